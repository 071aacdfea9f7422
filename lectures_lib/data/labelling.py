r"""Section 01's toy task: a label per token that depends on a far-away token.

**The dictionary-lookup labelling task** (a form of *associative recall*). Each sequence is a
message written with ``n_symbols`` letters ``a, b, c, ...``. Somewhere in it, at random
positions, stands one *definition* token for every letter, such as ``b=3``: in this sequence,
letter ``b`` stands for the number 3. The label of every other letter is the number its
definition gives it:

.. math::
    y_i = \text{value}(x_i) \quad\text{where the token } x_i{=}\text{value}(x_i)
    \text{ occurs somewhere in the same sequence.}

So the same letter means something different in every sequence, and what it means is decided by
a token that can sit anywhere: the lecture's "a label per vector" (词性标注, where the tag of a
word depends on its context), reduced to its core.

Why this task (used in ``01_self_attention.ipynb``):

* A per-token network sees only ``x_i``. The values are drawn uniformly and independently, so
  :math:`y_i` given :math:`x_i` is uniform: no per-token classifier beats chance ``1 / n_values``.
* Only letters **more than** ``min_distance`` positions away from their own definition carry a
  label (the others, the definitions and the padding get ``LOOKUP_IGNORE_INDEX``). A window
  network of width ``2 * min_distance + 1`` or less therefore never sees the definition a
  labelled letter needs, and everything it does see is independent of that definition: it
  stays at chance too.
* Self-attention compares every pair of tokens, whatever the length: the query of letter ``b``
  can match the key of the token ``b=3`` (relevance, 相关性) and copy its value. One attention
  layer solves the task exactly.

Each token is given both as an id (``tokens``) and as the vector a network reads (``features``,
the lecture's "input is a set of vectors"): ``[one-hot letter | one-hot value | is_definition |
is_padding]``, of size :func:`lookup_num_features`. A letter sets its letter part only, a
definition its letter and value parts and ``is_definition``, padding only ``is_padding``.
Token ids: letters ``0 .. n_symbols - 1``; definition ``letter=value`` is
``n_symbols + letter * n_values + value``; padding is :func:`lookup_pad_id` (the last id).
Sequences have random lengths in ``[min_len, max_len]`` and are padded at the end.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..utils import check_non_negative_int, check_positive_int, check_tensor

__all__ = [
    "LOOKUP_IGNORE_INDEX",
    "LookupData",
    "lookup_labelling",
    "lookup_labelling_splits",
    "lookup_features",
    "lookup_num_features",
    "lookup_vocab_size",
    "lookup_pad_id",
    "lookup_token_names",
]

LOOKUP_IGNORE_INDEX = -100
"""Label of padding, of definitions and of letters near their definition: not scored. It is the
default ``ignore_index`` of ``F.cross_entropy``; pass it to ``fit(..., ignore_index=...)``."""


class LookupData(NamedTuple):
    """A set of sequences of the dictionary-lookup task.

    Attributes:
        tokens: ``(n, max_len)`` long token ids, padded at the end with :func:`lookup_pad_id`.
        features: ``(n, max_len, lookup_num_features(...))`` float32 token vectors.
        labels: ``(n, max_len)`` long values in ``[0, n_values)``, or ``LOOKUP_IGNORE_INDEX``.
        lengths: ``(n,)`` long, number of real tokens of each sequence.
        definition_positions: ``(n, n_symbols)`` long, where letter ``c``'s definition stands.
        values: ``(n, n_symbols)`` long, the value letter ``c`` stands for in each sequence.
    """

    tokens: torch.Tensor
    features: torch.Tensor
    labels: torch.Tensor
    lengths: torch.Tensor
    definition_positions: torch.Tensor
    values: torch.Tensor


def lookup_vocab_size(n_symbols: int, n_values: int) -> int:
    """Number of token ids: letters, one definition per (letter, value) pair, one padding id."""
    n_symbols = check_positive_int(n_symbols, "n_symbols")
    n_values = check_positive_int(n_values, "n_values")
    return n_symbols + n_symbols * n_values + 1


def lookup_pad_id(n_symbols: int, n_values: int) -> int:
    """The padding token id (the last id of the vocabulary)."""
    return lookup_vocab_size(n_symbols, n_values) - 1


def lookup_num_features(n_symbols: int, n_values: int) -> int:
    """Size of a token vector: ``n_symbols + n_values + 2`` (two flags)."""
    n_symbols = check_positive_int(n_symbols, "n_symbols")
    n_values = check_positive_int(n_values, "n_values")
    return n_symbols + n_values + 2


def _check_tokens(tokens: object, n_symbols: int, n_values: int) -> torch.Tensor:
    tokens = check_tensor(tokens, "tokens", dtype="integer")
    pad = lookup_pad_id(n_symbols, n_values)
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) > pad):
        raise ValueError(
            f"token ids must lie in [0, {pad}] for n_symbols={n_symbols}, n_values={n_values}, "
            f"got ids from {int(tokens.min())} to {int(tokens.max())}"
        )
    return tokens


def lookup_features(tokens: torch.Tensor, n_symbols: int, n_values: int) -> torch.Tensor:
    """The vector of every token: ``(...)`` long ids -> ``(..., n_symbols + n_values + 2)`` float32.

    ``[one-hot letter | one-hot value | is_definition | is_padding]`` (see the module doc).
    """
    tokens = _check_tokens(tokens, n_symbols, n_values)
    pad = lookup_pad_id(n_symbols, n_values)
    is_padding = tokens == pad
    is_definition = (tokens >= n_symbols) & ~is_padding
    offset = (tokens - n_symbols).clamp(min=0)  # definitions: letter * n_values + value
    letter = torch.where(is_definition, offset // n_values, tokens).clamp(max=n_symbols - 1)
    value = offset % n_values
    letter_part = F.one_hot(letter, n_symbols) * (~is_padding)[..., None]  # (..., n_symbols)
    value_part = F.one_hot(value, n_values) * is_definition[..., None]  # (..., n_values)
    flags = torch.stack([is_definition, is_padding], dim=-1)  # (..., 2)
    return torch.cat([letter_part, value_part, flags], dim=-1).float()


def lookup_token_names(
    tokens: torch.Tensor | list[int], n_symbols: int, n_values: int
) -> list[str]:
    """Readable names for plot axes: letters ``a, b, ...``, definitions ``b=3``, padding ``_``."""
    tokens = _check_tokens(torch.as_tensor(tokens), n_symbols, n_values)

    def letter_name(letter: int) -> str:
        return chr(ord("a") + letter) if n_symbols <= 26 else f"x{letter}"

    names = []
    for token in tokens.reshape(-1).tolist():
        if token < n_symbols:
            names.append(letter_name(token))
        elif token < lookup_pad_id(n_symbols, n_values):
            letter, value = divmod(token - n_symbols, n_values)
            names.append(f"{letter_name(letter)}={value}")
        else:
            names.append("_")
    return names


def _check_sizes(n_symbols: int, n_values: int, min_len: int, max_len: int,
                 min_distance: int) -> None:
    check_positive_int(n_symbols, "n_symbols")
    check_positive_int(n_values, "n_values")
    check_positive_int(min_len, "min_len")
    check_positive_int(max_len, "max_len")
    check_non_negative_int(min_distance, "min_distance")
    if n_values < 2:
        raise ValueError(f"n_values must be >= 2 (with one value there is nothing to learn), "
                         f"got {n_values}")
    if min_len > max_len:
        raise ValueError(f"min_len must be <= max_len, got min_len={min_len}, max_len={max_len}")
    if min_distance >= max_len - 1:
        raise ValueError(
            f"min_distance={min_distance} leaves nothing to label: a letter is labelled only "
            f"when it stands more than min_distance positions from its definition, and in "
            f"sequences of at most max_len={max_len} tokens no two positions are more than "
            f"{max_len - 1} apart; use min_distance < {max_len - 1}"
        )
    if min_len <= n_symbols:
        raise ValueError(
            f"min_len={min_len} leaves no room for letters: every sequence holds one definition "
            f"per letter, so min_len must be > n_symbols={n_symbols}"
        )


def lookup_labelling(
    n_sequences: int,
    *,
    n_symbols: int = 4,
    n_values: int = 4,
    min_len: int = 12,
    max_len: int = 24,
    min_distance: int = 3,
    seed: int = 0,
) -> LookupData:
    """Generate ``n_sequences`` examples of the dictionary-lookup task (see the module doc).

    Args:
        n_sequences: number of sequences.
        n_symbols: number of letters; each sequence holds one definition per letter.
        n_values: number of values a letter can stand for; chance accuracy is ``1 / n_values``.
        min_len, max_len: lengths are uniform in ``[min_len, max_len]`` (definitions included).
        min_distance: a letter at distance ``<= min_distance`` from its own definition is not
            labelled, so no window of width ``<= 2 * min_distance + 1`` sees the definition.
        seed: the same seed gives the same data.

    Returns:
        a :class:`LookupData`. Labels are balanced in expectation: each value has probability
        ``1 / n_values``. Roughly half of the real tokens are labelled with the defaults.
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    _check_sizes(n_symbols, n_values, min_len, max_len, min_distance)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    generator = torch.Generator().manual_seed(seed)

    lengths = torch.randint(min_len, max_len + 1, (n_sequences,), generator=generator)  # (n,)
    values = torch.randint(0, n_values, (n_sequences, n_symbols), generator=generator)
    letters = torch.randint(0, n_symbols, (n_sequences, max_len), generator=generator)
    positions = torch.arange(max_len)[None, :]  # (1, max_len)
    is_real = positions < lengths[:, None]  # (n, max_len)

    # Definition positions: the first n_symbols entries of a random order of the real positions
    # (padding positions get a sort key of 2 > any uniform draw, so they come last).
    sort_keys = torch.rand(n_sequences, max_len, generator=generator).masked_fill(~is_real, 2.0)
    definition_positions = sort_keys.argsort(dim=1)[:, :n_symbols]  # (n, n_symbols)
    definitions = n_symbols + torch.arange(n_symbols) * n_values + values  # (n, n_symbols)

    tokens = letters.scatter(1, definition_positions, definitions)  # (n, max_len)
    tokens = tokens.masked_fill(~is_real, lookup_pad_id(n_symbols, n_values))
    is_definition = torch.zeros_like(is_real).scatter(1, definition_positions, True)

    own_definition = definition_positions.gather(1, letters)  # (n, max_len): where x_i is defined
    far_from_definition = (positions - own_definition).abs() > min_distance
    labelled = is_real & ~is_definition & far_from_definition
    labels = values.gather(1, letters).masked_fill(~labelled, LOOKUP_IGNORE_INDEX)  # (n, max_len)
    features = lookup_features(tokens, n_symbols, n_values)
    return LookupData(tokens, features, labels, lengths, definition_positions, values)


def lookup_labelling_splits(
    n_train: int,
    n_test: int,
    *,
    n_symbols: int = 4,
    n_values: int = 4,
    min_len: int = 12,
    max_len: int = 24,
    min_distance: int = 3,
    seed: int = 0,
) -> tuple[LookupData, LookupData]:
    """A training set and a held-out test set that share no sequence.

    Both come from one call of :func:`lookup_labelling` (same sizes and seed); a sequence that
    occurs twice is kept only once, so no test sequence is ever seen in training.
    """
    n_train = check_positive_int(n_train, "n_train")
    n_test = check_positive_int(n_test, "n_test")
    wanted = n_train + n_test
    data = lookup_labelling(
        wanted + wanted // 10 + 10, n_symbols=n_symbols, n_values=n_values, min_len=min_len,
        max_len=max_len, min_distance=min_distance, seed=seed,
    )
    # Keep the first occurrence of every distinct sequence, in generation order.
    _, inverse = torch.unique(data.tokens, dim=0, return_inverse=True)  # (n,)
    n_generated = len(inverse)
    first = torch.full((int(inverse.max()) + 1,), n_generated).scatter_reduce(
        0, inverse, torch.arange(n_generated), reduce="amin"
    )  # (n_distinct,) index of the first copy of each distinct sequence
    keep = first.sort().values
    if len(keep) < wanted:
        raise ValueError(
            f"only {len(keep)} distinct sequences among {n_generated} generated, fewer than "
            f"n_train + n_test = {wanted}: use longer sequences or more symbols"
        )

    def take(index: torch.Tensor) -> LookupData:
        return LookupData(*(t[index] for t in data))

    return take(keep[:n_train]), take(keep[n_train:wanted])
