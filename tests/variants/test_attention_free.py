"""Tests of ``lectures_lib.variants.attention_free`` (the uniform-average baseline, FNet) and
``lectures_lib.variants.efficient`` (Efficient Attention, Shen et al.): each against a reference
written from the paper's formula, masks, the N x N matrix never built, and use as a factory."""

import inspect
import math

import pytest
import torch
from torch import nn

from lectures_lib.attention import MultiHeadAttention
from lectures_lib.masks import causal_mask
from lectures_lib.models import EncoderTagger
from lectures_lib.variants import ATTENTION_FREE, AttentionVariant
from lectures_lib.variants.attention_free import (
    FourierMixing,
    UniformAttention,
    fourier_mixing,
    uniform_attention,
)
from lectures_lib.variants.efficient import EfficientAttention, efficient_attention

from .helpers import largest_tensors, random_qkv

# -- Efficient Attention ---------------------------------------------------------------------------


def reference_efficient(q, k, v, key_mask=None):
    """Loops over the d features: context_f = sum_j softmax_j(k_jf) v_j; out_i = sum_f
    softmax_f(q_if) context_f."""
    n_k, d = k.shape[-2], k.shape[-1]
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for f in range(d):
        column = k[..., f].clone()  # (..., n_k)
        if key_mask is not None:
            column = column.masked_fill(~key_mask, -math.inf)
        weights = column.exp() / column.exp().sum(-1, keepdim=True)  # over positions
        context = (weights[..., None] * v).sum(-2)  # (..., d_v)
        query_weight = q.exp()[..., f] / q.exp().sum(-1)  # (..., n_q), over features
        out += query_weight[..., None] * context[..., None, :]
    assert n_k == v.shape[-2]
    return out


@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_efficient_attention_matches_the_formula(batch):
    torch.manual_seed(0)
    q, k, v = random_qkv(*batch, n=6, d_k=4, d_v=5, n_k=9)
    torch.testing.assert_close(efficient_attention(q, k, v), reference_efficient(q, k, v))


def test_efficient_attention_outputs_are_convex_combinations_of_values():
    torch.manual_seed(1)
    q, k, _ = random_qkv(2, n=7, d_k=4, d_v=3)
    v = torch.eye(7, dtype=torch.float64).expand(2, 7, 7)  # values = one-hot positions
    weights = efficient_attention(q, k, v)  # row i = the weights query i gives each position
    assert bool((weights > 0).all())
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 7, dtype=torch.float64))
    assert not torch.allclose(weights, torch.softmax(q @ k.transpose(-2, -1), -1)), \
        "a different model from softmax attention"


def test_efficient_attention_key_mask_removes_keys():
    torch.manual_seed(2)
    q, k, v = random_qkv(2, n=6, d_k=4, d_v=3)
    key_mask = torch.tensor([True, True, False, True, False, True])
    out = efficient_attention(q, k, v, key_mask)
    v2, k2 = v.clone(), k.clone()
    v2[..., ~key_mask, :] = 1e3
    k2[..., ~key_mask, :] = -7.0
    torch.testing.assert_close(efficient_attention(q, k2, v2, key_mask), out)
    torch.testing.assert_close(out, reference_efficient(q, k, v, key_mask))


def test_efficient_attention_never_builds_n_by_n():
    n, d = 256, 8
    largest, saved = largest_tensors(lambda q, k, v: efficient_attention(q, k, v), n, d)
    assert largest < n * n / 4 and saved < n * n / 4


def test_efficient_attention_module_weights_and_masks():
    torch.manual_seed(3)
    module = EfficientAttention(8, 2).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    out, weights = module(x, x, x, need_weights=True)
    fused, none = module(x, x, x, need_weights=False)
    assert none is None and weights.shape == (2, 2, 5, 5)
    torch.testing.assert_close(out, fused)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 5, dtype=torch.float64))


# -- the uniform-average baseline ------------------------------------------------------------------


def test_uniform_attention_is_full_attention_without_content():
    # Full attention whose query projection is zero scores every key 0: weights 1/N, the baseline.
    torch.manual_seed(4)
    full = MultiHeadAttention(8, 2).double().eval()
    with torch.no_grad():
        full.q_proj.weight.zero_()
        full.q_proj.bias.zero_()
    uniform = UniformAttention(8, 2).double().eval()
    uniform.load_state_dict(full.state_dict())
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    key_mask = torch.tensor([[True] * 6, [True, False] * 3, [False] * 5 + [True]])[:, None, None]
    for mask in (None, key_mask):
        expected, expected_weights = full(x, x, x, mask)
        out, weights = uniform(x, x, x, mask)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(weights, expected_weights)


def test_uniform_attention_is_the_mean_over_the_unmasked_positions():
    """Its dense reference, written as a loop: every query gets the plain mean of the values of
    the keys it may attend to (all of them without a mask)."""
    torch.manual_seed(8)
    module = UniformAttention(8, 2).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    keep = torch.tensor([[True] * 5, [True, True, False, True, False]])
    q, k, v = module.project(x, x, x)  # (2, heads, 5, d_head)
    out, _ = module.attend(q, k, v, keep[:, None, None, :], False)
    for b in range(2):
        allowed = [j for j in range(5) if keep[b, j]]
        mean = sum(v[b, :, j] for j in allowed) / len(allowed)  # (heads, d_head)
        for i in range(5):
            torch.testing.assert_close(out[b, :, i], mean)


def test_uniform_attention_function_all_masked_row_is_zero():
    v = torch.randn(2, 4, 3)
    out = uniform_attention(v, torch.zeros(2, 4, dtype=torch.bool))
    assert torch.equal(out, torch.zeros_like(out))


# -- FNet ----------------------------------------------------------------------------------------


def dft(n, dtype=torch.complex128):
    index = torch.arange(n, dtype=torch.float64)
    return torch.exp(-2j * math.pi * torch.outer(index, index) / n).to(dtype)


def test_fourier_mixing_is_two_dft_matrices():
    torch.manual_seed(5)
    x = torch.randn(2, 7, 6, dtype=torch.float64)
    expected = (dft(7) @ x.to(torch.complex128) @ dft(6)).real  # F_seq X F_hidden (both symmetric)
    torch.testing.assert_close(fourier_mixing(x), expected)


def test_fourier_mixing_mixes_every_position_and_ignores_padding():
    torch.manual_seed(6)
    module = FourierMixing(6, 2)
    x = torch.randn(1, 5, 6, requires_grad=True)
    module(x, x, x)[0][0, 0].sum().backward()
    assert bool((x.grad.abs().sum(-1) > 0).all()), "output 0 depends on every position"
    keep = torch.tensor([True, True, True, False, False])
    out = module(x, x, x, keep[None, None, None])[0]
    x2 = x.detach().clone()
    x2[:, ~keep] = 50.0
    torch.testing.assert_close(module(x2, x2, x2, keep[None, None, None])[0], out.detach())


def test_the_attention_free_registry_holds_every_token_mixer_the_package_exports():
    """``variants.ATTENTION_FREE`` lists every exported factory class that is not an attention
    variant (no q.k, no weights, no value projection): the benchmark finds FNet there."""
    import lectures_lib.variants as variants

    exported = {getattr(variants, name) for name in variants.__all__}
    mixers = {obj for obj in exported if inspect.isclass(obj) and issubclass(obj, nn.Module)
              and not issubclass(obj, AttentionVariant)}
    assert mixers == set(ATTENTION_FREE), "list a new attention-free mixer in ATTENTION_FREE"


@pytest.mark.parametrize("cls", ATTENTION_FREE, ids=lambda c: c.__name__)
def test_an_attention_free_mixer_equals_its_reference_and_refuses_what_it_cannot_honour(cls):
    """FNet's reference: the real part of the 2-D DFT (positions x hidden) of the input with the
    padded positions zeroed; a causal mask or a band is refused (every position sees all)."""
    torch.manual_seed(9)
    module = cls(6, 2)
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    keep = torch.tensor([[True] * 5, [True, True, True, False, False]])
    kept = x * keep[..., None]
    expected = (dft(5) @ kept.to(torch.complex128) @ dft(6)).real
    torch.testing.assert_close(module(x, x, x, keep[:, None, None, :])[0], expected)
    for mask in (causal_mask(5), (torch.arange(5)[:, None] - torch.arange(5)).abs() <= 1):
        with pytest.raises(ValueError, match="key-padding mask"):
            module(x, x, x, mask)


@pytest.mark.parametrize("factory", [UniformAttention, FourierMixing, EfficientAttention])
def test_factories_train_in_an_encoder(factory):
    torch.manual_seed(7)
    model = EncoderTagger(12, 3, d_model=16, num_heads=2, num_layers=2, d_ff=32, max_len=10,
                          attention=factory)
    tokens = torch.randint(1, 12, (4, 10))
    tokens[0, -3:] = 0  # padding
    loss = model(tokens).logsumexp(-1).mean()
    loss.backward()
    assert model.embed.embedding.weight.grad is not None
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert all(bool(torch.isfinite(g).all()) for g in grads)
