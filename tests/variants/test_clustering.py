"""lectures_lib.variants.clustering: LSH buckets and k-means, attention inside clusters equals
dense attention under the cluster mask; LSHAttention and RoutingAttention modules."""

from __future__ import annotations

import math

import pytest
import torch

from lectures_lib.attention import scaled_dot_product_attention
from lectures_lib.variants import (
    LSHAttention,
    RoutingAttention,
    cluster_mask,
    clustered_attention,
    clustering,
    kmeans,
    lsh_buckets,
    nearest_centroid,
    random_rotations,
)

from .helpers import (
    assert_module_equals_dense,
    assert_module_gradients_equal_dense,
    largest_tensors,
    random_qkv,
)


@pytest.mark.parametrize(("rounds", "n_clusters"), [(1, 1), (1, 3), (2, 4), (3, 2), (4, 5)])
@pytest.mark.parametrize(("n_q", "n_k"), [(7, 7), (5, 9), (1, 4)])
@pytest.mark.parametrize("padded", [False, True])
def test_clustered_attention_equals_dense_under_cluster_mask(rounds, n_clusters, n_q, n_k, padded,
                                                             monkeypatch):
    """The chunked path against dense attention under the cluster mask (the masked-dense path is
    the chunked one's twin: test_the_chunked_and_the_masked_dense_path_agree)."""
    monkeypatch.setattr(clustering, "_masked_dense", clustering._chunked)  # take the chunks
    generator = torch.Generator().manual_seed(rounds * 100 + n_clusters * 10 + n_q)
    q, k, v = random_qkv(2, 3, n=n_q, n_k=n_k)
    query_clusters = torch.randint(0, n_clusters, (2, 3, rounds, n_q), generator=generator)
    key_clusters = torch.randint(0, n_clusters, (2, 1, rounds, n_k), generator=generator)
    mask = cluster_mask(query_clusters, key_clusters)  # (2, 3, n_q, n_k)
    key_mask = None
    if padded:
        key_mask = torch.rand(2, 1, n_k, generator=generator) > 0.3
        mask = mask & key_mask[..., None, :]
    expected, expected_weights = scaled_dot_product_attention(q, k, v, mask)
    out, weights = clustered_attention(q, k, v, query_clusters, key_clusters, n_clusters,
                                       need_weights=True, key_mask=key_mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_weights)


def test_one_cluster_is_full_attention():
    q, k, v = random_qkv(2, n=6)
    zeros = torch.zeros(2, 1, 6, dtype=torch.long)
    torch.testing.assert_close(clustered_attention(q, k, v, zeros, zeros, 1),
                               scaled_dot_product_attention(q, k, v)[0])


def test_clustered_attention_gradients_equal_dense():
    q, k, v = random_qkv(2, n=8)
    generator = torch.Generator().manual_seed(0)
    qc = torch.randint(0, 3, (2, 2, 8), generator=generator)
    kc = torch.randint(0, 3, (2, 2, 8), generator=generator)
    mask = cluster_mask(qc, kc)
    upstream = torch.randn(2, 8, 5, dtype=torch.float64)

    def grads(attention):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        (attention(*leaves) * upstream).sum().backward()
        return [t.grad for t in leaves]

    ours = grads(lambda a, b, c: clustered_attention(a, b, c, qc, kc, 3))
    dense = grads(lambda a, b, c: scaled_dot_product_attention(a, b, c, mask)[0])
    for name, g_ours, g_dense in zip("qkv", ours, dense):
        assert torch.isfinite(g_ours).all()
        torch.testing.assert_close(g_ours, g_dense, msg=f"gradient wrt {name} differs")


def test_lsh_buckets_properties():
    rotations = random_rotations(16, 8, 3, seed=0)
    assert rotations.shape == (3, 16, 4)
    x = torch.randn(5, 20, 16)
    buckets = lsh_buckets(x, rotations)
    assert buckets.shape == (5, 3, 20) and int(buckets.min()) >= 0 and int(buckets.max()) < 8
    assert torch.equal(lsh_buckets(3.7 * x, rotations), buckets), "only the direction matters"
    assert torch.equal((lsh_buckets(-x, rotations) - buckets) % 8, torch.full_like(buckets, 4)), \
        "the opposite direction lands in the opposite bucket"


def test_lsh_collision_rate_follows_one_minus_angle_over_pi():
    torch.manual_seed(0)
    d, trials = 8, 4000
    rotations = torch.randn(trials, 1, d, 1)  # one hyperplane per trial: 2 buckets
    for angle in (0.3, 1.2, 2.5):
        x = torch.nn.functional.normalize(torch.randn(d), dim=0)
        direction = torch.randn(d)
        direction = torch.nn.functional.normalize(direction - (direction @ x) * x, dim=0)
        y = math.cos(angle) * x + math.sin(angle) * direction
        same = (lsh_buckets(x[None, None], rotations) == lsh_buckets(y[None, None], rotations))
        rate = same.float().mean().item()
        assert abs(rate - (1 - angle / math.pi)) < 0.03, (angle, rate)


def test_kmeans_separates_obvious_clusters():
    torch.manual_seed(0)
    centres = torch.eye(4)[:3] * 10  # three directions
    points = torch.cat([c + 0.3 * torch.randn(30, 4) for c in centres])  # (90, 4)
    centroids, assignment = kmeans(points, 3, num_iters=10, seed=1)
    groups = assignment.reshape(3, 30)
    assert all(len(set(g.tolist())) == 1 for g in groups), "each blob is one cluster"
    assert len({int(g[0]) for g in groups}) == 3, "three different clusters"
    assert torch.equal(nearest_centroid(points, centroids), assignment)
    torch.testing.assert_close(centroids.norm(dim=-1), torch.ones(3))


def test_clustered_attention_never_builds_n_by_n_for_balanced_clusters():
    n, d, clusters = 4096, 8, 16
    assignment = (torch.arange(n) % clusters)[None, None]  # (1, 1, n): balanced clusters

    def attention(q, k, v):
        return clustered_attention(q, k, v, assignment, assignment, clusters)

    produced, saved = largest_tensors(attention, n, d)
    assert max(produced, saved) <= n * n // clusters + n * d, (produced, saved)


@pytest.mark.parametrize("rounds", [1, 2])
def test_unbalanced_clusters_cost_no_more_than_dense(rounds):
    """Padded to the largest cluster, C clusters of which one holds nearly everything would cost
    rounds * C times the n x n matrix; the masked dense form is taken instead (same result)."""
    n, d, clusters = 512, 8, 8
    lopsided = torch.zeros(1, rounds, n, dtype=torch.long)  # (batch, rounds, n)
    lopsided[..., :clusters - 1] = torch.arange(1, clusters)  # one member in each other cluster

    def attention(q, k, v):
        return clustered_attention(q, k, v, lopsided, lopsided, clusters)

    produced, saved = largest_tensors(attention, n, d)
    assert max(produced, saved) <= n * n, (produced, saved)
    q, k, v = random_qkv(1, n=n, d_k=d)
    expected, _ = scaled_dot_product_attention(q, k, v, cluster_mask(lopsided, lopsided))
    torch.testing.assert_close(attention(q, k, v), expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda: LSHAttention(12, 2, n_buckets=4, n_hashes=3, seed=2),
        lambda: RoutingAttention(12, 2, n_clusters=1),
    ],
)
@pytest.mark.parametrize(("batch", "n"), [(1, 1), (2, 6), (3, 13)])
def test_modules_equal_dense_attention_under_their_pattern(make, batch, n):
    torch.manual_seed(n)
    module = make().double()
    x = torch.randn(batch, n, module.d_model, dtype=torch.float64)
    lengths = torch.randint(1, n + 1, (batch,))
    padding = (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :]  # (batch, 1, 1, n)
    for mask in (None, padding, torch.ones(n, n, dtype=torch.bool).tril()):
        assert_module_equals_dense(module, x, mask)
    assert_module_gradients_equal_dense(module, x, padding)


def test_routing_with_one_cluster_is_full_attention():
    module = RoutingAttention(8, 2, n_clusters=1).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    q, k, _ = module.project(x, x, x)
    assert bool(module.pattern(q, k).all())


def test_routing_centroids_move_only_while_training():
    module = RoutingAttention(8, 2, n_clusters=3, decay=0.5)
    x = torch.randn(2, 6, 8)
    before = module.centroids.clone()
    module.eval()(x, x, x)
    assert torch.equal(module.centroids, before), "evaluation must not change the centroids"
    module.train()(x, x, x)
    assert not torch.equal(module.centroids, before), "training moves them (mini-batch k-means)"
    torch.testing.assert_close(module.centroids.norm(dim=-1), torch.ones(2, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("rounds", "n_clusters"), [(1, 4), (3, 2), (2, 16)])
def test_the_chunked_and_the_masked_dense_path_agree(dtype, rounds, n_clusters, monkeypatch):
    """Clusters broadcast over heads (queries) and batch (keys), a key mask, several rounds."""
    generator = torch.Generator().manual_seed(rounds * 10 + n_clusters)
    q, k, v = (torch.randn(2, 3, 9, 4, generator=generator).to(dtype) for _ in range(3))
    query_clusters = torch.randint(0, n_clusters, (2, 1, rounds, 9), generator=generator)
    key_clusters = torch.randint(0, n_clusters, (1, 3, rounds, 9), generator=generator)
    key_mask = torch.rand(2, 1, 9, generator=generator) > 0.3
    results = {}
    for path, other in (("_chunked", "_masked_dense"), ("_masked_dense", "_chunked")):
        with monkeypatch.context() as patch:
            patch.setattr(clustering, other, getattr(clustering, path))  # always take `path`
            results[path] = clustered_attention(q, k, v, query_clusters, key_clusters, n_clusters,
                                                need_weights=True, key_mask=key_mask)
    (chunked_out, chunked_weights), (dense_out, dense_weights) = results.values()
    assert chunked_out.dtype == dense_out.dtype == dtype
    tolerance = {"atol": 2e-2, "rtol": 2e-2} if dtype != torch.float32 else {}
    torch.testing.assert_close(chunked_out, dense_out, **tolerance)
    torch.testing.assert_close(chunked_weights, dense_weights, **tolerance)
