r"""Attention inside groups: the one engine of the clustering variants (聚类), not checked at the
door (its callers are: :func:`~.clustering.clustered_attention`,
:func:`~.chunked.lsh_chunked_attention`, :func:`~.chunked.balanced_routing_attention`).

The three compute attention the same way and differ only in *which* queries meet *which* keys:

1. **Groups.** A group is some query positions and some key positions of one sequence (one batch
   entry): a bucket of one hashing round (``clustered_attention``), a chunk of the sorted order and
   the chunk before it (Reformer), a balanced cluster (Routing). :class:`Groups` holds them as
   tables of positions, padded to equal sizes with an *empty slot*: position ``n``, which points at
   a zero row added below every table (:func:`with_spare_row`).
2. **Gather** each group's queries, keys and values (:func:`rows`): ``(G, a, d)``, ``(G, b, d)``.
3. **Attend** densely inside each group under the key-padding mask: scores ``(G, a, b)``, their
   softmax and its log-sum-exp :math:`\ell_{g,i} = \log \sum_{j \in g} e^{s_{ij}}`.
4. **Scatter back and merge** (:func:`merge_groups`): a query in several groups (hashing rounds,
   overlapping clusters) mixes its groups' outputs by their share of its total mass,

   .. math::
       \text{out}_i = \sum_{g \ni i} \frac{e^{\ell_{g,i}}}{\sum_{g' \ni i} e^{\ell_{g',i}}}\,
       \text{out}_{g,i},

   which is one softmax over all the cells the query keeps, once a cell met in :math:`m_{ij}`
   groups has its score lowered by :math:`\log m_{ij}` (so that it counts once).

A variant changes step 3 through **one hook**, ``scores(scores, part)`` (as labml's
``transformers/mha.py`` offers ``get_scores``): it receives the scores ``(g, a, b)`` of a block of
groups ``part`` and returns them with the cells it drops set to :math:`-\infty` (Reformer: another
bucket) and the others lowered by :math:`\log m_{ij}` (Reformer also lowers a query's own key).

Steps 2 and 3 run a block of about ``cells`` scores at a time (:data:`CELLS_PER_BLOCK`), so one
block of scores is alive at once, never all of them: memory linear in :math:`N` whatever the
number of groups (``benchmarks/clustered_memory.py`` measures it). The outputs do not depend on
the blocks; dropout draws its random mask block by block.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

CELLS_PER_BLOCK = 2**20  # scores alive at once: 4 MiB in float32
ScoresHook = Callable[[torch.Tensor, "Groups"], torch.Tensor]


@dataclass(frozen=True)
class Groups:
    """``G`` groups of queries and keys: ``batch`` ``(G,)`` the batch entry of each group,
    ``queries`` ``(G, a)`` and ``keys`` ``(G, b)`` positions in that entry (``n_q`` / ``n_k`` =
    an empty slot), ``round`` ``(G,)`` the hashing round of each group (None: no rounds)."""

    batch: torch.Tensor
    queries: torch.Tensor
    keys: torch.Tensor
    round: torch.Tensor | None = None

    def blocks(self, cells: int | None) -> Iterator[Groups]:
        """The groups, about ``cells`` scores at a time (``None``: all at once)."""
        count, (a, b) = self.queries.shape[0], (self.queries.shape[1], self.keys.shape[1])
        step = count if cells is None else max(cells // max(a * b, 1), 1)
        for start in range(0, count, max(step, 1)):
            part = slice(start, start + step)
            yield Groups(self.batch[part], self.queries[part], self.keys[part],
                         None if self.round is None else self.round[part])


def with_spare_row(x: torch.Tensor) -> torch.Tensor:
    """``(B, n, ...)`` -> ``(B, n + 1, ...)``: a zero (False, 0) row ``n``, where empty slots
    point."""
    return torch.cat([x, x.new_zeros(x.shape[0], 1, *x.shape[2:])], dim=1)


def rows(table: torch.Tensor, positions: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    """``table`` ``(B, n + 1, ...)``, ``positions`` ``(g, s)``, ``batch`` ``(g,)`` -> ``(g, s,
    ...)``: ``table[batch[i], positions[i, j]]``, the rows of group ``i``'s positions."""
    flat = table.reshape(-1, *table.shape[2:])  # (B (n + 1), ...)
    return flat[positions + (batch * table.shape[1])[:, None]]  # (g, s, ...)


def by_position(ids: torch.Tensor) -> torch.Tensor:
    """``(B, rounds, n)`` ids (the bucket, cluster or chunk of each position in each round) ->
    ``(B, n + 1, rounds)``: the rows :func:`rows` gathers, with -1 in the spare row."""
    ids = ids.transpose(1, 2)  # (B, n, rounds)
    return torch.cat([ids, ids.new_full((ids.shape[0], 1, ids.shape[2]), -1)], dim=1)


def per_round(met: Callable[[int], torch.Tensor], rounds: int, dtype: torch.dtype) -> torch.Tensor:
    """:math:`m_{ij} = \\sum_r` ``met(r)``: in how many rounds a cell is met (``met(r)`` a bool
    ``(g, a, b)``), one round at a time (never ``(g, a, b, rounds)``)."""
    meetings = met(0).to(dtype)  # (g, a, b)
    for r in range(1, rounds):
        meetings += met(r)
    return meetings


def _block_scores(qs, ks, key_ok, part: Groups, scores: ScoresHook | None) -> torch.Tensor:
    """Step 3's scores of one block ``(g, a, b)``: dot products scaled by :math:`1/\\sqrt{d}`, the
    variant's hook, then :math:`-\\infty` on the keys that are padding or empty slots."""
    queries = rows(qs, part.queries, part.batch)  # (g, a, d_k)
    keys = rows(ks, part.keys, part.batch)  # (g, b, d_k)
    block = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])  # (g, a, b)
    if scores is not None:
        block = scores(block, part)
    allowed = rows(key_ok, part.keys, part.batch)[:, None, :]  # (g, 1, b)
    return block.masked_fill(~allowed, float("-inf"))


def merge_groups(groups: Groups, lse: torch.Tensor, out: torch.Tensor, n_batch: int, n: int):
    """Step 4: ``lse`` ``(G, a)``, ``out`` ``(G, a, d_v)`` of every group -> ``(merged (B, n,
    d_v), total (B, n + 1))``, each query's groups mixed by :math:`e^{\\ell_{g,i}}` (a query met
    nowhere gets zeros) and its total log-mass :math:`\\log \\sum_g e^{\\ell_{g,i}}` (finite)."""
    d_v = out.shape[-1]
    flat = (groups.batch[:, None] * (n + 1) + groups.queries).reshape(-1)  # (G a,) in (B (n + 1))
    lse, out = lse.reshape(-1), out.reshape(-1, d_v)  # (G a,), (G a, d_v)
    best = lse.new_full((n_batch * (n + 1),), float("-inf")).scatter_reduce(
        0, flat, lse, "amax", include_self=True
    )  # (B (n + 1),) the largest lse of each query
    best = torch.where(torch.isfinite(best), best, 0)
    mass = torch.exp(lse - best[flat])  # (G a,), 0 where a group kept no key
    norm = lse.new_zeros(n_batch * (n + 1)).scatter_add(0, flat, mass)  # (B (n + 1),)
    total = out.new_zeros(n_batch * (n + 1), d_v).index_add(0, flat, mass[:, None] * out)
    tiny = torch.finfo(out.dtype).tiny
    merged = total / norm.clamp(min=tiny)[:, None]  # (B (n + 1), d_v)
    log_mass = torch.log(norm.clamp(min=tiny)) + best  # (B (n + 1),)
    return merged.reshape(n_batch, n + 1, d_v)[:, :n], log_mass.reshape(n_batch, n + 1)


def attend_in_groups(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    groups: Groups,
    *,
    key_mask: torch.Tensor | None = None,
    scores: ScoresHook | None = None,
    dropout_p: float = 0.0,
    cells: int | None = CELLS_PER_BLOCK,
    need_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Attention of every query with the keys of its groups (steps 2-4 of the module doc).

    ``q`` ``(B, n_q, d_k)``, ``k`` ``(B, n_k, d_k)``, ``v`` ``(B, n_k, d_v)``; ``key_mask`` bool
    ``(B, n_k)`` (True = may be attended to) or None; ``scores`` the variant's hook; ``cells``
    the scores computed at once (None: every group at once). Returns ``(B, n_q, d_v)`` (and, with
    ``need_weights``, the dense ``(B, n_q, n_k)`` weights, for pictures and checks; before dropout).
    """
    n_batch, n_q, n_k = q.shape[0], q.shape[1], k.shape[1]
    qs, ks, vs = with_spare_row(q), with_spare_row(k), with_spare_row(v)  # (B, n + 1, d)
    key_ok = torch.ones(n_batch, n_k, dtype=torch.bool, device=q.device)
    key_ok = with_spare_row(key_ok if key_mask is None else key_ok & key_mask)  # (B, n_k + 1)
    outs, lses = [], []
    for part in groups.blocks(cells):
        block = _block_scores(qs, ks, key_ok, part, scores)  # (g, a, b)
        lse = torch.logsumexp(block, dim=-1)  # (g, a), -inf where no key is kept
        weights = torch.exp(block - torch.where(torch.isfinite(lse), lse, 0)[..., None])
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        outs.append(weights @ rows(vs, part.keys, part.batch))  # (g, a, d_v)
        lses.append(lse)
    out, log_mass = merge_groups(groups, torch.cat(lses), torch.cat(outs), n_batch, n_q)
    if not need_weights:
        return out
    # The weights: every kept cell e^{s_ij - log m_ij - L_i} (L_i the query's total log-mass),
    # added up over the groups that meet it (m_ij of them: e^{s_ij - L_i} in all).
    dense = q.new_zeros(n_batch * (n_q + 1) * (n_k + 1))  # with the spare row and column
    for part in groups.blocks(cells):
        block = _block_scores(qs, ks, key_ok, part, scores)  # (g, a, b)
        cell = torch.exp(block - rows(log_mass, part.queries, part.batch)[..., None])  # (g, a, b)
        row = part.batch[:, None] * (n_q + 1) + part.queries  # (g, a)
        index = row[:, :, None] * (n_k + 1) + part.keys[:, None, :]  # (g, a, b)
        dense = dense.index_add(0, index.reshape(-1), cell.reshape(-1))
    return out, dense.reshape(n_batch, n_q + 1, n_k + 1)[:, :n_q, :n_k]  # (B, n_q, n_k)
