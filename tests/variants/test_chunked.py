"""The efficient local and clustered forms of ``variants.chunked``: exact against dense attention
under their own masks, never an N x N tensor, memory linear in N."""

import math

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.attention import scaled_dot_product_attention
from lectures_lib.measure import peak_tensor_memory
from lectures_lib.variants import band_to_dense, local_attention, local_mask, random_rotations
from lectures_lib.variants.chunked import (
    BalancedRoutingAttention,
    ReformerAttention,
    balanced_members,
    balanced_routing_attention,
    drop_self,
    hash_buckets,
    lsh_chunk_mask,
    lsh_chunked_attention,
    membership_mask,
)

from .helpers import reference_keys, reference_mask


def dense(q, k, v, mask):
    out = scaled_dot_product_attention(q, k, v, mask)
    return out[0] if isinstance(out, tuple) else out


def qkv(n, lead=(2, 3), d=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, *lead, n, d, dtype=torch.float64, generator=generator).unbind(0)


@pytest.mark.parametrize("n, window", [(1, 0), (5, 0), (17, 3), (24, 4), (30, 40), (33, 1), (64, 16)])
def test_local_attention_in_blocks_equals_dense_under_local_mask(n, window):
    q, k, v = qkv(n)
    key_mask = torch.rand(2, 1, n, generator=torch.Generator().manual_seed(n)) > 0.3
    out, band = local_attention(q, k, v, window, key_mask=key_mask, need_weights=True)
    expected, weights = scaled_dot_product_attention(q, k, v, local_mask(n, window) & key_mask[..., None, :])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(band_to_dense(band), weights)


def test_blocked_local_gradients_equal_dense():
    q, k, v = (t.requires_grad_() for t in qkv(20, lead=(1, 2)))
    local_attention(q, k, v, 3).square().sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    dense(q, k, v, local_mask(20, 3)).square().sum().backward()
    for got, want in zip(grads, (q.grad, k.grad, v.grad), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("n, chunk, rounds, buckets", [(40, 8, 2, 4), (37, 5, 3, 6), (16, 16, 1, 2),
                                                       (9, 4, 1, 4), (50, 7, 2, 8), (12, 6, 2, 2)])
@pytest.mark.parametrize("same_bucket", [True, False])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_lsh_chunked_equals_dense_under_its_own_mask(n, chunk, rounds, buckets, same_bucket,
                                                     exclude_self):
    q, k, v = qkv(n)
    bucket_ids = hash_buckets(k, random_rotations(8, buckets, rounds, heads=3, seed=1), block=7)
    key_mask = torch.rand(2, 1, n, generator=torch.Generator().manual_seed(1)) > 0.2
    out = lsh_chunked_attention(q, k, v, bucket_ids, chunk, same_bucket=same_bucket,
                                exclude_self=exclude_self, key_mask=key_mask)
    mask = lsh_chunk_mask(bucket_ids, chunk, same_bucket=same_bucket) & key_mask[..., None, :]
    if exclude_self:
        mask = drop_self(mask)
        assert not bool((mask.diagonal(dim1=-2, dim2=-1) & (mask.sum(-1) > 1)).any())
    torch.testing.assert_close(out, dense(q, k, v, mask))


def test_lsh_chunk_mask_is_the_chunk_pattern():
    # 8 positions, buckets 1 0 1 0 2 2 0 1: sorted order 1 3 6 | 0 2 7 | 4 5 (chunks of 3, 3, 2).
    buckets = torch.tensor([[1, 0, 1, 0, 2, 2, 0, 1]])
    kept = lsh_chunk_mask(buckets, 3, same_bucket=False)
    chunk = torch.tensor([1, 0, 1, 0, 2, 2, 0, 1])
    gap = (chunk[:, None] - chunk[None, :]) % 3
    assert torch.equal(kept, (gap == 0) | (gap == 1))
    same = lsh_chunk_mask(buckets, 3)
    assert torch.equal(same, kept & (buckets[0, :, None] == buckets[0, None, :]))
    # The chunks drop cells of a bucket split over chunks 0 and 2 ... and one chunk keeps them all.
    assert torch.equal(lsh_chunk_mask(buckets, 8), buckets[0, :, None] == buckets[0, None, :])


def test_lsh_chunked_self_rule_a_lonely_query_reads_itself_the_others_never_do():
    q, k, v = qkv(6, lead=(1,))
    lonely = torch.tensor([[0, 0, 0, 1, 2, 2]])  # position 3 is alone in bucket 1
    out = lsh_chunked_attention(q, k, v, lonely, 6, exclude_self=True)
    torch.testing.assert_close(out[0, 3], v[0, 3])
    crowd = dense(q[:, :3], k[:, :3], v[:, :3], ~torch.eye(3, dtype=torch.bool))
    torch.testing.assert_close(out[:, :3], crowd)


def test_lsh_chunked_one_chunk_without_buckets_is_full_attention():
    q, k, v = qkv(10)
    out = lsh_chunked_attention(q, k, v, torch.zeros(1, 10, dtype=torch.long), 16, same_bucket=False)
    torch.testing.assert_close(out, dense(q, k, v, None))


@pytest.mark.parametrize("n, clusters, size", [(40, 4, 10), (37, 5, 9), (20, 1, 20), (30, 6, 8), (33, 40, 2)])
def test_balanced_routing_equals_dense_under_membership(n, clusters, size):
    q, k, v = qkv(n)
    centroids = F.normalize(torch.randn(3, clusters, 8, dtype=torch.float64), dim=-1)
    q_members, k_members = balanced_members(q, centroids, size), balanced_members(k, centroids, size)
    assert q_members.shape == (2, 3, clusters, size)
    key_mask = torch.rand(2, 1, n, generator=torch.Generator().manual_seed(2)) > 0.2
    out = balanced_routing_attention(q, k, v, q_members, k_members, key_mask=key_mask)
    mask = membership_mask(q_members, k_members, n)
    torch.testing.assert_close(out, dense(q, k, v, mask & key_mask[..., None, :]))


def test_balanced_members_are_the_nearest_and_a_query_outside_every_cluster_gets_zero():
    x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [-1.0, 0.0]])
    centroids = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    members = balanced_members(x, centroids, 2)
    assert members.tolist() == [[0, 1], [2, 3]]  # position 4 points away from both
    q = k = v = x[None]
    out = balanced_routing_attention(q, k, v, members[None], members[None])
    assert torch.equal(out[0, 4], torch.zeros(2))
    assert bool((out[0, :4].abs().sum(-1) > 0).all())


def test_hash_buckets_in_blocks_equal_one_pass():
    from lectures_lib.variants import lsh_buckets
    x = torch.randn(2, 50, 8)
    rotations = random_rotations(8, 6, 2, seed=3)
    assert torch.equal(hash_buckets(x, rotations, block=7), lsh_buckets(x, rotations))


def _peak(fn):
    with torch.no_grad():
        return peak_tensor_memory(fn)


def _largest_is_not_n_by_n(report, n):
    big = [size for size in report.largest_tensor_shape if size >= n]
    return len(big) <= 1


def test_memory_is_linear_in_n_and_nothing_is_n_by_n():
    def forms(n):
        q, k, v = (t.float() for t in qkv(n, lead=(1, 2), d=16))
        kn = F.normalize(k, dim=-1)
        rotations = random_rotations(16, max(n // 32, 2), 2, heads=2, seed=0)
        centroids = F.normalize(torch.randn(2, n // 32, 16), dim=-1)
        return {
            "local": lambda: local_attention(q, k, v, 16),
            "lsh": lambda: lsh_chunked_attention(q, kn, v, hash_buckets(kn, rotations), 32),
            "routing": lambda: balanced_routing_attention(
                q, k, v, balanced_members(q, centroids, 32), balanced_members(k, centroids, 32)),
        }
    small, large = forms(512), forms(2048)
    for name in small:
        low, high = _peak(small[name]), _peak(large[name])
        assert _largest_is_not_n_by_n(high, 2048), (name, high.largest_tensor_shape)
        slope = math.log(high.peak_bytes / low.peak_bytes) / math.log(4)
        assert slope < 1.25, (name, slope)  # dense attention's is 2


@pytest.mark.parametrize("factory", [
    lambda: ReformerAttention(16, 2, n_buckets=4, n_hashes=2, chunk_size=5),
    lambda: ReformerAttention(16, 2, n_buckets=6, n_hashes=1, chunk_size=4, same_bucket=False),
    lambda: BalancedRoutingAttention(16, 2, n_clusters=3),
    lambda: BalancedRoutingAttention(16, 2, n_clusters=4, cluster_size=3),
])
def test_modules_equal_dense_under_their_pattern(factory):
    torch.manual_seed(0)
    module = factory().double().eval()
    x = torch.randn(3, 23, 16, dtype=torch.float64)
    padding = torch.arange(23) < 20  # a key-padding mask (keys 20.. are padding)
    efficient, _ = module(x, x, x, padding, need_weights=False)
    reference, weights = module(x, x, x, padding, need_weights=True)
    torch.testing.assert_close(efficient, reference)
    assert bool((weights[..., 20:] == 0).all())
    # The dense path really is dense attention of the projections under the module's cells
    # (pattern() & mask; Reformer's self rule after the mask, balanced clusters chosen among the
    # unpadded positions first: helpers.reference_mask), with Reformer's keys tied to its queries.
    q, k, v = module.project(x, x, x)
    allowed = reference_mask(module, q, k, padding[None, None, None, :])
    keys = reference_keys(module, q, k)
    torch.testing.assert_close(weights, scaled_dot_product_attention(q, keys, v, allowed)[1])


def test_balanced_routing_trains_its_centroids_and_plugs_into_the_factory():
    from functools import partial

    from lectures_lib.models import EncoderTagger
    model = EncoderTagger(10, 3, d_model=16, num_heads=2, num_layers=1, d_ff=32, max_len=12,
                          attention=partial(BalancedRoutingAttention, n_clusters=3, decay=0.5))
    attention = [m for m in model.modules() if isinstance(m, BalancedRoutingAttention)][0]
    before = attention.centroids.clone()
    model.train()
    model(torch.randint(0, 10, (4, 12))).sum().backward()
    assert not torch.equal(before, attention.centroids)
    assert torch.allclose(attention.centroids.norm(dim=-1), torch.ones(2, 3))
