"""lectures_lib.layers: PyTorch's fused fast path, from_torch's conversions and refusals, the
layers' own properties and the attention factory. Equality with nn.TransformerEncoderLayer and
nn.TransformerDecoderLayer (both norm orders, activations, biases, layouts, masks, gradients) is
tested in test_contract.py."""

from __future__ import annotations

from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lectures_lib.attention import MultiHeadAttention
from lectures_lib.layers import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    layer_norm,
    sublayer_connection,
)
from lectures_lib.positional import RotaryAttention

from .transformer_helpers import D_FF, D_MODEL, HEADS, _padding


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch_fast_path_without_grad(norm_first):
    # In eval mode without autograd PyTorch switches to a fused "fast path" kernel. On padded
    # inputs it may leave arbitrary values (zeros for nested tensors) at padded *query*
    # positions, which nothing downstream should read, so compare only the real tokens.
    torch.manual_seed(1)
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.0, norm_first=norm_first, batch_first=True
    ).eval()
    ours = EncoderLayer.from_torch(theirs).eval()
    x = torch.randn(3, 5, D_MODEL)
    pad = _padding([5, 3, 2], 5)
    with torch.no_grad():
        out_theirs = theirs(x, src_key_padding_mask=pad)
        out_ours = ours(x, (~pad)[:, None, None, :])
    torch.testing.assert_close(out_ours[~pad], out_theirs[~pad], atol=1e-5, rtol=1e-4)


def test_from_torch_detects_a_changed_weight():
    # The equivalence tests (test_contract.py) could only pass trivially if outputs ignored the
    # weights.
    theirs = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, batch_first=True)
    ours = EncoderLayer.from_torch(theirs)
    x = torch.randn(2, 4, D_MODEL)
    with torch.no_grad():
        ours.feed_forward.linear2.weight[0, 0] += 0.1
    assert not torch.allclose(ours(x), theirs(x), atol=1e-4)


def test_from_torch_activation_mapping():
    for activation, name in [("gelu", "gelu"), (F.relu, "relu"), (nn.GELU(), "gelu")]:
        theirs = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, activation=activation)
        assert EncoderLayer.from_torch(theirs).feed_forward.activation == name


def test_layer_norm_matches_torch():
    x = torch.randn(2, 3, 8, dtype=torch.float64) * 5 + 3
    gamma, beta = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    for eps in (1e-5, 0.3):
        expected = F.layer_norm(x, (8,), gamma, beta, eps)
        torch.testing.assert_close(layer_norm(x, gamma, beta, eps), expected)
    normalised = layer_norm(x, torch.ones(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64))
    torch.testing.assert_close(normalised.mean(-1), torch.zeros(2, 3, dtype=torch.float64))


def test_sublayer_connection_orders():
    x = torch.randn(2, 3, 4)
    norm = nn.LayerNorm(4)
    double = lambda h: 2 * h
    torch.testing.assert_close(sublayer_connection(x, double, norm), norm(3 * x))
    torch.testing.assert_close(sublayer_connection(x, double, norm, norm_first=True), x + 2 * norm(x))


def test_feed_forward_is_position_wise():
    ff = FeedForward(8, 16, activation="gelu")
    x = torch.randn(2, 5, 8)
    out = ff(x)
    torch.testing.assert_close(out[:, 2], ff(x[:, 2:3])[:, 0])
    expected = ff.linear2(F.gelu(ff.linear1(x)))
    torch.testing.assert_close(out, expected)


def test_decoder_layer_is_causal():
    torch.manual_seed(0)
    layer = DecoderLayer(D_MODEL, HEADS, D_FF).eval()
    x, memory = torch.randn(2, 6, D_MODEL), torch.randn(2, 4, D_MODEL)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    changed = x.clone()
    changed[:, 4] += 3.0
    out, out_changed = layer(x, memory, mask), layer(changed, memory, mask)
    torch.testing.assert_close(out[:, :4], out_changed[:, :4])
    assert not torch.allclose(out[:, 4:], out_changed[:, 4:])
    # Without the mask, the future leaks into the past: the test above can fail.
    assert not torch.allclose(layer(x, memory)[:, :4], layer(changed, memory)[:, :4])


# ---------------------------------------------------------------------------------------------
# Attention factories, attention maps, checks once
# ---------------------------------------------------------------------------------------------


class _ScaledAttention(MultiHeadAttention):
    """A stand-in variant: the factory's settings must reach it."""

    def __init__(self, d_model, num_heads, dropout=0.0, *, label="variant"):
        super().__init__(d_model, num_heads, dropout)
        self.label = label


def test_layers_build_their_attention_from_a_factory():
    default = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1)
    assert type(default.self_attn) is MultiHeadAttention and default.self_attn.dropout == 0.1
    layer = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.1, attention=partial(_ScaledAttention, label="x"))
    assert type(layer.self_attn) is _ScaledAttention and layer.self_attn.label == "x"
    assert layer.self_attn.dropout == 0.1, "the factory is called with (d_model, num_heads, dropout)"
    decoder = DecoderLayer(D_MODEL, HEADS, D_FF, self_attention=_ScaledAttention)
    assert type(decoder.self_attn) is _ScaledAttention
    assert type(decoder.cross_attn) is MultiHeadAttention, "None means MultiHeadAttention"
    no_bias = EncoderLayer(D_MODEL, HEADS, D_FF, bias=False)
    assert no_bias.self_attn.q_proj.bias is None


def test_attention_maps_run_one_forward_in_eval_mode():
    torch.manual_seed(0)
    layer = EncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.5).train()
    x = torch.randn(2, 5, D_MODEL)
    maps = layer.attention_maps(x)
    assert layer.training, "the mode is restored"
    assert maps.shape == (2, HEADS, 5, 5)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, HEADS, 5))  # no dropout in eval mode
    decoder = DecoderLayer(D_MODEL, HEADS, D_FF)
    both = decoder.attention_maps(x, torch.randn(2, 3, D_MODEL), torch.ones(5, 5, dtype=torch.bool).tril())
    assert both["self"].shape == (2, HEADS, 5, 5) and both["cross"].shape == (2, HEADS, 5, 3)
    assert (both["self"][..., 0, 1:] == 0).all(), "causal: position 0 sees only itself"


def test_a_decoder_stack_checks_each_mask_once(monkeypatch):
    import lectures_lib._validate.layers as validate_module  # layers.py's door checks
    from lectures_lib.models import Decoder

    checked = []
    real_check_mask = validate_module.check_mask
    monkeypatch.setattr(
        validate_module, "check_mask", lambda mask, shape: checked.append(shape) or real_check_mask(mask, shape)
    )
    decoder = Decoder(DecoderLayer(D_MODEL, HEADS, D_FF), num_layers=3)
    x, memory = torch.randn(2, 5, D_MODEL), torch.randn(2, 4, D_MODEL)
    decoder(x, memory, torch.ones(5, 5, dtype=torch.bool).tril(), torch.ones(2, 1, 1, 4, dtype=torch.bool))
    assert checked == [(2, HEADS, 5, 5), (2, HEADS, 5, 4)], "each mask once, at the door"


# ---- bias reaches the factory -----------------------------------------------------------


def test_bias_false_reaches_the_factory():
    layer = EncoderLayer(8, 2, 16, bias=False, attention=partial(RotaryAttention, max_len=64))
    assert layer.self_attn.q_proj.bias is None and layer.self_attn.out_proj.bias is None
    assert EncoderLayer(8, 2, 16, attention=RotaryAttention).self_attn.q_proj.bias is not None
