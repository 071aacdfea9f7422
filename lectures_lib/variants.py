r"""Attention variants (各式各样的 Attention) that never build the :math:`N \times N` matrix.

Full self-attention computes all :math:`N^2` scores :math:`\alpha_{i,j}`, so its time and memory
grow with the square of the sequence length :math:`N`. The lecture's variants skip most of them:

* patterns from human knowledge: :func:`local_mask` (local / truncated attention, 局部注意力:
  only the neighbours :math:`|i - j| \le w`), :func:`stride_mask` (stride attention: only
  positions a multiple of the stride apart) and :func:`global_mask` (global tokens that attend to
  every token and are attended by every token). Masks are boolean, True = "may attend", and combine
  with ``|`` (Longformer: local | global);
* :func:`local_attention`: exactly dense attention under :func:`local_mask`, computed band by band
  in :math:`O(N \cdot w)` memory; :func:`band_to_dense` turns its banded weights into a picture;
* :func:`linear_attention`: changing the order of the products (Katharopoulos et al. 2020,
  "Transformers are RNNs"): :math:`\phi(Q)\,(\phi(K)^\top V)` instead of
  :math:`(\phi(Q)\,\phi(K)^\top)\,V`, in :math:`O(N)` memory.

Derived in ``06_attention_variants.ipynb`` (planned).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from .attention import _check_qkv
from .utils import check_positive_int, check_tensor

__all__ = [
    "local_mask",
    "stride_mask",
    "global_mask",
    "local_attention",
    "band_to_dense",
    "elu_feature_map",
    "linear_attention",
]


# ---------------------------------------------------------------------------------------------
# Masks: patterns from human knowledge
# ---------------------------------------------------------------------------------------------


def _offsets(n: int, device: torch.device | str | None) -> torch.Tensor:
    positions = torch.arange(n, device=device)
    return positions[:, None] - positions[None, :]  # (n, n): i - j for query i, key j


def local_mask(n: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of local attention: True where :math:`|i - j| \le` ``window``.

    ``window=0`` gives the identity (each position sees only itself); ``window >= n - 1`` lets every
    position see every other one. Derived in ``06_attention_variants.ipynb`` (planned).
    """
    n = check_positive_int(n, "n")
    window = check_positive_int(window, "window", allow_zero=True)
    return _offsets(n, device).abs() <= window


def stride_mask(n: int, stride: int, device: torch.device | str | None = None) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of stride attention: True where :math:`i - j` is a multiple of
    ``stride`` (:math:`(i - j) \bmod s = 0`; the "strided" pattern of Child et al. 2019, both
    directions). ``stride=1`` lets every position see every other one; the diagonal is always True.
    Derived in ``06_attention_variants.ipynb`` (planned).
    """
    n = check_positive_int(n, "n")
    stride = check_positive_int(stride, "stride")
    return _offsets(n, device) % stride == 0


def global_mask(
    n: int,
    global_positions: Sequence[int] | torch.Tensor,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of global tokens: True in row *and* column :math:`g` for each
    :math:`g \in` ``global_positions``: a global token attends to every token (collects global
    information) and is attended by every token (everyone knows the global information).

    Other cells are False, so combine it with a local pattern: ``local_mask(n, w) | global_mask(n,
    [0])`` is Longformer's pattern. Derived in ``06_attention_variants.ipynb`` (planned).
    """
    n = check_positive_int(n, "n")
    if not isinstance(global_positions, torch.Tensor):
        positions = list(global_positions)  # no dtype forced: 1.5 must fail below, not become 1
        global_positions = torch.as_tensor(positions) if positions else torch.zeros(0, dtype=torch.long)
    check_tensor(global_positions, "global_positions", ndim=1, dtype="integer")
    if global_positions.numel() and not (
        0 <= int(global_positions.min()) and int(global_positions.max()) < n
    ):
        raise ValueError(
            f"global_positions must lie in [0, {n - 1}] for n={n}, "
            f"got {global_positions.tolist()}"
        )
    is_global = torch.zeros(n, dtype=torch.bool, device=device)  # (n,)
    is_global[global_positions.to(is_global.device)] = True
    return is_global[:, None] | is_global[None, :]  # (n, n): global row or global column


# ---------------------------------------------------------------------------------------------
# Local attention in O(N * window) memory
# ---------------------------------------------------------------------------------------------


def _neighbours(x: torch.Tensor, window: int) -> torch.Tensor:
    """``(..., n, d)`` -> ``(..., n, d, 2 * window + 1)``: slot o of row i holds x[i - window + o]
    (zeros where that position falls outside the sequence)."""
    padded = F.pad(x, (0, 0, window, window))  # (..., n + 2w, d): w zero rows on each side
    return padded.unfold(-2, 2 * window + 1, 1)  # (..., n, d, 2w + 1): a sliding view, no copy


def local_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int,
    *,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Local (truncated) self-attention: query :math:`i` attends only to keys :math:`|i - j| \le w`.

    .. math::
        \text{out}_i = \sum_{j = i - w}^{i + w} \alpha'_{i,j}\, v_j, \qquad
        \alpha'_{i,\cdot} = \operatorname{softmax}_{|i - j| \le w}
        \Big(\frac{q_i \cdot k_j}{\sqrt{d_k}}\Big)

    The same result as ``scaled_dot_product_attention(q, k, v, local_mask(n, window))``, but each
    query only ever meets its :math:`2w + 1` neighbours: the keys and values are padded by
    :math:`w` on both sides and cut into sliding windows, so the scores have shape
    ``(..., n, 2w + 1)`` and memory is :math:`O(N \cdot w \cdot d)` instead of :math:`O(N^2)`.
    A ``window >= n - 1`` is treated as ``n - 1`` (that already covers every key).

    Args:
        q, k, v: ``(..., n, d_k)``, ``(..., n, d_k)``, ``(..., n, d_v)``; self-attention, so the
            number of queries equals the number of keys.
        window: :math:`w \ge 0`, how many neighbours on *each* side a query sees.
        return_weights: also return the banded attention weights.

    Returns:
        ``out`` of shape ``(..., n, d_v)``; with ``return_weights=True`` the pair
        ``(out, band_weights)`` where ``band_weights[..., i, o]`` is the weight of key
        ``j = i - w + o`` (0 where ``j`` is outside the sequence), shape ``(..., n, 2w + 1)`` with
        the effective :math:`w = \min(\text{window}, n - 1)`. Each row sums to 1.
        :func:`band_to_dense` turns it into the ``(..., n, n)`` matrix (for small ``n`` only).

    Derived in ``06_attention_variants.ipynb`` (planned).
    """
    _check_qkv(q, k, v)
    window = check_positive_int(window, "window", allow_zero=True)
    n = q.shape[-2]
    if k.shape[-2] != n:
        raise ValueError(
            "local attention is self-attention: it needs as many queries as keys (query i looks "
            f"at keys i - window ... i + window), got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if not isinstance(return_weights, bool):
        raise TypeError(f"return_weights must be a bool, got {type(return_weights).__name__}")
    if n == 0:  # an empty sequence: nothing to attend to, nothing to return
        empty_weights = q.new_zeros(*q.shape[:-1], 1)  # (..., 0, 1)
        return (v.clone(), empty_weights) if return_weights else v.clone()
    window = min(window, n - 1)  # a wider window adds only padding slots
    d_k = q.shape[-1]

    keys = _neighbours(k, window)  # (..., n, d_k, 2w + 1)
    values = _neighbours(v, window)  # (..., n, d_v, 2w + 1)
    queries = (q / math.sqrt(d_k)).unsqueeze(-2)  # (..., n, 1, d_k)
    scores = (queries @ keys).squeeze(-2)  # (..., n, 2w + 1): q_i . k_{i-w+o} / sqrt(d_k)

    # Slot o of query i is key j = i - w + o; slots with j < 0 or j >= n are padding.
    key_index = torch.arange(n, device=q.device)[:, None] + torch.arange(
        -window, window + 1, device=q.device
    )  # (n, 2w + 1)
    in_sequence = (key_index >= 0) & (key_index < n)  # (n, 2w + 1)
    # Same masking constant as the dense path: padding slots get exactly 0 weight. Slot w (the
    # query itself) is always in the sequence, so no row is fully masked.
    scores = scores.masked_fill(~in_sequence, torch.finfo(scores.dtype).min)
    band_weights = torch.softmax(scores, dim=-1)  # (..., n, 2w + 1), rows sum to 1

    out = (values @ band_weights.unsqueeze(-1)).squeeze(-1)  # (..., n, d_v): sum_o w_o v_{i-w+o}
    return (out, band_weights) if return_weights else out


def band_to_dense(band_weights: torch.Tensor) -> torch.Tensor:
    """Scatter banded weights ``(..., n, 2w + 1)`` (from :func:`local_attention`) into the dense
    ``(..., n, n)`` matrix, zero outside the band. Builds the N x N matrix: for pictures and checks
    on small ``n`` only. Derived in ``06_attention_variants.ipynb`` (planned).
    """
    check_tensor(band_weights, "band_weights", dtype="floating")
    if band_weights.dim() < 2 or band_weights.shape[-1] % 2 == 0:
        raise ValueError(
            "band_weights must have shape (..., n, 2 * window + 1) (an odd last dimension), "
            f"got {tuple(band_weights.shape)}"
        )
    n, width = band_weights.shape[-2:]
    window = (width - 1) // 2
    # Row i of a matrix with w extra columns on each side: slot o lands in column i + o.
    columns = torch.arange(n, device=band_weights.device)[:, None] + torch.arange(
        width, device=band_weights.device
    )  # (n, 2w + 1)
    padded = band_weights.new_zeros(*band_weights.shape[:-1], n + 2 * window)  # (..., n, n + 2w)
    padded.scatter_(-1, columns.expand(band_weights.shape), band_weights)
    return padded[..., window : window + n]  # (..., n, n): drop the padding columns


# ---------------------------------------------------------------------------------------------
# Linear attention in O(N) memory
# ---------------------------------------------------------------------------------------------


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi(x) = \operatorname{elu}(x) + 1`, positive everywhere (Katharopoulos et al. 2020).

    Derived in ``06_attention_variants.ipynb`` (planned).
    """
    return F.elu(x) + 1


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

    Derived in ``06_attention_variants.ipynb`` (planned).
    """
    _check_qkv(q, k, v)
    if not callable(feature_map):
        raise TypeError(f"feature_map must be callable, got {type(feature_map).__name__}")
    q_features = feature_map(q)  # (..., n_q, d_phi)
    k_features = feature_map(k)  # (..., n_k, d_phi)
    if q_features.shape[-1] != k_features.shape[-1]:
        raise ValueError(
            "feature_map must map queries and keys to the same number of features, got "
            f"{tuple(q_features.shape)} and {tuple(k_features.shape)}"
        )
    key_value_sum = k_features.transpose(-2, -1) @ v  # (..., d_phi, d_v): sum_j phi(k_j) v_j^T
    key_sum = k_features.sum(dim=-2).unsqueeze(-1)  # (..., d_phi, 1): sum_j phi(k_j)
    numerator = q_features @ key_value_sum  # (..., n_q, d_v)
    denominator = q_features @ key_sum  # (..., n_q, 1)
    # With non-negative features a zero denominator means a zero numerator: output 0, not NaN.
    denominator = torch.where(denominator == 0, torch.ones_like(denominator), denominator)
    return numerator / denominator  # (..., n_q, d_v)
