"""Property-based tests (hypothesis): every efficient variant equals its dense form, on random
shapes, windows and scales (the profile in ``tests/conftest.py`` keeps the run small and
deterministic)."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from lectures_lib.attention import scaled_dot_product_attention
from lectures_lib.variants import (
    band_to_dense,
    elu_feature_map,
    linear_attention,
    local_attention,
    local_mask,
)


@st.composite
def self_attention_inputs(draw):
    batch = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))  # 0 to 2 leading dims
    n, d_k, d_v = draw(st.integers(1, 9)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    scale = draw(st.sampled_from([0.1, 1.0, 30.0]))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    q = torch.randn(*batch, n, d_k, generator=generator, dtype=torch.float64) * scale
    k = torch.randn(*batch, n, d_k, generator=generator, dtype=torch.float64) * scale
    v = torch.randn(*batch, n, d_v, generator=generator, dtype=torch.float64)
    return q, k, v


@given(self_attention_inputs(), st.integers(0, 10))
def test_local_attention_equals_dense_attention_under_local_mask(inputs, window):
    q, k, v = inputs
    n = q.shape[-2]
    pattern = local_mask(n, window).view(*[1] * (q.dim() - 2), n, n)  # one pattern for all
    expected_out, expected_weights = scaled_dot_product_attention(q, k, v, pattern)
    out, band = local_attention(q, k, v, window, need_weights=True)
    torch.testing.assert_close(out, expected_out, msg=f"local attention, window {window}")
    torch.testing.assert_close(band_to_dense(band), expected_weights,
                               msg=f"local attention's weights, window {window}")


@given(self_attention_inputs(), st.sampled_from(["elu", "exp", "relu+1"]), st.booleans())
def test_linear_attention_equals_its_quadratic_form(inputs, name, causal):
    """phi(Q) (phi(K)^T V), normalised, equals the N x N form (phi(Q) phi(K)^T) V row-normalised
    (with causal=True: only keys j <= i, the running sums against the lower triangle)."""
    q, k, v = inputs
    feature_map = {"elu": elu_feature_map, "exp": lambda x: (x / 30).exp(),
                   "relu+1": lambda x: x.relu() + 1}[name]
    scores = feature_map(q) @ feature_map(k).transpose(-2, -1)  # (..., n, n), all >= 0
    if causal:
        n = q.shape[-2]
        scores = scores * torch.ones(n, n, dtype=torch.bool).tril()  # query i sees keys j <= i
    sums = scores.sum(dim=-1, keepdim=True)  # 0 when every feature underflowed: zero output
    weights = torch.where(sums > 0, scores / sums.clamp(min=1e-300), torch.zeros_like(scores))
    out = linear_attention(q, k, v, feature_map=feature_map, causal=causal)
    torch.testing.assert_close(out, weights @ v,
                               msg=f"linear attention (causal={causal}), {name} feature map")
