"""lectures_lib.variants.sparse: stride attention by reshaping, global tokens and the gather
engine equal dense attention under their masks; Longformer and Big Bird modules."""

from __future__ import annotations

import pytest
import torch

from lectures_lib.attention import scaled_dot_product_attention
from lectures_lib.variants import (
    BigBirdAttention,
    LongformerAttention,
    dilated_mask,
    global_attention,
    global_mask,
    local_mask,
    random_mask,
    sparse_attention,
    sparse_pattern,
    stride_mask,
    strided_attention,
)

from .helpers import (
    assert_module_equals_dense,
    assert_module_gradients_equal_dense,
    largest_tensors,
    random_qkv,
)


def _padding(batch, n, seed):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, n + 1, (batch,), generator=generator)
    return torch.arange(n)[None, :] < lengths[:, None]  # (batch, n)


@pytest.mark.parametrize(("n", "stride"), [(1, 1), (7, 1), (7, 2), (9, 3), (10, 3), (5, 8), (12, 4)])
@pytest.mark.parametrize("padded", [False, True])
def test_strided_attention_equals_dense_under_stride_mask(n, stride, padded):
    q, k, v = random_qkv(2, 3, n=n)
    key_mask = _padding(2, n, n + stride)[:, None, :] if padded else None  # (2, 1, n)
    mask = stride_mask(n, stride) if key_mask is None else stride_mask(n, stride) & key_mask[..., None, :]
    expected, expected_weights = scaled_dot_product_attention(q, k, v, mask)
    out, weights = strided_attention(q, k, v, stride, need_weights=True, key_mask=key_mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_weights)
    assert torch.equal(strided_attention(q, k, v, stride, key_mask=key_mask), out)


@pytest.mark.parametrize("positions", [[0], [3], [0, 5, 5], [], [8, 1]])
@pytest.mark.parametrize("padded", [False, True])
def test_global_attention_equals_dense_under_global_mask(positions, padded):
    n = 9
    q, k, v = random_qkv(3, n=n)
    key_mask = _padding(3, n, 7) if padded else None
    mask = global_mask(n, positions)
    if key_mask is not None:
        mask = mask & key_mask[:, None, :]
    expected, expected_weights = scaled_dot_product_attention(q, k, v, mask)
    out, weights = global_attention(q, k, v, positions, need_weights=True, key_mask=key_mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_weights)


def test_global_tokens_attend_to_all_and_are_attended_by_all():
    n = 10
    q, k, v = random_qkv(n=n)
    _, weights = sparse_attention(q, k, v, torch.full((n, 0), -1), [0, 6], need_weights=True)
    assert bool((weights[[0, 6]] > 0).all()), "a global token attends to every token"
    assert bool((weights[:, [0, 6]] > 0).all()), "every token attends to the global tokens"
    others = [i for i in range(n) if i not in (0, 6)]
    assert not bool(weights[others][:, others].any()), "nothing else in the pure global pattern"


def test_sparse_attention_with_repeated_and_empty_slots_equals_dense():
    n = 8
    q, k, v = random_qkv(2, n=n)
    key_index = torch.randint(-1, n, (2, n, 6), generator=torch.Generator().manual_seed(1))
    mask = sparse_pattern(n, key_index, [2])
    expected, expected_weights = scaled_dot_product_attention(q, k, v, mask)
    out, weights = sparse_attention(q, k, v, key_index, [2], need_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_weights)


def test_sparse_pattern_of_local_index_is_local_mask():
    n, window = 9, 2
    index = torch.arange(n)[:, None] + torch.arange(-window, window + 1)
    index = index.masked_fill((index < 0) | (index >= n), -1)
    assert torch.equal(sparse_pattern(n, index), local_mask(n, window))
    assert torch.equal(sparse_pattern(n, index, [0]), local_mask(n, window) | global_mask(n, [0]))


def test_engines_never_build_n_by_n():
    n, d = 4096, 8
    produced, saved = largest_tensors(lambda q, k, v: strided_attention(q, k, v, 64), n, d)
    assert max(produced, saved) <= n * n // 64 + n * d, "stride s: N^2 / s scores"
    index = torch.arange(n)[:, None] + torch.arange(-4, 5)
    index = index.masked_fill((index < 0) | (index >= n), -1)
    produced, saved = largest_tensors(
        lambda q, k, v: sparse_attention(q, k, v, index, [0, 1]), n, d
    )
    assert max(produced, saved) <= 2 * n * (9 + 2) * d, (produced, saved)


@pytest.mark.parametrize(
    "make",
    [
        lambda: LongformerAttention(12, 2, window=1, dilations=(1, 3), global_positions=(0, 4)),
        lambda: BigBirdAttention(8, 2, window=0, num_random=5, global_positions=(), seed=3),
    ],
)
@pytest.mark.parametrize(("batch", "n"), [(1, 1), (2, 5), (3, 13)])
def test_modules_equal_dense_attention_under_their_pattern(make, batch, n):
    torch.manual_seed(n)
    module = make().double()
    if module.global_positions and max(module.global_positions) >= n:
        pytest.skip("global positions outside this short sequence")
    x = torch.randn(batch, n, module.d_model, dtype=torch.float64)
    padding = _padding(batch, n, n)[:, None, None, :]  # (batch, 1, 1, n), as EncoderTagger's
    for mask in (None, padding, torch.ones(n, n, dtype=torch.bool).tril()):
        assert_module_equals_dense(module, x, mask)
    assert_module_gradients_equal_dense(module, x, padding)


def test_module_patterns_per_head():
    longformer = LongformerAttention(16, 4, window=2)
    n = 12
    heads = longformer.head_masks(n)
    assert [bool(torch.equal(h, dilated_mask(n, 2, d) | global_mask(n, [0])))
            for h, d in zip(heads, (1, 1, 2, 2))] == [True] * 4
    q = torch.zeros(1, 4, n, 4)
    assert torch.equal(longformer.pattern(q, q)[0], torch.stack(heads))
    bigbird = BigBirdAttention(16, 4, window=1, num_random=2)
    heads = bigbird.head_masks(n)
    assert torch.equal(bigbird.pattern(q, q)[0], torch.stack(heads))
    assert not torch.equal(heads[0], heads[1]), "each head has its own random links"
    assert torch.equal(heads[2], local_mask(n, 1) | global_mask(n, [0]) | random_mask(n, 2, 2))
