"""The grouped-attention engine of the clustering variants (``lectures_lib/variants/_groups.py``):
attention inside arbitrary, overlapping groups, merged per query, equals dense attention under
"some group holds both", whatever the blocks it is computed in."""

from __future__ import annotations

import pytest
import torch

from lectures_lib.attention import scaled_dot_product_attention
from lectures_lib.variants._groups import Groups, attend_in_groups, rows


def random_groups(n_batch, n_q, n_k, count, a, b, generator):
    """``count`` groups per batch entry of ``a`` query and ``b`` key slots, drawn at random
    (a position may sit in several groups, or in none; a slot may be empty)."""
    queries = torch.randint(0, n_q + 1, (n_batch * count, a), generator=generator)  # n_q = empty
    keys = torch.randint(0, n_k + 1, (n_batch * count, b), generator=generator)  # n_k = empty
    # No position twice in one group (a group lists positions): repeats become empty slots.
    for table, empty in ((queries, n_q), (keys, n_k)):
        sorted_table, _ = table.sort(dim=-1)
        repeated = torch.zeros_like(sorted_table, dtype=torch.bool)
        repeated[:, 1:] = sorted_table[:, 1:] == sorted_table[:, :-1]
        table.copy_(sorted_table.masked_fill(repeated, empty))
    batch = torch.arange(n_batch).repeat_interleave(count)  # (G,)
    return Groups(batch, queries, keys)


def meetings(groups, n_batch, n_q, n_k):
    """m_ij: in how many groups query i and key j meet, ``(B, n_q + 1, n_k + 1)`` (dense: a check)."""
    counts = torch.zeros(n_batch, n_q + 1, n_k + 1)
    for g in range(groups.batch.shape[0]):
        b = groups.batch[g]
        counts[b, groups.queries[g][:, None], groups.keys[g][None, :]] += 1
    return counts


@pytest.mark.parametrize("seed, n_q, n_k, count, a, b", [
    (0, 13, 13, 6, 4, 5), (1, 9, 17, 10, 3, 6), (2, 20, 20, 3, 8, 8), (3, 5, 5, 1, 5, 5),
])
def test_groups_merged_equal_dense_attention_under_their_union(seed, n_q, n_k, count, a, b):
    generator = torch.Generator().manual_seed(seed)
    n_batch = 2
    q = torch.randn(n_batch, n_q, 6, generator=generator, dtype=torch.float64)
    k = torch.randn(n_batch, n_k, 6, generator=generator, dtype=torch.float64)
    v = torch.randn(n_batch, n_k, 3, generator=generator, dtype=torch.float64)
    key_mask = torch.rand(n_batch, n_k, generator=generator) > 0.25
    groups = random_groups(n_batch, n_q, n_k, count, a, b, generator)
    met = meetings(groups, n_batch, n_q, n_k)  # (B, n_q + 1, n_k + 1)

    def lower_by_meetings(block, part):  # (g, a, b): each cell counted once
        m = rows(met, part.queries, part.batch)  # (g, a, n_k + 1)
        m = m.gather(-1, part.keys[:, None, :].expand(-1, m.shape[1], -1))  # (g, a, b)
        return block - torch.log(m.clamp(min=1))

    kept = (met[:, :n_q, :n_k] > 0) & key_mask[:, None, :]  # (B, n_q, n_k)
    expected_out, expected_weights = scaled_dot_product_attention(q, k, v, kept)
    for cells in (None, 1, 2 * a * b, 10**6):  # the blocks do not change the result
        out, weights = attend_in_groups(q, k, v, groups, key_mask=key_mask,
                                        scores=lower_by_meetings, cells=cells, need_weights=True)
        torch.testing.assert_close(out, expected_out)
        torch.testing.assert_close(weights, expected_weights)
    assert bool((out[~kept.any(-1)] == 0).all()), "a query that meets no key gets zeros"


def test_without_the_count_a_cell_met_twice_would_weigh_twice():
    """The hook is what makes the merge exact: the same groups without lowering by log m_ij
    differ from dense attention (a cell met in two groups counts twice)."""
    q, k, v = (torch.randn(1, 4, 2, dtype=torch.float64) for _ in range(3))
    twice = Groups(torch.tensor([0, 0]), torch.tensor([[0, 1], [0, 2]]), torch.tensor([[0, 1], [0, 3]]))
    kept = torch.zeros(1, 4, 4, dtype=torch.bool)
    kept[0, 0, [0, 1, 3]] = kept[0, 1, [0, 1]] = kept[0, 2, [0, 3]] = True
    expected, _ = scaled_dot_product_attention(q, k, v, kept)
    plain = attend_in_groups(q, k, v, twice)
    assert not torch.allclose(plain[0, 0], expected[0, 0]), "query 0 meets key 0 in both groups"
    torch.testing.assert_close(plain[0, 1:3], expected[0, 1:3])  # each met once
