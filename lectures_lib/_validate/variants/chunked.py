"""The rules of :mod:`lectures_lib.variants.chunked`.
"""

from __future__ import annotations

import torch

from ...utils import check_positive_int, check_tensor
from ..settings import check_settings, settings, tensor
from .clustering import rotations_for_x
from .shared import fits, self_attention_qkv


def leading_fit(shape, lead, name) -> None:
    if not fits(shape, lead):
        raise ValueError(
            f"the leading dimensions of {name} {tuple(shape)} must equal those of q {tuple(lead)} "
            "or be 1"
        )


def bucket_ids(buckets, name: str = "buckets", n: int | None = None) -> None:
    """Bucket ids ``(..., rounds >= 1, n)``, each >= 0 (any ``n`` when None)."""
    check_tensor(buckets, "buckets", dtype="integer")
    if n is None and buckets.dim() < 2:
        raise ValueError(f"buckets must have shape (..., rounds, n), got {tuple(buckets.shape)}")
    n = buckets.shape[-1] if n is None else n
    if buckets.dim() < 2 or buckets.shape[-1] != n or buckets.shape[-2] == 0:
        raise ValueError(f"buckets must have shape (..., rounds >= 1, {n}), got {tuple(buckets.shape)}")
    if buckets.numel() and int(buckets.min()) < 0:
        raise ValueError(f"buckets must be >= 0 (bucket ids), got a minimum of {int(buckets.min())}")


def cluster_members(members, name: str, *, n: int) -> None:
    """Positions ``(..., clusters, size)`` in ``[0, n)``, none twice in one cluster."""
    check_tensor(members, name, dtype="integer")
    if members.dim() < 2:
        raise ValueError(f"{name} must have shape (..., clusters, size), got {tuple(members.shape)}")
    if members.numel():
        if int(members.min()) < 0 or int(members.max()) >= n:
            raise ValueError(
                f"{name} must hold positions in [0, {n - 1}], got values from "
                f"{int(members.min())} to {int(members.max())}"
            )
        ordered = members.sort(dim=-1).values
        if bool((ordered[..., 1:] == ordered[..., :-1]).any()):
            raise ValueError(f"{name} lists a position twice in one cluster")


bucket_chunks = settings("buckets", "chunk_size", "same_bucket", buckets=bucket_ids)


def lsh_chunked_qkv(q, k, v, buckets, chunk_size, *, same_bucket=True, exclude_self=False,
                    key_mask=None, dropout_p=0.0):
    self_attention_qkv(q, k, v, key_mask=key_mask, dropout_p=dropout_p,
                       name="lsh_chunked_attention", why=" (queries and keys share one sort order)")
    bucket_ids(buckets, n=q.shape[-2])
    leading_fit(buckets.shape[:-2], q.shape[:-2], "buckets")
    check_settings(chunk_size=chunk_size, same_bucket=same_bucket, exclude_self=exclude_self)


def balanced_args(x, centroids, size, valid=None):
    check_tensor(x, "x", dtype="floating")
    if valid is not None:
        check_tensor(valid, "valid", dtype=torch.bool)
    check_tensor(centroids, "centroids", dtype="floating")
    if x.dim() < 2 or centroids.dim() < 2 or x.shape[-1] != centroids.shape[-1]:
        raise ValueError(
            f"x must be (..., n, d) and centroids (..., C, d) with the same d, got x "
            f"{tuple(x.shape)} and centroids {tuple(centroids.shape)}"
        )
    check_positive_int(size, "size")
    if size > x.shape[-2]:
        raise ValueError(f"size must be at most n = {x.shape[-2]} (the vectors to choose from), got {size}")


hashing_args = settings("x", "rotations", "block", x=tensor(dtype="floating"),
                        rotations=rotations_for_x)
member_pair = settings("query_members", "key_members", "n", query_members=cluster_members,
                       key_members=cluster_members)


def balanced_routing_qkv(q, k, v, query_members, key_members, *, key_mask=None, dropout_p=0.0):
    self_attention_qkv(q, k, v, key_mask=key_mask, dropout_p=dropout_p,
                       name="balanced_routing_attention")
    n = q.shape[-2]
    cluster_members(query_members, "query_members", n=n)
    cluster_members(key_members, "key_members", n=n)
    if query_members.shape[-2] != key_members.shape[-2]:
        raise ValueError(
            "query_members and key_members must list the same clusters, got "
            f"{tuple(query_members.shape)} and {tuple(key_members.shape)}"
        )
    if query_members.shape[-2] == 0:
        raise ValueError(
            "query_members and key_members must list at least one cluster: shape "
            f"(..., clusters >= 1, size), got {tuple(query_members.shape)} and "
            f"{tuple(key_members.shape)}"
        )
    leading_fit(query_members.shape[:-2], q.shape[:-2], "query_members")
    leading_fit(key_members.shape[:-2], q.shape[:-2], "key_members")


def square_allowed(allowed):
    check_tensor(allowed, "allowed", dtype="bool")
    if allowed.dim() < 2 or allowed.shape[-1] != allowed.shape[-2]:
        raise ValueError(f"allowed must be a square mask (..., n, n), got {tuple(allowed.shape)}")
