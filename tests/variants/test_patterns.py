"""lectures_lib.variants.patterns: local, stride and global masks."""

from __future__ import annotations

import pytest
import torch

from lectures_lib.variants import global_mask, local_mask, stride_mask


@pytest.mark.parametrize(("n", "window"), [(1, 0), (1, 3), (6, 0), (6, 1), (9, 2), (9, 8), (5, 7)])
def test_local_mask_is_the_band_abs_i_minus_j_le_window(n, window):
    mask = local_mask(n, window)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    for i in range(n):
        for j in range(n):
            assert bool(mask[i, j]) == (abs(i - j) <= window), (n, window, i, j)


def test_local_mask_extremes():
    assert torch.equal(local_mask(6, 0), torch.eye(6, dtype=torch.bool)), "window 0 = identity"
    for window in (5, 6, 100):
        assert bool(local_mask(6, window).all()), f"window {window} >= n - 1 sees everything"
    assert not bool(local_mask(6, 4).all()), "window n - 2 misses the two corners"


@pytest.mark.parametrize(("n", "stride"), [(1, 1), (7, 1), (7, 2), (9, 3), (5, 8)])
def test_stride_mask_is_multiples_of_the_stride(n, stride):
    mask = stride_mask(n, stride)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    for i in range(n):
        for j in range(n):
            assert bool(mask[i, j]) == ((i - j) % stride == 0), (n, stride, i, j)


def test_global_mask_rows_and_columns_of_global_tokens():
    n, positions = 7, [0, 4]
    mask = global_mask(n, positions)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    for i in range(n):
        for j in range(n):
            assert bool(mask[i, j]) == (i in positions or j in positions), (i, j)
    assert torch.equal(global_mask(n, torch.tensor([4, 0, 4])), mask), "tensor input, duplicates"
    assert not bool(global_mask(n, []).any()), "no global token: nothing allowed"
    longformer = local_mask(n, 1) | global_mask(n, [0])
    assert bool(longformer.all(dim=1).any()) and bool(longformer.all(dim=0).any())


def test_masks_are_built_on_the_requested_device():
    for make in (lambda: local_mask(4, 1, device="cpu"), lambda: stride_mask(4, 2, device="cpu"),
                 lambda: global_mask(4, [1], device="cpu")):
        assert make().device == torch.device("cpu")


# -- section 06: dilated and random patterns, per-head patterns, the receptive field ----------


@pytest.mark.parametrize(("n", "window", "dilation"), [(1, 0, 1), (9, 2, 1), (9, 2, 3), (12, 1, 4)])
def test_dilated_mask_definition(n, window, dilation):
    from lectures_lib.variants import dilated_mask

    mask = dilated_mask(n, window, dilation)
    for i in range(n):
        for j in range(n):
            expected = (i - j) % dilation == 0 and abs(i - j) <= window * dilation
            assert bool(mask[i, j]) == expected, (i, j)
    assert torch.equal(dilated_mask(n, window, 1), local_mask(n, window))


def test_random_mask_is_fixed_by_its_seed_and_matches_random_keys():
    from lectures_lib.variants import random_keys, random_mask

    mask = random_mask(20, 3, seed=5)
    assert torch.equal(mask, random_mask(20, 3, seed=5)), "same seed, same links"
    assert not torch.equal(mask, random_mask(20, 3, seed=6))
    counts = mask.sum(dim=1)
    assert bool((counts >= 1).all() and (counts <= 3).all()), counts
    keys = random_keys(20, 3, seed=5)
    assert bool(mask.gather(1, keys).all()) and int(mask.sum()) == sum(
        len(set(row)) for row in keys.tolist()
    )
    assert not bool(random_mask(5, 0).any())


def test_head_patterns_stacks_one_mask_per_head():
    from lectures_lib.variants import head_patterns

    patterns = [local_mask(6, 1), stride_mask(6, 2), global_mask(6, [0])]
    stacked = head_patterns(patterns)
    assert stacked.shape == (1, 3, 6, 6)
    for h, pattern in enumerate(patterns):
        assert torch.equal(stacked[0, h], pattern)


def test_receptive_field_grows_with_depth():
    from lectures_lib.variants import receptive_field

    n, window = 12, 2
    mask = local_mask(n, window)
    for layers in range(4):
        expected = local_mask(n, layers * window)  # each layer reaches w further
        assert torch.equal(receptive_field(mask, layers), expected), layers
    with_global = mask | global_mask(n, [0])
    assert not bool(receptive_field(with_global, 1).all())
    assert bool(receptive_field(with_global, 2).all()), "any token -> global token -> any token"
    per_head = torch.stack([local_mask(n, 1), stride_mask(n, 4)])[None]  # (1, 2, n, n)
    assert torch.equal(receptive_field(per_head, 1), local_mask(n, 1) | stride_mask(n, 4))
