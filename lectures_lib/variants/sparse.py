r"""Sparse patterns without the :math:`N \times N` matrix: stride attention by reshaping, global
tokens as a few dense rows and columns, and one gather engine for Longformer and Big Bird.

* :func:`strided_attention`: query :math:`i` attends to keys :math:`j` with
  :math:`(i - j) \bmod s = 0`. Positions with the same remainder :math:`i \bmod s` form a group,
  so the sequence is reshaped into :math:`s` groups of :math:`\lceil N / s \rceil` and each group
  attends within itself: :math:`O(N^2 / s)` scores instead of :math:`N^2`.
* :func:`sparse_attention`: every query attends to a short list of key positions of its own
  (``key_index``, :math:`S \ll N` slots) plus the global positions, and the global queries attend
  to every key. Keys are *gathered* per query: :math:`O(N (S + G))` scores, plus :math:`G` dense
  rows of length :math:`N`.
* :func:`global_attention`: the pure global pattern (:func:`~.patterns.global_mask`).
* :class:`LongformerAttention` (local + dilated windows, one per head, + global tokens) and
  :class:`BigBirdAttention` (local + random links, different per head, + global tokens): modules
  and attention factories built on :func:`sparse_attention`.

Every function equals ``scaled_dot_product_attention`` under the corresponding mask (the tests
and ``06_attention_variants.ipynb`` check it). Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .._validate.variants import sparse as rules
from ..attention import masked_softmax
from ..utils import validated
from .base import PatternAttention, gather_rows
from .patterns import dilated_mask, global_mask, local_mask, random_keys, random_mask

__all__ = [
    "strided_attention",
    "sparse_attention",
    "global_attention",
    "sparse_pattern",
    "LongformerAttention",
    "BigBirdAttention",
]


def _global_positions(global_positions: object) -> torch.Tensor:
    """Checked global positions as a sorted 1-D long tensor without repeats."""
    if global_positions is None:
        return torch.zeros(0, dtype=torch.long)
    return torch.unique(torch.as_tensor(global_positions, dtype=torch.long).cpu())  # sorted


# ---------------------------------------------------------------------------------------------
# Stride attention by reshaping
# ---------------------------------------------------------------------------------------------


@validated(rules.strided_qkv)
def strided_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    stride: int,
    *,
    need_weights: bool = False,
    key_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Stride attention: query :math:`i` attends to the keys :math:`j` with :math:`(i - j) \bmod s
    = 0`, the same result as dense attention under ``stride_mask(n, stride)``.

    Position :math:`p = t s + r` sits in group :math:`r` at place :math:`t`. Padding the sequence
    to :math:`m s` positions (:math:`m = \lceil n / s \rceil`) and reshaping ``(..., m, s, d) ->
    (..., s, m, d)`` puts every group in a row of its own; each group is an ordinary dense
    attention of :math:`m` queries and keys. Scores: ``(..., s, m, m)``, :math:`N^2 / s` cells.

    Args:
        q, k, v: ``(..., n, d_k)``, ``(..., n, d_k)``, ``(..., n, d_v)`` (self-attention).
        stride: :math:`s \ge 1`; 1 is full attention, :math:`s \ge n` lets each position see
            only itself.
        need_weights: also return the ``(..., n, n)`` weights (built only because they are
            asked for: pictures and checks).
        key_mask: optional bool ``(..., n)``, True = this key may be attended to (padding).
        dropout_p: dropout on the weights.

    Returns ``out`` ``(..., n, d_v)``, or ``(out, weights)``. Derived in
    ``06_attention_variants.ipynb``.
    """
    n = q.shape[-2]
    m = math.ceil(n / stride)  # places per group

    def groups(x: torch.Tensor) -> torch.Tensor:
        x = F.pad(x, (0, 0, 0, m * stride - n))  # (..., m * s, d): zero rows at the end
        x = x.reshape(*x.shape[:-2], m, stride, x.shape[-1])  # (..., m, s, d): p = t s + r
        return x.transpose(-3, -2)  # (..., s, m, d): group r holds r, r + s, r + 2s, ...

    real = torch.arange(m * stride, device=q.device) < n  # (m * s,): not a padding row
    if key_mask is not None:
        real = F.pad(key_mask.to(q.device), (0, m * stride - n), value=False)  # (..., m * s)
    allowed = real.reshape(*real.shape[:-1], m, stride).transpose(-2, -1)  # (..., s, m)
    scores = groups(q) @ groups(k).transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., s, m, m)
    weights = masked_softmax(scores, allowed[..., None, :])  # (..., s, m, m)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = weights @ groups(v)  # (..., s, m, d_v)
    out = out.transpose(-3, -2).reshape(*out.shape[:-3], m * stride, out.shape[-1])  # (..., m*s, d_v)
    out = out[..., :n, :]  # (..., n, d_v): drop the padding rows
    if not need_weights:
        return out
    # weights[..., r, t1, t2] is the weight of query t1*s + r on key t2*s + r.
    by_place = weights.transpose(-3, -2)  # (..., m, s, m): query place t1, group r, key place t2
    same_group = torch.eye(stride, dtype=weights.dtype, device=weights.device)  # (s, s)
    dense = by_place[..., :, :, :, None] * same_group[:, None, :]  # (..., m, s, m, s)
    dense = dense.reshape(*dense.shape[:-4], m * stride, m * stride)  # (..., m*s, m*s)
    return out, dense[..., :n, :n]


# ---------------------------------------------------------------------------------------------
# One engine: a few gathered keys per query, plus global rows and columns
# ---------------------------------------------------------------------------------------------


def _slots(key_index: torch.Tensor, global_positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Append the global keys to every query's slots, then keep each key once.

    ``key_index`` ``(..., n, S)`` with -1 for an empty slot -> ``(index (..., n, S + G) with empty
    slots at 0, valid (..., n, S + G))``: a key listed twice (or local *and* global) counts once,
    as in the dense mask.
    """
    if global_positions.numel():
        columns = global_positions.to(key_index.device).expand(*key_index.shape[:-1], -1)
        key_index = torch.cat([key_index, columns], dim=-1)  # (..., n, S + G)
    index, _ = key_index.sort(dim=-1)  # repeats become neighbours
    repeat = torch.zeros_like(index, dtype=torch.bool)
    repeat[..., 1:] = index[..., 1:] == index[..., :-1]
    valid = (index >= 0) & ~repeat  # (..., n, S + G)
    return index.clamp(min=0), valid


@validated(rules.key_index_pattern)
def sparse_pattern(
    n: int,
    key_index: torch.Tensor,
    global_positions: Sequence[int] | torch.Tensor | None = None,
) -> torch.Tensor:
    """The dense bool mask ``(..., n, n)`` that :func:`sparse_attention` attends under: the
    listed keys of each query, the global columns and the global rows. For pictures and checks.
    Derived in ``06_attention_variants.ipynb``.
    """
    globals_ = _global_positions(global_positions)
    index, valid = _slots(key_index, globals_)
    hits = torch.zeros(*index.shape[:-1], n, device=index.device)  # (..., n, n)
    mask = hits.scatter_add(-1, index, valid.float()) > 0  # True at every valid listed key
    mask[..., globals_.to(mask.device), :] = True  # global rows: attend to every key
    return mask


@validated(rules.sparse_qkv)
def sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    key_index: torch.Tensor,
    global_positions: Sequence[int] | torch.Tensor | None = None,
    *,
    need_weights: bool = False,
    key_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Attention of each query to its own short list of keys, plus global tokens.

    Query :math:`i` attends to the keys ``key_index[..., i, :]`` (``-1`` = an empty slot; a key
    listed twice counts once) and to every global position; a global query attends to every key.
    The same result as dense attention under :func:`sparse_pattern`, computed by *gathering* the
    :math:`S + G` keys of each query: scores ``(..., n, S + G)`` and :math:`G` dense rows
    ``(..., G, n)``, never ``(..., n, n)``.

    Args:
        q, k, v: ``(..., n, d_k)``, ``(..., n, d_k)``, ``(..., n, d_v)`` (self-attention).
        key_index: integer ``(..., n, S)`` broadcasting to ``q.shape[:-1] + (S,)`` (e.g. one
            list per head ``(heads, n, S)``), entries in ``[-1, n)``.
        global_positions: positions of the global tokens (default none).
        need_weights: also return the dense ``(..., n, n)`` weights (for pictures and checks).
        key_mask: optional bool ``(..., n)``, True = this key may be attended to.
        dropout_p: dropout on the weights.

    Returns ``out`` ``(..., n, d_v)`` (a query with no allowed key gets zeros), or
    ``(out, weights)``. Derived in ``06_attention_variants.ipynb``.
    """
    lead, n, d_k, d_v = q.shape[:-2], q.shape[-2], q.shape[-1], v.shape[-1]
    batch = math.prod(lead)
    if batch == 0 or n == 0:  # nothing to attend from: the empty result dense attention gives
        out = v.new_zeros(*lead, n, d_v)
        return (out, q.new_zeros(*lead, n, n)) if need_weights else out
    globals_ = _global_positions(global_positions)
    index, valid = _slots(key_index.to(q.device), globals_)  # (..., n, S + G)
    slots = index.shape[-1]
    index = index.expand(*lead, n, slots).reshape(batch, n, slots)  # (B, n, S + G)
    valid = valid.expand(*lead, n, slots).reshape(batch, n, slots)  # (B, n, S + G)
    if key_mask is not None:
        keys_allowed = key_mask.to(q.device).expand(*lead, n).reshape(batch, n)  # (B, n)
        valid = valid & gather_rows(keys_allowed[..., None], index)[..., 0]  # (B, n, S + G)

    queries = q.reshape(batch, n, 1, d_k) / math.sqrt(d_k)  # (B, n, 1, d_k)
    keys = gather_rows(k.reshape(batch, n, d_k), index)  # (B, n, S + G, d_k)
    values = gather_rows(v.reshape(batch, n, d_v), index)  # (B, n, S + G, d_v)
    scores = (queries @ keys.transpose(-2, -1)).squeeze(-2)  # (B, n, S + G)
    weights = masked_softmax(scores, valid)  # (B, n, S + G), rows sum to 1 (or 0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = (weights.unsqueeze(-2) @ values).squeeze(-2)  # (B, n, d_v)

    row_weights = None
    if globals_.numel():  # global queries: G dense rows over all n keys
        rows = globals_.to(q.device)
        row_queries = q.reshape(batch, n, d_k)[:, rows]  # (B, G, d_k)
        row_scores = row_queries @ k.reshape(batch, n, d_k).transpose(-2, -1)  # (B, G, n)
        row_scores = row_scores / math.sqrt(d_k)
        row_mask = None
        if key_mask is not None:
            row_mask = keys_allowed[:, None, :]  # (B, 1, n)
        row_weights = masked_softmax(row_scores, row_mask)  # (B, G, n)
        if dropout_p > 0.0:
            row_weights = F.dropout(row_weights, p=dropout_p)
        row_out = row_weights @ v.reshape(batch, n, d_v)  # (B, G, d_v)
        out = out.index_copy(1, rows, row_out)  # the global rows replace the sparse ones
    out = out.reshape(*lead, n, d_v)  # (..., n, d_v)
    if not need_weights:
        return out
    dense = weights.new_zeros(batch, n, n).scatter_add(-1, index, weights * valid)  # (B, n, n)
    if row_weights is not None:
        dense = dense.index_copy(1, globals_.to(q.device), row_weights)
    return out, dense.reshape(*lead, n, n)


@validated(rules.global_qkv)
def global_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    global_positions: Sequence[int] | torch.Tensor,
    *,
    need_weights: bool = False,
    key_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Global attention alone (the pattern of :func:`~.patterns.global_mask`): a global token
    attends to every token (collects global information) and every token attends to the global
    tokens (knows the global information); nothing else. :math:`G` dense rows and :math:`G`
    columns: :math:`O(N G)` scores. Combine it with a local pattern through
    :func:`sparse_attention` (Longformer). Same arguments as :func:`sparse_attention`.
    Derived in ``06_attention_variants.ipynb``.
    """
    no_slots = torch.full((q.shape[-2], 0), -1, dtype=torch.long)  # (n, 0): no key of their own
    return sparse_attention(
        q, k, v, no_slots, global_positions, need_weights=need_weights, key_mask=key_mask,
        dropout_p=dropout_p,
    )


# ---------------------------------------------------------------------------------------------
# Modules: Longformer and Big Bird
# ---------------------------------------------------------------------------------------------


def _window_index(n: int, offsets: torch.Tensor) -> torch.Tensor:
    """``(n, S)``: key ``i + offsets[s]`` for query ``i``, ``-1`` outside the sequence."""
    index = torch.arange(n)[:, None] + offsets[None, :]  # (n, S)
    return index.masked_fill((index < 0) | (index >= n), -1)


class _SparsePatternAttention(PatternAttention):
    """A pattern given by per-head key lists (``key_index(n)``) and global positions."""

    global_positions: tuple[int, ...]

    def key_index(self, n: int) -> torch.Tensor:
        """``(heads, n, S)`` key positions per head and query (-1 = empty)."""
        raise NotImplementedError

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        n = q.shape[-2]
        return sparse_pattern(n, self.key_index(n), self._globals(n))[None].to(q.device)

    def efficient_attend(self, q, k, v, key_mask, need_weights, dropout_p):
        n = q.shape[-2]
        result = sparse_attention(
            q, k, v, self.key_index(n), self._globals(n), need_weights=need_weights,
            key_mask=key_mask, dropout_p=dropout_p,
        )
        return result if need_weights else (result, None)

    def _globals(self, n: int) -> tuple[int, ...]:
        return self.global_positions if n else ()  # an empty sequence has no global token


class LongformerAttention(_SparsePatternAttention):
    r"""Longformer's attention (Beltagy et al. 2020): a sliding window in every head, dilated
    in some heads, plus global tokens.

    Head :math:`h` attends to :math:`|i - j| \le w d_h` with :math:`(i - j) \bmod d_h = 0`
    (:func:`~.patterns.dilated_mask`; :math:`d_h = 1` is plain local attention), and the tokens
    at ``global_positions`` attend to and are attended by every token (like ``[CLS]``). Computed
    by :func:`sparse_attention`: :math:`2w + 1 + G` keys per query, never :math:`N \times N`.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        window: neighbours on each side (default 4).
        dilations: one dilation per head; default: 1 for the first half of the heads, 2 for the
            rest (the paper dilates some heads in the upper layers; here every layer does).
        global_positions: positions of the global tokens (default ``(0,)``, the first token).

    An attention factory: ``partial(LongformerAttention, window=4)``. Derived in
    ``06_attention_variants.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        window: int = 4,
        dilations: Sequence[int] | None = None,
        global_positions: Sequence[int] = (0,),
    ) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias)
        if dilations is None:
            dilations = [1] * ((num_heads + 1) // 2) + [2] * (num_heads // 2)
        rules.longformer_settings(self, window, dilations, global_positions)
        self.window = int(window)
        self.dilations = tuple(int(d) for d in dilations)
        self.global_positions = tuple(int(p) for p in global_positions)

    def key_index(self, n: int) -> torch.Tensor:
        steps = torch.arange(-self.window, self.window + 1)  # (2w + 1,)
        return torch.stack([_window_index(n, steps * d) for d in self.dilations])  # (heads, n, 2w+1)

    def head_masks(self, n: int) -> list[torch.Tensor]:
        """The pattern of each head as ``(n, n)`` masks (for pictures)."""
        return [
            dilated_mask(n, self.window, d) | global_mask(n, list(self.global_positions))
            for d in self.dilations
        ]

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, window={self.window}, dilations={self.dilations}, "
                f"global_positions={self.global_positions}")


class BigBirdAttention(_SparsePatternAttention):
    r"""Big Bird's attention (Zaheer et al. 2020): a sliding window, random links and global
    tokens, with different random links in every head.

    Head :math:`h` attends to :math:`|i - j| \le w`, to ``num_random`` random keys per query
    (:func:`~.patterns.random_keys` with seed ``seed + h``: fixed for a given length, not redrawn
    at every step), and the tokens at ``global_positions`` attend to and are attended by every
    token. The paper works with blocks of tokens (for GPU efficiency); here every token is its
    own block. Computed by :func:`sparse_attention`: :math:`2w + 1 + r + G` keys per query.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        window: neighbours on each side (default 3).
        num_random: random keys per query and head (default 3).
        global_positions: positions of the global tokens (default ``(0,)``).
        seed: seed of the random links.

    Derived in ``06_attention_variants.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        window: int = 3,
        num_random: int = 3,
        global_positions: Sequence[int] = (0,),
        seed: int = 0,
    ) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias)
        rules.big_bird_settings(window, num_random, global_positions, seed)
        self.window, self.num_random, self.seed = int(window), int(num_random), int(seed)
        self.global_positions = tuple(int(p) for p in global_positions)

    def key_index(self, n: int) -> torch.Tensor:
        local = _window_index(n, torch.arange(-self.window, self.window + 1))  # (n, 2w + 1)
        return torch.stack([
            torch.cat([local, random_keys(n, self.num_random, self.seed + h)], dim=-1)
            for h in range(self.num_heads)
        ])  # (heads, n, 2w + 1 + r)

    def head_masks(self, n: int) -> list[torch.Tensor]:
        """The pattern of each head as ``(n, n)`` masks (for pictures)."""
        shared = local_mask(n, self.window) | global_mask(n, list(self.global_positions))
        return [shared | random_mask(n, self.num_random, self.seed + h)
                for h in range(self.num_heads)]

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, window={self.window}, num_random={self.num_random}, "
                f"global_positions={self.global_positions}, seed={self.seed}")

