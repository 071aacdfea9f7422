r"""Patterns from human knowledge (人类知识): which cells of the N x N attention matrix to keep.

Boolean ``(n, n)`` masks, True = "may attend", that combine with ``|`` and ``&``:

* :func:`local_mask`: local / truncated attention (局部注意力): only the neighbours
  :math:`|i - j| \le w`;
* :func:`stride_mask`: stride attention: only positions a multiple of the stride apart;
* :func:`global_mask`: global tokens that attend to every token and are attended by every token;
  ``local_mask(n, w) | global_mask(n, [0])`` is Longformer's pattern;
* :func:`dilated_mask`: a dilated sliding window (Longformer's dilation): every ``dilation``-th
  neighbour, up to ``window`` of them on each side;
* :func:`random_mask`: a few random keys per query (Big Bird's random links);
* :func:`head_patterns`: one pattern per head, stacked into a ``(1, heads, n, n)`` mask;
* :func:`receptive_field`: which tokens can reach which after ``L`` layers of a pattern.

Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..utils import check_non_negative_int, check_positive_int, check_tensor

__all__ = [
    "local_mask",
    "stride_mask",
    "global_mask",
    "dilated_mask",
    "random_mask",
    "random_keys",
    "head_patterns",
    "receptive_field",
]


def _offsets(n: int, device: torch.device | str | None) -> torch.Tensor:
    positions = torch.arange(n, device=device)
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
    is_global = torch.zeros(n, dtype=torch.bool, device=device)  # (n,)
    is_global[global_positions.to(is_global.device)] = True
    return is_global[:, None] | is_global[None, :]  # (n, n): global row or global column


def dilated_mask(
    n: int, window: int, dilation: int, device: torch.device | str | None = None
) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of a dilated sliding window (Longformer): True where
    :math:`i - j` is a multiple of ``dilation`` and :math:`|i - j| \le` ``window * dilation``:
    ``window`` neighbours on each side, every ``dilation``-th one. ``dilation=1`` is
    :func:`local_mask`; a larger dilation reaches further with the same number of cells, like a
    stride pattern cut to a window. Derived in ``06_attention_variants.ipynb``.
    """
    n = check_positive_int(n, "n")
    window = check_non_negative_int(window, "window")
    dilation = check_positive_int(dilation, "dilation")
    offsets = _offsets(n, device)
    return (offsets % dilation == 0) & (offsets.abs() <= window * dilation)


def random_keys(n: int, num_random: int, seed: int = 0) -> torch.Tensor:
    """``(n, num_random)`` long: the random key positions each query gets (Big Bird's random
    links), drawn uniformly *with* replacement from ``0 ... n - 1`` by a generator seeded with
    ``seed`` (a key drawn twice counts once, so a query has at most ``num_random`` random keys).
    The same ``(n, num_random, seed)`` always gives the same keys: the pattern is fixed, not
    redrawn at every step. Never builds ``n x n``. Derived in ``06_attention_variants.ipynb``.
    """
    n = check_positive_int(n, "n")
    num_random = check_non_negative_int(num_random, "num_random")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} ({seed!r})")
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (n, num_random), generator=generator)  # (n, num_random)


def random_mask(
    n: int, num_random: int, seed: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean ``(n, n)`` mask of Big Bird's random links: row ``i`` is True at the keys
    :func:`random_keys` draws for query ``i`` (at most ``num_random`` per row, fixed by ``seed``).
    Derived in ``06_attention_variants.ipynb``.
    """
    keys = random_keys(n, num_random, seed).to(device)  # (n, num_random); checks the arguments
    mask = torch.zeros(n, n, dtype=torch.bool, device=device)
    return mask.scatter_(1, keys, True)  # (n, n): True at each drawn key


def head_patterns(patterns: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack one ``(n, n)`` pattern per head into a ``(1, heads, n, n)`` mask: head ``h`` attends
    under ``patterns[h]``. The result broadcasts over the batch and combines with a key-padding
    mask ``(batch, 1, 1, n)`` by ``&``. Derived in ``06_attention_variants.ipynb``.
    """
    if isinstance(patterns, torch.Tensor) or not isinstance(patterns, Sequence) or not patterns:
        raise TypeError(
            "patterns must be a non-empty list of (n, n) bool masks, one per head, got "
            f"{type(patterns).__name__}"
        )
    first = check_tensor(patterns[0], "patterns[0]", ndim=2, dtype="bool")
    for index, pattern in enumerate(patterns):
        check_tensor(pattern, f"patterns[{index}]", shape=first.shape, dtype="bool")
    return torch.stack(list(patterns))[None]  # (1, heads, n, n)


def receptive_field(mask: torch.Tensor, num_layers: int) -> torch.Tensor:
    r"""Which tokens can reach which after ``num_layers`` layers of attention under ``mask``.

    ``mask`` is ``(n, n)`` or per head ``(heads, n, n)`` / ``(1, heads, n, n)`` (a token's
    information passes through *any* head, so the heads are united). Entry ``[i, j]`` of the
    result is True when the output of query ``i`` after ``num_layers`` layers can depend on input
    token ``j``: the boolean matrix power :math:`R_L = R_{L-1} M` with :math:`R_1 = M` (the
    residual connection keeps every token's own information, so the diagonal is added to
    :math:`M`). Builds ``n x n``: a tool for pictures and checks. Derived in
    ``06_attention_variants.ipynb``.
    """
    check_tensor(mask, "mask", ndim=(2, 3, 4), dtype="bool")
    num_layers = check_non_negative_int(num_layers, "num_layers")
    if mask.shape[-1] != mask.shape[-2]:
        raise ValueError(f"mask must be square (..., n, n), got {tuple(mask.shape)}")
    step = mask.reshape(-1, *mask.shape[-2:]).any(dim=0)  # (n, n): union over heads
    n = step.shape[-1]
    step = step | torch.eye(n, dtype=torch.bool, device=mask.device)  # the residual path
    reach = torch.eye(n, dtype=torch.bool, device=mask.device)  # 0 layers: each token itself
    for _ in range(num_layers):
        reach = (reach.float() @ step.float()) > 0  # (n, n): i reaches j through some k
    return reach
