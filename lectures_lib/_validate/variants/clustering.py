"""The rules of :mod:`lectures_lib.variants.clustering`.
"""

from __future__ import annotations

import torch

from ...utils import check_qkv, check_tensor
from ..settings import check_settings, settings, tensor
from .shared import key_mask_shape

rotation_sizes = settings("d", "n_buckets", "n_hashes", "heads", "seed")


def rotations_for_x(rotations, name: str = "rotations", *, x) -> None:
    """Random rotations ``(..., n_hashes, d, n_buckets / 2)`` for ``x`` ``(..., n, d)``."""
    check_tensor(rotations, name, dtype="floating")
    if x.dim() < 2 or rotations.dim() < 3 or rotations.shape[-2] != x.shape[-1]:
        raise ValueError(
            "x must be (..., n, d) and rotations (..., n_hashes, d, n_buckets / 2) with the "
            f"same d, got x {tuple(x.shape)} and rotations {tuple(rotations.shape)}"
        )


x_and_rotations = settings("x", "rotations", x=tensor(dtype="floating"), rotations=rotations_for_x)


def x_and_centroids(x, centroids):
    check_tensor(x, "x", dtype="floating")
    check_tensor(centroids, "centroids", dtype="floating")
    if x.dim() < 2 or centroids.dim() < 2 or centroids.shape[-2] == 0:
        raise ValueError(
            f"x must have shape (..., n, d) and centroids (..., C >= 1, d), got x "
            f"{tuple(x.shape)} and centroids {tuple(centroids.shape)}"
        )
    if x.shape[-1] != centroids.shape[-1]:
        raise ValueError(
            f"centroids must have the width d = {x.shape[-1]} of x, got centroids "
            f"{tuple(centroids.shape)} for x {tuple(x.shape)}"
        )
    _broadcast(x, centroids, "x", "centroids")


def _broadcast(a, b, name_a, name_b, drop=2):
    try:
        torch.broadcast_shapes(a.shape[:-drop], b.shape[:-drop])
    except RuntimeError:
        raise ValueError(
            f"the leading dimensions of {name_a} {tuple(a.shape)} and {name_b} "
            f"{tuple(b.shape)} must broadcast"
        ) from None


def kmeans_args(x, n_clusters, num_iters=10, seed=0):
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 2 or x.shape[-2] == 0:
        raise ValueError(f"x must have shape (..., n >= 1, d), got {tuple(x.shape)}")
    check_settings(n_clusters=n_clusters, num_iters=num_iters, seed=seed)


def cluster_id_pair(query_clusters, key_clusters):
    check_tensor(query_clusters, "query_clusters", dtype="integer")
    check_tensor(key_clusters, "key_clusters", dtype="integer")
    for name, clusters in (("query_clusters", query_clusters), ("key_clusters", key_clusters)):
        if clusters.dim() < 1:
            raise ValueError(f"{name} must have shape (..., rounds, n), got a 0-d tensor")
    if query_clusters.dim() != key_clusters.dim():
        raise ValueError(
            "query_clusters and key_clusters must have the same number of dimensions "
            f"(..., rounds, n), got {tuple(query_clusters.shape)} and {tuple(key_clusters.shape)}"
        )
    _broadcast(query_clusters, key_clusters, "query_clusters", "key_clusters", drop=1)


def clustered_qkv(q, k, v, query_clusters, key_clusters, n_clusters, *,
                  need_weights=False, key_mask=None, dropout_p=0.0):
    check_qkv(q, k, v)
    check_settings(n_clusters=n_clusters, need_weights=need_weights, dropout_p=dropout_p)
    lead = tuple(q.shape[:-2])
    for name, clusters, n in (("query_clusters", query_clusters, q.shape[-2]),
                              ("key_clusters", key_clusters, k.shape[-2])):
        check_tensor(clusters, name, dtype="integer")
        # One dimension per leading dimension of q, plus the rounds: (batch, n) ids are not
        # silently read as `batch` rounds of hashing.
        fits = clusters.dim() == q.dim() and clusters.shape[-1] == n and all(
            size in (1, target) for size, target in zip(clusters.shape[:-2], lead, strict=True)
        )
        if not fits:
            expected = ", ".join([*(str(s) for s in lead), "rounds", str(n)])
            raise ValueError(
                f"{name} must have shape (..., rounds, {n}) = ({expected}): one dimension per "
                f"leading dimension of q {tuple(q.shape)} (each equal or 1), then the rounds of "
                f"hashing, then the positions; got {tuple(clusters.shape)} (for one round, add "
                "the rounds dimension: clusters[..., None, :])"
            )
        if clusters.numel() and not (0 <= int(clusters.min()) and int(clusters.max()) < n_clusters):
            raise ValueError(
                f"{name} must lie in [0, {n_clusters - 1}] (n_clusters={n_clusters}), got "
                f"values from {int(clusters.min())} to {int(clusters.max())}"
            )
    if query_clusters.shape[-2] != key_clusters.shape[-2]:
        raise ValueError(
            "query_clusters and key_clusters must have the same number of rounds, got "
            f"{tuple(query_clusters.shape)} and {tuple(key_clusters.shape)}"
        )
    if key_mask is not None:
        key_mask_shape(key_mask, k.shape[:-1])
