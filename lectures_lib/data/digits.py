r"""Real images for section 04: scikit-learn's bundled handwritten digits, cut into patches.

``sklearn.datasets.load_digits`` ships 1,797 real 8×8 grey-scale images (图像) of the digits
0–9 inside the package (UCI's "Optical Recognition of Handwritten Digits", 43 writers), so
nothing is downloaded. Each pixel (像素) holds an ink count 0–16; here it is scaled to [0, 1].

The lecture: an image is a set of vectors too (一个像素三个通道可视为一个向量). A vision
Transformer (ViT, Dosovitskiy et al. 2021) cuts the image into ``patch_size × patch_size``
patches (图块) and reads each flattened patch as one input vector:

.. math::
    x \in \mathbb{R}^{H\times W} \;\mapsto\; (p_1, \dots, p_N),\quad
    p_{r \cdot (W/P) + c} = \operatorname{vec}\big(x[rP:(r+1)P,\; cP:(c+1)P]\big) \in \mathbb{R}^{P^2},
    \quad N = \tfrac{H}{P}\cdot\tfrac{W}{P}

(patches in reading order: row by row, left to right). With 8×8 images and ``P = 2``: 16
patches of 4 pixels each.

:func:`digits_splits` returns a **fixed seeded split** (the same held-out images for every model
that is compared on it), stratified so that both parts hold every digit in the same proportion.
Derived in ``04_transformer_encoder.ipynb``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..utils import check_positive_int, check_probability, check_seed, check_tensor

__all__ = [
    "DIGITS_SIZE",
    "DIGITS_CLASSES",
    "DigitsSplit",
    "load_digit_images",
    "digits_splits",
    "image_patches",
    "patch_grid",
]

DIGITS_SIZE = 8  # images are DIGITS_SIZE x DIGITS_SIZE pixels
DIGITS_CLASSES = 10  # the digits 0 ... 9
_INK_MAX = 16.0  # load_digits' pixel values are ink counts 0 ... 16


class DigitsSplit(NamedTuple):
    """One part of the split: ``images`` ``(n, 8, 8)`` float32 in [0, 1], ``labels`` ``(n,)``."""

    images: torch.Tensor
    labels: torch.Tensor


def load_digit_images() -> DigitsSplit:
    """All 1,797 digits: images ``(1797, 8, 8)`` float32 in [0, 1] and labels ``(1797,)`` int64."""
    from sklearn.datasets import load_digits  # imported here: only this function needs it

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32) / _INK_MAX  # (n, 8, 8)
    labels = torch.tensor(digits.target, dtype=torch.int64)  # (n,)
    return DigitsSplit(images, labels)


def digits_splits(test_fraction: float = 0.25, seed: int = 0) -> tuple[DigitsSplit, DigitsSplit]:
    """A fixed, seeded, stratified split ``(train, test)`` of the 1,797 digits.

    Every digit class is shuffled with ``seed`` and its first ``round(test_fraction * count)``
    images go to the test part, so both parts keep the classes' proportions and the same seed
    always holds out the same images. The default holds out 450 images (25 %).
    """
    test_fraction = check_probability(test_fraction, "test_fraction")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    seed = check_seed(seed)
    images, labels = load_digit_images()
    generator = torch.Generator().manual_seed(seed)
    test_rows, train_rows = [], []
    for digit in range(DIGITS_CLASSES):
        rows = torch.nonzero(labels == digit).flatten()  # (count,) indices of this digit
        rows = rows[torch.randperm(len(rows), generator=generator)]
        n_test = round(test_fraction * len(rows))
        test_rows.append(rows[:n_test])
        train_rows.append(rows[n_test:])
    # shuffle across classes too, so a batch taken in order is not all one digit
    train = torch.cat(train_rows)
    test = torch.cat(test_rows)
    train = train[torch.randperm(len(train), generator=generator)]
    test = test[torch.randperm(len(test), generator=generator)]
    return DigitsSplit(images[train], labels[train]), DigitsSplit(images[test], labels[test])


def _check_images(images: object, patch_size: object) -> int:
    check_tensor(images, "images", ndim=3, dtype="floating")
    patch_size = check_positive_int(patch_size, "patch_size")
    height, width = images.shape[1:]
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"images of {height}x{width} pixels (shape {tuple(images.shape)}) cannot be cut into "
            f"{patch_size}x{patch_size} patches: patch_size must divide both sides"
        )
    return patch_size


def image_patches(images: torch.Tensor, patch_size: int = 2) -> torch.Tensor:
    """Cut images ``(batch, H, W)`` into patches ``(batch, N, P*P)``, N = (H/P)(W/P), in
    reading order (row by row, left to right); each patch flattened row by row."""
    patch_size = _check_images(images, patch_size)
    batch, height, width = images.shape
    rows, cols = height // patch_size, width // patch_size
    grid = images.reshape(batch, rows, patch_size, cols, patch_size)  # (b, r, P, c, P)
    grid = grid.transpose(2, 3)  # (batch, rows, cols, P, P): patch (r, c) together
    return grid.reshape(batch, rows * cols, patch_size * patch_size)  # (batch, N, P*P)


def patch_grid(image_size: int = DIGITS_SIZE, patch_size: int = 2) -> tuple[int, int]:
    """``(rows, cols)`` of the patch grid: attention over the N patches reshapes to it."""
    image_size = check_positive_int(image_size, "image_size")
    patch_size = check_positive_int(patch_size, "patch_size")
    if image_size % patch_size:
        raise ValueError(f"patch_size={patch_size} does not divide image_size={image_size}")
    return image_size // patch_size, image_size // patch_size

