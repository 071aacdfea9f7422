r"""Clustered attention that is efficient for real: equal-size groups, never the
:math:`N \times N` matrix, memory linear in :math:`N` (local attention's blocks are in
:mod:`.local`).

Two forms, each with the dense reference it is tested against (dense attention under a mask
that this module also builds, for small :math:`N` only):

* :func:`lsh_chunked_attention`: Reformer's construction (Kitaev et al. 2020). Sort the positions
  by hash bucket (哈希桶), cut the sorted order into equal chunks of ``chunk_size``, and let every
  chunk attend to itself and to the previous chunk (the first chunk to the last). Queries and keys
  must share the sort order, which is why Reformer ties :math:`Q = K` (keys normalised): one bucket
  per position. The chunks change which cells are kept: a bucket larger than a chunk loses the
  cells between its far-apart chunks, a small bucket may see a neighbouring bucket's keys unless
  ``same_bucket=True`` drops them. The kept cells are :func:`lsh_chunk_mask`; the function is
  exact against dense attention under that mask.
* :func:`balanced_routing_attention`: the Routing Transformer's balanced clusters (Roy et al.
  2021). Every centroid takes the ``size`` queries and the ``size`` keys most similar to it
  (:func:`balanced_members`): equal clusters, so :math:`C \cdot \text{size}^2` scores. A vector may
  join several clusters or none: a query in no cluster gets a zero output. The kept cells are
  :func:`membership_mask`; exact against dense attention under it.

A cell met in several groups (hash rounds, overlapping clusters) is counted once: its score is
lowered by :math:`\log m_{ij}` (:math:`m_{ij}` = groups in which it is met), and the groups of a
query are merged by their log-sum-exp (:func:`_merge_rows`), as in ``clustered_attention``.
Derived and measured in ``06_attention_variants.ipynb`` and ``benchmarks/clustered_memory.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._validate.settings import check_settings
from .._validate.variants import chunked as rules
from ..attention import fused_attention, scaled_dot_product_attention
from ..utils import validated
from .base import split_mask
from .clustering import LSHAttention, RoutingAttention, lsh_buckets

__all__ = [
    "lsh_chunk_mask",
    "lsh_chunked_attention",
    "drop_self",
    "hash_buckets",
    "balanced_members",
    "membership_mask",
    "balanced_routing_attention",
    "ReformerAttention",
    "BalancedRoutingAttention",
]


# ---------------------------------------------------------------------------------------------
# Groups of queries attending to groups of keys, merged per query
# ---------------------------------------------------------------------------------------------


def _rows(x: torch.Tensor, table: torch.Tensor, group_batch: torch.Tensor) -> torch.Tensor:
    """``x`` ``(B, n + 1, d)`` (row n is a spare zero row), ``table`` ``(G, ...)`` positions,
    ``group_batch`` ``(G,)`` the batch entry of each group -> ``x[group_batch, table]``."""
    flat = x.reshape(-1, x.shape[-1])  # (B (n + 1), d)
    offset = (group_batch * x.shape[-2]).reshape(-1, *([1] * (table.dim() - 1)))
    return flat[table + offset]  # (G, ..., d)


def _attend_groups(queries, keys, values, allowed, meetings, dropout_p, own=None):
    """Softmax inside each group, with its log-sum-exp. ``queries`` ``(G, a, d)``, ``keys``
    ``(G, b, d)``, ``allowed`` ``(G, a, b)``, ``meetings`` ``(G, a, b)`` or None (m_ij >= 1).
    Returns ``(out (G, a, d_v), lse (G, a))`` (lse = -inf where nothing is allowed)."""
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(queries.shape[-1])  # (G, a, b)
    if meetings is not None:
        scores = scores - torch.log(meetings.clamp(min=1))
    if own is not None:  # a query's own key: weight 0 unless it is the only one
        scores = scores - SELF_PENALTY * own
    scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)  # (G, a), -inf on empty rows
    weights = torch.exp(scores - torch.where(torch.isfinite(lse), lse, 0)[..., None])  # 0 if blocked
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ values, lse


def _merge_rows(index, lse, out, batch, n):
    """Merge every group's answer for a query by log-sum-exp: ``index`` ``(G, a)`` the query's
    position (n = padding), ``lse`` ``(G, a)``, ``out`` ``(G, a, d_v)``, ``batch`` ``(G,)`` ->
    ``(B, n, d_v)``. A query met nowhere (or only with -inf) gets zeros."""
    n_batch = int(batch.max()) + 1 if batch.numel() else 0
    d_v = out.shape[-1]
    flat = (batch[:, None] * (n + 1) + index).reshape(-1)  # (G a,) rows of a (B (n + 1)) table
    lse, out = lse.reshape(-1), out.reshape(-1, d_v)
    best = lse.new_full((n_batch * (n + 1),), float("-inf")).scatter_reduce(
        0, flat, lse, "amax", include_self=True
    )  # (B (n + 1),) the largest lse of each query
    best = torch.where(torch.isfinite(best), best, 0)
    mass = torch.exp(lse - best[flat])  # (G a,), 0 where a group saw no key
    norm = lse.new_zeros(n_batch * (n + 1)).scatter_add(0, flat, mass)
    total = out.new_zeros(n_batch * (n + 1), d_v).index_add(0, flat, mass[:, None] * out)
    merged = total / norm.clamp(min=torch.finfo(out.dtype).tiny)[:, None]
    return merged.reshape(n_batch, n + 1, d_v)[:, :n]  # (B, n, d_v)


def _with_spare_row(x: torch.Tensor, batch: int) -> torch.Tensor:
    """``(..., n, d)`` -> ``(B, n + 1, d)`` with a zero row n (padding slots point at it)."""
    x = x.reshape(batch, *x.shape[-2:])
    return torch.cat([x, x.new_zeros(batch, 1, x.shape[-1])], dim=1)


# ---------------------------------------------------------------------------------------------
# Reformer: sort by bucket, equal chunks, each chunk attends to itself and the previous one
# ---------------------------------------------------------------------------------------------


def _sorted_chunks(buckets: torch.Tensor, chunk_size: int):
    """``buckets`` ``(BR, n)`` -> ``(order (BR, n_chunks, m) positions (n = padding), chunk of
    each position (BR, n), n_chunks)``: positions sorted by (bucket, position), cut into chunks."""
    rows, n = buckets.shape
    order = (buckets * n + torch.arange(n, device=buckets.device)).argsort(dim=-1)  # (BR, n)
    n_chunks = -(-n // chunk_size)
    padded = F.pad(order, (0, n_chunks * chunk_size - n), value=n)  # (BR, C m)
    rank = torch.empty_like(order).scatter_(
        -1, order, torch.arange(n, device=buckets.device).expand(rows, n)
    )  # (BR, n): where each position sits in the sorted order
    return padded.reshape(rows, n_chunks, chunk_size), rank // chunk_size, n_chunks


SELF_PENALTY = 1e5  # Reformer's: e^{-1e5} is exactly 0 in float32 and float64


@validated(rules.square_allowed)
def drop_self(allowed: torch.Tensor) -> torch.Tensor:
    """Reformer's self rule on a dense bool mask ``(..., n, n)``: remove the diagonal cell of every
    row that has another allowed key (a row with only itself keeps it)."""
    n = allowed.shape[-1]
    eye = torch.eye(n, dtype=torch.bool, device=allowed.device)
    others = (allowed & ~eye).any(dim=-1, keepdim=True)  # (..., n, 1)
    return allowed & ~(eye & others)


def _chunk_neighbours(chunk_i: torch.Tensor, chunk_j: torch.Tensor, n_chunks: int) -> torch.Tensor:
    """Query chunk c sees key chunks c and c - 1 (the first sees the last)."""
    gap = (chunk_i - chunk_j) % n_chunks
    return (gap == 0) | (gap == 1)


@validated(rules.bucket_chunks)
def lsh_chunk_mask(buckets: torch.Tensor, chunk_size: int, *, same_bucket: bool = True) -> torch.Tensor:
    """The cells :func:`lsh_chunked_attention` keeps, as a dense bool ``(..., n, n)`` mask: in some
    round, key j is in query i's chunk or the previous one (and, with ``same_bucket``, in its
    bucket). ``buckets`` long ``(..., rounds, n)``. Builds ``n x n``: for pictures and checks."""
    lead, (rounds, n) = buckets.shape[:-2], buckets.shape[-2:]
    if buckets.numel() == 0:  # no position (or no example): the empty mask
        return torch.zeros(*lead, n, n, dtype=torch.bool, device=buckets.device)
    flat = buckets.reshape(-1, n)  # (BR, n)
    _, chunk, n_chunks = _sorted_chunks(flat, chunk_size)
    kept = _chunk_neighbours(chunk[:, :, None], chunk[:, None, :], n_chunks)  # (BR, n, n)
    if same_bucket:
        kept = kept & (flat[:, :, None] == flat[:, None, :])
    return kept.reshape(*lead, rounds, n, n).any(dim=-3)  # (..., n, n)


@validated(rules.lsh_chunked_qkv)
def lsh_chunked_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    buckets: torch.Tensor,
    chunk_size: int,
    *,
    same_bucket: bool = True,
    exclude_self: bool = False,
    key_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    r"""Reformer's chunked LSH attention: memory :math:`O(N \cdot m)` for chunks of :math:`m`.

    In each round: sort the positions by bucket (ties by position), cut the sorted order into
    chunks of ``chunk_size`` :math:`m`, and let the :math:`m` queries of chunk :math:`c` attend to
    the :math:`2m` keys of chunks :math:`c` and :math:`c - 1` (chunk 0 to the last chunk): scores
    ``(rounds, N / m, m, 2m)``. One sort for queries and keys, so each position has *one* bucket
    per round: hash the shared ``q = k`` (Reformer) or the normalised keys.

    Args:
        q, k, v: ``(..., n, d_k)``, ``(..., n, d_k)``, ``(..., n, d_v)``.
        buckets: long ``(..., rounds, n)``, each position's bucket in each round (any ids >= 0),
            leading dimensions equal to those of ``q`` or 1.
        chunk_size: :math:`m`; a chunk size ``>= n`` is full attention.
        same_bucket: keep only the cells whose query and key share the bucket (Reformer's
            restriction); ``False`` keeps the whole chunk pair.
        exclude_self: Reformer's rule for shared QK (where :math:`q_i \cdot k_i` is a query's
            largest score): a query attends to its own position only when it has no other key
            (its score is lowered by :math:`10^5`, so its weight is 0 otherwise).
        key_mask: optional bool ``(..., n)``, True = may be attended to.
        dropout_p: dropout on each chunk's weights.

    Returns ``(..., n, d_v)``, equal to dense attention under
    ``lsh_chunk_mask(buckets, chunk_size, same_bucket=same_bucket) & key_mask`` (with
    ``exclude_self``: minus the diagonal in every row that has another allowed key,
    :func:`drop_self`).
    """
    lead, n, d_v = q.shape[:-2], q.shape[-2], v.shape[-1]
    batch, rounds = math.prod(lead), buckets.shape[-2]
    if n == 0 or batch == 0:  # nothing to attend to, or no one asking: dense attention's result
        return v.new_zeros(*lead, n, d_v)
    chunk_size = min(chunk_size, n)
    flat = buckets.to(q.device).expand(*lead, rounds, n).reshape(batch * rounds, n)  # (BR, n)
    order, chunk, n_chunks = _sorted_chunks(flat, chunk_size)  # (BR, C, m), (BR, n)
    # Keys of chunk c: chunks c and c - 1 (one chunk: only itself, never twice).
    key_order = order if n_chunks == 1 else torch.cat([order, order.roll(1, dims=1)], dim=-1)
    group_batch = torch.arange(batch * rounds, device=q.device) // rounds  # (BR,)
    group_batch = group_batch[:, None].expand(-1, n_chunks).reshape(-1)  # (BR C,)
    q_index = order.reshape(-1, chunk_size)  # (G, m), G = B R C
    k_index = key_order.reshape(q_index.shape[0], -1)  # (G, m or 2m)

    def padded_ids(ids: torch.Tensor) -> torch.Tensor:  # (BR, n) -> (B, n + 1, R), spare = -1
        ids = ids.reshape(batch, rounds, n).transpose(1, 2)
        return torch.cat([ids, ids.new_full((batch, 1, rounds), -1)], dim=1)

    bucket_of, chunk_of = padded_ids(flat), padded_ids(chunk)  # (B, n + 1, R)
    round_of = (torch.arange(batch * rounds, device=q.device) % rounds)[:, None].expand(-1, n_chunks)
    round_of = round_of.reshape(-1, 1, 1)  # (G, 1, 1)

    def this_round(ids: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return _rows(ids, index, group_batch).gather(-1, round_of.expand(*index.shape, 1))[..., 0]

    allowed = (q_index < n)[:, :, None] & (k_index < n)[:, None, :]  # (G, m, 2m)
    if same_bucket:
        allowed = allowed & (
            this_round(bucket_of, q_index)[:, :, None] == this_round(bucket_of, k_index)[:, None, :]
        )
    if key_mask is not None:
        ok = _with_spare_row(key_mask.to(q.device).expand(*lead, n)[..., None].float(), batch)
        allowed = allowed & _rows(ok, k_index, group_batch)[..., 0].bool()[:, None, :]
    meetings = None
    if rounds > 1:  # m_ij: in how many rounds the cell is kept
        q_buckets, k_buckets = _rows(bucket_of, q_index, group_batch), _rows(bucket_of, k_index, group_batch)
        q_chunks, k_chunks = _rows(chunk_of, q_index, group_batch), _rows(chunk_of, k_index, group_batch)
        meetings = torch.zeros(allowed.shape, dtype=q.dtype, device=q.device)
        for r in range(rounds):
            met = _chunk_neighbours(q_chunks[..., r, None], k_chunks[..., None, :, r], n_chunks)
            if same_bucket:
                met = met & (q_buckets[..., r, None] == k_buckets[..., None, :, r])
            meetings += met
    qs, ks, vs = (_with_spare_row(x, batch) for x in (q, k, v))  # (B, n + 1, d)
    own = (q_index[:, :, None] == k_index[:, None, :]).to(q.dtype) if exclude_self else None
    out, lse = _attend_groups(
        _rows(qs, q_index, group_batch), _rows(ks, k_index, group_batch),
        _rows(vs, k_index, group_batch), allowed, meetings, dropout_p, own,
    )  # (G, m, d_v), (G, m)
    return _merge_rows(q_index, lse, out, group_batch, n).reshape(*lead, n, d_v)


# ---------------------------------------------------------------------------------------------
# Routing Transformer: balanced clusters (top-k members per centroid)
# ---------------------------------------------------------------------------------------------


@validated(rules.balanced_args)
def balanced_members(
    x: torch.Tensor, centroids: torch.Tensor, size: int, valid: torch.Tensor | None = None
) -> torch.Tensor:
    r"""Balanced clusters: centroid :math:`c` takes the ``size`` vectors with the largest
    :math:`\hat x \cdot \mu_c` (spherical). ``x`` ``(..., n, d)``, ``centroids`` ``(..., C, d)`` ->
    long ``(..., C, size)`` positions, increasing. A vector may join several clusters, or none.
    ``valid`` bool ``(..., n)`` (True = a real position; e.g. the key-padding mask): every valid
    vector ranks before every invalid one, so which *valid* vectors join depends on the valid ones
    only (padding cannot push a real token out of a cluster).
    The similarities are computed for 32 centroids at a time (never all ``n x C`` at once)."""
    directions = F.normalize(x, dim=-1)  # (..., n, d)
    centroids = centroids.to(x.dtype)

    def similarities(part):  # (..., <= 32, n)
        scores = (directions @ part.transpose(-2, -1)).transpose(-2, -1)
        return scores if valid is None else scores.masked_fill(~valid[..., None, :], float("-inf"))

    picked = [similarities(part).topk(size, dim=-1).indices
              for part in centroids.split(32, dim=-2)]  # each (..., <= 32, size)
    return torch.cat(picked, dim=-2).sort(dim=-1).values  # (..., C, size)


@validated(rules.hashing_args)
def hash_buckets(x: torch.Tensor, rotations: torch.Tensor, block: int = 1024) -> torch.Tensor:
    r"""``lsh_buckets(x, rotations)`` computed ``block`` positions at a time: the projections
    :math:`xR` are ``n x n_buckets / 2`` per round (quadratic when the buckets grow with
    :math:`N`), so only one block of them is alive at once. ``(..., n, d)`` -> ``(..., rounds, n)``."""
    return torch.cat([lsh_buckets(part, rotations) for part in x.split(block, dim=-2)], dim=-1)


def _membership(members: torch.Tensor, n: int) -> torch.Tensor:
    """``(..., C, size)`` -> bool ``(..., n + 1, C)``: True where position i is in cluster c (one
    byte per cell: the only table of the engine that is not linear in N, N C bytes)."""
    C = members.shape[-2]
    table = torch.zeros(*members.shape[:-2], C, n + 1, dtype=torch.bool, device=members.device)
    table.scatter_(-1, members, True)  # (..., C, n + 1)
    return table.transpose(-2, -1)  # (..., n + 1, C), row n (padding) all False


@validated(rules.member_pair)
def membership_mask(query_members: torch.Tensor, key_members: torch.Tensor, n: int) -> torch.Tensor:
    """The cells :func:`balanced_routing_attention` keeps, as a dense bool ``(..., n, n)`` mask:
    query i and key j share at least one cluster. Builds ``n x n``: for pictures and checks."""
    q_in = _membership(query_members, n)[..., :n, :].float()  # (..., n, C)
    k_in = _membership(key_members, n)[..., :n, :].float()
    return (q_in @ k_in.transpose(-2, -1)) > 0  # (..., n, n)


@validated(rules.balanced_routing_qkv)
def balanced_routing_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    query_members: torch.Tensor,
    key_members: torch.Tensor,
    *,
    key_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    r"""Attention inside balanced clusters: the queries of cluster :math:`c` attend to its keys.

    ``query_members``, ``key_members``: long ``(..., C, size_q)``, ``(..., C, size_k)`` (from
    :func:`balanced_members`), leading dimensions equal to those of ``q`` or 1. Scores
    ``(..., C, size_q, size_k)``: with ``size = N / C`` that is :math:`N^2 / C`, linear in
    :math:`N` when :math:`C` grows with :math:`N`. A cell shared by several clusters is counted
    once; a query in no cluster (or whose clusters hold no allowed key) gets zeros.

    Returns ``(..., n, d_v)``, equal to dense attention under
    ``membership_mask(query_members, key_members, n) & key_mask``.
    """
    lead, n, d_v = q.shape[:-2], q.shape[-2], v.shape[-1]
    batch = math.prod(lead)
    if n == 0 or batch == 0:  # nothing to attend to, or no one asking: dense attention's result
        return v.new_zeros(*lead, n, d_v)
    C = query_members.shape[-2]
    q_index = query_members.to(q.device).expand(*lead, *query_members.shape[-2:]).reshape(batch * C, -1)
    k_index = key_members.to(q.device).expand(*lead, *key_members.shape[-2:]).reshape(batch * C, -1)
    group_batch = torch.arange(batch, device=q.device).repeat_interleave(C)  # (B C,)
    allowed = torch.ones(q_index.shape[0], q_index.shape[1], k_index.shape[1], dtype=torch.bool,
                         device=q.device)  # (G, a, b)
    if key_mask is not None:
        ok = _with_spare_row(key_mask.to(q.device).expand(*lead, n)[..., None].float(), batch)
        allowed = allowed & _rows(ok, k_index, group_batch)[..., 0].bool()[:, None, :]
    meetings = None
    if C > 1:  # m_ij: how many clusters hold both query i and key j
        q_in = _membership(q_index.reshape(batch, C, -1), n)  # (B, n + 1, C) bool
        k_in = _membership(k_index.reshape(batch, C, -1), n)
        meetings = torch.cat([  # 32 clusters at a time: (32, a, C) @ (32, C, b)
            _rows(q_in, qi, gb).to(q.dtype) @ _rows(k_in, ki, gb).to(q.dtype).transpose(-2, -1)
            for qi, ki, gb in zip(q_index.split(32), k_index.split(32), group_batch.split(32),
                                  strict=True)
        ])  # (G, a, b)
    qs, ks, vs = (_with_spare_row(x, batch) for x in (q, k, v))
    out, lse = _attend_groups(
        _rows(qs, q_index, group_batch), _rows(ks, k_index, group_batch),
        _rows(vs, k_index, group_batch), allowed, meetings, dropout_p,
    )
    return _merge_rows(q_index, lse, out, group_batch, n).reshape(*lead, n, d_v)


# ---------------------------------------------------------------------------------------------
# Modules (attention factories): Reformer and the balanced Routing Transformer
# ---------------------------------------------------------------------------------------------


class ReformerAttention(LSHAttention):
    r"""Reformer's attention (Kitaev et al. 2020): shared query-key, LSH buckets, sorted equal
    chunks, each chunk attending to itself and the previous chunk (:func:`lsh_chunked_attention`).

    Shared-QK: the keys are the normalised queries, :math:`k_j = q_j / \lVert q_j \rVert` (the key
    projection is not used), so a query and a key at the same position have *one* bucket and one
    place in the sorted order, and angular hashing compares directions of vectors of equal norm.
    Then :math:`q_i \cdot k_i = \lVert q_i \rVert` is every query's largest score, so (Reformer's
    rule, ``exclude_self``) a query attends to itself only when it has no other key.
    Memory is :math:`O(N \cdot \text{chunk\_size})` per round, whatever the bucket sizes.

    Args:
        d_model, num_heads, dropout, bias, n_buckets, n_hashes, seed: as in :class:`LSHAttention`
            (Reformer grows ``n_buckets`` with :math:`N`, about :math:`2N / \text{chunk\_size}`).
        chunk_size: positions per chunk (default 32).
        same_bucket: keep only same-bucket cells inside the chunk pair (default True).
        exclude_self: Reformer's self rule (default True).

    :meth:`pattern` is :func:`lsh_chunk_mask` (then :func:`drop_self`), the cells the chunks keep:
    a subset of the bucket mask when a bucket spans more than two chunks.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, *, bias: bool = True,
                 n_buckets: int = 8, n_hashes: int = 2, seed: int = 0, chunk_size: int = 32,
                 same_bucket: bool = True, exclude_self: bool = True) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias, n_buckets=n_buckets,
                         n_hashes=n_hashes, seed=seed)
        check_settings(chunk_size=chunk_size, same_bucket=same_bucket, exclude_self=exclude_self)
        self.chunk_size, self.same_bucket, self.exclude_self = chunk_size, same_bucket, exclude_self

    def buckets(self, q: torch.Tensor) -> torch.Tensor:
        """One bucket per position and round, ``(batch, heads, n_hashes, n)``, from the shared
        (normalised) query-keys."""
        return hash_buckets(F.normalize(q, dim=-1), self.rotations)

    def _allowed(self, q: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        allowed = lsh_chunk_mask(self.buckets(q), self.chunk_size, same_bucket=self.same_bucket)
        if mask is not None:
            allowed = allowed & mask.to(q.device)
        return drop_self(allowed) if self.exclude_self else allowed

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self._allowed(q, None)  # (batch, heads, n, n)

    def attend(self, q, k, v, mask, need_weights):
        keys = F.normalize(q, dim=-1)  # shared QK
        dropout_p = self.dropout_p
        key_mask, kind = split_mask(mask, q.shape[-2], k.shape[-2])
        key_mask = None if key_mask is None else key_mask[..., 0, :]  # (batch|1, heads|1, n)
        if kind == "keys" and not need_weights:
            out = lsh_chunked_attention(
                q, keys, v, self.buckets(q), self.chunk_size, same_bucket=self.same_bucket,
                exclude_self=self.exclude_self, key_mask=key_mask, dropout_p=dropout_p,
            )
            return out, None
        # Weights asked for (pictures), or a mask that is already n x n (causal, a band): dense
        # under the pattern and the whole mask (not only its key-padding row).
        if kind == "keys":
            mask = None if key_mask is None else key_mask[..., None, :]  # (batch|1, heads|1, 1, n)
        allowed = self._allowed(q, mask)
        return scaled_dot_product_attention(q, keys, v, allowed, dropout_p) if need_weights else (
            fused_attention(q, keys, v, allowed, dropout_p), None)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, chunk_size={self.chunk_size}, "
                f"same_bucket={self.same_bucket}, exclude_self={self.exclude_self}")


class BalancedRoutingAttention(RoutingAttention):
    r"""The Routing Transformer's balanced clusters (Roy et al. 2021): every centroid takes the
    ``cluster_size`` queries and the ``cluster_size`` keys nearest to it in direction
    (:func:`balanced_members`), and attends inside each cluster
    (:func:`balanced_routing_attention`): :math:`C \cdot \text{size}^2` scores whatever the data.

    Args:
        d_model, num_heads, dropout, bias, n_clusters, decay, seed: as in
            :class:`RoutingAttention` (the centroids follow the queries and keys while training).
        cluster_size: members per cluster (default ``None``: :math:`\lceil N / C \rceil`, so
            every cluster is as large as an even split).

    A query in no cluster gets a zero output; :meth:`pattern` is :func:`membership_mask`. Which
    vectors a centroid takes depends on every position, later ones included, so there is no
    causal form here (``masks = "keys"``); under key padding the padded positions are chosen
    last (:func:`balanced_members`' ``valid``), so padding never changes a real token's output.
    """

    masks = "keys"

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, *, bias: bool = True,
                 n_clusters: int = 4, decay: float = 0.999, seed: int = 0,
                 cluster_size: int | None = None) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias, n_clusters=n_clusters,
                         decay=decay, seed=seed)
        check_settings(cluster_size=cluster_size)
        self.cluster_size = cluster_size

    def members(self, q: torch.Tensor, k: torch.Tensor, key_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Balanced members ``(batch, heads, C, size)`` of the queries and of the keys; with a
        key-padding ``key_mask`` ``(batch|1, heads|1, n)`` the padded positions are taken last."""
        n = q.shape[-2]
        size = min(self.cluster_size or -(-n // self.n_clusters), n)
        centroids = self.centroids[None]  # (1, heads, C, d_head)
        if n == 0:  # no position to take
            empty = torch.zeros(*q.shape[:-2], self.n_clusters, 0, dtype=torch.long, device=q.device)
            return empty, empty
        return (balanced_members(q, centroids, size, key_mask),
                balanced_members(k, centroids, size, key_mask))

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return membership_mask(*self.members(q, k), q.shape[-2])

    def attend(self, q, k, v, mask, need_weights):
        self.supported_mask(mask, q.shape[-2], k.shape[-2])  # refused inside a model too
        return super().attend(q, k, v, mask, need_weights)

    def efficient_attend(self, q, k, v, key_mask, need_weights, dropout_p):
        members = self.members(q, k, key_mask)
        if need_weights:
            allowed = membership_mask(*members, q.shape[-2])
            if key_mask is not None:
                allowed = allowed & key_mask[..., None, :]
            result = scaled_dot_product_attention(q, k, v, allowed, dropout_p)
        else:
            result = balanced_routing_attention(q, k, v, *members, key_mask=key_mask,
                                                dropout_p=dropout_p), None
        if self.training:  # after attending: the pattern used is the one pattern() reports
            self.update_centroids(q, k)
        return result

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, cluster_size={self.cluster_size}"
