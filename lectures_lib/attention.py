r"""Scaled dot-product attention, masks, single- and multi-head self-attention.

Derived in ``01_self_attention.ipynb`` (scaled dot-product attention, ``causal_mask``,
``SelfAttention``) and ``02_multi_head_attention.ipynb`` (``split_heads``, ``merge_heads``,
``multi_head_attention``, ``MultiHeadAttention``, ``key_padding_mask``).

Conventions (the course's contract):

* shapes are batch-first: ``(batch, seq, d_model)``; per head ``(batch, heads, seq, d_head)``;
* masks are boolean and **True means "may attend"**, as in
  :func:`torch.nn.functional.scaled_dot_product_attention`. ``nn.MultiheadAttention`` uses the
  *opposite* for its boolean ``attn_mask``/``key_padding_mask`` (True = "blocked");
* a mask broadcasts to ``(batch, heads, n_queries, n_keys)``; every mask dimension must equal the
  score dimension it lines up with (right-aligned) or be 1, so a mask never broadcasts by accident.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .utils import check_positive_int, check_tensor

__all__ = [
    "scaled_dot_product_attention",
    "fast_attention",
    "causal_mask",
    "key_padding_mask",
    "check_mask",
    "SelfAttention",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "multi_head_attention",
]


# ---------------------------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------------------------


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(t, name, dtype="floating")
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., seq, features), "
                f"got shape {tuple(t.shape)}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "queries and keys must have the same feature size d_k to take dot products: "
            f"q has shape {tuple(q.shape)}, k has shape {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "keys and values must come in pairs (same number of positions): "
            f"k has shape {tuple(k.shape)}, v has shape {tuple(v.shape)}"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            "q, k and v must have the same leading (batch/head) dimensions: got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")


def _check_dropout_p(dropout_p: object, name: str = "dropout_p") -> float:
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"{name} must be a float in [0, 1), got {type(dropout_p).__name__}")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {dropout_p}")
    return float(dropout_p)


def _padding_hint(scores_ndim: int) -> str:
    if scores_ndim == 4:  # (batch, heads, n_q, n_k)
        return "A key-padding mask (batch, n_keys) needs shape (batch, 1, 1, n_keys): key_padding_mask()."
    if scores_ndim == 3:  # (batch, n_q, n_k): single-head attention
        return "A key-padding mask (batch, n_keys) needs shape (batch, 1, n_keys): key_padding_mask(...)[:, 0]."
    return ""


def check_mask(mask: object, scores_shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """Validate a boolean attention mask against the shape of the scores it will mask.

    ``scores_shape`` is ``(..., n_queries, n_keys)``. The mask must be ``torch.bool`` (True = may
    attend), have at most as many dimensions as the scores, and each of its dimensions
    (right-aligned) must equal the corresponding score dimension or be 1.
    Returns the mask unchanged.
    """
    scores_shape = tuple(scores_shape)
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}. "
            "An additive float mask (0 / -inf) is not accepted: convert it with `mask == 0`."
        )
    if mask.dim() > len(scores_shape) or mask.dim() == 0:
        raise ValueError(
            f"mask with shape {tuple(mask.shape)} cannot be matched to attention scores of shape "
            f"{scores_shape} (batch..., n_queries, n_keys)"
        )
    for mask_size, score_size in zip(reversed(mask.shape), reversed(scores_shape), strict=False):
        if mask_size not in (1, score_size):
            raise ValueError(
                f"mask with shape {tuple(mask.shape)} does not fit attention scores of shape "
                f"{scores_shape}: each mask dimension (aligned from the right) must equal the "
                "score dimension or be 1. " + _padding_hint(len(scores_shape))
            )
    return mask


# ---------------------------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------------------------


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``(n, n)`` mask, True on and below the diagonal: position i may attend to j <= i.

    Derived in ``05_transformer_decoder.ipynb`` (masked self-attention); used from section 01 on.
    """
    n = check_positive_int(n, "n")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def key_padding_mask(
    lengths: torch.Tensor | list[int], max_len: int | None = None
) -> torch.Tensor:
    """Mask of shape ``(batch, 1, 1, max_len)``: True for the real (non-padding) keys.

    ``lengths[b]`` is the number of real tokens of sequence ``b`` (padding at the end). The two
    singleton dimensions let the mask broadcast over heads and queries.
    Derived in ``02_multi_head_attention.ipynb``.
    """
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths)
    check_tensor(lengths, "lengths", ndim=1, dtype="integer")
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    longest = int(lengths.max()) if lengths.numel() else 0
    if max_len is None:
        max_len = longest
    max_len = check_positive_int(max_len, "max_len", allow_zero=True)
    if longest > max_len:
        raise ValueError(f"max_len={max_len} is shorter than the longest sequence ({longest})")
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    valid = positions[None, :] < lengths[:, None]  # (batch, max_len)
    return valid[:, None, None, :]  # (batch, 1, 1, max_len)


# ---------------------------------------------------------------------------------------------
# Scaled dot-product attention: the explicit path and the fast path
# ---------------------------------------------------------------------------------------------


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Explicit scaled dot-product attention that also returns the attention weights.

    .. math::
        \alpha = \frac{Q K^\top}{\sqrt{d_k}}, \qquad
        \alpha' = \operatorname{softmax}_{\text{keys}}(\alpha), \qquad
        \text{out} = \alpha' V

    Args:
        q: queries ``(..., n_q, d_k)``.
        k: keys ``(..., n_k, d_k)``.
        v: values ``(..., n_k, d_v)``.
        mask: optional bool mask broadcastable to ``(..., n_q, n_k)``; True = may attend.
        dropout_p: dropout on the attention weights (only when > 0).

    Returns:
        ``(out, weights)`` with shapes ``(..., n_q, d_v)`` and ``(..., n_q, n_k)``. Each row of
        ``weights`` sums to 1 and is exactly 0 on masked cells. A query whose keys are *all* masked
        (e.g. a padding query) gets an all-zero row and a zero output instead of NaN.

    Numerically stable: softmax subtracts the row maximum, and masked cells are filled with the
    dtype's most negative finite number rather than ``-inf`` (so ``-inf - (-inf)`` never happens).
    Derived in ``01_self_attention.ipynb``.
    """
    _check_qkv(q, k, v)
    dropout_p = _check_dropout_p(dropout_p)
    d_k = q.shape[-1]
    # Scaling the queries before the product is the same as scaling the scores, but costs
    # n_q * d_k multiplications instead of n_q * n_k.
    scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)  # (..., n_q, n_k)
    if mask is not None:
        mask = check_mask(mask, scores.shape).to(scores.device)
        # The most negative finite number, not -inf: a row with every key masked then stays finite
        # (uniform), where -inf would give exp(-inf - (-inf)) = NaN. Any row with at least one
        # key left gives masked cells exp(min - max) = exactly 0.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., n_q, n_k), rows sum to 1
    if mask is not None:
        has_key = mask.any(dim=-1, keepdim=True)  # (..., n_q or 1, 1): may this query attend?
        if not bool(has_key.all()):
            weights = weights * has_key  # queries with nothing to attend to: all-zero rows
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights @ v  # (..., n_q, d_v)
    return out, weights


def fast_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Same result as :func:`scaled_dot_product_attention` but via PyTorch's fused kernel.

    Returns only ``out`` (the fused kernels never materialise the weights). Used by the modules
    when the weights are not needed (``need_weights=False``). Queries whose keys are all masked
    get a zero output, as in the explicit path (depending on the PyTorch version and backend, the
    fused kernel alone may give NaN there). Same arguments and checks as the explicit path.
    """
    _check_qkv(q, k, v)
    dropout_p = _check_dropout_p(dropout_p)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    scores_shape = (*q.shape[:-1], k.shape[-2])  # (..., n_q, n_k)
    mask = check_mask(mask, scores_shape).to(q.device)
    if mask.dim() == 1:  # (n_k,): the fused kernel wants at least (n_q or 1, n_k)
        mask = mask[None, :]  # (1, n_k)
    has_key = mask.any(dim=-1, keepdim=True)  # (..., n_q or 1, 1): may this query attend at all?
    if bool(has_key.all()):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    safe_mask = mask | ~has_key  # let empty rows attend everywhere, then zero them below
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=safe_mask, dropout_p=dropout_p)
    return out * has_key  # (..., n_q, d_v), zero rows where there was nothing to attend to


# ---------------------------------------------------------------------------------------------
# Single-head self-attention, as in the lecture
# ---------------------------------------------------------------------------------------------


class SelfAttention(nn.Module):
    r"""Single-head self-attention with the lecture's three learned matrices.

    :math:`q^i = W^q a^i,\; k^i = W^k a^i,\; v^i = W^v a^i`, then
    :math:`b^i = \sum_j \alpha'_{i,j} v^j` with :math:`\alpha'_{i,\cdot} =
    \operatorname{softmax}_j(q^i \cdot k^j / \sqrt{d_k})`. Only ``w_q``, ``w_k``, ``w_v`` are learned.

    Args:
        d_model: size of each input vector a^i.
        d_k: size of queries and keys (default ``d_model``).
        d_v: size of values and of the outputs b^i (default ``d_model``).
        bias: add a bias to the three projections (the lecture has none).

    Derived in ``01_self_attention.ipynb``.
    """

    def __init__(
        self, d_model: int, d_k: int | None = None, d_v: int | None = None, bias: bool = False
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.d_k = check_positive_int(d_k if d_k is not None else d_model, "d_k")
        self.d_v = check_positive_int(d_v if d_v is not None else d_model, "d_v")
        self.w_q = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.w_k = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.w_v = nn.Linear(self.d_model, self.d_v, bias=bias)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x``: ``(batch, seq, d_model)`` -> ``(out (batch, seq, d_v), weights (batch, seq, seq))``."""
        check_tensor(x, "x", ndim=3, dtype="floating")
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (batch, seq, {self.d_model}), got {tuple(x.shape)}"
            )
        queries = self.w_q(x)  # (batch, seq, d_k)
        keys = self.w_k(x)  # (batch, seq, d_k)
        values = self.w_v(x)  # (batch, seq, d_v)
        return scaled_dot_product_attention(queries, keys, values, mask)


# ---------------------------------------------------------------------------------------------
# Multi-head attention
# ---------------------------------------------------------------------------------------------


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(batch, seq, d_model)`` -> ``(batch, num_heads, seq, d_head)`` with d_head = d_model / num_heads.

    Head h gets features ``h * d_head ... (h + 1) * d_head - 1`` of every position.
    Reshaping straight to ``(batch, num_heads, seq, d_head)`` without the transpose would mix
    positions into heads: the classic bug. Derived in ``02_multi_head_attention.ipynb``.
    """
    check_tensor(x, "x", ndim=3)
    num_heads = check_positive_int(num_heads, "num_heads")
    batch, seq, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(
            f"d_model={d_model} (last dimension of x, shape {tuple(x.shape)}) is not divisible "
            f"by num_heads={num_heads}"
        )
    d_head = d_model // num_heads
    x = x.reshape(batch, seq, num_heads, d_head)  # (batch, seq, heads, d_head): cut the features
    return x.transpose(1, 2)  # (batch, heads, seq, d_head): heads become a batch dimension


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`split_heads`: ``(batch, heads, seq, d_head)`` -> ``(batch, seq, heads * d_head)``.

    This is the concatenation ``[b^{i,1}; b^{i,2}; ...]`` of the lecture (拼接), for every
    position i. Derived in ``02_multi_head_attention.ipynb``.
    """
    check_tensor(x, "x", ndim=4)
    batch, num_heads, seq, d_head = x.shape
    x = x.transpose(1, 2)  # (batch, seq, heads, d_head)
    return x.reshape(batch, seq, num_heads * d_head)  # (batch, seq, d_model)


def multi_head_attention(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    w_o: torch.Tensor,
    num_heads: int,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Multi-head self-attention as one function of explicit weight matrices (no biases).

    Row convention of code, :math:`y = x W`:

    .. math::
        Q = X W_q,\; K = X W_k,\; V = X W_v \;\to\; \text{split into heads} \;\to\;
        \text{head}_h = \operatorname{softmax}\!\Big(\frac{Q_h K_h^\top}{\sqrt{d_{head}}}\Big)
        V_h \;\to\; \text{out} = [\text{head}_1; \dots; \text{head}_H]\, W_o

    Args:
        x: ``(batch, seq, d_model)``.
        w_q, w_k, w_v, w_o: ``(d_model, d_model)`` each (``nn.Linear.weight`` is the transpose).
        num_heads: must divide ``d_model``; each head works on ``d_head = d_model / num_heads``
            features and is scaled by :math:`\sqrt{d_{head}}` (not :math:`\sqrt{d_{model}}`).
        mask: optional bool mask (True = may attend) broadcastable to
            ``(batch, num_heads, seq, seq)``.

    Returns:
        ``out`` ``(batch, seq, d_model)`` and the per-head ``weights`` ``(batch, num_heads, seq,
        seq)``. Equal to :class:`MultiHeadAttention` with ``bias=False`` and
        ``q_proj.weight = w_q.T`` (etc.). The exercise of ``02_multi_head_attention.ipynb``.
    """
    check_tensor(x, "x", ndim=3, dtype="floating")
    d_model = x.shape[-1]
    for name, weight in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        check_tensor(weight, name, shape=(d_model, d_model), dtype=x.dtype)
    queries = split_heads(x @ w_q, num_heads)  # (batch, heads, seq, d_head)
    keys = split_heads(x @ w_k, num_heads)  # (batch, heads, seq, d_head)
    values = split_heads(x @ w_v, num_heads)  # (batch, heads, seq, d_head)
    heads, weights = scaled_dot_product_attention(queries, keys, values, mask)
    # heads: (batch, heads, seq, d_head); weights: (batch, heads, seq, seq)
    out = merge_heads(heads) @ w_o  # (batch, seq, d_model)
    return out, weights


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention: ``num_heads`` scaled dot-product attentions side by side.

    .. math::
        \text{head}_h = \operatorname{Attention}(Q W^Q_h, K W^K_h, V W^V_h), \qquad
        \text{MHA}(Q, K, V) = [\text{head}_1; \dots; \text{head}_H]\, W^O

    One ``d_model x d_model`` projection per role is the same computation as the lecture's
    ``num_heads`` separate per-head projections :math:`q^{i,h} = W^{q,h} q^i` (their products,
    stacked as row blocks of ``q_proj.weight``: block ``h`` is head ``h``); ``02`` asserts it.

    Args:
        d_model: size of the query vectors and of the output.
        num_heads: number of heads; must divide ``d_model``.
        dropout: dropout probability on the attention weights (training only).
        bias: biases on the four projections (PyTorch's default is True).
        kdim, vdim: sizes of key and value inputs for cross-attention (default ``d_model``).

    ``forward(query, key, value, mask=None, need_weights=True)`` returns ``(out, weights)`` with
    ``out`` ``(batch, n_q, d_model)`` and per-head ``weights`` ``(batch, num_heads, n_q, n_k)``;
    with ``need_weights=False`` it takes the fused fast path and returns ``(out, None)``.
    Derived in ``02_multi_head_attention.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.num_heads = check_positive_int(num_heads, "num_heads")
        if d_model % num_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}: every head gets "
                "d_head = d_model / num_heads features"
            )
        self.d_head = d_model // num_heads
        self.kdim = check_positive_int(kdim if kdim is not None else d_model, "kdim")
        self.vdim = check_positive_int(vdim if vdim is not None else d_model, "vdim")
        self.dropout = _check_dropout_p(dropout, "dropout")
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W^Q, all heads side by side
        self.k_proj = nn.Linear(self.kdim, d_model, bias=bias)  # W^K
        self.v_proj = nn.Linear(self.vdim, d_model, bias=bias)  # W^V
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O

    def _check_inputs(self, query, key, value) -> None:
        for name, t, size in (
            ("query", query, self.d_model),
            ("key", key, self.kdim),
            ("value", value, self.vdim),
        ):
            check_tensor(t, name, ndim=3, dtype="floating")
            if t.shape[-1] != size:
                raise ValueError(
                    f"{name} must have shape (batch, seq, {size}), got {tuple(t.shape)}"
                )
        if not (query.shape[0] == key.shape[0] == value.shape[0]):
            raise ValueError(
                "query, key and value must have the same batch size, got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )
        if key.shape[1] != value.shape[1]:
            raise ValueError(
                "key and value must have the same length, got "
                f"{tuple(key.shape)} and {tuple(value.shape)}"
            )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(batch, n_q, d_model)``.
            key: ``(batch, n_k, kdim)``; ``value``: ``(batch, n_k, vdim)``. Self-attention passes
                the same tensor three times.
            mask: optional bool mask, True = may attend, broadcastable to
                ``(batch, num_heads, n_q, n_k)`` with each dimension equal or 1 (aligned from the
                right): e.g. ``causal_mask(n)`` ``(n_q, n_k)``, ``key_padding_mask(lengths)``
                ``(batch, 1, 1, n_k)``, or both combined with ``&``. A 3-D mask is read as
                ``(num_heads, n_q, n_k)``; a per-example mask needs ``mask[:, None]``.
            need_weights: return the per-head weights (explicit path). ``False`` takes the fused
                fast path (same output, up to rounding) and returns ``None`` as weights.

        Returns:
            ``out`` ``(batch, n_q, d_model)`` and ``weights`` ``(batch, num_heads, n_q, n_k)``
            (after dropout, as in PyTorch), or ``None``.
        """
        self._check_inputs(query, key, value)
        batch, n_q, _ = query.shape
        n_k = key.shape[1]
        if mask is not None:
            check_mask(mask, (batch, self.num_heads, n_q, n_k))
        queries = split_heads(self.q_proj(query), self.num_heads)  # (batch, heads, n_q, d_head)
        keys = split_heads(self.k_proj(key), self.num_heads)  # (batch, heads, n_k, d_head)
        values = split_heads(self.v_proj(value), self.num_heads)  # (batch, heads, n_k, d_head)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            heads, weights = scaled_dot_product_attention(queries, keys, values, mask, dropout_p)
        else:
            heads, weights = fast_attention(queries, keys, values, mask, dropout_p), None
        # heads: (batch, heads, n_q, d_head)
        out = self.out_proj(merge_heads(heads))  # (batch, n_q, d_model)
        return out, weights

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, d_head={self.d_head}, "
            f"kdim={self.kdim}, vdim={self.vdim}, dropout={self.dropout}"
        )

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """Build an equivalent course module from a PyTorch ``nn.MultiheadAttention``.

        Copies every weight (the packed ``in_proj_weight`` is split into W^Q, W^K, W^V).
        Nothing about masks is converted: for PyTorch a *True* in a boolean ``attn_mask`` or
        ``key_padding_mask`` means "blocked", for this course it means "may attend", so pass
        ``~torch_mask`` here. Our module is always batch-first, whatever ``module.batch_first``
        says. ``add_bias_kv`` and ``add_zero_attn`` are not supported and raise.
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"expected nn.MultiheadAttention, got {type(module).__name__}")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("add_bias_kv / add_zero_attn are not supported by MultiHeadAttention")
        has_bias = module.in_proj_bias is not None
        if has_bias != (module.out_proj.bias is not None):
            raise ValueError("in-projection and out-projection must both have biases or neither")
        ours = cls(
            module.embed_dim,
            module.num_heads,
            dropout=module.dropout,
            bias=has_bias,
            kdim=module.kdim,
            vdim=module.vdim,
        )
        ours = ours.to(device=module.out_proj.weight.device, dtype=module.out_proj.weight.dtype)
        d = module.embed_dim
        with torch.no_grad():
            if module._qkv_same_embed_dim:
                w_q, w_k, w_v = module.in_proj_weight.split(d, dim=0)
            else:
                w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
            ours.q_proj.weight.copy_(w_q)
            ours.k_proj.weight.copy_(w_k)
            ours.v_proj.weight.copy_(w_v)
            ours.out_proj.weight.copy_(module.out_proj.weight)
            if has_bias:
                b_q, b_k, b_v = module.in_proj_bias.split(d, dim=0)
                ours.q_proj.bias.copy_(b_q)
                ours.k_proj.bias.copy_(b_k)
                ours.v_proj.bias.copy_(b_v)
                ours.out_proj.bias.copy_(module.out_proj.bias)
        ours.train(module.training)
        return ours
