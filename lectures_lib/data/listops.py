r"""ListOps (Nangia & Bowman 2018), as the Long Range Arena uses it (Tay et al. 2020): a task no one
here designed, for section 07's comparison with the paper's Table 1.

An example is a nested expression over the digits 0-9 with four operators, each written as an
opening token, its arguments, and a closing ``]``:

* ``[MAX`` the largest argument, ``[MIN`` the smallest,
* ``[MED`` the median, rounded down to an integer (the mean of the two middle ones when their
  number is even, then truncated, as LRA's ``int(np.median(...))``),
* ``[SM`` the sum modulo 10;

e.g. ``[MAX 4 3 [MIN 2 3 ] 1 0 [MED 1 5 8 9 2 ] ]`` is 5. The label is the value at the root: 10
classes. To answer, a model must evaluate the expression bottom up: every bracket's value depends
on tokens that can be far apart, and the root's on the whole sequence.

Generation follows the LRA's description (its ``listops.py``): a node at depth ``d`` (the root
has depth 1) is, if ``d < max_depth``, an operator with probability ``value_p`` = 0.25 and else a
digit (always a digit at ``max_depth``); an operator takes ``randint(2, max_args)`` arguments (both
ends included), each a node at depth ``d + 1``, and a uniformly drawn operator. A tree is kept
if its number of tokens lies in ``[min_len, max_len]`` (LRA: 500 to 2000, ``max_depth`` 10,
``max_args`` 10), else it is drawn again. LRA's files also carry round brackets ``( )`` around
every sub-expression, which its input pipelines drop before tokenising; here they are never
written. So the token count is the LRA's length, and the vocabulary is 16 ids:
``0`` padding, ``1 ... 10`` the digits 0-9, ``11 ... 14`` ``[MIN [MAX [MED [SM``, ``15`` ``]``.

:func:`listops_task` returns the rows padded with 0 to ``max_len`` and the key-padding mask
(``True`` = a real token, the course's convention). The classes are **not** balanced: a MAX of
several arguments is often 9 and a MIN often 0, so the most frequent class is well above 1/10
(:func:`listops_class_shares` counts them; ``benchmarks/listops.py`` stores the majority share
beside the trained models, the accuracy a model that ignores the input can reach).
Used by ``benchmarks/listops.py``.
"""

from __future__ import annotations

import random

import torch

from ..utils import check_non_negative_int, check_positive_int

__all__ = [
    "LISTOPS_TOKENS",
    "listops_vocab_size",
    "listops_encode",
    "listops_decode",
    "listops_value",
    "listops_task",
    "listops_class_shares",
]

PAD_ID = 0
OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
CLOSE = "]"
#: The token of each id (index = id): padding, the digits 0-9, the four operators, ``]``.
LISTOPS_TOKENS: tuple[str, ...] = ("<pad>", *(str(d) for d in range(10)), *OPERATORS, CLOSE)
_ID = {token: index for index, token in enumerate(LISTOPS_TOKENS)}
VALUE_P = 0.25  # the LRA's probability that a node above max_depth is an operator


def listops_vocab_size() -> int:
    """16: padding, 10 digits, 4 operators and the closing bracket."""
    return len(LISTOPS_TOKENS)


def listops_encode(expression: str) -> list[int]:
    """Token ids of a space-separated expression, e.g. ``"[SM 3 9 ]"`` -> ``[14, 4, 10, 15]``."""
    if not isinstance(expression, str):
        raise TypeError(f"expression must be a str, got {type(expression).__name__}")
    unknown = [token for token in expression.split() if token not in _ID or token == "<pad>"]
    if unknown:
        raise ValueError(f"expression must use the tokens {LISTOPS_TOKENS[1:]}, got {unknown[:5]}")
    return [_ID[token] for token in expression.split()]


def listops_decode(ids) -> str:
    """The expression of a row of ids (padding dropped): the inverse of :func:`listops_encode`."""
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    bad = [i for i in ids if not (isinstance(i, int) and 0 <= i < len(LISTOPS_TOKENS))]
    if bad:
        raise ValueError(f"ids must be ints in 0 ... {len(LISTOPS_TOKENS) - 1}, got {bad[:5]}")
    return " ".join(LISTOPS_TOKENS[i] for i in ids if i != PAD_ID)


# A tree is a digit (int) or (operator, [children]).


def _apply(operator: str, values: list[int]) -> int:
    if operator == "[MIN":
        return min(values)
    if operator == "[MAX":
        return max(values)
    if operator == "[SM":
        return sum(values) % 10
    ordered = sorted(values)  # [MED: the median, rounded down (LRA: int(np.median(values)))
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) // 2


def _value(tree) -> int:
    if isinstance(tree, int):
        return tree
    operator, children = tree
    return _apply(operator, [_value(child) for child in children])


def _check_tree(tree, where: str = "tree") -> None:
    if isinstance(tree, bool) or not isinstance(tree, (int, tuple)):
        raise TypeError(f"{where} must be a digit (int) or a tuple (operator, [children]), got "
                        f"{type(tree).__name__}")
    if isinstance(tree, int):
        if not 0 <= tree <= 9:
            raise ValueError(f"{where} must be a digit 0 ... 9, got {tree}")
        return
    if len(tree) != 2 or tree[0] not in OPERATORS or not isinstance(tree[1], (list, tuple)):
        raise ValueError(f"{where} must be (operator, [children]) with operator in {OPERATORS}, "
                         f"got {tree!r:.80}")
    if len(tree[1]) == 0:
        raise ValueError(f"{where} must have at least one child, got {tree[0]} with none")
    for index, child in enumerate(tree[1]):
        _check_tree(child, f"{where}[1][{index}]")


def listops_value(tree) -> int:
    """The value of a tree (a digit, or ``(operator, [children])``), bottom up, e.g.
    ``listops_value(("[SM", [9, ("[MAX", [1, 7])])) == 6``."""
    _check_tree(tree)
    return _value(tree)


def _tokens(tree, out: list[int]) -> list[int]:
    if isinstance(tree, int):
        out.append(_ID[str(tree)])
        return out
    operator, children = tree
    out.append(_ID[operator])
    for child in children:
        _tokens(child, out)
    out.append(_ID[CLOSE])
    return out


class _TooLong(Exception):
    pass


def _draw(rng: random.Random, depth: int, max_depth: int, max_args: int, budget: list[int]):
    """One node at ``depth``; ``budget[0]`` counts the tokens still allowed (a tree that would
    pass ``max_len`` is abandoned early: it would be rejected anyway)."""
    if depth >= max_depth or rng.random() > VALUE_P:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooLong
        return rng.randrange(10)
    budget[0] -= 2  # the operator and its ]
    if budget[0] < 0:
        raise _TooLong
    n_args = rng.randint(2, max_args)
    children = [_draw(rng, depth + 1, max_depth, max_args, budget) for _ in range(n_args)]
    return rng.choice(OPERATORS), children


def _longest(max_depth: int, max_args: int) -> int:
    """The most tokens a tree of ``max_depth`` levels with ``max_args`` arguments can have."""
    length = 1  # a digit at max_depth
    for _ in range(max_depth - 1):
        length = 2 + max_args * length
    return length


def _check_task(n_examples, max_len, min_len, max_depth, max_args, seed):
    n_examples = check_positive_int(n_examples, "n_examples")
    max_len = check_positive_int(max_len, "max_len")
    if max_len < 4:
        raise ValueError(f"max_len must be >= 4 (the shortest expression, e.g. '[MAX 1 2 ]', "
                         f"has 4 tokens), got max_len={max_len}")
    min_len = check_positive_int(max_len // 4 if min_len is None else min_len, "min_len")
    max_depth = check_positive_int(max_depth, "max_depth")
    max_args = check_positive_int(max_args, "max_args")
    seed = check_non_negative_int(seed, "seed")
    if max_depth < 2:
        raise ValueError(f"max_depth must be >= 2 (the root must be able to be an operator), got "
                         f"max_depth={max_depth}")
    if max_args < 2:
        raise ValueError(f"max_args must be >= 2 (an operator takes 2 ... max_args arguments), "
                         f"got max_args={max_args}")
    if min_len > max_len:
        raise ValueError(f"min_len must be <= max_len={max_len}, got min_len={min_len}")
    longest = _longest(max_depth, max_args)
    if min_len > longest:
        raise ValueError(f"min_len must be <= {longest}, the longest expression of max_depth="
                         f"{max_depth} and max_args={max_args}, got min_len={min_len}")
    return n_examples, max_len, min_len, max_depth, max_args, seed


def listops_task(
    n_examples: int,
    max_len: int = 512,
    *,
    min_len: int | None = None,
    max_depth: int = 10,
    max_args: int = 10,
    seed: int = 0,
    max_attempts: int = 1000,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(tokens, mask, labels)``: ``tokens`` int64 ``(n_examples, max_len)``, each expression
    followed by padding (0); ``mask`` bool, the same shape, ``True`` on the real tokens (the
    course's key-padding convention); ``labels`` int64 ``(n_examples,)``, the value at the root
    (10 classes).

    Every expression has between ``min_len`` (default ``max_len // 4``, LRA's 500 / 2000) and
    ``max_len`` tokens, drawn as the module doc says (rejection sampling; deterministic given
    ``seed``). ``max_attempts`` draws per example on average are allowed before giving up with a
    ``RuntimeError`` (a length range the generator almost never produces).
    """
    n_examples, max_len, min_len, max_depth, max_args, seed = _check_task(
        n_examples, max_len, min_len, max_depth, max_args, seed)
    max_attempts = check_positive_int(max_attempts, "max_attempts")
    rng = random.Random(seed)
    tokens = torch.zeros(n_examples, max_len, dtype=torch.int64)
    labels = torch.zeros(n_examples, dtype=torch.int64)
    kept, attempts = 0, 0
    while kept < n_examples:
        attempts += 1
        if attempts > max_attempts * n_examples:
            raise RuntimeError(
                f"listops_task: {attempts - 1} draws gave only {kept} of {n_examples} expressions "
                f"with {min_len} ... {max_len} tokens (max_depth={max_depth}, max_args={max_args});"
                f" widen the range or raise max_attempts")
        try:
            tree = _draw(rng, 1, max_depth, max_args, [max_len])
        except _TooLong:
            continue
        row = _tokens(tree, [])
        if len(row) < min_len:
            continue
        tokens[kept, : len(row)] = torch.tensor(row)
        labels[kept] = _value(tree)
        kept += 1
    return tokens, tokens != PAD_ID, labels


def listops_class_shares(labels: torch.Tensor) -> torch.Tensor:
    """The share of each class 0-9 among ``labels`` (float ``(10,)``, sums to 1); its largest
    entry is the accuracy of always answering the most frequent class."""
    if not isinstance(labels, torch.Tensor) or labels.dtype != torch.int64 or labels.dim() != 1:
        raise TypeError(f"labels must be an int64 tensor (n,), got "
                        f"{getattr(labels, 'dtype', type(labels).__name__)} "
                        f"{tuple(getattr(labels, 'shape', ()))}")
    if labels.numel() == 0 or int(labels.min()) < 0 or int(labels.max()) > 9:
        raise ValueError(f"labels must be a non-empty tensor of classes 0 ... 9, got "
                         f"{labels.numel()} labels in {labels.min().item() if labels.numel() else '-'}"
                         f" ... {labels.max().item() if labels.numel() else '-'}")
    return torch.bincount(labels, minlength=10).double() / labels.numel()
