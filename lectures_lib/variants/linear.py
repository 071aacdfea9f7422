r"""Linear attention: changing the order of the products (Katharopoulos et al. 2020,
"Transformers are RNNs"): :math:`\phi(Q)\,(\phi(K)^\top V)` instead of
:math:`(\phi(Q)\,\phi(K)^\top)\,V`, in :math:`O(N)` memory; and Performer (Choromanski et al.
2021), whose positive random features :math:`\phi` make the same product approximate softmax
attention.

Derived in ``07_efficient_attention.ipynb``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .._validate.settings import check_settings
from .._validate.variants import linear as rules
from ..attention import MultiHeadAttention
from ..utils import validated
from .base import AttentionVariant

__all__ = [
    "elu_feature_map",
    "linear_attention",
    "LinearAttention",
    "random_projection",
    "performer_features",
    "PerformerAttention",
]

CHUNK = 64  # causal linear attention: queries per chunk (an N x CHUNK block at most)


@validated(rules.floating_tensor)
def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi(x) = \operatorname{elu}(x) + 1`, positive everywhere (Katharopoulos et al. 2020).

    Computed as :math:`e^{\min(x, 0)} + \max(x, 0)` (:math:`= x + 1` for :math:`x > 0`,
    :math:`e^x` otherwise), not as ``elu(x) + 1``: below :math:`x \approx -17` the float32 sum
    :math:`(e^x - 1) + 1` cancels to exactly 0, and a key whose features are all 0 drops out of
    attention. This form stays positive until :math:`e^x` itself underflows (:math:`x < -103`
    in float32). Derived in ``07_efficient_attention.ipynb``.
    """
    return torch.exp(torch.clamp(x, max=0.0)) + torch.relu(x)


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """Sums over N keys are kept in at least float32: in float16 they overflow (max 65504)."""
    return torch.promote_types(dtype, torch.float32)


def _safe_divide(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    # With non-negative features a zero denominator means a zero numerator: output 0, not NaN.
    return numerator / torch.where(denominator == 0, torch.ones_like(denominator), denominator)


def _quadratic_weights(q_features, k_features, causal: bool) -> torch.Tensor:
    r"""The left form's ``(..., n_q, n_k)`` weights :math:`\phi(q_i) \cdot \phi(k_j)`, normalised
    per row: built only when they are asked for (pictures and checks)."""
    similarity = q_features @ k_features.transpose(-2, -1)  # (..., n_q, n_k)
    if causal:
        similarity = similarity.tril()  # j <= i
    return _safe_divide(similarity, similarity.sum(dim=-1, keepdim=True))


def _linear_from_features(
    q_features: torch.Tensor, k_features: torch.Tensor, v: torch.Tensor, causal: bool
) -> torch.Tensor:
    r"""Linear attention given the features :math:`\phi(q_i)`, :math:`\phi(k_j)` (non-negative).

    ``q_features`` ``(..., n_q, f)``, ``k_features`` ``(..., n_k, f)``, ``v`` ``(..., n_k, d_v)``,
    all in the accumulation dtype. Never builds an ``n_q x n_k`` matrix.
    """
    if not causal:
        key_value_sum = k_features.transpose(-2, -1) @ v  # (..., f, d_v): sum_j phi(k_j) v_j^T
        key_sum = k_features.sum(dim=-2).unsqueeze(-1)  # (..., f, 1): sum_j phi(k_j)
        numerator = q_features @ key_value_sum  # (..., n_q, d_v)
        denominator = q_features @ key_sum  # (..., n_q, 1)
        return _safe_divide(numerator, denominator)
    # Causal: query i sees the prefix sums S_i = sum_{j <= i} phi(k_j) v_j^T, z_i = sum_{j <= i}
    # phi(k_j), an RNN whose state is (S, z). Computed chunk by chunk: inside a chunk the
    # (CHUNK x CHUNK) masked products, across chunks the running state.
    n = q_features.shape[-2]
    state = q_features.new_zeros(*q_features.shape[:-2], q_features.shape[-1], v.shape[-1])
    normaliser = q_features.new_zeros(*q_features.shape[:-2], 1, q_features.shape[-1])
    outputs = []
    for start in range(0, n, CHUNK):
        q_c = q_features[..., start : start + CHUNK, :]  # (..., c, f)
        k_c = k_features[..., start : start + CHUNK, :]  # (..., c, f)
        v_c = v[..., start : start + CHUNK, :]  # (..., c, d_v)
        lower = torch.ones(q_c.shape[-2], q_c.shape[-2], dtype=torch.bool, device=v.device).tril()
        similarity = (q_c @ k_c.transpose(-2, -1)) * lower  # (..., c, c): j <= i inside the chunk
        numerator = q_c @ state + similarity @ v_c  # (..., c, d_v)
        denominator = (q_c * normaliser).sum(-1, keepdim=True) + similarity.sum(-1, keepdim=True)
        outputs.append(_safe_divide(numerator, denominator))  # (..., c, d_v)
        state = state + k_c.transpose(-2, -1) @ v_c  # (..., f, d_v): add this chunk's keys
        normaliser = normaliser + k_c.sum(dim=-2, keepdim=True)  # (..., 1, f)
    if not outputs:
        return v.new_zeros(*q_features.shape[:-1], v.shape[-1])
    return torch.cat(outputs, dim=-2)  # (..., n, d_v)


@validated(rules.linear_qkv)
def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    feature_map: Callable[[torch.Tensor], torch.Tensor] = elu_feature_map,
    causal: bool = False,
) -> torch.Tensor:
    r"""Linear attention (Katharopoulos et al. 2020): softmax replaced by a kernel.

    .. math::
        \text{out}_i = \frac{\sum_j \big(\phi(q_i) \cdot \phi(k_j)\big)\, v_j}
                            {\sum_j \phi(q_i) \cdot \phi(k_j)}
                     = \frac{\phi(q_i)^\top \big(\sum_j \phi(k_j)\, v_j^\top\big)}
                            {\phi(q_i)^\top \sum_j \phi(k_j)}

    The left form is attention with weights :math:`\phi(q_i) \cdot \phi(k_j)` normalised per row
    (the :math:`N \times N` matrix :math:`\phi(Q)\phi(K)^\top`); the right form changes the order of
    the products and first sums the keys into the ``(f, d_v)`` matrix :math:`\phi(K)^\top V` and
    the ``(f,)`` vector :math:`\sum_j \phi(k_j)`, shared by all queries, so time and memory grow
    linearly with :math:`N`. With ``causal=True`` query :math:`i` uses only :math:`j \le i`: the two
    sums become running (prefix) sums, the state of an RNN (computed chunk by chunk, never
    :math:`N \times N`). Unlike softmax attention there is no :math:`1/\sqrt{d_k}` (as in the
    paper). A query whose features are orthogonal to every key's (e.g. no keys) gets a zero output.

    float16 and bfloat16 inputs are cast to float32 *before* the feature map (in float16
    :math:`e^x` is exactly 0 below :math:`x \approx -17`, and a query whose features all vanish
    would get an all-zero output) and summed in float32 (a sum over 4096 keys overflows float16);
    the output is returned in the input dtype.

    Args:
        q: queries ``(..., n_q, d_k)``.
        k: keys ``(..., n_k, d_k)``.
        v: values ``(..., n_k, d_v)``.
        feature_map: :math:`\phi`, applied to the last dimension; must give non-negative features
            (default :func:`elu_feature_map`; with random features this is Performer).
        causal: query ``i`` attends to keys ``0 ... i`` only (needs ``n_q == n_k``).

    Returns:
        ``out`` of shape ``(..., n_q, d_v)``.

    Derived in ``07_efficient_attention.ipynb``.
    """
    with_sums = _accumulation_dtype(q.dtype)
    q, k = q.to(with_sums), k.to(with_sums)  # upcast first: the feature map runs in float32
    q_features, k_features = feature_map(q), feature_map(k)  # (..., n_q, f), (..., n_k, f)
    rules.feature_values(q_features, k_features, q, k)  # the map may be the learner's: check it
    q_features, k_features = q_features.to(with_sums), k_features.to(with_sums)
    out = _linear_from_features(q_features, k_features, v.to(with_sums), causal)
    return out.to(v.dtype)  # (..., n_q, d_v)


class LinearAttention(AttentionVariant):
    r"""Multi-head linear attention (Katharopoulos et al. 2020): :class:`MultiHeadAttention` with
    :meth:`attend` replaced by :func:`linear_attention` on each head.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``. ``dropout`` is accepted
            for the factory signature but unused: there is no attention matrix to drop cells from.
        feature_map: :math:`\phi` (default :func:`elu_feature_map`).

    Masks: key padding (the same keys for every query) and the causal mask (with or without key
    padding, as the Transformer's decoder builds it) are honoured: a padded key's features are set
    to 0, so it drops out of both sums; causal uses the running sums. Any other mask raises.
    ``need_weights=True`` also returns the weights of the quadratic form,
    :math:`\phi(q_i) \cdot \phi(k_j) / \sum_{j'} \phi(q_i) \cdot \phi(k_{j'})`
    ``(batch, heads, n_q, n_k)``, built only because they were asked for (pictures and checks);
    the output itself never builds them. Derived in ``07_efficient_attention.ipynb``.
    """

    masks = "keys and causal"

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        feature_map: Callable[[torch.Tensor], torch.Tensor] = elu_feature_map,
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias)
        rules.feature_map_is_callable(feature_map)
        self.feature_map = feature_map

    def features(
        self, x: torch.Tensor, is_query: bool, key_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """:math:`\\phi` of queries or keys ``(batch, heads, n, d_head)`` -> ``(..., n, f)``, in
        at least float32; a key where ``key_mask`` ``(.., n)`` is False gets all-zero features,
        so it drops out of both sums."""
        x = x.to(_accumulation_dtype(x.dtype))  # upcast first: the map runs in float32 at least
        features = self.feature_map(x)
        rules.feature_values(features, features, x, x)  # the map may be the learner's: check it
        features = features.to(x.dtype)
        if key_mask is not None:
            keep = key_mask[..., None]  # (batch | 1, heads | 1, n, 1)
            features = torch.where(keep, features, torch.zeros_like(features))  # padded key: 0
        return features

    def attend(self, q, k, v, mask, need_weights):
        key_mask, kind = self.supported_mask(mask, q.shape[-2], k.shape[-2])  # keys or causal
        q_features = self.features(q, is_query=True)  # (batch, heads, n_q, f)
        k_features = self.features(k, is_query=False, key_mask=key_mask)  # (batch, heads, n_k, f)
        causal = kind == "causal"
        out = _linear_from_features(q_features, k_features, v.to(q_features.dtype), causal)
        weights = _quadratic_weights(q_features, k_features, causal) if need_weights else None
        return out.to(v.dtype), weights if weights is None else weights.to(v.dtype)

    def extra_repr(self) -> str:
        name = getattr(self.feature_map, "__name__", type(self.feature_map).__name__)
        return f"{super().extra_repr()}, feature_map={name}"


# ---------------------------------------------------------------------------------------------
# Performer: positive random features for the softmax kernel
# ---------------------------------------------------------------------------------------------


@validated(rules.projection_args)
def random_projection(
    n_features: int,
    d: int,
    orthogonal: bool = True,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    r"""The ``(n_features, d)`` matrix :math:`W` of Performer's random features, rows
    :math:`w_i \sim \mathcal{N}(0, I_d)`.

    With ``orthogonal=True`` the rows come in blocks of ``d`` that are exactly orthogonal
    (orthogonal random features: the QR factor of a Gaussian matrix), each row rescaled to the
    length of a Gaussian vector so that every :math:`w_i` is still :math:`\mathcal{N}(0, I_d)`
    on its own; the estimate stays unbiased and its variance is smaller. Derived in
    ``07_efficient_attention.ipynb``.
    """
    gaussian = torch.randn(n_features, d, generator=generator, dtype=torch.float64)
    if not orthogonal:
        return gaussian.to(dtype)
    blocks = []
    for start in range(0, n_features, d):
        square = torch.randn(d, d, generator=generator, dtype=torch.float64)
        orthonormal, upper = torch.linalg.qr(square)  # (d, d), orthonormal columns
        # QR fixes the signs of R's diagonal, which biases Q's directions; undo it so that every
        # column points in a uniformly random direction (a Haar-distributed rotation).
        orthonormal = orthonormal * torch.sign(torch.diagonal(upper))[None, :]
        blocks.append(orthonormal.T[: n_features - start])  # rows orthonormal
    rows = torch.cat(blocks)  # (n_features, d), unit rows, orthogonal within a block
    lengths = gaussian.norm(dim=-1, keepdim=True)  # (n_features, 1): chi_d distributed
    return (rows * lengths).to(dtype)


@validated(rules.x_and_projection)
def performer_features(x: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    r"""Positive random features of the softmax kernel (FAVOR+, Choromanski et al. 2021):

    .. math::
        \phi(x) = \frac{1}{\sqrt{m}} \Big[e^{w_1^\top x - \|x\|^2/2}, \dots,
        e^{w_m^\top x - \|x\|^2/2}\Big], \qquad
        \mathbb{E}_w\big[\phi(x)^\top \phi(y)\big] = e^{x^\top y}

    ``x`` ``(..., n, d)``, ``projection`` :math:`W` ``(m, d)`` (from :func:`random_projection`)
    -> ``(..., n, m)``, every feature positive. For softmax attention feed
    :math:`x = q / d^{1/4}` and :math:`y = k / d^{1/4}`, so :math:`x^\top y = q^\top k/\sqrt{d}`.
    Computed exactly as written (no stabilising shift): for large :math:`\|x\|` it can overflow;
    :class:`PerformerAttention` shifts the exponents by constants that cancel in the ratio.
    Derived in ``07_efficient_attention.ipynb``.
    """
    return torch.exp(_performer_exponents(x, projection)) / math.sqrt(projection.shape[0])


def _performer_exponents(x: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """``w_i^T x - |x|^2 / 2`` for every feature i: ``(..., n, d)`` -> ``(..., n, m)``."""
    projection = projection.to(x.dtype)
    return x @ projection.T - (x * x).sum(dim=-1, keepdim=True) / 2  # (..., n, m)


class PerformerAttention(LinearAttention):
    r"""Performer (Choromanski et al. 2021): linear attention whose features approximate the
    softmax kernel, :math:`\phi(q)^\top\phi(k) \approx e^{q^\top k/\sqrt{d}}`, so the output
    approximates softmax attention in :math:`O(N m d)` time and :math:`O(N m)` memory.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention`` (``dropout`` unused).
        n_features: :math:`m`, random features per head (default 64); the error falls roughly as
            :math:`m^{-1/2}`.
        orthogonal: orthogonal random features (default True; smaller error at the same m).

    The projection is drawn once (from PyTorch's global generator, so ``seed_everything`` fixes
    it) and kept as a buffer, shared by the heads; the paper redraws it from time to time during
    training, this course does not. Exponents are shifted before ``exp`` (by each query's maximum,
    and by the maximum over all keys), constants that cancel between numerator and denominator.
    Masks as in :class:`LinearAttention` (causal works). Derived in ``07_efficient_attention.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        n_features: int = 64,
        orthogonal: bool = True,
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias)
        check_settings(n_features=n_features, orthogonal=orthogonal)
        self.n_features, self.orthogonal = int(n_features), orthogonal
        self.register_buffer("projection", random_projection(n_features, self.d_head, orthogonal))

    def features(
        self, x: torch.Tensor, is_query: bool, key_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        x = x.to(_accumulation_dtype(x.dtype)) / self.d_head**0.25  # x^T y = q^T k / sqrt(d_head)
        exponents = _performer_exponents(x, self.projection)  # (batch, heads, n, m)
        if key_mask is not None:  # a padded key: exp(-inf) = 0 features, whatever its content
            exponents = exponents.masked_fill(~key_mask[..., None], float("-inf"))
        if is_query:  # a per-query constant: cancels in that query's ratio
            shift = exponents.amax(dim=-1, keepdim=True)  # (batch, heads, n, 1)
        elif x.shape[-2] > 0:  # one constant for all keys of a head: cancels for every query
            shift = exponents.amax(dim=(-2, -1), keepdim=True)  # (batch, heads, 1, 1)
        else:
            return torch.exp(exponents)  # no keys: nothing to shift
        shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))  # all masked
        return torch.exp(exponents - shift.detach())

    def extra_repr(self) -> str:
        return (
            f"{MultiHeadAttention.extra_repr(self)}, n_features={self.n_features}, "
            f"orthogonal={self.orthogonal}"
        )
