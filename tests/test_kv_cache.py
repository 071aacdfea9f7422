"""Incremental decoding with a key/value cache (attention -> layer -> model -> decoders), and the
decoders' promise never to emit padding or BEGIN."""

import pytest
import torch

from lectures_lib.attention import (
    KeyValueCache,
    MultiHeadAttention,
    causal_mask,
    kv_cache_problem,
)
from lectures_lib.decoding import beam_search, greedy_decode, sequence_log_prob
from lectures_lib.layers import DecoderLayer
from lectures_lib.models import Transformer
from lectures_lib.positional import RotaryAttention

PAD, BOS, EOS = 0, 1, 2


@pytest.mark.parametrize(("batch", "chunks"), [(2, [1] * 7), (1, [2, 3, 2]), (3, [7]),
                                              (2, [3, 1, 3])])
def test_forward_cached_equals_forward_under_a_causal_mask(batch, chunks):
    """One new token a step, or several at once (their causal rows of the mask)."""
    torch.manual_seed(0)
    attention = MultiHeadAttention(24, 3, kdim=10, vdim=6).eval().double()
    x = torch.randn(batch, 7, 24, dtype=torch.double)
    self_attention = MultiHeadAttention(24, 3).eval().double()
    full, _ = self_attention(x, x, x, causal_mask(7))
    cache, rows, start = KeyValueCache(), [], 0
    for n in chunks:
        piece = x[:, start : start + n]
        step_mask = causal_mask(start + n)[start:]  # (n, start + n)
        rows.append(self_attention.forward_cached(piece, piece, piece, cache, step_mask))
        start += n
        assert len(cache) == start
    assert torch.allclose(torch.cat(rows, dim=1), full, atol=1e-12)

    memory = torch.randn(batch, 5, 10, dtype=torch.double)
    values = torch.randn(batch, 5, 6, dtype=torch.double)
    keep = torch.tensor([[True] * 5, [True, True, False, False, False]] * 2)[:batch, None, None]
    cross_full, _ = attention(x, memory, values, keep)
    cross_cache = KeyValueCache()
    cross_rows = [attention.forward_cached(x[:, t : t + 1], memory, values, cross_cache, keep,
                                           static=True) for t in range(7)]
    assert len(cross_cache) == 5, "the memory is projected once"
    assert torch.allclose(torch.cat(cross_rows, dim=1), cross_full, atol=1e-12)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_forward_cached_equals_forward(norm_first):
    torch.manual_seed(1)
    layer = DecoderLayer(16, 4, 32, norm_first=norm_first).eval().double()
    x, memory = torch.randn(3, 6, 16).double(), torch.randn(3, 4, 16).double()
    full = layer(x, memory, causal_mask(6))
    caches = (KeyValueCache(), KeyValueCache())
    steps = [layer.forward_cached(x[:, t : t + 1], memory, caches) for t in range(6)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-12)


def _model(seed, norm_first=False, **kwargs):
    torch.manual_seed(seed)
    return Transformer(11, 9, d_model=16, num_heads=2, d_ff=32, norm_first=norm_first,
                       **kwargs).eval()


def _sources(seed):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(3, 11, (5, 6), generator=generator)
    src[1, 3:] = PAD
    src[4, 1:] = PAD
    return src


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("decoder_attention", [None, RotaryAttention])
def test_decode_step_equals_decode_on_the_prefix(norm_first, decoder_attention):
    model = _model(2, norm_first, decoder_attention=decoder_attention).double()
    src = _sources(0)
    tgt = torch.randint(3, 9, (5, 7))
    tgt[:, 0] = BOS
    tgt[2, 4:] = PAD  # a finished sequence keeps receiving padding
    memory = model.encode(src)
    full = model.decode(tgt, memory, src=src)
    cache = model.init_cache()
    first = model.decode_step(tgt[:, :3], memory, cache, src=src)  # several tokens at once
    rest = [model.decode_step(tgt[:, t : t + 1], memory, cache, src=src) for t in range(3, 7)]
    assert len(cache) == 7
    assert torch.allclose(torch.cat([first, *rest], dim=1), full, atol=1e-10)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("decoder_attention", [None, RotaryAttention])
def test_cached_decoding_gives_the_same_tokens_and_scores(norm_first, decoder_attention):
    for seed in range(4):
        model = _model(seed, norm_first, decoder_attention=decoder_attention)
        src = _sources(seed)
        for decode, extra in ((greedy_decode, ()), (beam_search, (3,))):
            cached, cached_scores = decode(model, src, *extra, 9, BOS, EOS, PAD,
                                           return_scores=True, use_cache=True)
            plain, plain_scores = decode(model, src, *extra, 9, BOS, EOS, PAD,
                                         return_scores=True, use_cache=False)
            assert torch.equal(cached, plain)
            # float32 sums in another order: equal up to rounding (exactly equal in float64)
            assert torch.allclose(cached_scores, plain_scores, rtol=0, atol=1e-5)
    model = _model(7, norm_first, decoder_attention=decoder_attention).double()
    src = _sources(7)
    for width in (1, 4):
        cached, cached_scores = beam_search(model, src, width, 9, BOS, EOS, PAD,
                                            return_scores=True)
        plain, plain_scores = beam_search(model, src, width, 9, BOS, EOS, PAD,
                                          return_scores=True, use_cache=False)
        assert torch.equal(cached, plain)
        assert torch.allclose(cached_scores, plain_scores, rtol=0, atol=1e-10)


def test_the_cache_feeds_each_token_once():
    model = _model(3)
    with torch.no_grad():
        model.output.bias[EOS] = -1e4  # never END: every output runs to max_len
    fed = []
    model.tgt_embed.register_forward_hook(lambda module, args, out: fed.append(out.shape[1]))
    src = _sources(3)
    greedy_decode(model, src, 8, BOS, EOS, PAD)
    assert fed == [1] * 8, "O(n): one new position per step"
    fed.clear()
    greedy_decode(model, src, 8, BOS, EOS, PAD, use_cache=False)
    assert fed == list(range(1, 9)), "O(n^2): the whole prefix at every step"


class LocalOnly(MultiHeadAttention):
    """A variant that changes `attend` and says nothing about caching."""

    def attend(self, q, k, v, mask, need_weights):
        return super().attend(q, k, v, mask, need_weights)


class DeclaredLocal(LocalOnly):
    supports_kv_cache = True


class RotaryChanged(RotaryAttention):
    def attend(self, q, k, v, mask, need_weights):
        return super().attend(q, k, v, mask, need_weights)


def test_a_variant_that_does_not_declare_cache_support_is_refused_clearly():
    assert kv_cache_problem(MultiHeadAttention(8, 2)) is None
    assert kv_cache_problem(RotaryAttention(8, 2)) is None
    assert kv_cache_problem(DeclaredLocal(8, 2)) is None
    assert "LocalOnly overrides `attend`" in kv_cache_problem(LocalOnly(8, 2))
    assert "RotaryChanged overrides `attend`" in kv_cache_problem(RotaryChanged(8, 2))
    assert "not a MultiHeadAttention" in kv_cache_problem(torch.nn.Linear(2, 2))
    # (the refusals of forward_cached, greedy_decode and beam_search: tests/test_bad_inputs.py)
    model = _model(4, decoder_attention=LocalOnly)
    assert greedy_decode(model, _sources(4), 5, BOS, EOS, PAD, use_cache=False).shape[0] == 5


def _pad_and_bos_loving_model(seed):
    """A random model pushed to prefer padding and BEGIN, the tokens a decoder must not emit."""
    model = _model(seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.output.bias[PAD] += 3.0 * torch.rand((), generator=generator)
        model.output.bias[BOS] += 3.0 * torch.rand((), generator=generator)
    return model


@pytest.mark.slow
def test_decoders_never_emit_padding_or_begin_and_width_one_is_greedy():
    for seed in range(30):
        model = _pad_and_bos_loving_model(seed)
        src = _sources(seed)
        greedy, greedy_scores = greedy_decode(model, src, 6, BOS, EOS, PAD, return_scores=True)
        beam, beam_scores = beam_search(model, src, 1, 6, BOS, EOS, PAD, return_scores=True)
        wide = beam_search(model, src, 3, 6, BOS, EOS, PAD)
        for output in (greedy, beam, wide):
            assert not (output == BOS).any()
            is_eos = output == EOS
            before_end = (is_eos.long().cumsum(dim=1) - is_eos.long()) == 0  # up to the 1st END
            assert not (output[before_end] == PAD).any(), "padding only after END"
        assert torch.equal(greedy, beam) and greedy.shape == beam.shape
        assert torch.equal(greedy_scores, beam_scores)
        assert torch.allclose(sequence_log_prob(model, src, greedy, BOS, EOS, PAD),
                              greedy_scores, atol=1e-4), "scores use the decoders' distribution"


# ---- the cache rule; a refused call leaves the cache as it was ---------------------------


def test_the_cache_rule_is_init_subclass():
    class Plain(MultiHeadAttention):
        pass

    class Changed(MultiHeadAttention):
        def attend(self, q, k, v, mask, need_weights):
            return super().attend(q, k, v, mask, need_weights)

    class Vouched(Changed):
        supports_kv_cache = True

    class ChangedAgain(Vouched):
        def project(self, query, key, value, positions=None):
            return super().project(query, key, value, positions)

    assert Plain.supports_kv_cache and kv_cache_problem(Plain(8, 2)) is None
    assert Changed.supports_kv_cache is False
    assert "Changed overrides `attend`" in kv_cache_problem(Changed(8, 2))
    assert kv_cache_problem(Vouched(8, 2)) is None
    assert "ChangedAgain overrides `project`" in kv_cache_problem(ChangedAgain(8, 2))



@pytest.mark.parametrize("bad", ["float mask", "int mask", "static str", "batch changes",
                                 "wide query"])
def test_a_refused_forward_cached_leaves_the_cache_as_it_was(bad):
    module, cache = MultiHeadAttention(8, 2), KeyValueCache()
    x = torch.randn(2, 1, 8, generator=torch.Generator().manual_seed(0))
    module.forward_cached(x, x, x, cache)
    keys, values = cache.keys.clone(), cache.values.clone()
    call = {
        "float mask": lambda: module.forward_cached(x, x, x, cache, torch.ones(1, 2)),
        "int mask": lambda: module.forward_cached(x, x, x, cache, torch.ones(1, 2, dtype=torch.long)),
        "static str": lambda: module.forward_cached(x, x, x, cache, static="False"),
        "batch changes": lambda: module.forward_cached(x[:1], x[:1], x[:1], cache),
        "wide query": lambda: module.forward_cached(torch.randn(2, 1, 9), x, x, cache),
    }[bad]
    with pytest.raises((TypeError, ValueError)):  # the messages: tests/test_bad_inputs.py
        call()
    assert len(cache) == 1, "a refused call leaves the cache as it was"
    assert torch.equal(cache.keys, keys) and torch.equal(cache.values, values)
