r"""Patterns from human knowledge (人类知识): which cells of the N x N attention matrix to keep.

Boolean ``(n, n)`` masks, True = "may attend", that combine with ``|`` and ``&``:

* :func:`local_mask`: local / truncated attention (局部注意力): only the neighbours
  :math:`|i - j| \le w`;
* :func:`stride_mask`: stride attention: only positions a multiple of the stride apart;
* :func:`global_mask`: global tokens that attend to every token and are attended by every token;
  ``local_mask(n, w) | global_mask(n, [0])`` is Longformer's pattern.

Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..utils import check_device, check_non_negative_int, check_positive_int, check_tensor

__all__ = ["local_mask", "stride_mask", "global_mask"]


def _offsets(n: int, device: torch.device | str | None) -> torch.Tensor:
    positions = torch.arange(n, device=check_device(device))
    return positions[:, None] - positions[None, :]  # (n, n): i - j for query i, key j


def local_mask(n: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of local attention: True where :math:`|i - j| \le` ``window``.

    ``window=0`` gives the identity (each position sees only itself); ``window >= n - 1`` lets every
    position see every other one. Derived in ``06_attention_variants.ipynb``.
    """
    n = check_positive_int(n, "n")
    window = check_non_negative_int(window, "window")
    return _offsets(n, device).abs() <= window


def stride_mask(n: int, stride: int, device: torch.device | str | None = None) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of stride attention: True where :math:`i - j` is a multiple of
    ``stride`` (:math:`(i - j) \bmod s = 0`; the "strided" pattern of Child et al. 2019, both
    directions). ``stride=1`` lets every position see every other one; the diagonal is always True.
    Derived in ``06_attention_variants.ipynb``.
    """
    n = check_positive_int(n, "n")
    stride = check_positive_int(stride, "stride")
    return _offsets(n, device) % stride == 0


def global_mask(
    n: int,
    global_positions: Sequence[int] | torch.Tensor,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of global tokens: True in row *and* column :math:`g` for each
    :math:`g \in` ``global_positions``: a global token attends to every token (collects global
    information) and is attended by every token (everyone knows the global information).

    Other cells are False, so combine it with a local pattern: ``local_mask(n, w) | global_mask(n,
    [0])`` is Longformer's pattern. Derived in ``06_attention_variants.ipynb``.
    """
    n = check_positive_int(n, "n")
    if not isinstance(global_positions, (torch.Tensor, Sequence)) or isinstance(
        global_positions, str
    ):
        raise TypeError(
            "global_positions must be a list of positions or a 1-D integer tensor, e.g. [0], "
            f"got {type(global_positions).__name__} ({global_positions!r})"
        )
    if not isinstance(global_positions, torch.Tensor):
        positions = list(global_positions)  # no dtype forced: 1.5 must fail below, not become 1
        global_positions = torch.as_tensor(positions) if positions else torch.zeros(0, dtype=torch.long)
    check_tensor(global_positions, "global_positions", ndim=1, dtype="integer")
    if global_positions.numel() and not (
        0 <= int(global_positions.min()) and int(global_positions.max()) < n
    ):
        raise ValueError(
            f"global_positions must lie in [0, {n - 1}] for n={n}, "
            f"got {global_positions.tolist()}"
        )
    is_global = torch.zeros(n, dtype=torch.bool, device=check_device(device))  # (n,)
    is_global[global_positions.to(is_global.device)] = True
    return is_global[:, None] | is_global[None, :]  # (n, n): global row or global column
