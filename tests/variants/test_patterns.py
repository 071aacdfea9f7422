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


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: local_mask(0, 1), ValueError, "n must be >= 1"),
        (lambda: local_mask(4, -1), ValueError, "window must be >= 0"),
        (lambda: local_mask(4, 1.5), TypeError, "window must be an int"),
        (lambda: local_mask(4, True), TypeError, "window must be an int"),
        (lambda: stride_mask(4, 0), ValueError, "stride must be >= 1"),
        (lambda: global_mask(4, [4]), ValueError, r"global_positions must lie in \[0, 3\]"),
        (lambda: global_mask(4, [-1]), ValueError, "global_positions must lie"),
        (lambda: global_mask(4, torch.tensor([0.0])), TypeError, "global_positions must have"),
        (lambda: global_mask(4, [1.5]), TypeError, "global_positions must have dtype integer"),
        (lambda: global_mask(4, [[1]]), ValueError, "global_positions must have 1 dimensions"),
    ],
)
def test_mask_and_band_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
