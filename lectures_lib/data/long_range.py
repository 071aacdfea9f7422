"""A long-range toy task for section 06 (part 2): retrieve the value paired with a key far away.

The first half of every sequence holds ``n_keys`` *pair* tokens, one per key, each carrying a key
and a random value, at random positions among filler tokens; the second half is filler, and the
last position holds a *query* token naming one key. The label is the value paired with that key.
To answer, the query must find, by content, the one pair token whose key matches its own, at least
``seq_len / 2`` positions away: a local window cannot see it, and an attention pattern that does
not depend on content (Random Synthesizer) cannot pick it out of the other pairs. The Long Range
Arena (Tay et al. 2021) idea at CPU size. Used in ``07_efficient_attention.ipynb`` and
``benchmarks/long_range.py``.
"""

from __future__ import annotations

import torch

from ..utils import check_non_negative_int, check_positive_int

__all__ = ["retrieval_vocab_size", "retrieval_task"]

N_SPECIAL = 1  # token 0 is reserved for padding (the task itself never pads)


def retrieval_vocab_size(n_keys: int = 4, n_values: int = 4, n_filler: int = 8) -> int:
    """Token ids: 0 pad, ``1 ... n_filler`` filler, then ``n_keys`` query tokens, then the
    ``n_keys * n_values`` pair tokens (``key * n_values + value`` after the query tokens)."""
    n_keys = check_positive_int(n_keys, "n_keys")
    n_values = check_positive_int(n_values, "n_values")
    n_filler = check_positive_int(n_filler, "n_filler")
    return N_SPECIAL + n_filler + n_keys + n_keys * n_values


def retrieval_task(
    n_examples: int,
    seq_len: int,
    *,
    n_keys: int = 4,
    n_values: int = 4,
    n_filler: int = 8,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, labels)``: ``tokens`` int64 ``(n_examples, seq_len)``, ``labels`` int64
    ``(n_examples,)`` in ``0 ... n_values - 1`` (chance accuracy ``1 / n_values``).

    In every row: ``n_keys`` pair tokens (one per key, each with a random value) at distinct random
    positions ``< seq_len // 2``; filler tokens ``1 ... n_filler`` everywhere else except the last
    position, which is the query token ``1 + n_filler + key`` for a random key; the label is the
    value paired with that key. Deterministic given ``seed``.
    """
    n_examples = check_positive_int(n_examples, "n_examples")
    seq_len = check_positive_int(seq_len, "seq_len")
    retrieval_vocab_size(n_keys, n_values, n_filler)  # checks the three sizes
    if seq_len // 2 < n_keys:
        raise ValueError(
            f"seq_len must be >= 2 * n_keys (the {n_keys} pairs sit in the first half), got "
            f"seq_len={seq_len}"
        )
    generator = torch.Generator().manual_seed(check_non_negative_int(seed, "seed"))
    tokens = torch.randint(N_SPECIAL, N_SPECIAL + n_filler, (n_examples, seq_len), generator=generator)
    values = torch.randint(0, n_values, (n_examples, n_keys), generator=generator)  # per key
    # n_keys distinct positions in the first half of every row
    positions = torch.rand(n_examples, seq_len // 2, generator=generator).argsort(-1)[:, :n_keys]
    first_pair = N_SPECIAL + n_filler + n_keys
    pair_tokens = first_pair + torch.arange(n_keys) * n_values + values  # (n_examples, n_keys)
    tokens.scatter_(1, positions, pair_tokens)
    asked = torch.randint(0, n_keys, (n_examples,), generator=generator)
    tokens[:, -1] = N_SPECIAL + n_filler + asked  # the query token names the key
    labels = values.gather(1, asked[:, None])[:, 0]  # the value paired with the asked key
    return tokens, labels
