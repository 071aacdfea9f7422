"""One suite for every attention variant, found from the registry ``variants.VARIANTS`` (as
xformers' tests iterate their attention registry): adding a variant means writing its class and
listing it there, and these tests then check it with no further code.

For each variant:

* it equals its dense reference: a :class:`PatternAttention` equals dense attention under
  ``pattern & mask`` (outputs, weights, gradients); a variant that returns weights averages the
  values with them (``out == weights @ v``: for linear attention the linear-time path against
  the quadratic form) and gives padded keys none; every variant ignores the content of padded
  keys; a causal variant never looks ahead; a mask it cannot honour is refused, naming it;
* gradients reach the input and every parameter the variant adds;
* it trains through the factory in ``EncoderTagger`` and in the ``Transformer`` (encoder, and
  decoder where it honours the causal mask, refused clearly where it does not);
* it refuses the key/value cache clearly.

Family files keep what only one family has (memory measured, exactness in a degenerate setting,
the quality a method reaches on its task).
"""

from __future__ import annotations

import inspect
from functools import partial

import pytest
import torch

from lectures_lib.attention import KeyValueCache, kv_cache_problem, scaled_dot_product_attention
from lectures_lib.masks import causal_mask, key_padding_mask
from lectures_lib.models import Transformer
from lectures_lib.utils import inside_library
from lectures_lib.variants import VARIANTS, AttentionVariant, PatternAttention

from .factory_helpers import decoder_is_causal
from .helpers import (
    assert_module_equals_dense,
    assert_module_gradients_equal_dense,
    reference_keys,
    reference_mask,
    train_through_factory,
)

IDS = [cls.__name__ for cls in VARIANTS]
every_variant = pytest.mark.parametrize("cls", VARIANTS, ids=IDS)


def factory_of(cls, seq_len=16):
    """The variant as an attention factory, its required ``seq_len`` bound by ``partial``."""
    needs_len = "seq_len" in inspect.signature(cls).parameters
    return partial(cls, seq_len=seq_len) if needs_len else cls


def build(cls, d_model=12, num_heads=3):
    torch.manual_seed(0)
    return factory_of(cls)(d_model, num_heads).double().eval()


def padded_inputs(batch, n, d_model=12, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, n, d_model, generator=generator, dtype=torch.float64)
    lengths = torch.randint(1, n + 1, (batch,), generator=generator)
    lengths[0] = n  # one full row, one padded (when batch > 1)
    return x, lengths, key_padding_mask(lengths, n)  # (batch, 1, 1, n)


def test_the_registry_holds_every_variant_class_the_package_exports():
    import lectures_lib.variants as variants

    exported = {getattr(variants, name) for name in variants.__all__}
    concrete = {obj for obj in exported if inspect.isclass(obj)
                and issubclass(obj, AttentionVariant) and obj not in (AttentionVariant, PatternAttention)}
    assert concrete == set(VARIANTS), "list a new variant class in variants.VARIANTS"
    assert len(VARIANTS) == len(set(VARIANTS))


@every_variant
@pytest.mark.parametrize(("batch", "n"), [(1, 1), (2, 6), (3, 13)])
def test_equals_its_dense_reference(cls, batch, n):
    module = build(cls)
    x, lengths, padding = padded_inputs(batch, n, seed=n)
    masks = [None, padding]
    if cls.masks != "keys":
        masks.append(causal_mask(n) & padding)  # as the Transformer's decoder builds it
    q, k, v = module.project(x, x, x)
    for mask in masks:
        with inside_library():  # the steps as forward calls them (its door check is done)
            out, weights = module.attend(q, k, v, mask, True)  # (batch, heads, n, d_head)
            fast, none = module.attend(q, k, v, mask, False)
        if isinstance(module, PatternAttention):
            expected_out, expected_weights = scaled_dot_product_attention(
                q, reference_keys(module, q, k), v, reference_mask(module, q, k, mask))
            torch.testing.assert_close(out, expected_out)
            torch.testing.assert_close(weights, expected_weights)
        if not cls.returns_weights:
            assert weights is None, f"{cls.__name__} says returns_weights = False"
            continue
        assert weights.shape == (batch, module.num_heads, n, n)
        torch.testing.assert_close(weights @ v, out, msg="the output is not weights @ values")
        if mask is not None:
            assert not weights.masked_select(~mask.expand_as(weights)).any(), "a masked cell"
        sums = weights.sum(dim=-1)
        assert bool(((sums - 1).abs() < 1e-9).logical_or(sums == 0).all()), "rows sum to 1 (or 0)"
        assert none is None
        torch.testing.assert_close(fast, out, msg="need_weights=False changes the output")
    if isinstance(module, PatternAttention):  # the whole module, forward and backward
        assert_module_equals_dense(module, x, padding)
        assert_module_gradients_equal_dense(module, x, padding)


@every_variant
def test_padded_keys_never_reach_real_tokens(cls):
    module = build(cls)
    x, lengths, padding = padded_inputs(3, 9, seed=1)
    lengths[1:] = torch.tensor([5, 2])
    padding = key_padding_mask(lengths, 9)
    changed = x.clone()
    for b, length in enumerate(lengths.tolist()):
        changed[b, length:] = 100 * torch.randn(9 - length, 12, dtype=torch.float64)
    out = module(x, x, x, padding)[0]
    new = module(changed, changed, changed, padding)[0]
    for b, length in enumerate(lengths.tolist()):
        torch.testing.assert_close(new[b, :length], out[b, :length],
                                   msg=f"{cls.__name__}: padding content changed a real token")


@every_variant
def test_a_causal_variant_never_looks_ahead_and_others_refuse_the_causal_mask(cls):
    module = build(cls)
    x = torch.randn(2, 10, 12, dtype=torch.float64)
    causal = causal_mask(10)
    if cls.masks == "keys":
        with pytest.raises(ValueError, match=f"{cls.__name__}.*causal mask is not supported"):
            module(x, x, x, causal)
        return
    out = module(x, x, x, causal)[0]
    changed = x.clone()
    changed[:, 6:] = torch.randn(2, 4, 12, dtype=torch.float64)
    torch.testing.assert_close(module(changed, changed, changed, causal)[0][:, :6], out[:, :6])


@every_variant
def test_a_mask_it_cannot_honour_is_refused_or_honoured(cls):
    module = build(cls)
    x = torch.randn(2, 8, 12, dtype=torch.float64)
    band = (torch.arange(8)[:, None] - torch.arange(8)[None, :]).abs() <= 1  # differs per query
    if cls.masks == "any":
        out, _ = module(x, x, x, band)
        assert bool(torch.isfinite(out).all())
    else:
        with pytest.raises(ValueError, match=f"{cls.__name__} never builds the N x N matrix"):
            module(x, x, x, band)


@every_variant
def test_gradients_reach_the_input_and_every_parameter_it_adds(cls):
    module = build(cls).train()
    module.dropout = 0.0
    x = torch.randn(2, 7, 12, dtype=torch.float64, requires_grad=True)
    out, _ = module(x, x, x, key_padding_mask(torch.tensor([7, 4]), 7))
    (out * torch.randn_like(out)).sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all()) and x.grad.abs().sum() > 0
    own_parameters_have_gradients(module, cls.__name__)


@pytest.mark.slow
@every_variant
def test_trains_through_the_factory_in_an_encoder_tagger(cls):
    first, last, changed = train_through_factory(factory_of(cls), steps=40)
    assert changed, "gradients reach the attention's projections"
    assert last < 0.5 * first, (first, last)


def own_parameters_have_gradients(module, name):
    """``v_proj``, ``out_proj`` and every parameter the variant adds got a finite gradient (a
    variant may leave ``q_proj``/``k_proj`` unused: the synthesizers do, by design)."""
    shared = ("q_proj.", "k_proj.", "v_proj.", "out_proj.")
    for key, parameter in module.named_parameters():
        if parameter.requires_grad and (key.startswith(shared[2:]) or not key.startswith(shared)):
            assert parameter.grad is not None, f"{name}.{key} got no gradient"
            assert bool(torch.isfinite(parameter.grad).all()), f"{name}.{key}"


@every_variant
def test_trains_in_the_transformer_encoder_and_in_the_decoder_where_it_can(cls):
    """Encoder attention (padded sources): a step reaches the variant. Decoder self-attention: a
    causal variant never looks ahead; one that cannot honour the causal mask says so."""
    torch.manual_seed(0)
    factory, n = factory_of(cls), 10
    model = Transformer(11, 13, d_model=16, num_heads=2, num_encoder_layers=1,
                        num_decoder_layers=1, d_ff=32, max_len=n, encoder_attention=factory)
    src, tgt = torch.randint(1, 11, (2, n)), torch.randint(1, 13, (2, n))
    src[1, 6:] = 0  # padding (pad_id 0)
    logits = model(src, tgt)
    assert logits.shape == (2, n, 13) and bool(torch.isfinite(logits).all())
    logits.sum().backward()
    own_parameters_have_gradients(model.encoder.layers[0].self_attn, cls.__name__)
    if cls.masks != "keys":
        assert decoder_is_causal(factory, n=n)
        return
    decoder_model = Transformer(11, 13, d_model=16, num_heads=2, num_encoder_layers=1,
                                num_decoder_layers=1, d_ff=32, max_len=n, decoder_attention=factory)
    with pytest.raises(ValueError, match=f"{cls.__name__}.*causal mask is not supported"):
        decoder_model(src, tgt)


@every_variant
def test_refuses_the_key_value_cache_clearly(cls):
    module = build(cls)
    problem = kv_cache_problem(module)
    assert problem and "use_cache=False" in problem, problem
    x = torch.randn(1, 1, 12, dtype=torch.float64)
    with pytest.raises(TypeError, match="use_cache=False"):
        module.forward_cached(x, x, x, KeyValueCache())
