"""lectures_lib.data.digits: scikit-learn's bundled digits, a fixed stratified split, patches."""

from __future__ import annotations

import pytest
import torch

from lectures_lib.data.digits import (
    DIGITS_CLASSES,
    digits_splits,
    image_patches,
    load_digit_images,
    patch_grid,
)


@pytest.mark.slow
def test_the_real_digits_are_loaded_and_scaled():
    images, labels = load_digit_images()
    assert images.shape == (1797, 8, 8) and images.dtype == torch.float32
    assert labels.shape == (1797,) and labels.dtype == torch.int64
    assert images.min() == 0 and images.max() == 1, "ink counts 0..16 scaled to [0, 1]"
    assert set(labels.tolist()) == set(range(DIGITS_CLASSES))


@pytest.mark.parametrize("test_fraction", [0.25, 0.1, 0.5])
def test_the_split_is_a_stratified_partition(test_fraction):
    train, test = digits_splits(test_fraction, seed=3)
    images, labels = load_digit_images()
    assert len(train.labels) + len(test.labels) == len(labels)
    # every image lands in exactly one part (rows of the flattened images, as a multiset)
    together = torch.cat([train.images, test.images]).flatten(1)
    assert torch.equal(together.sort(0).values, images.flatten(1).sort(0).values)
    train_rows = {tuple(r) for r in train.images.flatten(1).tolist()}
    overlap = [r for r in test.images.flatten(1).tolist() if tuple(r) in train_rows]
    duplicates = len(images) - len({tuple(r) for r in images.flatten(1).tolist()})
    assert len(overlap) <= duplicates, "only images that occur twice in the data set can overlap"
    counts, test_counts = labels.bincount(), test.labels.bincount(minlength=DIGITS_CLASSES)
    assert torch.all((test_counts - test_fraction * counts).abs() <= 0.5 + 1e-9), "stratified"


def test_the_split_is_fixed_by_its_seed():
    first, second = digits_splits(seed=0), digits_splits(seed=0)
    other = digits_splits(seed=1)
    assert torch.equal(first[1].images, second[1].images)
    assert torch.equal(first[1].labels, second[1].labels)
    assert not torch.equal(first[1].images, other[1].images)
    assert len(first[1].labels) == 450


@pytest.mark.parametrize("patch_size, height, width", [(2, 8, 8), (4, 8, 8), (1, 3, 5), (3, 6, 9)])
def test_patches_are_the_blocks_in_reading_order(patch_size, height, width):
    images = torch.randn(3, height, width)
    patches = image_patches(images, patch_size)
    rows, cols = height // patch_size, width // patch_size
    assert patches.shape == (3, rows * cols, patch_size**2)
    for r in range(rows):
        for c in range(cols):
            block = images[:, r * patch_size:(r + 1) * patch_size, c * patch_size:(c + 1) * patch_size]
            assert torch.equal(patches[:, r * cols + c], block.reshape(3, -1)), (r, c)


def test_patch_grid_counts_the_patches_per_side():  # its refusals: tests/test_bad_inputs.py
    assert patch_grid(8, 2) == (4, 4)
