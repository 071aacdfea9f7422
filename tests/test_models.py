"""lectures_lib.models: stacks, embeddings, mask builders, EncoderTagger and the Transformer,
against PyTorch's stacks and by their properties (causality, padding, gradients, attention maps)."""

from __future__ import annotations

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lectures_lib.attention import MultiHeadAttention, attention_scores, masked_softmax
from lectures_lib.layers import DecoderLayer, EncoderLayer
from lectures_lib.models import (
    Decoder,
    Encoder,
    EncoderTagger,
    TokenEmbedding,
    Transformer,
    make_src_mask,
    make_tgt_mask,
)
from lectures_lib.positional import RotaryAttention, sinusoidal_encoding

from .transformer_helpers import D_FF, D_MODEL, HEADS, _padding


def test_encoder_layers_share_no_parameters():
    template = EncoderLayer(D_MODEL, HEADS, D_FF)
    for encoder in (Encoder(template, 3), Encoder(lambda: EncoderLayer(D_MODEL, HEADS, D_FF), 3)):
        storages = [p.data_ptr() for layer in encoder.layers for p in layer.parameters()]
        assert len(set(storages)) == len(storages), "two layers share a parameter tensor"
        first, second = encoder.layers[0], encoder.layers[1]
        assert not torch.equal(first.self_attn.q_proj.weight, second.self_attn.q_proj.weight)
        assert not torch.equal(first.feed_forward.linear1.weight, second.feed_forward.linear1.weight)


def test_final_norm_defaults_follow_norm_order():
    assert Encoder(EncoderLayer(8, 2, 16), 2).norm is None  # Post-LN ends with a LayerNorm
    assert isinstance(Encoder(EncoderLayer(8, 2, 16, norm_first=True), 2).norm, nn.LayerNorm)
    assert isinstance(Decoder(DecoderLayer(8, 2, 16, norm_first=True), 2).norm, nn.LayerNorm)


def test_encoder_stack_matches_torch_stack():
    torch.manual_seed(0)
    for norm_first in (False, True):
        theirs_layer = nn.TransformerEncoderLayer(
            D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first, batch_first=True
        )
        theirs = nn.TransformerEncoder(
            theirs_layer, 2, norm=nn.LayerNorm(D_MODEL) if norm_first else None,
            enable_nested_tensor=False,
        )
        layers = iter([EncoderLayer.from_torch(layer) for layer in theirs.layers])
        ours = Encoder(lambda layers=layers: next(layers), 2)
        if norm_first:
            ours.norm.load_state_dict(theirs.norm.state_dict())
        x = torch.randn(2, 5, D_MODEL)
        pad = _padding([5, 3], 5)
        torch.testing.assert_close(
            ours(x, (~pad)[:, None, None, :]), theirs(x, src_key_padding_mask=pad)
        )


def test_masks_from_token_ids():
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    src_mask = make_src_mask(tokens, pad_id=0)
    assert src_mask.shape == (2, 1, 1, 3) and src_mask.dtype == torch.bool
    assert src_mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    tgt_mask = make_tgt_mask(tokens, pad_id=0)
    assert tgt_mask.shape == (2, 1, 3, 3)
    assert tgt_mask[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert tgt_mask[1, 0, 2].tolist() == [True, False, False]
    assert make_src_mask(tokens, None).all()


def _small_transformer(**kwargs) -> Transformer:
    settings = dict(d_model=16, num_heads=2, num_encoder_layers=2, num_decoder_layers=2, d_ff=24)
    settings.update(kwargs)
    return Transformer(11, 13, **settings)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_is_causal_and_respects_padding(norm_first):
    torch.manual_seed(0)
    model = _small_transformer(norm_first=norm_first).eval()
    src = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    tgt = torch.tensor([[1, 2, 3, 4, 5], [1, 9, 10, 0, 0]])
    logits = model(src, tgt)
    assert logits.shape == (2, 5, 13)
    future = tgt.clone()
    future[:, 3] = 12
    changed = model(src, future)
    torch.testing.assert_close(logits[:, :3], changed[:, :3])
    assert not torch.allclose(logits[0, 3:], changed[0, 3:])
    # Source padding is invisible: one more padding column changes no logit.
    padded_longer = torch.cat([src, torch.zeros(2, 1, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(padded_longer, tgt), logits, atol=1e-5, rtol=1e-4)
    # ... and neither does target padding for the real target positions.
    target_padded = torch.cat([tgt, torch.zeros(2, 1, dtype=torch.long)], dim=1)
    torch.testing.assert_close(model(src, target_padded)[:, :5], logits, atol=1e-5, rtol=1e-4)


def test_transformer_gradients_reach_every_parameter():
    torch.manual_seed(0)
    for norm_first in (False, True):
        model = _small_transformer(norm_first=norm_first)
        src = torch.randint(1, 11, (3, 5))
        tgt = torch.randint(1, 13, (3, 4))
        logits = model(src, tgt)
        F.cross_entropy(logits.reshape(-1, 13), torch.randint(0, 13, (12,))).backward()
        for name, parameter in model.named_parameters():
            assert parameter.grad is not None, f"{name} got no gradient"
            assert parameter.grad.abs().sum() > 0, f"{name} got an all-zero gradient"


def test_transformer_attention_maps_shapes_and_rows():
    torch.manual_seed(0)
    model = _small_transformer(num_encoder_layers=3).train()
    src = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    tgt = torch.tensor([[1, 2, 3], [1, 9, 0]])
    maps = model.attention_maps(src, tgt)
    assert model.training, "attention_maps restores the training mode"
    assert maps["encoder"].shape == (3, 2, 2, 4, 4)
    assert maps["decoder_self"].shape == (2, 2, 2, 3, 3)
    assert maps["decoder_cross"].shape == (2, 2, 2, 3, 4)
    torch.testing.assert_close(maps["encoder"].sum(-1), torch.ones(3, 2, 2, 4))
    assert (maps["decoder_cross"][:, 1, :, :, 2:] == 0).all(), "padded source keys get no weight"
    assert (maps["decoder_self"][..., 0, 1:] == 0).all(), "first target position sees only itself"
    # need_weights=False (the default) takes the fused path and gives the same output.
    model.eval()
    torch.testing.assert_close(
        model.decode(tgt, model.encode(src), src=src),
        model.decode(tgt, model.encode(src, need_weights=True), src=src, need_weights=True),
    )


def test_encoder_tagger_and_embedding():
    torch.manual_seed(0)
    tagger = EncoderTagger(10, 10, d_model=16, num_heads=4, num_layers=2, d_ff=32)
    tokens = torch.randint(1, 10, (3, 7))
    assert tagger(tokens).shape == (3, 7, 10)
    assert tagger.attention_maps(tokens).shape == (2, 3, 4, 7, 7)
    embed = TokenEmbedding(10, 16, max_len=8)
    one_hot = F.one_hot(tokens, 10).float()  # (batch, seq, vocab)
    expected = (one_hot @ embed.embedding.weight) * 4.0 + sinusoidal_encoding(7, 16)
    torch.testing.assert_close(embed(tokens), expected)


# ---------------------------------------------------------------------------------------------
# The seam: a new attention variant, written here against MultiHeadAttention in a few lines,
# trains inside EncoderTagger and Transformer through the factory, with no change to the library.
# ---------------------------------------------------------------------------------------------


class TemperatureAttention(MultiHeadAttention):
    """Softmax attention with a fixed temperature: overrides the one step it changes."""

    def __init__(self, d_model, num_heads, dropout=0.0, *, temperature=2.0):
        super().__init__(d_model, num_heads, dropout)
        self.temperature = temperature
        self.calls = 0

    def attend(self, q, k, v, mask, need_weights):  # (batch, heads, n, d_head) each
        self.calls += 1
        scores = attention_scores(q, k) / self.temperature  # (batch, heads, n_q, n_k)
        weights = masked_softmax(scores, mask)
        return weights @ v, (weights if need_weights else None)


def _train(model, inputs, targets, forward, steps=150, lr=3e-3):
    """A bare training loop (no `fit`): the factory route must work with any loop."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        logits = forward(model, inputs)  # (batch, seq, classes)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()
    return loss.item()


@pytest.mark.slow
def test_a_variant_written_against_the_seam_trains_in_encoder_tagger():
    torch.manual_seed(0)
    factory = partial(TemperatureAttention, temperature=0.5)
    tagger = EncoderTagger(8, 8, d_model=16, num_heads=2, num_layers=2, d_ff=32, attention=factory)
    layers = tagger.encoder.layers
    assert all(type(layer.self_attn) is TemperatureAttention for layer in layers)
    assert layers[0].self_attn is not layers[1].self_attn, "each layer builds its own module"
    assert layers[0].self_attn.temperature == 0.5, "partial's setting reached the module"
    tokens = torch.randint(1, 8, (64, 6))  # reverse 6 tokens: needs attention to a far position
    targets = tokens.flip(1)
    before = (tagger(tokens).argmax(-1) == targets).float().mean().item()
    _train(tagger, tokens, targets, lambda model, x: model(x))
    after = (tagger(tokens).argmax(-1) == targets).float().mean().item()
    assert layers[0].self_attn.calls > 0, "training went through the variant's attend"
    assert before < 0.3 and after > 0.95, (before, after)
    maps = tagger.attention_maps(tokens[:2])  # (layers, batch, heads, seq, seq)
    assert maps.shape == (2, 2, 2, 6, 6)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 2, 2, 6))


@pytest.mark.slow
def test_a_variant_trains_in_every_attention_slot_of_the_transformer():
    torch.manual_seed(0)
    model = Transformer(
        8, 8, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32,
        encoder_attention=TemperatureAttention,
        decoder_attention=partial(TemperatureAttention, temperature=0.5),
        cross_attention=partial(TemperatureAttention, temperature=1.5),
    )
    layer = model.decoder.layers[0]
    temperatures = [model.encoder.layers[0].self_attn.temperature, layer.self_attn.temperature,
                    layer.cross_attn.temperature]
    assert temperatures == [2.0, 0.5, 1.5], "every slot got its own factory"
    src = torch.randint(3, 8, (64, 5))  # copy task: target = BOS(1) + source
    tgt = torch.cat([torch.ones(64, 1, dtype=torch.long), src], dim=1)
    final_loss = _train(model, src, tgt[:, 1:], lambda m, s: m(s, tgt[:, :-1]), steps=200)
    accuracy = (model(src, tgt[:, :-1]).argmax(-1) == tgt[:, 1:]).float().mean().item()
    assert final_loss < 0.1 and accuracy > 0.98, (final_loss, accuracy)
    # The decoder's variant is still causal: a later target token changes no earlier logit.
    changed = tgt[:, :-1].clone()
    changed[:, 3] = 2
    with torch.no_grad():
        torch.testing.assert_close(model(src, changed)[:, :3], model(src, tgt[:, :-1])[:, :3])


# ---- decode takes the source mask; positional_encoding -----------------------------------


def _transformer(**kwargs):
    torch.manual_seed(0)
    return Transformer(7, 9, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=2,
                       d_ff=32, **kwargs).eval()



def test_decode_with_src_mask_equals_decode_with_src_and_is_not_rebuilt(monkeypatch):
    model = _transformer()
    src = torch.tensor([[3, 4, 5, 0, 0], [6, 2, 3, 4, 1]])
    tgt = torch.tensor([[1, 5, 6], [1, 2, 0]])
    src_mask = make_src_mask(src, 0)
    memory = model.encode(src, src_mask)
    torch.testing.assert_close(model.decode(tgt, memory, src_mask), model.decode(tgt, memory, src=src))
    import lectures_lib.models as models_module

    calls = []
    real = models_module.make_src_mask
    monkeypatch.setattr(models_module, "make_src_mask", lambda *a: calls.append(1) or real(*a))
    cache = model.init_cache()
    for t in range(3):
        model.decode_step(tgt[:, t : t + 1], memory, cache, src_mask)
    assert calls == [], "decode_step with src_mask builds no mask from src"



def test_decoders_build_the_source_mask_once(monkeypatch):
    import lectures_lib.models as models_module
    from lectures_lib.decoding import beam_search, greedy_decode

    model = _transformer()
    src = torch.tensor([[3, 4, 5, 0, 0], [6, 2, 3, 4, 1]])
    for decode in (greedy_decode, partial(beam_search, beam_width=2)):
        for use_cache in (True, False):
            calls = []
            real = models_module.make_src_mask
            def spy(tokens, pad_id, real=real, calls=calls):
                if tokens.shape[1] == src.shape[1]:  # a source mask (targets stay shorter)
                    calls.append(1)
                return real(tokens, pad_id)

            monkeypatch.setattr(models_module, "make_src_mask", spy)
            decode(model, src, max_len=3, bos_id=1, eos_id=2, pad_id=0, use_cache=use_cache)
            monkeypatch.undo()
            assert len(calls) == 1, f"{decode}: the source mask is built once, got {len(calls)}"



def test_transformer_positional_encoding_option():
    rotary = _transformer(encoder_attention=RotaryAttention, decoder_attention=RotaryAttention,
                          positional_encoding=False)
    assert rotary.src_embed.positional is None and rotary.tgt_embed.positional is None
    assert _transformer().src_embed.positional is not None
    src, tgt = torch.tensor([[3, 4, 5]]), torch.tensor([[1, 5]])
    assert rotary(src, tgt).shape == (1, 2, 9)
