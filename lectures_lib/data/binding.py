r"""A long-range task that needs content (section 07, part 7): bind a value to its key.

Why a new task: in :func:`~lectures_lib.data.retrieval_task` the answer is in the *bag* of tokens
(each key occurs once, in one pair token), so a content-blind model that averages every position
solves it given enough training (``07_efficient_attention.ipynb`` measures this). Here the bag is
the same for every example, so no function of it can beat chance.

Every sequence of length ``seq_len`` holds, for each of the ``n_pairs`` keys,

* one **true** pair token ``(key, value)`` at a random position in the *first* half,
* ``n_values - 1`` **distractor** pair tokens ``(key, v)``, one for every other value ``v``, at
  random positions in the *second* half (before the last position),

filler tokens everywhere else, and at the last position a *query* token naming one key. The label
is the value of that key's true pair. So every pair token ``(key, v)`` occurs exactly once in every
sequence: the multiset of tokens (a bag of words, a uniform average of the token embeddings) does
not depend on the label, and a model that only sees it is at chance ``1 / n_values`` *by
construction*. To answer, the query must find the pair token whose key matches its own (content)
and that sits in the first half (position): one layer of full attention can do both. A fixed,
input-independent mixing of positions (Random Synthesizer, Linformer) can keep the first half and
drop the second, but then holds the ``n_pairs`` true pairs superposed, and their share of the mix
falls like ``n_pairs / seq_len``.
"""

from __future__ import annotations

import torch

from ..utils import check_non_negative_int, check_positive_int

__all__ = ["binding_vocab_size", "binding_task", "binding_tokens"]

N_SPECIAL = 1  # token 0 is reserved for padding (the task itself never pads)


def _check_sizes(n_pairs: object, n_values: object, n_filler: object) -> tuple[int, int, int]:
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    n_values = check_positive_int(n_values, "n_values")
    n_filler = check_positive_int(n_filler, "n_filler")
    if n_values < 2:
        raise ValueError(f"n_values must be >= 2 (one value is no question), got n_values={n_values}")
    return n_pairs, n_values, n_filler


def binding_tokens(n_pairs: int = 4, n_values: int = 4, n_filler: int = 8) -> dict[str, range]:
    """The token ids of each kind: ``filler``, ``query`` (one per key), ``pair`` (the pair token
    of key ``k`` and value ``v`` is ``pair[k * n_values + v]``); 0 is padding."""
    n_pairs, n_values, n_filler = _check_sizes(n_pairs, n_values, n_filler)
    first_query = N_SPECIAL + n_filler
    first_pair = first_query + n_pairs
    return {
        "filler": range(N_SPECIAL, first_query),
        "query": range(first_query, first_pair),
        "pair": range(first_pair, first_pair + n_pairs * n_values),
    }


def binding_vocab_size(n_pairs: int = 4, n_values: int = 4, n_filler: int = 8) -> int:
    """``1 + n_filler + n_pairs + n_pairs * n_values``: padding, filler, query and pair tokens."""
    return binding_tokens(n_pairs, n_values, n_filler)["pair"].stop


def binding_task(
    n_examples: int,
    seq_len: int,
    *,
    n_pairs: int = 4,
    n_values: int = 4,
    n_filler: int = 8,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, labels)``: ``tokens`` int64 ``(n_examples, seq_len)``, ``labels`` int64
    ``(n_examples,)`` in ``0 ... n_values - 1`` (chance ``1 / n_values``); the answer is read at
    the last position (the query). See the module docstring. Deterministic given ``seed``.

    Needs ``seq_len // 2 >= n_pairs`` (the true pairs) and
    ``seq_len - seq_len // 2 - 1 >= n_pairs * (n_values - 1)`` (the distractors).
    """
    n_examples = check_positive_int(n_examples, "n_examples")
    seq_len = check_positive_int(seq_len, "seq_len")
    n_pairs, n_values, n_filler = _check_sizes(n_pairs, n_values, n_filler)
    seed = check_non_negative_int(seed, "seed")
    half = seq_len // 2
    n_distractors = n_pairs * (n_values - 1)
    if half < n_pairs or seq_len - half - 1 < n_distractors:
        need = max(2 * n_pairs, 2 * (n_distractors + 1))
        raise ValueError(
            f"seq_len must hold {n_pairs} true pairs in the first half and {n_distractors} "
            f"distractors in the second (before the query): seq_len >= {need} for n_pairs="
            f"{n_pairs}, n_values={n_values}, got seq_len={seq_len}"
        )
    ids = binding_tokens(n_pairs, n_values, n_filler)
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(ids["filler"].start, ids["filler"].stop, (n_examples, seq_len),
                           generator=generator)
    values = torch.randint(0, n_values, (n_examples, n_pairs), generator=generator)  # true value per key
    pair_ids = ids["pair"].start + torch.arange(n_pairs * n_values).view(n_pairs, n_values)  # (key, v)
    true_pairs = pair_ids.gather(1, values.T).T  # (n_examples, n_pairs)
    # the other n_values - 1 values of each key: all values, minus the true one
    is_other = torch.arange(n_values) != values[..., None]  # (n_examples, n_pairs, n_values)
    distractors = pair_ids.expand(n_examples, -1, -1)[is_other].view(n_examples, n_distractors)
    first = torch.rand(n_examples, half, generator=generator).argsort(-1)[:, :n_pairs]
    second = half + torch.rand(n_examples, seq_len - half - 1, generator=generator).argsort(-1)
    tokens.scatter_(1, first, true_pairs)
    tokens.scatter_(1, second[:, :n_distractors], distractors)
    asked = torch.randint(0, n_pairs, (n_examples,), generator=generator)
    tokens[:, -1] = ids["query"].start + asked
    labels = values.gather(1, asked[:, None])[:, 0]
    return tokens, labels
