r"""Linear attention: changing the order of the products (Katharopoulos et al. 2020,
"Transformers are RNNs"): :math:`\phi(Q)\,(\phi(K)^\top V)` instead of
:math:`(\phi(Q)\,\phi(K)^\top)\,V`, in :math:`O(N)` memory.

Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..utils import at_boundary, check_qkv, check_tensor, inside_library

__all__ = ["elu_feature_map", "linear_attention"]


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi(x) = \operatorname{elu}(x) + 1`, positive everywhere (Katharopoulos et al. 2020).

    ``x``: a floating tensor of any shape; returns the same shape. Derived in
    ``06_attention_variants.ipynb``.
    """
    if at_boundary():
        check_tensor(x, "x", dtype="floating")
    return F.elu(x) + 1


def _check_features(
    q_features: object, k_features: object, q: torch.Tensor, k: torch.Tensor
) -> None:
    """What a feature map returns: tensors ``(..., n, d_phi)`` of non-negative features."""
    for name, features, x in (("queries", q_features, q), ("keys", k_features, k)):
        if not isinstance(features, torch.Tensor) or not features.is_floating_point():
            raise TypeError(
                f"feature_map must return a floating tensor, got {type(features).__name__} "
                f"for the {name}"
            )
        if features.shape[:-1] != x.shape[:-1]:
            raise ValueError(
                f"feature_map must keep every dimension but the last: the {name} have shape "
                f"{tuple(x.shape)}, their features {tuple(features.shape)}"
            )
        if bool((features < 0).any()):
            raise ValueError(
                f"feature_map must give non-negative features (weights phi(q).phi(k) >= 0), but "
                f"the features of the {name} reach {features.min().item():.3g}: use "
                "elu_feature_map or another positive map (softmax attention is exp(q.k) > 0)"
            )
    if q_features.shape[-1] != k_features.shape[-1]:
        raise ValueError(
            "feature_map must map queries and keys to the same number of features, got "
            f"{tuple(q_features.shape)} and {tuple(k_features.shape)}"
        )


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    feature_map: Callable[[torch.Tensor], torch.Tensor] = elu_feature_map,
) -> torch.Tensor:
    r"""Non-causal linear attention (Katharopoulos et al. 2020): softmax replaced by a kernel.

    .. math::
        \text{out}_i = \frac{\sum_j \big(\phi(q_i) \cdot \phi(k_j)\big)\, v_j}
                            {\sum_j \phi(q_i) \cdot \phi(k_j)}
                     = \frac{\phi(q_i)^\top \big(\sum_j \phi(k_j)\, v_j^\top\big)}
                            {\phi(q_i)^\top \sum_j \phi(k_j)}

    The left form is attention with weights :math:`\phi(q_i) \cdot \phi(k_j)` normalised per row
    (the :math:`N \times N` matrix :math:`\phi(Q)\phi(K)^\top`); the right form changes the order of
    the products and first sums the keys into the ``(d_k, d_v)`` matrix
    :math:`\phi(K)^\top V` and the ``(d_k,)`` vector :math:`\sum_j \phi(k_j)`, so time and memory
    grow linearly with :math:`N`. Unlike softmax attention there is no :math:`1/\sqrt{d_k}`
    (as in the paper). A query whose features are orthogonal to every key's (e.g. no keys) gets a
    zero output, like a fully masked query in :func:`~lectures_lib.attention.scaled_dot_product_attention`.

    Args:
        q: queries ``(..., n_q, d_k)``.
        k: keys ``(..., n_k, d_k)``.
        v: values ``(..., n_k, d_v)``.
        feature_map: :math:`\phi`, applied to the last dimension; must give non-negative features
            (default :func:`elu_feature_map`; random features turn this into Performer).

    Returns:
        ``out`` of shape ``(..., n_q, d_v)``.

    Derived in ``06_attention_variants.ipynb``.
    """
    if at_boundary():
        check_qkv(q, k, v)
        if not callable(feature_map):
            raise TypeError(f"feature_map must be callable, got {type(feature_map).__name__}")
    with inside_library():
        q_features = feature_map(q)  # (..., n_q, d_phi)
        k_features = feature_map(k)  # (..., n_k, d_phi)
    if at_boundary():
        _check_features(q_features, k_features, q, k)
    key_value_sum = k_features.transpose(-2, -1) @ v  # (..., d_phi, d_v): sum_j phi(k_j) v_j^T
    key_sum = k_features.sum(dim=-2).unsqueeze(-1)  # (..., d_phi, 1): sum_j phi(k_j)
    numerator = q_features @ key_value_sum  # (..., n_q, d_v)
    denominator = q_features @ key_sum  # (..., n_q, 1)
    # With non-negative features a zero denominator means a zero numerator: output 0, not NaN.
    denominator = torch.where(denominator == 0, torch.ones_like(denominator), denominator)
    return numerator / denominator  # (..., n_q, d_v)
