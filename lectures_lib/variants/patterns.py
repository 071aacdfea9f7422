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

from .._validate.variants import patterns as rules
from ..utils import validated

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


@validated(rules.size_and_window)
def local_mask(n: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of local attention: True where :math:`|i - j| \le` ``window``.

    ``window=0`` gives the identity (each position sees only itself); ``window >= n - 1`` lets every
    position see every other one. Derived in ``06_attention_variants.ipynb``.
    """
    return _offsets(n, device).abs() <= window


@validated(rules.size_and_stride)
def stride_mask(n: int, stride: int, device: torch.device | str | None = None) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of stride attention: True where :math:`i - j` is a multiple of
    ``stride`` (:math:`(i - j) \bmod s = 0`; the "strided" pattern of Child et al. 2019, both
    directions). ``stride=1`` lets every position see every other one; the diagonal is always True.
    Derived in ``06_attention_variants.ipynb``.
    """
    return _offsets(n, device) % stride == 0


@validated(rules.size_and_globals)
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
    positions = torch.as_tensor(global_positions, dtype=torch.long)  # (G,)
    is_global = torch.zeros(n, dtype=torch.bool, device=device)  # (n,)
    is_global[positions.to(is_global.device)] = True
    return is_global[:, None] | is_global[None, :]  # (n, n): global row or global column


@validated(rules.dilated_window)
def dilated_mask(
    n: int, window: int, dilation: int, device: torch.device | str | None = None
) -> torch.Tensor:
    r"""Boolean ``(n, n)`` mask of a dilated sliding window (Longformer): True where
    :math:`i - j` is a multiple of ``dilation`` and :math:`|i - j| \le` ``window * dilation``:
    ``window`` neighbours on each side, every ``dilation``-th one. ``dilation=1`` is
    :func:`local_mask`; a larger dilation reaches further with the same number of cells, like a
    stride pattern cut to a window. Derived in ``06_attention_variants.ipynb``.
    """
    offsets = _offsets(n, device)
    return (offsets % dilation == 0) & (offsets.abs() <= window * dilation)


@validated(rules.random_key_count)
def random_keys(n: int, num_random: int, seed: int = 0) -> torch.Tensor:
    """``(n, num_random)`` long: the random key positions each query gets (Big Bird's random
    links), drawn uniformly *with* replacement from ``0 ... n - 1`` by a generator seeded with
    ``seed`` (a key drawn twice counts once, so a query has at most ``num_random`` random keys).
    The same ``(n, num_random, seed)`` always gives the same keys: the pattern is fixed, not
    redrawn at every step. Never builds ``n x n``. Derived in ``06_attention_variants.ipynb``.
    """
    generator = torch.Generator().manual_seed(int(seed))
    # (max(n, 1): an empty sequence draws no key, and n >= 1 draws the same keys as ever)
    return torch.randint(0, max(n, 1), (n, num_random), generator=generator)  # (n, num_random)


@validated(rules.random_mask_args)
def random_mask(
    n: int, num_random: int, seed: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean ``(n, n)`` mask of Big Bird's random links: row ``i`` is True at the keys
    :func:`random_keys` draws for query ``i`` (at most ``num_random`` per row, fixed by ``seed``).
    Derived in ``06_attention_variants.ipynb``.
    """
    keys = random_keys(n, num_random, seed).to(device)  # (n, num_random)
    mask = torch.zeros(n, n, dtype=torch.bool, device=device)
    return mask.scatter_(1, keys, True)  # (n, n): True at each drawn key


@validated(rules.one_mask_per_head)
def head_patterns(patterns: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack one ``(n, n)`` pattern per head into a ``(1, heads, n, n)`` mask: head ``h`` attends
    under ``patterns[h]``. The result broadcasts over the batch and combines with a key-padding
    mask ``(batch, 1, 1, n)`` by ``&``. Derived in ``06_attention_variants.ipynb``.
    """
    return torch.stack(list(patterns))[None]  # (1, heads, n, n)


@validated(rules.square_mask_and_layers)
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
    step = mask.reshape(-1, *mask.shape[-2:]).any(dim=0)  # (n, n): union over heads
    n = step.shape[-1]
    step = step | torch.eye(n, dtype=torch.bool, device=mask.device)  # the residual path
    reach = torch.eye(n, dtype=torch.bool, device=mask.device)  # 0 layers: each token itself
    for _ in range(num_layers):
        reach = (reach.float() @ step.float()) > 0  # (n, n): i reaches j through some k
    return reach
