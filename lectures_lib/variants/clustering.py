r"""Only the important cells: clustering (聚类) queries and keys, then attention inside a cluster.

The lecture's two steps: (1) put queries and keys that are close into the same cluster, (2)
compute the weights :math:`\alpha_{i,j}` only when query :math:`i` and key :math:`j` share a
cluster; every other cell is set to 0 (it would have been small anyway).

* :func:`lsh_buckets`: Reformer's locality-sensitive hashing (Kitaev et al. 2020): a random
  rotation :math:`R`, and bucket :math:`h(x) = \arg\max [xR; -xR]`. Near vectors (small angle)
  usually land in the same bucket; with one random hyperplane the probability is
  :math:`1 - \theta / \pi`.
* :func:`kmeans`: the (spherical) k-means of the Routing Transformer (Roy et al. 2021).
* :func:`clustered_attention`: positions are *sorted by cluster* and every cluster is cut into a
  padded chunk, so each cluster is one small dense attention (the grouped-attention engine of
  :mod:`._groups`, shared with :mod:`.chunked`):
  :math:`C \cdot B_q \cdot B_k` scores (:math:`B` = largest cluster): about :math:`N^2 / C` when
  the clusters are balanced, but up to :math:`N^2` when one cluster holds most vectors (LSH
  buckets are unbalanced; Reformer's equal-size chunks and Routing's balanced clusters trade
  exactness for a guaranteed cost; ``benchmarks/variants_speed.py`` measures it). With several rounds of
  hashing (``n_hashes``), a cell is kept when the two share a cluster in *any* round, and the
  rounds are merged exactly (each cell counted once, by its multiplicity).
* :class:`LSHAttention`, :class:`RoutingAttention`: modules and attention factories.

Where the code differs from the papers: queries and keys are hashed/clustered separately with the
same rotations/centroids (Reformer ties keys to queries); no chunk-to-neighbour attention, no
"do not attend to yourself" rule; the Routing Transformer's balanced top-k cluster membership is
replaced by "each vector joins its nearest centroid". Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._validate.settings import check_settings
from .._validate.variants import clustering as rules
from ..attention import scaled_dot_product_attention
from ..utils import validated
from ._groups import Groups, attend_in_groups, by_position, per_round, rows
from .base import PatternAttention

__all__ = [
    "lsh_buckets",
    "random_rotations",
    "kmeans",
    "nearest_centroid",
    "cluster_mask",
    "clustered_attention",
    "LSHAttention",
    "RoutingAttention",
]


# ---------------------------------------------------------------------------------------------
# Step 1: clusters
# ---------------------------------------------------------------------------------------------


@validated(rules.rotation_sizes)
def random_rotations(
    d: int, n_buckets: int, n_hashes: int = 1, *, heads: int | None = None, seed: int = 0
) -> torch.Tensor:
    """Random projections for :func:`lsh_buckets`: ``(n_hashes, d, n_buckets // 2)`` (or
    ``(heads, n_hashes, d, n_buckets // 2)``) standard normal entries from a generator seeded with
    ``seed``. ``n_buckets`` must be even (each direction and its opposite are two buckets).
    Derived in ``06_attention_variants.ipynb``."""
    shape = (n_hashes, d, n_buckets // 2) if heads is None else (heads, n_hashes, d, n_buckets // 2)
    generator = torch.Generator().manual_seed(int(seed))
    return torch.randn(shape, generator=generator)


@validated(rules.x_and_rotations)
def lsh_buckets(x: torch.Tensor, rotations: torch.Tensor) -> torch.Tensor:
    r"""Reformer's angular LSH: bucket :math:`h(x) = \arg\max_b [x R; -x R]_b` per round.

    ``x`` ``(..., n, d)`` and ``rotations`` ``(..., n_hashes, d, n_buckets / 2)`` (leading
    dimensions broadcasting, e.g. one set per head) -> long ``(..., n_hashes, n)`` in
    ``[0, n_buckets)``. Only directions matter: :math:`h(cx) = h(x)` for :math:`c > 0`.
    Derived in ``06_attention_variants.ipynb``.
    """
    projected = x.unsqueeze(-3) @ rotations.to(x.dtype)  # (..., n_hashes, n, n_buckets / 2)
    return torch.cat([projected, -projected], dim=-1).argmax(dim=-1)  # (..., n_hashes, n)


@validated(rules.x_and_centroids)
def nearest_centroid(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    r"""Spherical k-means assignment: the centroid :math:`\mu_c` with the largest
    :math:`\hat x \cdot \mu_c` (:math:`\hat x = x / \lVert x \rVert`). ``x`` ``(..., n, d)``,
    ``centroids`` ``(..., C, d)`` -> long ``(..., n)``. Derived in ``06_attention_variants.ipynb``."""
    return (F.normalize(x, dim=-1) @ centroids.to(x.dtype).transpose(-2, -1)).argmax(dim=-1)


@validated(rules.kmeans_args)
def kmeans(
    x: torch.Tensor, n_clusters: int, num_iters: int = 10, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Spherical k-means on the directions of ``x`` ``(..., n, d)``: start from ``n_clusters``
    random points (seeded), then alternate "assign each vector to its nearest centroid" and
    "move each centroid to the normalised mean of its vectors" ``num_iters`` times.

    Returns ``(centroids (..., n_clusters, d), assignment (..., n))``; a centroid that loses all
    its vectors stays where it was. Derived in ``06_attention_variants.ipynb``.
    """
    directions = F.normalize(x.detach(), dim=-1)  # (..., n, d)
    generator = torch.Generator().manual_seed(int(seed))
    start = torch.randint(0, x.shape[-2], (n_clusters,), generator=generator).to(x.device)
    centroids = directions[..., start, :]  # (..., C, d)
    for _ in range(num_iters):
        assignment = nearest_centroid(directions, centroids)  # (..., n)
        members = F.one_hot(assignment, n_clusters).to(x.dtype)  # (..., n, C)
        sums = members.transpose(-2, -1) @ directions  # (..., C, d)
        empty = members.sum(dim=-2)[..., None] == 0  # (..., C, 1)
        centroids = torch.where(empty, centroids, F.normalize(sums, dim=-1))
    return centroids, nearest_centroid(directions, centroids)


@validated(rules.cluster_id_pair)
def cluster_mask(query_clusters: torch.Tensor, key_clusters: torch.Tensor) -> torch.Tensor:
    """Dense bool mask ``(..., n_q, n_k)``: True where query and key share a cluster in at least
    one round. ``query_clusters`` ``(..., rounds, n_q)``, ``key_clusters`` ``(..., rounds, n_k)``.
    Builds ``n x n``: for pictures, checks and dense attention under the clusters. Derived in
    ``06_attention_variants.ipynb``."""
    return _cluster_mask(query_clusters, key_clusters)


def _cluster_mask(query_clusters: torch.Tensor, key_clusters: torch.Tensor) -> torch.Tensor:
    """:func:`cluster_mask` without the checks; the rounds are OR-ed one at a time, so the largest
    tensor is one ``(..., n_q, n_k)`` mask, never ``(..., rounds, n_q, n_k)``."""
    allowed = query_clusters[..., 0, :, None] == key_clusters[..., 0, None, :]  # round 0
    for r in range(1, query_clusters.shape[-2]):
        allowed = allowed | (query_clusters[..., r, :, None] == key_clusters[..., r, None, :])
    return allowed  # (..., n_q, n_k)


# ---------------------------------------------------------------------------------------------
# Step 2: attention inside each cluster, sorted and chunked
# ---------------------------------------------------------------------------------------------


def _chunks(cluster: torch.Tensor, n_clusters: int, size: int | None = None):
    """Sort positions by cluster and cut one padded chunk per cluster.

    ``cluster`` ``(B, n)`` -> ``(table (B, C, size) of positions with n for an empty slot,
    size)``: ``table[b, c]`` lists the positions of cluster ``c`` in increasing order.
    """
    batch, n = cluster.shape
    counts = _cluster_sizes(cluster, n_clusters)  # (B, C) members per cluster
    if size is None:
        size = max(int(counts.max()), 1) if counts.numel() else 1
    order = torch.sort(cluster, dim=-1, stable=True).indices  # (B, n): positions, by cluster
    starts = counts.cumsum(dim=-1) - counts  # (B, C): first sorted index of each cluster
    sorted_cluster = cluster.gather(-1, order)  # (B, n)
    rank = torch.arange(n, device=cluster.device) - starts.gather(-1, sorted_cluster)  # (B, n)
    slot = sorted_cluster * size + rank  # (B, n): where each sorted position goes in the table
    table = torch.full((batch, n_clusters * size), n, dtype=torch.long, device=cluster.device)
    table.scatter_(-1, slot, order)
    return table.reshape(batch, n_clusters, size), size


@validated(rules.clustered_qkv)
def clustered_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    query_clusters: torch.Tensor,
    key_clusters: torch.Tensor,
    n_clusters: int,
    *,
    need_weights: bool = False,
    key_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Attention only between a query and the keys of its cluster(s).

    Equal to ``scaled_dot_product_attention(q, k, v, cluster_mask(query_clusters, key_clusters))``
    (and ``& key_mask``): a query attends to the keys that share its cluster in at least one
    round; a query whose clusters hold no key gets zeros.

    How: in each round, sort queries and keys by cluster and cut each cluster into a padded chunk
    (:func:`_chunks`), so cluster :math:`c` is one dense attention of its :math:`B_q` queries and
    :math:`B_k` keys: scores ``(..., rounds, C, B_q, B_k)``. With several rounds a cell may be
    seen more than once; its score is lowered by :math:`\log m_{ij}` (:math:`m_{ij}` = rounds in
    which they meet), and the rounds are merged by their log-sum-exp, which counts every kept cell
    exactly once:

    .. math::
        \text{out}_i = \sum_r \frac{e^{\ell_{r,i}}}{\sum_{r'} e^{\ell_{r',i}}}\,\text{out}_{r,i},
        \qquad \ell_{r,i} = \log \sum_{j \in c_r(i)} e^{s_{ij} - \log m_{ij}}.

    The chunks are padded to the largest cluster, so they cost
    :math:`R \cdot C \cdot B_q \cdot B_k` scores: :math:`n^2 / C` per round when the clusters are
    balanced, but up to :math:`R \cdot C` times the :math:`n_q \times n_k` matrix when one cluster
    holds (nearly) everything. When the chunks would hold more scores than the dense matrix, the
    same result is computed as dense attention under the cluster mask (never more than dense):
    unbalanced clusters save nothing, which is why Reformer cuts *equal* chunks instead
    (:class:`~lectures_lib.variants.chunked.ReformerAttention`).

    Args:
        q, k, v: ``(..., n_q, d_k)``, ``(..., n_k, d_k)``, ``(..., n_k, d_v)``.
        query_clusters, key_clusters: long ``(..., rounds, n_q)`` / ``(..., rounds, n_k)`` in
            ``[0, n_clusters)``, leading dimensions equal to those of ``q`` or 1.
        n_clusters: number of clusters (or buckets) per round.
        need_weights: also return the dense ``(..., n_q, n_k)`` weights (pictures and checks).
        key_mask: optional bool ``(..., n_k)``, True = this key may be attended to.
        dropout_p: dropout on each round's weights.

    Derived in ``06_attention_variants.ipynb``.
    """
    lead, n_q, n_k = q.shape[:-2], q.shape[-2], k.shape[-2]
    rounds = query_clusters.shape[-2]
    batch = math.prod(lead)
    q_clusters = query_clusters.to(q.device).expand(*lead, rounds, n_q).reshape(batch, rounds, n_q)
    k_clusters = key_clusters.to(q.device).expand(*lead, rounds, n_k).reshape(batch, rounds, n_k)
    if batch == 0 or n_q == 0 or n_k == 0:  # the empty result dense attention gives
        out = q.new_zeros(*lead, n_q, v.shape[-1])
        return (out, q.new_zeros(*lead, n_q, n_k)) if need_weights else out

    size_q = _largest_cluster(q_clusters, n_clusters)  # the chunks' padded sizes
    size_k = _largest_cluster(k_clusters, n_clusters)
    path = _masked_dense if rounds * n_clusters * size_q * size_k > n_q * n_k else _chunked
    return path(q, k, v, q_clusters, k_clusters, n_clusters, key_mask, need_weights, dropout_p)


def _cluster_sizes(cluster: torch.Tensor, n_clusters: int) -> torch.Tensor:
    """Members of each cluster: ``cluster`` ``(B, n)`` -> ``(B, C)`` counts (no ``(B, n, C)``)."""
    counts = torch.zeros(cluster.shape[0], n_clusters, dtype=torch.long, device=cluster.device)
    return counts.scatter_add_(1, cluster, torch.ones_like(cluster))


def _largest_cluster(clusters: torch.Tensor, n_clusters: int) -> int:
    """Members of the largest cluster of any row of ``clusters`` ``(B, rounds, n)``."""
    return max(int(_cluster_sizes(clusters.reshape(-1, clusters.shape[-1]), n_clusters).max()), 1)


def _masked_dense(q, k, v, q_clusters, k_clusters, n_clusters, key_mask, need_weights, dropout_p):
    """``clustered_attention`` as dense attention under ``cluster_mask`` (and ``key_mask``)."""
    lead, n_k = q.shape[:-2], k.shape[-2]
    allowed = _cluster_mask(q_clusters, k_clusters)  # (B, n_q, n_k)
    allowed = allowed.reshape(*lead, *allowed.shape[-2:])  # (..., n_q, n_k)
    if key_mask is not None:
        allowed = allowed & key_mask.to(q.device).expand(*lead, n_k)[..., None, :]
    out, weights = scaled_dot_product_attention(q, k, v, allowed, dropout_p)
    return (out, weights) if need_weights else out


def _chunked(q, k, v, q_clusters, k_clusters, n_clusters, key_mask, need_weights, dropout_p):
    """``clustered_attention`` chunk by chunk: one group per (round, cluster), on the engine of
    :mod:`._groups`. All the padded chunks are computed at once (``cells=None``): this exact form
    costs what its padding costs, and section 06 measures it."""
    lead, n_q, n_k = q.shape[:-2], q.shape[-2], k.shape[-2]
    batch, rounds = q_clusters.shape[:2]
    # Every round becomes a batch entry: (B * rounds, n), then one group per cluster.
    q_table, _ = _chunks(q_clusters.reshape(batch * rounds, n_q), n_clusters)  # (BR, C, Bq)
    k_table, _ = _chunks(k_clusters.reshape(batch * rounds, n_k), n_clusters)  # (BR, C, Bk)
    entry = torch.arange(batch * rounds, device=q.device)  # (BR,): entry b, round r at b R + r
    groups = Groups(
        batch=(entry // rounds).repeat_interleave(n_clusters),  # (G,), G = B R C
        queries=q_table.reshape(batch * rounds * n_clusters, -1),  # (G, Bq)
        keys=k_table.reshape(batch * rounds * n_clusters, -1),  # (G, Bk)
    )
    scores = None
    if rounds > 1:  # m_ij: in how many rounds query i and key j share a cluster
        q_of, k_of = by_position(q_clusters), by_position(k_clusters)  # (B, n + 1, R)

        def scores(block: torch.Tensor, part: Groups) -> torch.Tensor:
            """The engine's hook on a block of scores ``(g, a, b)``: lowered by log m_ij."""
            q_ids = rows(q_of, part.queries, part.batch)  # (g, a, R)
            k_ids = rows(k_of, part.keys, part.batch)  # (g, b, R)

            def met(r: int) -> torch.Tensor:  # (g, a, b): same cluster in round r
                return q_ids[..., r, None] == k_ids[..., None, :, r]

            return block - torch.log(per_round(met, rounds, block.dtype).clamp(min=1))

    if key_mask is not None:
        key_mask = key_mask.to(q.device).expand(*lead, n_k).reshape(batch, n_k)  # (B, n_k)
    result = attend_in_groups(
        q.reshape(batch, n_q, -1), k.reshape(batch, n_k, -1), v.reshape(batch, n_k, -1), groups,
        key_mask=key_mask, scores=scores, dropout_p=dropout_p, cells=None,
        need_weights=need_weights,
    )  # (B, n_q, d_v) [, (B, n_q, n_k)]
    if not need_weights:
        return result.reshape(*lead, n_q, -1)  # (..., n_q, d_v)
    out, weights = result
    return out.reshape(*lead, n_q, -1), weights.reshape(*lead, n_q, n_k)


# ---------------------------------------------------------------------------------------------
# Modules
# ---------------------------------------------------------------------------------------------


class LSHAttention(PatternAttention):
    r"""Reformer-style attention: hash queries and keys with angular LSH (:func:`lsh_buckets`),
    then attend only within a bucket (:func:`clustered_attention`), over ``n_hashes`` rounds.

    Each head has its own fixed random rotations (a buffer drawn from ``seed``; Reformer redraws
    them at every step). :meth:`pattern` reports the cells, ``cluster_mask`` of the buckets.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        n_buckets: buckets per round (even; default 8).
        n_hashes: rounds of hashing (default 2); more rounds keep more near pairs.
        seed: seed of the rotations.

    Derived in ``06_attention_variants.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        n_buckets: int = 8,
        n_hashes: int = 2,
        seed: int = 0,
    ) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias)
        check_settings(n_buckets=n_buckets, n_hashes=n_hashes, seed=seed)
        self.n_buckets, self.n_hashes = int(n_buckets), int(n_hashes)
        rotations = random_rotations(self.d_head, n_buckets, n_hashes, heads=num_heads, seed=seed)
        self.register_buffer("rotations", rotations)  # (heads, n_hashes, d_head, n_buckets / 2)

    def clusters(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Buckets ``(batch, heads, n_hashes, n)`` of the queries and of the keys."""
        return lsh_buckets(q, self.rotations), lsh_buckets(k, self.rotations)

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return cluster_mask(*self.clusters(q, k))  # (batch, heads, n, n)

    def efficient_attend(self, q, k, v, key_mask, need_weights, dropout_p):
        query_buckets, key_buckets = self.clusters(q, k)
        result = clustered_attention(
            q, k, v, query_buckets, key_buckets, self.n_buckets, need_weights=need_weights,
            key_mask=key_mask, dropout_p=dropout_p,
        )
        return result if need_weights else (result, None)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, n_buckets={self.n_buckets}, n_hashes={self.n_hashes}"


class RoutingAttention(PatternAttention):
    r"""Routing-Transformer-style attention: queries and keys join their nearest of
    ``n_clusters`` centroids (spherical k-means, :func:`nearest_centroid`), then attend only
    within a cluster (:func:`clustered_attention`, one round).

    The centroids (one set per head, a buffer) start as random unit vectors and, while training,
    follow the queries and keys assigned to them by an exponential moving average (mini-batch
    k-means, as in the paper): :math:`\mu_c \leftarrow \lambda \mu_c + (1 - \lambda)\,
    \overline{x}_c`, renormalised. The paper's balanced top-k membership is not used: each vector
    joins its nearest centroid.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        n_clusters: clusters per head (default 4); 1 is full attention.
        decay: the moving average's :math:`\lambda` (default 0.999).
        seed: seed of the initial centroids.

    Derived in ``06_attention_variants.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        n_clusters: int = 4,
        decay: float = 0.999,
        seed: int = 0,
    ) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias)
        check_settings(n_clusters=n_clusters, decay=decay, seed=seed)
        self.n_clusters, self.decay = int(n_clusters), float(decay)
        generator = torch.Generator().manual_seed(int(seed))
        centroids = F.normalize(torch.randn(num_heads, n_clusters, self.d_head, generator=generator), dim=-1)
        self.register_buffer("centroids", centroids)  # (heads, C, d_head)

    def clusters(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Clusters ``(batch, heads, 1, n)`` of the queries and of the keys (one round)."""
        centroids = self.centroids[None]  # (1, heads, C, d_head)
        return nearest_centroid(q, centroids)[..., None, :], nearest_centroid(k, centroids)[..., None, :]

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return cluster_mask(*self.clusters(q, k))  # (batch, heads, n, n)

    @torch.no_grad()
    def update_centroids(self, q: torch.Tensor, k: torch.Tensor) -> None:
        """One step of mini-batch spherical k-means on this batch's queries and keys."""
        points = F.normalize(torch.cat([q, k], dim=-2), dim=-1)  # (batch, heads, 2n, d_head)
        assignment = nearest_centroid(points, self.centroids[None])  # (batch, heads, 2n)
        members = F.one_hot(assignment, self.n_clusters).to(points.dtype)  # (batch, heads, 2n, C)
        sums = (members.transpose(-2, -1) @ points).sum(dim=0)  # (heads, C, d_head)
        counts = members.sum(dim=(0, 2))[..., None]  # (heads, C, 1)
        means = sums / counts.clamp(min=1)
        moved = self.decay * self.centroids + (1 - self.decay) * means.to(self.centroids.dtype)
        self.centroids.copy_(torch.where(counts > 0, F.normalize(moved, dim=-1), self.centroids))

    def efficient_attend(self, q, k, v, key_mask, need_weights, dropout_p):
        query_clusters, key_clusters = self.clusters(q, k)
        result = clustered_attention(
            q, k, v, query_clusters, key_clusters, self.n_clusters, need_weights=need_weights,
            key_mask=key_mask, dropout_p=dropout_p,
        )
        if self.training:
            self.update_centroids(q, k)
        return result if need_weights else (result, None)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, n_clusters={self.n_clusters}, decay={self.decay}"
