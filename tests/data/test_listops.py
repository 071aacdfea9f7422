"""Tests of ``lectures_lib.data.listops`` (ListOps as the Long Range Arena generates it).

The labels are recomputed by an evaluator written here from the module doc's words: a stack
machine over the decoded *string* (the generator evaluates its trees recursively), with the
median taken by the standard library. The layout (padding after the expression, the mask, the
brackets, the arity and depth limits, the length range) is checked row by row.
"""

import math
import random
import statistics

import numpy as np
import pytest
import torch

from lectures_lib.data import (
    LISTOPS_TOKENS,
    listops_class_shares,
    listops_decode,
    listops_encode,
    listops_task,
    listops_value,
    listops_vocab_size,
)

OPERATORS = {"[MIN": min, "[MAX": max, "[SM": lambda xs: sum(xs) % 10,
             "[MED": lambda xs: math.floor(statistics.median(xs))}


def evaluate(expression: str, max_args: int, max_depth: int) -> int:
    """The value of a space-separated expression, with a stack; asserts the grammar on the way."""
    stack: list[tuple[str, list[int]]] = []
    result = None
    for token in expression.split():
        assert result is None, "nothing follows the root's ]"
        if token in OPERATORS:
            stack.append((token, []))
            assert len(stack) < max_depth, "an operator deeper than max_depth - 1"
        elif token == "]":
            operator, arguments = stack.pop()
            assert 2 <= len(arguments) <= max_args, f"{operator} with {len(arguments)} arguments"
            value = OPERATORS[operator](arguments)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        else:
            digit = int(token)
            assert 0 <= digit <= 9 and stack, "a digit inside an operator"
            assert len(stack) <= max_depth - 1, "a digit deeper than max_depth"
            stack[-1][1].append(digit)
    assert result is not None and not stack, "the brackets close"
    return result


@pytest.mark.parametrize("max_len, min_len, max_depth, max_args", [
    (512, 128, 10, 10), (64, 4, 10, 10), (100, 20, 4, 5), (40, 6, 3, 2), (256, None, 10, 10)])
def test_labels_follow_the_definition(max_len, min_len, max_depth, max_args):
    tokens, mask, labels = listops_task(300, max_len, min_len=min_len, max_depth=max_depth,
                                        max_args=max_args, seed=5)
    low = max_len // 4 if min_len is None else min_len
    assert tokens.shape == mask.shape == (300, max_len) and labels.shape == (300,)
    assert tokens.dtype == labels.dtype == torch.int64 and mask.dtype == torch.bool
    assert int(tokens.max()) < listops_vocab_size() == len(LISTOPS_TOKENS)
    lengths = mask.sum(1)
    assert bool(((lengths >= low) & (lengths <= max_len)).all()), "lengths within the range"
    positions = torch.arange(max_len)
    assert torch.equal(mask, positions < lengths[:, None]), "the real tokens first, then padding"
    assert torch.equal(mask, tokens != 0), "the mask is True exactly on the real tokens"
    expected = [evaluate(listops_decode(row), max_args, max_depth) for row in tokens]
    assert labels.tolist() == expected


def test_the_root_is_an_operator_and_all_ranges_are_met():
    tokens, mask, labels = listops_task(2000, 128, min_len=16, seed=0)
    assert set(tokens[:, 0].tolist()) == {listops_encode(op)[0] for op in ("[MIN", "[MAX", "[MED", "[SM")}
    lengths = mask.sum(1)
    assert int(lengths.min()) < 32 and int(lengths.max()) > 96, "short and long expressions both drawn"
    assert set(labels.tolist()) == set(range(10)), "every class occurs"


def test_deterministic_given_the_seed():
    a = listops_task(50, 128, seed=3)
    b = listops_task(50, 128, seed=3)
    c = listops_task(50, 128, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])
    # the first rows do not depend on how many are asked for
    assert torch.equal(listops_task(10, 128, seed=3)[0], a[0][:10])


def test_median_rounds_down_as_lra():
    # LRA: int(np.median(values)): the mean of the two middle values, truncated.
    rng = random.Random(0)
    for _ in range(500):
        values = [rng.randrange(10) for _ in range(rng.randint(2, 10))]
        assert listops_value(("[MED", values)) == int(np.median(values))
    assert listops_value(("[MED", [1, 2])) == 1 and listops_value(("[MED", [3, 9, 0])) == 3
    assert listops_value(("[SM", [9, 8, 7])) == 4
    nested = ("[MAX", [4, 3, ("[MIN", [2, 3]), 1, 0, ("[MED", [1, 5, 8, 9, 2])])
    assert listops_value(nested) == 5 == evaluate("[MAX 4 3 [MIN 2 3 ] 1 0 [MED 1 5 8 9 2 ] ]", 10, 10)


def test_encode_and_decode_are_inverse():
    expression = "[SM 3 [MAX 9 0 ] [MED 1 2 3 4 ] ]"
    ids = listops_encode(expression)
    assert listops_decode(ids) == expression
    assert listops_decode(torch.tensor(ids + [0, 0])) == expression, "padding dropped"
    tokens, _, _ = listops_task(20, 64, seed=1)
    for row in tokens:
        real = [t for t in row.tolist() if t]
        assert listops_encode(listops_decode(row)) == real


def test_classes_are_not_balanced_and_the_shares_say_so():
    _, _, labels = listops_task(3000, 256, min_len=64, seed=2)
    shares = listops_class_shares(labels)
    assert shares.shape == (10,) and abs(float(shares.sum()) - 1) < 1e-12
    counts = torch.bincount(labels, minlength=10).double()
    torch.testing.assert_close(shares, counts / counts.sum())
    # Pearson's chi-square against uniform classes: 27.88 is its 99.9 % point with 9 degrees of
    # freedom, so uniform labels would pass this line once in a thousand runs.
    expected = len(labels) / 10
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square > 27.88, f"the module doc says the classes are unbalanced (chi2 {chi_square:.1f})"
    assert int(shares.argmax()) in (0, 9), "MIN's 0 or MAX's 9 is the most frequent class"

