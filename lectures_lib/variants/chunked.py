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
query are merged by their log-sum-exp, as in ``clustered_attention``: one engine for the three,
:mod:`._groups`.
Derived and measured in ``06_attention_variants.ipynb`` and ``benchmarks/clustered_memory.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._validate.settings import check_settings
from .._validate.variants import chunked as rules
from ..attention import scaled_dot_product_attention
from ..utils import validated
from ._groups import Groups, attend_in_groups, by_position, per_round, rows
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
    """Query chunk c sees key chunks c and c - 1 (the first sees the last). Compared, never
    subtracted: the result is the only tensor as large as the broadcast of the two."""
    return (chunk_i == chunk_j) | (chunk_i == (chunk_j + 1) % n_chunks)


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


def _attend_flat(q, k, v, groups, key_mask, scores, dropout_p):
    """:func:`attend_in_groups` over the leading dims flattened into one batch, and back."""
    lead, n, d_v = q.shape[:-2], q.shape[-2], v.shape[-1]
    batch = math.prod(lead)
    if key_mask is not None:
        key_mask = key_mask.to(q.device).expand(*lead, n).reshape(batch, n)  # (B, n)
    out = attend_in_groups(
        q.reshape(batch, n, -1), k.reshape(batch, n, -1), v.reshape(batch, n, d_v),  # (B, n, d)
        groups,
        key_mask=key_mask, scores=scores, dropout_p=dropout_p,
    )  # (B, n, d_v)
    return out.reshape(*lead, n, d_v)


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
    entry = torch.arange(batch * rounds, device=q.device)  # (BR,): entry b, round r at b R + r
    groups = Groups(
        batch=(entry // rounds).repeat_interleave(n_chunks),  # (G,), G = B R C
        queries=order.reshape(-1, chunk_size),  # (G, m)
        keys=key_order.reshape(batch * rounds * n_chunks, -1),  # (G, m or 2m)
        round=(entry % rounds).repeat_interleave(n_chunks),  # (G,)
    )
    bucket_of = by_position(flat.reshape(batch, rounds, n))  # (B, n + 1, R)
    chunk_of = by_position(chunk.reshape(batch, rounds, n))  # (B, n + 1, R)

    def scores(block: torch.Tensor, part: Groups) -> torch.Tensor:
        """The engine's hook on a block of scores ``(g, a, b)``: Reformer's cells."""
        q_buckets = rows(bucket_of, part.queries, part.batch)  # (g, a, R)
        k_buckets = rows(bucket_of, part.keys, part.batch)  # (g, b, R)
        if rounds > 1:  # m_ij: in how many rounds the cell is kept
            q_chunks = rows(chunk_of, part.queries, part.batch)  # (g, a, R)
            k_chunks = rows(chunk_of, part.keys, part.batch)  # (g, b, R)

            def met(r: int) -> torch.Tensor:  # (g, a, b): kept in round r
                kept = _chunk_neighbours(q_chunks[..., r, None], k_chunks[..., None, :, r],
                                         n_chunks)
                if same_bucket:
                    kept = kept & (q_buckets[..., r, None] == k_buckets[..., None, :, r])
                return kept

            block = block - torch.log(per_round(met, rounds, block.dtype).clamp(min=1))
        if exclude_self:  # a query's own key: weight 0 unless it is the only one
            own = part.queries[:, :, None] == part.keys[:, None, :]  # (g, a, b)
            block = torch.where(own, block - SELF_PENALTY, block)
        if not same_bucket:
            return block
        r = part.round[:, None, None]  # (g, 1, 1): each group's bucket ids are those of its round
        q_bucket = q_buckets.gather(-1, r.expand(-1, q_buckets.shape[1], 1))  # (g, a, 1)
        k_bucket = k_buckets.gather(-1, r.expand(-1, k_buckets.shape[1], 1))  # (g, b, 1)
        return block.masked_fill(q_bucket != k_bucket.transpose(1, 2), float("-inf"))  # (g, a, b)

    return _attend_flat(q, k, v, groups, key_mask, scores, dropout_p)


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
    table = torch.zeros(*members.shape[:-2], n + 1, C, dtype=torch.bool, device=members.device)
    # table[..., members[..., c, s], c] = True, laid out (n + 1, C): its rows gather uncopied
    return table.scatter_(-2, members.transpose(-2, -1), True)  # (..., n + 1, C), row n all False


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
    q_members = query_members.to(q.device).expand(*lead, *query_members.shape[-2:])
    k_members = key_members.to(q.device).expand(*lead, *key_members.shape[-2:])
    q_members, k_members = q_members.reshape(batch, C, -1), k_members.reshape(batch, C, -1)
    groups = Groups(
        batch=torch.arange(batch, device=q.device).repeat_interleave(C),  # (G,), G = B C
        queries=q_members.reshape(batch * C, -1),  # (G, size_q)
        keys=k_members.reshape(batch * C, -1),  # (G, size_k)
    )
    scores = None
    if C > 1:  # m_ij: how many clusters hold both query i and key j
        q_in, k_in = _membership(q_members, n), _membership(k_members, n)  # (B, n + 1, C) bool

        def scores(block: torch.Tensor, part: Groups) -> torch.Tensor:
            """The engine's hook on a block of scores ``(g, a, b)``: lowered by log m_ij."""
            meetings = torch.cat([  # 32 clusters at a time: (32, a, C) @ (32, C, b)
                rows(q_in, qi, gb).to(block.dtype) @ rows(k_in, ki, gb).to(block.dtype).mT
                for qi, ki, gb in zip(part.queries.split(32), part.keys.split(32),
                                      part.batch.split(32), strict=True)
            ])  # (g, a, b)
            return block - torch.log(meetings.clamp(min=1))

    return _attend_flat(q, k, v, groups, key_mask, scores, dropout_p)


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
    a subset of the bucket mask when a bucket spans more than two chunks. Reformer changes two
    hooks of :class:`~.base.PatternAttention`, not its ``attend``: :meth:`keys` (shared QK) and
    :meth:`cells` (the self rule comes after the mask).
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

    def keys(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return F.normalize(q, dim=-1)  # shared QK: k_j = q_j / |q_j| (the key projection is unused)

    def cells(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The chunks' cells under ``mask``, then the self rule (:func:`drop_self`): a query sees
        itself only when the mask leaves it no other key."""
        allowed = lsh_chunk_mask(self.buckets(q), self.chunk_size, same_bucket=self.same_bucket)
        if mask is not None:
            allowed = allowed & mask.to(q.device)
        return drop_self(allowed) if self.exclude_self else allowed

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return self.cells(q, k, None)  # (batch, heads, n, n)

    def efficient_attend(self, q, k, v, key_mask, need_weights, dropout_p):
        if need_weights:  # pictures: dense under the cells the chunks keep, and the key padding
            mask = None if key_mask is None else key_mask[..., None, :]  # (batch|1, heads|1, 1, n)
            return scaled_dot_product_attention(q, k, v, self.cells(q, k, mask), dropout_p)
        out = lsh_chunked_attention(
            q, k, v, self.buckets(q), self.chunk_size, same_bucket=self.same_bucket,
            exclude_self=self.exclude_self, key_mask=key_mask, dropout_p=dropout_p,
        )
        return out, None

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
