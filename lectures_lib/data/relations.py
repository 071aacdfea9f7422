r"""Section 02's toy task: every position needs two *kinds* of relation at once.

**The successor-and-neighbour task.** A sequence holds each of ``num_letters`` letters exactly
once, in a random order, and every letter carries a random digit: ``C3 A1 D0 B2`` (token id
``letter * num_digits + digit``). Position ``i`` has two labels, two digits to fetch:

* ``labels[..., i, 0]``: the digit of the **successor**, the token whose letter comes next in the
  alphabet after the letter at ``i`` (cyclic: after the last letter comes ``A``);
* ``labels[..., i, 1]``: the digit of the **previous** position ``i - 1`` (cyclic: before position
  0 comes the last one).

In ``C3 A1 D0 B2`` the labels of ``A1`` are ``(2, 3)``: the digit of ``B`` and the digit of its left
neighbour ``C``. Two different kinds of relevance (相关性有很多种不同的形式), as the lecture
motivates multi-head self-attention: the successor is a relation of *content* (where it sits does
not matter), the previous token a relation of *position* (what it is does not matter).

Why one head is not enough (for a linear readout, as in ``02_multi_head_attention.ipynb``): a
head's softmax gives query ``i`` *one* distribution over the keys; to fetch two digits it splits
its mass, and its output is the mixture :math:`\beta v_a + (1 - \beta) v_b` of two values made with
the *same* :math:`W^v`. Change only the two digits (``x`` at the successor, ``y`` at the previous
position): the outputs for ``(x, x), (x, y), (y, x), (y, y)`` lie in this order on one line when
:math:`\beta > 1/2`. A linear classifier's decision regions are convex, so the "previous digit"
labels ``x, y, x, y`` along that line cannot all be right (for :math:`\beta < 1/2` the successor
digit suffers instead). One head can only escape by letting :math:`\beta` depend on the digits
it fetches, which helps little. Two heads of half the width each fetch one digit into their own
features, and the concatenation keeps them apart. The notebook trains both with the same
``d_model`` and asserts the difference.

The targets of both relations are returned too, so a notebook can check what each head attends to.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..utils import check_positive_int, check_tensor

__all__ = [
    "TwoRelationsData",
    "make_two_relations",
    "two_relations_vocab_size",
    "format_two_relations",
]


class TwoRelationsData(NamedTuple):
    """The arrays of the successor-and-neighbour task, ``(num_sequences, num_letters)`` but labels.

    * ``tokens``: ``letter * num_digits + digit``;
    * ``labels``: ``(num_sequences, num_letters, 2)``: ``digit[successor]`` and
      ``digit[previous]``, two classes in ``0 .. num_digits - 1`` per position;
    * ``successor``: position of the next letter of the alphabet (the content relation);
    * ``previous``: position ``i - 1`` modulo the length (the positional relation);
    * ``letters``, ``digits``: the two parts of each token.
    """

    tokens: torch.Tensor
    labels: torch.Tensor
    successor: torch.Tensor
    previous: torch.Tensor
    letters: torch.Tensor
    digits: torch.Tensor


def two_relations_vocab_size(num_letters: int, num_digits: int) -> int:
    """Number of distinct tokens: one per (letter, digit) pair."""
    return check_positive_int(num_letters, "num_letters") * check_positive_int(
        num_digits, "num_digits"
    )


def make_two_relations(
    num_sequences: int, num_letters: int = 8, num_digits: int = 4, seed: int = 0
) -> TwoRelationsData:
    """Generate ``num_sequences`` sequences of the successor-and-neighbour task (see the module).

    Every sequence has length ``num_letters`` (each letter once, random order, random digits).
    ``num_letters >= 3`` so that the two relations are not always the same position.
    Deterministic: the same arguments give the same tensors.
    """
    num_sequences = check_positive_int(num_sequences, "num_sequences")
    num_letters = check_positive_int(num_letters, "num_letters")
    num_digits = check_positive_int(num_digits, "num_digits")
    if num_letters < 3:
        raise ValueError(
            f"num_letters must be >= 3 (with 2 letters the successor is always the neighbour), "
            f"got {num_letters}"
        )
    if num_digits < 2:
        raise ValueError(f"num_digits must be >= 2 (one digit carries nothing), got {num_digits}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    generator = torch.Generator().manual_seed(seed)
    # Each row is a random permutation of the letters: letters[b, i] = letter at position i.
    letters = torch.argsort(torch.rand(num_sequences, num_letters, generator=generator), dim=1)
    digits = torch.randint(num_digits, (num_sequences, num_letters), generator=generator)
    tokens = letters * num_digits + digits  # (num_sequences, num_letters)

    position_of_letter = torch.argsort(letters, dim=1)  # inverse permutation
    next_letter = (letters + 1) % num_letters  # (num_sequences, num_letters)
    successor = torch.gather(position_of_letter, 1, next_letter)  # where the next letter sits
    positions = torch.arange(num_letters)
    previous = ((positions - 1) % num_letters).expand(num_sequences, -1).clone()

    successor_digit = torch.gather(digits, 1, successor)
    previous_digit = torch.gather(digits, 1, previous)
    labels = torch.stack([successor_digit, previous_digit], dim=-1)  # (num_sequences, letters, 2)
    return TwoRelationsData(tokens, labels, successor, previous, letters, digits)


def format_two_relations(tokens: torch.Tensor, num_digits: int) -> list[str]:
    """Readable names of one sequence's tokens, e.g. ``["C3", "A1", "D0", "B2"]``."""
    check_tensor(tokens, "tokens", ndim=1, dtype="integer")
    num_digits = check_positive_int(num_digits, "num_digits")
    if tokens.numel() and int(tokens.min()) < 0:
        raise ValueError(f"tokens must be ids >= 0 (letter * num_digits + digit), got {tokens.tolist()}")
    names = []
    for token in tokens.tolist():
        letter, digit = divmod(token, num_digits)
        letter_name = chr(ord("A") + letter) if letter < 26 else f"L{letter}:"
        names.append(f"{letter_name}{digit}")
    return names
