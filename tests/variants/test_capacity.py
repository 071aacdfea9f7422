"""Capacity, not optimisation: what a variant's construction allows, computed from the module.

Three analyses behind issue 31's "each variant at chance has its reason shown":

* **Reformer's shared QK.** With keys :math:`k_j = q_j / \\lVert q_j \\rVert`, Cauchy-Schwarz
  gives :math:`q_i \\cdot k_j \\le \\lVert q_i \\rVert`, with equality for every key whose query is
  parallel to :math:`q_i`: a token's other occurrences score at least as high as any other key,
  so with :math:`r` occurrences no other key gets more than :math:`1 / r` of the weight (its own
  cell is dropped by Reformer's self rule). On 06's lookup (each letter occurs many times) that
  caps the weight on the definition; ``benchmarks/reformer_lookup.py`` trains it (shared-QK *full*
  attention trains as poorly as Reformer's chunks; LSH with separate keys solves it).
* **Reformer's chunks and the query at the end.** Sorted by (bucket, position), the binding
  task's query (position N - 1) is the last of its bucket and reads its chunk and the previous one:
  of a bucket larger than two chunks it never sees the earliest members (the first half).
* **The information path on the binding task** (``lectures_lib.data.binding_task``, the N = 512
  picture): which first-half positions (where the true pairs sit) the query at N - 1 can depend
  on after 1 or 2 layers of each pattern, from the module's own masks and
  :func:`~lectures_lib.variants.receptive_field`, and through which positions the path runs.
"""

import pytest
import torch

from lectures_lib.attention import MultiHeadAttention
from lectures_lib.data import binding_task, binding_tokens
from lectures_lib.variants import (
    BigBirdAttention,
    LocalAttention,
    LongformerAttention,
    ReformerAttention,
    local_mask,
    receptive_field,
)
from lectures_lib.variants.chunked import lsh_chunk_mask

# ---------------------------------------------------------------------------------------------
# Shared QK: a token's duplicates outrank every other key
# ---------------------------------------------------------------------------------------------


def _weights(module, x):
    module.eval()
    with torch.no_grad():
        _, weights = module(x, x, x, need_weights=True)
    return weights[0]  # (heads, n, n)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("copies", [2, 3, 5])
def test_with_shared_qk_no_key_outweighs_a_copy_of_the_query(seed, copies):
    torch.manual_seed(seed)
    n, d = 16, 16
    x = torch.randn(1, n, d)
    where = torch.randperm(n)[:copies]
    x[0, where] = x[0, where[0]].clone()  # the same token at `copies` positions (no positions added)
    # One chunk and one bucket: Reformer here is shared-QK full attention with the self rule.
    reformer = ReformerAttention(d, 2, n_buckets=2, n_hashes=1, chunk_size=n, same_bucket=False)
    weights = _weights(reformer, x)  # (heads, n, n)
    others = torch.ones(n, dtype=torch.bool)
    others[where] = False
    for i in where.tolist():
        duplicates = [j for j in where.tolist() if j != i]
        row = weights[:, i]  # (heads, n)
        assert torch.all(row[:, i] == 0), "the self rule: a query with other keys skips itself"
        least_copy = row[:, duplicates].min(-1).values  # (heads,)
        assert torch.all(row[:, others].max(-1).values <= least_copy + 1e-6), \
            "every copy of the query scores at least as high as any other key"
        assert torch.all(row[:, others].max(-1).values <= 1 / copies + 1e-6), \
            "so no other key (e.g. the definition) gets more than 1 / copies"


def test_with_separate_keys_the_bound_does_not_hold():
    # The same layout with full attention's own key projection: other keys do outrank the
    # copies, so the bound above is a property of the shared QK, not of attention.
    violated = 0
    for seed in range(5):
        torch.manual_seed(seed)
        x = torch.randn(1, 16, 16)
        x[0, [2, 9, 13]] = x[0, 2].clone()
        row = _weights(MultiHeadAttention(16, 2), x)[:, 2]  # (heads, n)
        others = [j for j in range(16) if j not in (2, 9, 13)]
        violated += int((row[:, others].max(-1).values > row[:, [9, 13]].min(-1).values).any())
    assert violated > 0


# ---------------------------------------------------------------------------------------------
# The information path on the binding task at N = 512
# ---------------------------------------------------------------------------------------------

N = 512


@pytest.fixture(scope="module")
def true_pair_positions():
    """Where the true pairs sit in a few real binding sequences (all in the first half)."""
    tokens, _ = binding_task(8, N, seed=0)
    pairs = binding_tokens()["pair"]
    first_half = [(row[: N // 2] >= pairs.start).nonzero()[:, 0] for row in tokens]
    assert all(len(p) == 4 for p in first_half), "4 true pairs, all in the first half"
    return first_half


def _reach(masks, layers):
    return receptive_field(torch.stack(list(masks)), layers)[N - 1]  # (N,): what the query sees


def _relays(masks, global_positions):
    """Positions through which 2 layers carry first-half information to the query: keys of the
    query (layer 2) whose own keys (layer 1) include a first-half position other than a global
    token (every position reads those directly)."""
    step = torch.stack(list(masks)).any(0) | torch.eye(N, dtype=torch.bool)  # with the residual
    sources = torch.zeros(N, dtype=torch.bool)
    sources[: N // 2] = True
    sources[list(global_positions)] = False
    return [k for k in step[N - 1].nonzero()[:, 0].tolist() if bool(step[k, sources].any())]


def test_local_attention_cannot_reach_the_pairs(true_pair_positions):
    window = LocalAttention(32, 2).window
    reach = _reach([local_mask(N, window)], 2)
    assert not bool(reach[: N // 2].any()), "two windows: capacity, no path at all"
    assert all(not bool(reach[p].any()) for p in true_pair_positions)


def test_longformer_has_one_relay_in_two_layers(true_pair_positions):
    module = LongformerAttention(32, 2)  # the N = 512 picture's settings (global token at 0)
    masks = module.head_masks(N)
    assert not bool(_reach(masks, 1)[1 : N // 2].any()), "one layer: only the global token itself"
    assert bool(_reach(masks, 2)[: N // 2].all()), "two layers: every first-half position"
    assert _relays(masks, module.global_positions) == list(module.global_positions) == [0], \
        "and every path from another first-half position runs through the global token at 0"
    on_query = LongformerAttention(32, 2, global_positions=(N - 1,)).head_masks(N)
    assert bool(_reach(on_query, 1)[: N // 2].all()), "global on the query: one layer suffices"


def test_big_bird_relays_are_the_global_token_and_a_few_random_links():
    module = BigBirdAttention(32, 2)
    masks = module.head_masks(N)
    assert bool(_reach(masks, 2)[: N // 2].all())
    assert 0 in _relays(masks, module.global_positions), "the global token is one relay"
    no_global = BigBirdAttention(32, 2, global_positions=()).head_masks(N)
    reached = _reach(no_global, 2)[: N // 2].float().mean()
    assert 0 < reached < 0.5, \
        "the random links alone reach part of the first half: the rest only through the global token"


def test_reformer_chunks_cut_the_last_query_off_from_the_start_of_a_big_bucket():
    # Sorted by (bucket, position), the query at N - 1 is the last member of its bucket, and its
    # chunk reads only itself and the previous chunk: of a bucket larger than two chunks it sees
    # the latest members, never the earliest (the first half, where the true pairs sit).
    chunk = 32
    for bucket_size in (16, 48, 64, 128, 512):
        buckets = torch.arange(N) * (N // bucket_size) // N  # equal buckets of consecutive positions
        buckets = buckets.reshape(1, N)[:, torch.randperm(N, generator=torch.Generator().manual_seed(0))]
        same = buckets[0] == buckets[0, N - 1]  # the query's bucket
        kept = lsh_chunk_mask(buckets, chunk)[N - 1]  # (N,) what the query's chunks read
        seen = (kept & same).sum().item()
        assert seen <= 2 * chunk, "at most its chunk and the one before it (itself included)"
        if bucket_size <= chunk:
            assert bool(kept[same].all()), "a bucket that fits in a chunk is read whole"
        members = same.nonzero()[:, 0]
        earliest = members[: bucket_size - 2 * chunk] if bucket_size > 2 * chunk else members[:0]
        assert not bool(kept[earliest].any()), "the bucket's earliest members are out of reach"
