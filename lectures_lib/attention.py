r"""Attention in named steps, fused attention, single- and multi-head self-attention.

Derived in ``01_self_attention.ipynb`` (the steps :func:`attention_scores` ->
:func:`masked_softmax` -> :func:`scaled_dot_product_attention`, ``SelfAttention``) and
``02_multi_head_attention.ipynb`` (``split_heads``, ``merge_heads``, ``multi_head_attention``,
``MultiHeadAttention``). Masks (``causal_mask``, ``key_padding_mask``, ``check_mask``) live in
:mod:`lectures_lib.masks` and are importable from here too.

**The seam.** :class:`MultiHeadAttention` computes attention in named steps, and a variant of
attention (section 06) changes exactly one of them by overriding it::

    forward(query, key, value, mask=None, need_weights=True, *, key_padding_mask=None,
            positions=None)
        = check the inputs once (at the public boundary: check_inputs, rules in _validate/attention.py)
        -> project(query, key, value, positions) -> q, k, v   (batch, heads, n, d_head) each
        -> attend(q, k, v, mask, need_weights)   -> heads_out (batch, heads, n_q, d_head), weights
        -> merge_heads -> out_proj

Override ``project`` to change how queries and keys are formed (rotary positions:
:class:`~lectures_lib.positional.RotaryAttention`, which reads ``positions``); override ``attend``
to change which cells are scored or how they are normalised (local, clustered, linear, and
Linformer, whose projected keys and values are made inside ``attend``). Layers and models take
the attention as a *factory* ``factory(d_model, num_heads, dropout) -> module`` (a class or a
``functools.partial``).

**Incremental decoding** (section 05): :meth:`MultiHeadAttention.forward_cached` runs the same
steps for the *new* positions only, keeping earlier keys and values in a :class:`KeyValueCache`
(:mod:`lectures_lib.cache`, which also says when a variant may use one).

Conventions: batch-first shapes ``(batch, seq, d_model)``, per head ``(batch, heads, seq,
d_head)``; boolean masks with **True = may attend** (see :mod:`lectures_lib.masks`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import interop
from ._validate import attention as rules
from ._validate.settings import check_settings
from .cache import KeyValueCache, declare, kv_cache_problem
from .masks import causal_mask, check_mask, key_padding_mask, with_key_padding
from .utils import validated

__all__ = [
    "attention_scores",
    "masked_softmax",
    "scaled_dot_product_attention",
    "fused_attention",
    "causal_mask",
    "key_padding_mask",
    "check_mask",
    "SelfAttention",
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "multi_head_attention",
    "KeyValueCache",
    "kv_cache_problem",
]


# ---------------------------------------------------------------------------------------------
# The steps of scaled dot-product attention
# ---------------------------------------------------------------------------------------------


@validated(rules.qkv_and_mask)
def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    r"""Step 1, the relevance :math:`\alpha_{i,j} = q^i \cdot k^j / \sqrt{d_k}` of every key to
    every query: :math:`\alpha = Q K^\top / \sqrt{d_k}`.

    ``q`` ``(..., n_q, d_k)`` and ``k`` ``(..., n_k, d_k)`` -> scores ``(..., n_q, n_k)``.
    Scaling the queries before the product is the same as scaling the scores, but costs
    ``n_q * d_k`` multiplications instead of ``n_q * n_k``. Derived in ``01_self_attention.ipynb``.
    """
    d_k = q.shape[-1]
    return (q / math.sqrt(d_k)) @ k.transpose(-2, -1)  # (..., n_q, n_k)


@validated(rules.scores_and_mask)
def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    r"""Step 2, normalise each query's scores over the keys it may attend to:
    :math:`\alpha'_{i,j} = \exp(\alpha_{i,j}) / \sum_{j' \text{ allowed}} \exp(\alpha_{i,j'})`.

    ``scores`` ``(..., n_q, n_k)``; ``mask`` a bool mask broadcasting to it (True = may attend).
    Returns weights of the same shape: each row sums to 1, and masked cells are exactly 0 in
    every dtype (they are set to :math:`-\infty` before the softmax, and to 0 after it), so a
    masked key never gets weight. A query with *no* allowed key gets an all-zero row instead of
    NaN (the course's convention, not softmax's: PyTorch's fused kernel may give NaN there).
    Softmax itself subtracts the row maximum, so large scores do not overflow. A NaN score
    stays NaN in the weights of its row (see ``scaled_dot_product_attention`` for the NaN
    rule). Derived in ``01_self_attention.ipynb``.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)  # (..., n_q, n_k)
    mask = mask.to(scores.device)
    scores = scores.masked_fill(~mask, float("-inf"))  # exp(-inf) = 0: masked keys get no weight
    weights = torch.softmax(scores, dim=-1)  # a row with no allowed key is 0 / 0 = NaN here...
    # ...and a row whose allowed scores all overflowed too: set every masked cell to exactly 0,
    # so a query with nothing to attend to gets an all-zero row, and a masked key never wins.
    return weights.masked_fill(~mask, 0.0)  # (..., n_q, n_k)


@validated(rules.qkv_and_mask)
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

    It composes the steps: :func:`attention_scores` -> :func:`masked_softmax` -> (dropout) ->
    weights @ values.

    Args:
        q: queries ``(..., n_q, d_k)``.
        k: keys ``(..., n_k, d_k)``.
        v: values ``(..., n_k, d_v)``.
        mask: optional bool mask broadcastable to ``(..., n_q, n_k)``; True = may attend.
        dropout_p: dropout on the attention weights (only when > 0).

    Returns:
        ``(out, weights)`` with shapes ``(..., n_q, d_v)`` and ``(..., n_q, n_k)``. Each row of
        ``weights`` sums to 1 and is exactly 0 on masked cells. A query whose keys are *all* masked
        (e.g. a padding query), or a sequence with no keys at all, gets an all-zero row and a zero
        output instead of NaN.

    **Half precision.** In float16 a score :math:`q \cdot k` overflows past 65504, so the scores
    and the softmax are computed in float32 for float16/bfloat16 inputs (as PyTorch's fused
    kernels do), and the weights are cast back to the input dtype: no row overflows to
    :math:`-\infty` everywhere, and masked cells stay exactly 0.

    **NaN and inf** in ``q``, ``k``, ``v`` are not refused (checking every tensor would cost a
    pass over it at every call); they propagate, the same on this path and on
    :func:`fused_attention`: a non-finite query makes its own output row NaN (unless it may attend
    to no key at all: such a row is all zeros, whatever the query); a non-finite key
    makes NaN the rows of the queries that *may attend* to it (a masked key is removed before
    the softmax); a non-finite value reaches every output of its ``(batch, head)`` slice,
    masked or not (the weighted sum multiplies it by 0, and 0 x NaN = NaN).

    Derived in ``01_self_attention.ipynb``.
    """
    # float16 scores overflow past 65504 (bfloat16 loses digits): score in at least float32.
    compute_dtype = torch.promote_types(q.dtype, torch.float32)
    scores = attention_scores(q.to(compute_dtype), k.to(compute_dtype))  # (..., n_q, n_k)
    weights = masked_softmax(scores, mask).to(v.dtype)  # (..., n_q, n_k), rows sum to 1 or 0
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights @ v  # (..., n_q, d_v)
    return out, weights


@validated(rules.qkv_and_mask)
def fused_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Same result as :func:`scaled_dot_product_attention` via PyTorch's fused kernel.

    Returns only ``out`` (fused kernels never materialise the weights). Used by the modules when
    the weights are not needed (``need_weights=False``). Queries whose keys are all masked (or a
    sequence with no keys) get a zero output, as in the explicit path (the fused kernel alone may
    give NaN there). Same arguments and checks as the explicit path.

    **NaN and inf** follow the explicit path's rule (see :func:`scaled_dot_product_attention`):
    PyTorch's fused kernels do not agree among themselves on where a NaN goes (some give a zero
    row), so when ``q``, ``k`` or ``v`` holds a non-finite value this function computes the
    explicit path instead, and both paths give the same output. (Named *fused* for PyTorch's
    kernel; section 06's Performer is "fast attention via orthogonal random features", a
    different thing.)
    """
    empty = q.shape[-2] == 0 or k.shape[-2] == 0  # no query, or no key: kernels may give NaN
    if empty or not all(bool(torch.isfinite(t).all()) for t in (q, k, v)):
        # one rule for both paths (NaN, no key): the explicit one
        return scaled_dot_product_attention(q, k, v, mask, dropout_p)[0]
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    mask = mask.to(q.device)
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
        check_settings(d_model=d_model, d_k=d_k, d_v=d_v, bias=bias)
        super().__init__()
        self.d_model = d_model
        self.d_k = d_k if d_k is not None else d_model
        self.d_v = d_v if d_v is not None else d_model
        self.w_q = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.w_k = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.w_v = nn.Linear(self.d_model, self.d_v, bias=bias)

    @validated(rules.self_attention_inputs)
    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x``: ``(batch, seq, d_model)`` -> ``(out (batch, seq, d_v), weights (batch, seq, seq))``."""
        queries = self.w_q(x)  # (batch, seq, d_k)
        keys = self.w_k(x)  # (batch, seq, d_k)
        values = self.w_v(x)  # (batch, seq, d_v)
        return scaled_dot_product_attention(queries, keys, values, mask)


# ---------------------------------------------------------------------------------------------
# Multi-head attention
# ---------------------------------------------------------------------------------------------


@validated(rules.heads_divide_features)
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(batch, seq, d_model)`` -> ``(batch, num_heads, seq, d_head)`` with d_head = d_model / num_heads.

    Head h gets features ``h * d_head ... (h + 1) * d_head - 1`` of every position.
    Reshaping straight to ``(batch, num_heads, seq, d_head)`` without the transpose would mix
    positions into heads: the classic bug. Derived in ``02_multi_head_attention.ipynb``.
    """
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    x = x.reshape(batch, seq, num_heads, d_head)  # (batch, seq, heads, d_head): cut the features
    return x.transpose(1, 2)  # (batch, heads, seq, d_head): heads become a batch dimension


@validated(rules.stacked_heads)
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`split_heads`: ``(batch, heads, seq, d_head)`` -> ``(batch, seq, heads * d_head)``.

    This is the concatenation ``[b^{i,1}; b^{i,2}; ...]`` of the lecture (拼接), for every
    position i. Derived in ``02_multi_head_attention.ipynb``.
    """
    batch, num_heads, seq, d_head = x.shape
    x = x.transpose(1, 2)  # (batch, seq, heads, d_head)
    return x.reshape(batch, seq, num_heads * d_head)  # (batch, seq, d_model)


@validated(rules.mha_weights)
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
    queries = split_heads(x @ w_q, num_heads)  # (batch, heads, seq, d_head)
    keys = split_heads(x @ w_k, num_heads)  # (batch, heads, seq, d_head)
    values = split_heads(x @ w_v, num_heads)  # (batch, heads, seq, d_head)
    heads, weights = scaled_dot_product_attention(queries, keys, values, mask)
    # heads: (batch, heads, seq, d_head); weights: (batch, heads, seq, seq)
    out = merge_heads(heads) @ w_o  # (batch, seq, d_model)
    return out, weights


# ---------------------------------------------------------------------------------------------
# Multi-head attention: check -> project -> attend -> merge -> out_proj
# ---------------------------------------------------------------------------------------------


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

    The seam (see the module docstring): ``forward`` = check once -> :meth:`project` ->
    :meth:`attend` -> merge heads -> ``out_proj``; a variant overrides one step.
    Derived in ``02_multi_head_attention.ipynb``; :meth:`forward_cached` in
    ``05_transformer_decoder.ipynb``.
    """

    #: ``forward_cached`` (project the new positions, append to the cache, attend) gives the same
    #: result as ``forward`` on the whole prefix. A subclass that overrides ``project``,
    #: ``attend``, ``forward`` or ``forward_cached`` must set it again in its own class body to
    #: claim the same (:mod:`lectures_lib.cache`); otherwise it is set to False for it.
    supports_kv_cache = True

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        declare(cls)  # overrides a step without supports_kv_cache = True: no cache for it

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        kdim: int | None = None,
        vdim: int | None = None,
    ) -> None:
        rules.mha_sizes(d_model, num_heads, dropout, bias, kdim, vdim)
        super().__init__()
        self.d_model, self.num_heads = d_model, num_heads
        self.d_head = d_model // num_heads
        self.kdim = kdim if kdim is not None else d_model
        self.vdim = vdim if vdim is not None else d_model
        self.dropout = float(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W^Q, all heads side by side
        self.k_proj = nn.Linear(self.kdim, d_model, bias=bias)  # W^K
        self.v_proj = nn.Linear(self.vdim, d_model, bias=bias)  # W^V
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O

    # -- the door: overridable hooks, their rules in lectures_lib/_validate/attention.py ----

    #: ``check_inputs(query, key, value, mask=None, need_weights=True, *, key_padding_mask=None,
    #: positions=None)``: the door of ``forward`` (once, at the public boundary). A variant with
    #: extra requirements (e.g. self-attention only, a fixed ``seq_len``) replaces it with a rule
    #: that calls this one first.
    check_inputs = rules.mha_inputs
    #: ``check_cached_inputs(query, key, value, cache, mask=None, *, static=False)``: the door of
    #: ``forward_cached`` (the same rules, plus the cache).
    check_cached_inputs = rules.mha_cached_inputs

    # -- forward: check once -> project -> attend -> merge heads -> out_proj ----------------

    @validated("check_inputs")
    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
        mask: torch.Tensor | None = None, need_weights: bool = True, *,
        key_padding_mask: torch.Tensor | None = None, positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(batch, n_q, d_model)``.
            key: ``(batch, n_k, kdim)``; ``value``: ``(batch, n_k, vdim)``. Self-attention passes
                the same tensor three times.
            mask: optional bool mask, True = may attend, 2-D ``(n_q, n_k)`` or 4-D broadcasting
                to ``(batch, num_heads, n_q, n_k)``, e.g. ``causal_mask(n)`` ``&``
                ``key_padding_mask(lengths)`` (see :mod:`lectures_lib.masks`).
            need_weights: return the per-head weights (explicit path). ``False`` takes the fused
                path (same output, up to rounding) and returns ``None`` as weights.
            key_padding_mask: optional bool ``(batch, n_k)``, **True = a real token**, ANDed with
                ``mask`` (PyTorch's separate argument; theirs is True at padding: pass ``~theirs``).
            positions: optional ``(seq,)`` or ``(batch, seq)``, handed to :meth:`project` for
                position-aware projections (:class:`~lectures_lib.positional.RotaryAttention`).

        Returns:
            ``out`` ``(batch, n_q, d_model)`` and ``weights`` ``(batch, num_heads, n_q, n_k)``
            (after dropout, as in PyTorch), or ``None``.
        """
        mask = with_key_padding(mask, key_padding_mask)  # AND (batch, 1, 1, n_k)
        queries, keys, values = self.project(query, key, value, positions)  # (b, h, n, d_head)
        heads, weights = self.attend(queries, keys, values, mask, need_weights)
        # heads: (batch, heads, n_q, d_head)
        out = self.out_proj(merge_heads(heads))  # (batch, n_q, d_model)
        return out, weights

    @validated("check_cached_inputs")
    def forward_cached(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cache: KeyValueCache,
        mask: torch.Tensor | None = None, *, static: bool = False,
    ) -> torch.Tensor:
        r"""Attention for the *new* positions of autoregressive decoding, with a key/value cache.

        Self-attention (``static=False``): ``query``, ``key``, ``value`` are the new positions
        ``(batch, n_new, d_model)``, at positions ``len(cache) ... len(cache) + n_new - 1``
        (handed to :meth:`project`); their keys and values are appended to ``cache``, and the
        new queries attend to every cached position, so step :math:`t` costs :math:`O(t)`
        instead of recomputing the whole prefix (:math:`O(t^2)`). Cross-attention
        (``static=True``): the keys and values of ``key``/``value`` (the encoder's memory) are
        projected on the first call only; later calls reuse them from the cache.

        ``mask``: bool, True = may attend, broadcasting to ``(batch, heads, n_new, len(cache))``
        *after* the new keys are appended. Returns ``out`` ``(batch, n_new, d_model)`` (fused
        path, no weights). Equal to the last ``n_new`` rows of :meth:`forward` on the whole
        prefix under a causal mask. Derived in ``05_transformer_decoder.ipynb``.
        """
        start = len(cache)
        positions = None if static else torch.arange(start, start + query.shape[1],
                                                     device=query.device)  # (n_new,)
        if static and start:  # the memory was projected on the first step
            queries, _, _ = self.project(query, key[:, :0], value[:, :0])  # (b, h, n_new, d)
        else:
            queries, keys, values = self.project(query, key, value, positions)  # (b, h, n, d)
            cache.append(keys, values)  # cache: (batch, heads, t, d_head)
        heads, _ = self.attend(queries, cache.keys, cache.values, mask, False)
        return self.out_proj(merge_heads(heads))  # (batch, n_new, d_model)

    # -- the two steps a variant may override ----------------------------------------------

    def project(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r"""Step 1: queries, keys and values per head, :math:`Q W^Q`, :math:`K W^K`, :math:`V W^V`
        cut into heads: each ``(batch, num_heads, n, d_head)``. ``positions`` (where each token
        sits, from ``forward(positions=)`` or the cache) is for position-aware projections:
        these projections do not depend on where a token is."""
        queries = split_heads(self.q_proj(query), self.num_heads)  # (batch, heads, n_q, d_head)
        keys = split_heads(self.k_proj(key), self.num_heads)  # (batch, heads, n_k, d_head)
        values = split_heads(self.v_proj(value), self.num_heads)  # (batch, heads, n_k, d_head)
        return queries, keys, values

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
        need_weights: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Step 2: every head attends, ``(batch, heads, n_q, d_head)`` out, and its weights
        ``(batch, heads, n_q, n_k)`` when ``need_weights`` (else ``None``). ``mask`` was checked
        at the door: 2-D ``(n_q, n_k)`` or 4-D, True = may attend. Dropout on the weights while
        training."""
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            return scaled_dot_product_attention(q, k, v, mask, dropout_p)
        return fused_attention(q, k, v, mask, dropout_p), None

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, d_head={self.d_head}, "
            f"kdim={self.kdim}, vdim={self.vdim}, dropout={self.dropout}"
        )

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """An equivalent course module from a PyTorch ``nn.MultiheadAttention``, every weight
        copied (:mod:`lectures_lib.interop`). Masks are not converted: PyTorch's True means
        "blocked", ours "may attend" (pass ``~torch_mask``). Always batch-first; ``add_bias_kv`` and
        ``add_zero_attn`` are not supported and raise."""
        return interop.attention_from_torch(cls, module)
