"""lectures_lib.layers against PyTorch's own Transformer layers (both norm orders, both
activations, with and without biases, masks, gradients), plus the layers' own properties and the
attention factory."""

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

from .transformer_helpers import D_FF, D_MODEL, HEADS, SETTINGS, _padding, _to_torch_layout


@pytest.mark.parametrize("norm_first,activation,bias,batch_first", SETTINGS)
@pytest.mark.parametrize("train_mode", [False, True])
def test_encoder_layer_matches_torch(norm_first, activation, bias, batch_first, train_mode):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.0, activation=activation, norm_first=norm_first,
        bias=bias, batch_first=batch_first, layer_norm_eps=1e-4,
    ).train(train_mode)
    ours = EncoderLayer.from_torch(theirs)
    assert ours.training == train_mode and ours.norm1.eps == 1e-4
    x = torch.randn(3, 6, D_MODEL, dtype=torch.float64)
    theirs, ours = theirs.double(), ours.double()
    pad = _padding([6, 4, 1], 6)
    x_theirs = x.clone().requires_grad_()
    x_ours = x.clone().requires_grad_()
    out_theirs = _to_torch_layout(
        theirs(_to_torch_layout(x_theirs, batch_first), src_key_padding_mask=pad), batch_first
    )
    out_ours = ours(x_ours, (~pad)[:, None, None, :])  # ours: True = may attend
    torch.testing.assert_close(out_ours, out_theirs)
    weights = torch.randn_like(out_ours)
    (out_theirs * weights).sum().backward()
    (out_ours * weights).sum().backward()
    torch.testing.assert_close(x_ours.grad, x_theirs.grad)
    # Parameter gradients too: the copied linear map receives the same gradient.
    torch.testing.assert_close(ours.feed_forward.linear1.weight.grad, theirs.linear1.weight.grad)


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


@pytest.mark.parametrize("norm_first,activation,bias,batch_first", SETTINGS)
def test_decoder_layer_matches_torch(norm_first, activation, bias, batch_first):
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.0, activation=activation, norm_first=norm_first,
        bias=bias, batch_first=batch_first,
    ).double().eval()
    ours = DecoderLayer.from_torch(theirs)
    n_tgt, n_src = 5, 7
    tgt = torch.randn(3, n_tgt, D_MODEL, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(3, n_src, D_MODEL, dtype=torch.float64, requires_grad=True)
    tgt_pad, src_pad = _padding([5, 2, 4], n_tgt), _padding([7, 3, 5], n_src)
    causal = torch.ones(n_tgt, n_tgt, dtype=torch.bool).tril()
    out_theirs = _to_torch_layout(
        theirs(
            _to_torch_layout(tgt, batch_first), _to_torch_layout(memory, batch_first),
            tgt_mask=~causal, tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
        ),
        batch_first,
    )
    tgt_mask = causal[None, None] & (~tgt_pad)[:, None, None, :]  # (batch, 1, n_tgt, n_tgt)
    memory_mask = (~src_pad)[:, None, None, :]  # (batch, 1, 1, n_src)
    out_ours = ours(tgt, memory, tgt_mask, memory_mask)
    torch.testing.assert_close(out_ours, out_theirs)
    weights = torch.randn_like(out_ours)
    grads_theirs = torch.autograd.grad((out_theirs * weights).sum(), (tgt, memory))
    grads_ours = torch.autograd.grad((out_ours * weights).sum(), (tgt, memory))
    torch.testing.assert_close(grads_ours, grads_theirs)


def test_from_torch_detects_a_changed_weight():
    # The equivalence tests above could only pass trivially if outputs ignored the weights.
    theirs = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, dropout=0.0, batch_first=True)
    ours = EncoderLayer.from_torch(theirs)
    x = torch.randn(2, 4, D_MODEL)
    with torch.no_grad():
        ours.feed_forward.linear2.weight[0, 0] += 0.1
    assert not torch.allclose(ours(x), theirs(x), atol=1e-4)


def test_from_torch_activation_mapping_and_errors():
    for activation, name in [("gelu", "gelu"), (F.relu, "relu"), (nn.GELU(), "gelu")]:
        theirs = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, activation=activation)
        assert EncoderLayer.from_torch(theirs).feed_forward.activation == name
    unsupported = nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, activation=torch.tanh)
    with pytest.raises(ValueError, match="activation"):
        EncoderLayer.from_torch(unsupported)
    with pytest.raises(ValueError, match="activation"):
        EncoderLayer.from_torch(
            nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF, activation=nn.GELU("tanh"))
        )
    with pytest.raises(TypeError, match="TransformerEncoderLayer"):
        EncoderLayer.from_torch(nn.TransformerDecoderLayer(D_MODEL, HEADS, D_FF))
    with pytest.raises(TypeError, match="TransformerDecoderLayer"):
        DecoderLayer.from_torch(nn.TransformerEncoderLayer(D_MODEL, HEADS, D_FF))


def test_layer_norm_matches_torch():
    x = torch.randn(2, 3, 8, dtype=torch.float64) * 5 + 3
    gamma, beta = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    for eps in (1e-5, 0.3):
        expected = F.layer_norm(x, (8,), gamma, beta, eps)
        torch.testing.assert_close(layer_norm(x, gamma, beta, eps), expected)
    normalised = layer_norm(x, torch.ones(8, dtype=torch.float64), torch.zeros(8, dtype=torch.float64))
    torch.testing.assert_close(normalised.mean(-1), torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="gamma"):
        layer_norm(x, torch.ones(7, dtype=torch.float64), torch.zeros(8, dtype=torch.float64))


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


def test_bad_layer_inputs_raise_clear_errors():
    layer = EncoderLayer(8, 2, 16)
    with pytest.raises(ValueError, match="d_model=8"):
        layer(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="3 dimensions"):
        layer(torch.randn(3, 8))
    with pytest.raises(TypeError, match="bool"):
        layer(torch.randn(2, 3, 8), torch.ones(2, 1, 1, 3))
    with pytest.raises(ValueError, match="mask"):
        layer(torch.randn(2, 3, 8), torch.ones(2, 3, dtype=torch.bool))  # (batch, n) needs (batch,1,1,n)
    with pytest.raises(ValueError, match="divisible"):
        EncoderLayer(8, 3, 16)
    with pytest.raises(ValueError, match="activation"):
        EncoderLayer(8, 2, 16, activation="tanh")
    with pytest.raises(ValueError, match="dropout"):
        EncoderLayer(8, 2, 16, dropout=1.5)
    decoder_layer = DecoderLayer(8, 2, 16)
    with pytest.raises(ValueError, match="batch size"):
        decoder_layer(torch.randn(2, 3, 8), torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match="memory"):
        decoder_layer(torch.randn(2, 3, 8), torch.randn(2, 4, 6))
    with pytest.raises(ValueError, match="mask"):
        decoder_layer(torch.randn(2, 3, 8), torch.randn(2, 4, 8), memory_mask=torch.ones(3, 3, dtype=torch.bool))


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
    with pytest.raises(ValueError, match="mask"):
        decoder(x, memory, torch.ones(5, 4, dtype=torch.bool))
