"""Legal edges and the one rule of the variants (issue 18): empty batches and sequences give the
empty result dense attention gives, float16 linear attention is right, cluster ids have one
reading, the constructor convention holds, and an unsupported dtype is refused clearly.
Property tests draw the shapes (hypothesis; ``tests/conftest.py`` keeps the run small)."""

from __future__ import annotations

import inspect

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from lectures_lib.attention import MultiHeadAttention, scaled_dot_product_attention
from lectures_lib.variants import (
    VARIANTS,
    LinearAttention,
    PerformerAttention,
    cluster_mask,
    clustered_attention,
    global_attention,
    global_mask,
    linear_attention,
    local_attention,
    sparse_attention,
    strided_attention,
)


def build(cls, **options):
    """A small module of ``cls`` (d_model 8, 2 heads), its required ``seq_len`` filled in."""
    if "seq_len" in inspect.signature(cls).parameters:
        options.setdefault("seq_len", 8)
    return cls(8, 2, **options)


@pytest.mark.parametrize("cls", VARIANTS, ids=lambda c: c.__name__)
def test_one_constructor_convention(cls):
    """``Cls(d_model, num_heads, dropout=0.0, *, bias=True, <own options keyword-only>)``."""
    parameters = list(inspect.signature(cls).parameters.values())
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert positional == ["d_model", "num_heads", "dropout"], positional
    assert parameters[2].default == 0.0
    keyword_only = [p for p in parameters if p.kind is p.KEYWORD_ONLY]
    assert keyword_only[0].name == "bias" and keyword_only[0].default is True
    assert len(keyword_only) == len(parameters) - 3, "every option is keyword-only"
    module = build(cls, bias=False)
    assert module.q_proj.bias is None and module.out_proj.bias is None, "bias=False is honoured"


@pytest.mark.parametrize("cls", VARIANTS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("batch", "n"), [(0, 5), (2, 0), (0, 0)])
def test_empty_batch_or_sequence_gives_the_empty_result(cls, batch, n):
    torch.manual_seed(0)
    for training in (False, True):
        module = build(cls, dropout=0.1).train(training)
        x = torch.randn(batch, n, 8)
        padding = torch.ones(batch, 1, 1, n, dtype=torch.bool)
        out, weights = module(x, x, x, padding, need_weights=True)
        assert out.shape == (batch, n, 8)
        if cls.returns_weights:
            assert weights.shape == (batch, 2, n, n)
        assert module(x, x, x, need_weights=False)[0].shape == (batch, n, 8)


@given(st.integers(0, 2), st.integers(0, 3), st.integers(0, 6))
def test_the_engines_accept_empty_inputs(batch, heads, n):
    q = k = v = torch.randn(batch, heads, n, 4)
    expected = scaled_dot_product_attention(q, k, v)[0]
    results = {
        "local": local_attention(q, k, v, 1),
        "strided": strided_attention(q, k, v, 2),
        "sparse": sparse_attention(q, k, v, torch.full((n, 1), -1)),
        "global": global_attention(q, k, v, [0] if n else []),
        "clustered": clustered_attention(q, k, v, torch.zeros(1, 1, 1, n, dtype=torch.long),
                                         torch.zeros(1, 1, 1, n, dtype=torch.long), 1),
        "linear": linear_attention(q, k, v),
    }
    for name, out in results.items():
        assert out.shape == expected.shape, name
        if not q.numel():
            assert out.numel() == 0, name


def test_global_attention_attends_through_its_global_tokens():  # None: a bad-input row
    q = torch.randn(2, 5, 4)
    out = global_attention(q, q, q, [1, 3])
    expected = scaled_dot_product_attention(q, q, q, global_mask(5, [1, 3]))[0]
    torch.testing.assert_close(out, expected)


@given(st.floats(-30.0, -8.0), st.integers(0, 2**31 - 1))
@example(-25.0, 0)  # exp(-25) underflows float16: the old order gave an all-zero row here
def test_float16_linear_attention_equals_float32_on_the_same_inputs(low, seed):
    """The feature map runs after the upcast: a query whose components are all very negative
    still gets a real average (before the fix it got an all-zero row in float16)."""
    generator = torch.Generator().manual_seed(seed)
    q = (torch.rand(2, 3, 4, generator=generator) + low).half()  # every component < -7
    k, v = (torch.randn(2, 6, 4, generator=generator).half() for _ in range(2))
    out = linear_attention(q, k, v)
    assert out.dtype == torch.float16
    expected = linear_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(out.float(), expected, atol=2e-3, rtol=2e-3)
    assert out.abs().sum() > 0


@pytest.mark.parametrize("cls", [LinearAttention, PerformerAttention])
def test_float16_linear_modules_equal_their_float32_copy(cls):
    torch.manual_seed(0)
    module = build(cls).eval()
    x = torch.randn(2, 6, 8) * 8
    expected = module(x, x, x, need_weights=False)[0]
    half = module.half()
    out = half(x.half(), x.half(), x.half(), need_weights=False)[0]
    torch.testing.assert_close(out.float(), expected, atol=5e-2, rtol=5e-2)


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 7), st.integers(1, 3),
       st.integers(0, 2**31 - 1))
def test_cluster_ids_have_one_reading(batch, heads, n, rounds, seed):
    """``(batch, heads, rounds, n)`` ids, per example, equal dense attention under their mask;
    ``(batch, n)`` ids (ambiguous with rounds) and ``(batch, heads, n)`` ids are refused."""
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, n, 4, generator=generator, dtype=torch.float64)
               for _ in range(3))
    ids = torch.randint(0, 3, (batch, heads, rounds, n), generator=generator)
    expected = scaled_dot_product_attention(q, k, v, cluster_mask(ids, ids))[0]
    torch.testing.assert_close(clustered_attention(q, k, v, ids, ids, 3), expected)
    for wrong in (ids[:, 0, 0], ids[:, :, 0]):
        with pytest.raises(ValueError, match="query_clusters must have shape"):
            clustered_attention(q, k, v, wrong, wrong, 3)


@pytest.mark.parametrize("cls", VARIANTS, ids=lambda c: c.__name__)
def test_an_input_of_another_dtype_is_refused_naming_both(cls):
    module = build(cls)
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"module's dtype torch.float32, got torch.float64"):
        module(x, x, x)
    out, _ = module.double()(x, x, x)  # converting the module is the fix the message names
    assert out.dtype == torch.float64


def test_dense_attention_is_the_reference_for_an_empty_input():
    """The 'empty result' the variants return is what the course's dense attention returns."""
    x = torch.randn(0, 5, 8)
    out, weights = MultiHeadAttention(8, 2)(x, x, x)
    assert out.shape == (0, 5, 8) and weights.shape == (0, 2, 5, 5)
