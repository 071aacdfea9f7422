"""lectures_lib.transformer against PyTorch's own Transformer layers, plus its own properties."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lectures_lib.positional import sinusoidal_encoding
from lectures_lib.transformer import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    EncoderTagger,
    FeedForward,
    TokenEmbedding,
    Transformer,
    layer_norm,
    make_src_mask,
    make_tgt_mask,
    sublayer_connection,
)

torch.set_num_threads(1)

D_MODEL, HEADS, D_FF = 12, 2, 20
# Every combination the contract names: norm order x activation x bias x batch_first.
SETTINGS = list(itertools.product([False, True], ["relu", F.gelu], [True, False], [True, False]))


def _padding(lengths: list[int], n: int) -> torch.Tensor:
    """PyTorch-style key padding mask: True at padding positions (end of each sequence)."""
    return torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]  # (batch, n)


def _to_torch_layout(x: torch.Tensor, batch_first: bool) -> torch.Tensor:
    return x if batch_first else x.transpose(0, 1)


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


def test_encoder_layers_share_no_parameters():
    template = EncoderLayer(D_MODEL, HEADS, D_FF)
    for encoder in (Encoder(template, 3), Encoder(lambda: EncoderLayer(D_MODEL, HEADS, D_FF), 3)):
        storages = [p.data_ptr() for layer in encoder.layers for p in layer.parameters()]
        assert len(set(storages)) == len(storages), "two layers share a parameter tensor"
        first, second = encoder.layers[0], encoder.layers[1]
        assert not torch.equal(first.self_attn.q_proj.weight, second.self_attn.q_proj.weight)
        assert not torch.equal(first.feed_forward.linear1.weight, second.feed_forward.linear1.weight)
    layer = EncoderLayer(D_MODEL, HEADS, D_FF)
    with pytest.raises(ValueError, match="same layer"):
        Encoder(lambda: layer, 2)
    with pytest.raises(TypeError, match="EncoderLayer"):
        Encoder(DecoderLayer(D_MODEL, HEADS, D_FF), 2)


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
    with pytest.raises(TypeError):
        make_src_mask(tokens.float(), 0)
    with pytest.raises(ValueError):
        make_tgt_mask(tokens[0], 0)


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
    with pytest.raises(ValueError, match="max_len"):
        embed(torch.ones(1, 9, dtype=torch.long))


def test_bad_inputs_raise_clear_errors():
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
    model = _small_transformer()
    with pytest.raises(ValueError, match=r"\[0, 10\]"):
        model(torch.tensor([[1, 11]]), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="tgt"):
        model(torch.tensor([[1, 2]]), torch.tensor([[1, 13]]))
    with pytest.raises(TypeError, match="integer"):
        model(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="2 dimensions"):
        model(torch.tensor([1, 2]), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="batch"):
        model.decode(torch.tensor([[1, 2]]), torch.randn(2, 3, 16))
