"""Property-based tests (hypothesis) of the attention contract, on random shapes, masks and scales.

What must hold for *every* input the contract admits, not only for the examples other tests pick:

* the fused path equals the explicit path (masks of every admitted shape, queries with no key);
* each row of weights sums to 1, or to 0 when the query may attend to nothing; masked cells are
  exactly 0;
* both equal PyTorch's ``F.scaled_dot_product_attention`` (``nn.MultiheadAttention``: in
  ``test_contract.py``, values, weights and gradients);
* NaN inputs give the same output on both paths (the rule in ``scaled_dot_product_attention``);
* in float16 and bfloat16, a masked key never gets weight, even when the allowed scores would
  overflow half precision.

The hypothesis profile (``tests/conftest.py``) keeps the example count small and derandomized, so
the run is fast and the same every time; ``HYPOTHESIS_PROFILE=thorough`` explores far more.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from lectures_lib.attention import (
    fused_attention,
    key_padding_mask,
    scaled_dot_product_attention,
)

MASK_KINDS = ["none", "random 4-D", "pattern 2-D", "keys 1-D", "key padding", "causal"]


def _random_mask(kind, batch, heads, n_q, n_k, density, generator):
    """A bool mask of the contract (True = may attend) that broadcasts to the scores."""
    if kind == "none":
        return None
    if kind == "random 4-D":
        shape = [batch, heads, n_q, n_k]
        keep_full = torch.randint(0, 2, (4,), generator=generator).bool().tolist()
        shape = [size if full else 1 for size, full in zip(shape, keep_full)]
        return torch.rand(*shape, generator=generator) < density
    if kind == "pattern 2-D":
        return torch.rand(n_q, n_k, generator=generator) < density  # read as (n_q, n_k)
    if kind == "keys 1-D":
        return torch.rand(n_k, generator=generator) < density
    if kind == "key padding":
        lengths = torch.randint(0, n_k + 1, (batch,), generator=generator)
        return key_padding_mask(lengths, n_k)  # (batch, 1, 1, n_k); length 0 = no key at all
    return torch.ones(n_q, n_k, dtype=torch.bool).tril()[None, None]  # causal, (1, 1, n_q, n_k)


@st.composite
def attention_inputs(draw, dtype=torch.float64, min_len=1):
    batch, heads = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n_q, n_k = draw(st.integers(min_len, 6)), draw(st.integers(min_len, 6))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    scale = draw(st.sampled_from([0.01, 1.0, 10.0, 300.0]))  # 300: scores far past exp's range
    kind = draw(st.sampled_from(MASK_KINDS))
    density = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    q = torch.randn(batch, heads, n_q, d_k, generator=generator, dtype=dtype) * scale
    k = torch.randn(batch, heads, n_k, d_k, generator=generator, dtype=dtype) * scale
    v = torch.randn(batch, heads, n_k, d_v, generator=generator, dtype=dtype)
    mask = _random_mask(kind, batch, heads, n_q, n_k, density, generator)
    return q, k, v, mask


def _allowed(mask, q, k):
    """The mask broadcast to the scores ``(..., n_q, n_k)`` (all True without a mask)."""
    shape = (*q.shape[:-1], k.shape[-2])
    if mask is None:
        return torch.ones(shape, dtype=torch.bool)
    return mask.expand(shape)


@given(attention_inputs(min_len=0))  # no query or no key at all: an empty or zero output
def test_fused_path_equals_explicit_path(inputs):
    q, k, v, mask = inputs
    explicit, _ = scaled_dot_product_attention(q, k, v, mask)
    fused = fused_attention(q, k, v, mask)
    torch.testing.assert_close(fused, explicit, rtol=1e-9, atol=1e-9,
                               msg="fused_attention differs from scaled_dot_product_attention")


@given(attention_inputs(min_len=0))
def test_rows_sum_to_one_or_zero_and_masked_cells_are_exactly_zero(inputs):
    q, k, v, mask = inputs
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    allowed = _allowed(mask, q, k)
    assert bool((weights[~allowed] == 0).all()), "a masked cell got weight"
    assert bool((weights >= 0).all()), "negative weight"
    has_key = allowed.any(dim=-1)  # (..., n_q)
    sums = weights.sum(dim=-1)
    torch.testing.assert_close(sums[has_key], torch.ones_like(sums[has_key]), msg="row sum != 1")
    assert bool((sums[~has_key] == 0).all()), "a query with no key must get an all-zero row"
    assert bool((out[~has_key] == 0).all()), "a query with no key must get a zero output"


@given(attention_inputs())
def test_equals_pytorch_scaled_dot_product_attention(inputs):
    q, k, v, mask = inputs
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    torch_mask = mask[None] if mask is not None and mask.dim() == 1 else mask  # it wants >= 2-D
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=torch_mask)
    has_key = _allowed(mask, q, k).any(dim=-1)  # PyTorch may give NaN where there is no key
    torch.testing.assert_close(ours[has_key], theirs[has_key], rtol=1e-9, atol=1e-9,
                               msg="differs from F.scaled_dot_product_attention")


@given(attention_inputs(), st.sampled_from(["q", "k", "v"]), st.integers(0, 10**6),
       st.sampled_from([float("nan"), float("inf"), float("-inf")]))
def test_non_finite_inputs_give_the_same_output_on_both_paths(inputs, where, position, value):
    q, k, v, mask = inputs
    target = {"q": q, "k": k, "v": v}[where]
    target.view(-1)[position % target.numel()] = value
    explicit, _ = scaled_dot_product_attention(q, k, v, mask)
    fused = fused_attention(q, k, v, mask)
    torch.testing.assert_close(fused, explicit, equal_nan=True,
                               msg=f"a {value} in {where}: the two paths disagree")
    row = (position % q.numel()) // q.shape[-1]
    has_key = _allowed(mask, q, k).any(dim=-1).reshape(-1)[row]
    if where == "q" and value != value and has_key:  # a NaN query that attends: its row is NaN
        assert bool(explicit.reshape(-1, v.shape[-1])[row].isnan().all()), "NaN query hidden"


@given(st.sampled_from([torch.float16, torch.bfloat16]), st.integers(1, 6), st.integers(2, 7),
       st.integers(2, 16), st.integers(0, 2**31 - 1))
def test_masked_keys_never_win_in_half_precision(dtype, n_q, n_k, d, seed):
    """Allowed keys point *against* their query (scores around -1e5, past float16's -65504);
    masked keys are zero vectors (score 0), so a path that let them in would give them all the
    weight. Both paths must put every weight on allowed keys, as float64 does."""
    generator = torch.Generator().manual_seed(seed)
    q = 40 + torch.rand(1, n_q, d, generator=generator) * 10  # (1, n_q, d), large positive
    allowed = torch.rand(n_q, n_k, generator=generator) < 0.5
    allowed[:, 0] = True  # every query has a key
    key_allowed_by_anyone = allowed.any(dim=0)  # (n_k,)
    k = -(40 + torch.rand(1, n_k, d, generator=generator) * 10)  # scores ~ -q.k/sqrt(d) << 0
    k = torch.where(key_allowed_by_anyone[None, :, None], k, torch.zeros_like(k))
    v = torch.randn(1, n_k, 3, generator=generator)
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    mask = allowed[None] if n_q == 1 else allowed  # (n_q, n_k): one pattern

    reference, _ = scaled_dot_product_attention(q.double(), k.double(), v.double(), mask)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert weights.dtype == dtype and out.dtype == dtype
    assert bool((weights[0][~allowed] == 0).all()), f"a masked key got weight in {dtype}"
    assert not bool(weights.isnan().any()), f"NaN weights in {dtype}"
    tolerance = 2e-2 if dtype == torch.float16 else 6e-2
    torch.testing.assert_close(out.double(), reference, atol=tolerance, rtol=0,
                               msg=f"explicit path in {dtype}")
    torch.testing.assert_close(fused_attention(q, k, v, mask).double(), reference,
                               atol=tolerance, rtol=0, msg=f"fused path in {dtype}")
    torch.testing.assert_close(weights.float().sum(-1), torch.ones(1, n_q), atol=tolerance,
                               rtol=0, msg=f"rows of weights sum to 1 in {dtype}")
