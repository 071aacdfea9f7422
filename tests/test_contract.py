"""Adversarial tests of the course's *contract*: the names, shapes, masks and mistakes that
README.md states ("The library: `lectures_lib`", the paragraph "Conventions (the course's
contract)"), written from the project's specification (``../shared/COURSE_SPEC.md`` beside the
repository, not in it: section "Contract: names the tests, notebooks and exercises rely on").

Everything here is checked against references written independently of the library: float64
attention by einsum and by explicit loops, sinusoid tables from the formula, masks from
``j <= i``, and PyTorch's own modules (``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer``/``DecoderLayer``, ``F.scaled_dot_product_attention``). The
shapes, masks, dtypes and mistakes are deliberately unlike the ones the library's own tests use.
The checkers' half of the contract (correct implementations written in several ways pass, each
classic mistake is named, misbehaving functions are reported) is ``tests/checks/test_contract.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lectures_lib.attention import (
    MultiHeadAttention,
    causal_mask,
    fused_attention,
    key_padding_mask,
    scaled_dot_product_attention,
)
from lectures_lib.layers import DecoderLayer, EncoderLayer
from lectures_lib.positional import sinusoidal_encoding

from .references import loop_attention

# ---------------------------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------------------------


def ref_attention(q, k, v, mask=None):
    """float64 attention by einsum; a fully masked row gets all-zero weights (library's rule)."""
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        mask = mask.expand(scores.shape)
        scores = torch.where(mask, scores, torch.tensor(-math.inf, dtype=torch.float64))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    exps = torch.exp(scores - top)
    total = exps.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, exps / total.clamp_min(1e-300), torch.zeros_like(exps))
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=torch.float64).to(dtype)


def close(a, b, atol=1e-5, rtol=1e-5):
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol))


# ---------------------------------------------------------------------------------------------
# scaled_dot_product_attention: shapes, masks, dtypes, stability
# ---------------------------------------------------------------------------------------------

# (batch dims, n_q, n_k, d_k, d_v): cross lengths, d_k != d_v, singletons, 5-D inputs.
SHAPES = [
    ((), 1, 1, 1, 1),
    ((), 3, 7, 2, 5),
    ((1,), 6, 2, 4, 3),
    ((2, 3), 5, 5, 8, 8),
    ((2, 1, 3), 4, 9, 3, 6),
    ((4,), 1, 6, 5, 2),
]


@pytest.mark.parametrize("batch,n_q,n_k,d_k,d_v", SHAPES)
def test_attention_matches_reference_on_unusual_shapes(batch, n_q, n_k, d_k, d_v):
    q, k, v = randn(*batch, n_q, d_k), randn(*batch, n_k, d_k), randn(*batch, n_k, d_v)
    out, weights = scaled_dot_product_attention(q, k, v)
    ref_out, ref_weights = ref_attention(q, k, v)
    assert out.shape == (*batch, n_q, d_v) and weights.shape == (*batch, n_q, n_k)
    assert out.dtype == weights.dtype == torch.float32
    assert close(out, ref_out) and close(weights, ref_weights)
    assert close(weights.sum(-1), torch.ones(*batch, n_q)), "rows sum to 1"
    torch_out = F.scaled_dot_product_attention(q, k, v)
    assert close(out, torch_out), "same as PyTorch's fused kernel"


def test_attention_equals_loops_unbatched():
    q, k, v = randn(4, 3), randn(6, 3), randn(6, 2)
    mask = torch.rand(4, 6) < 0.5
    mask[:, 2] = True
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    loop_out, loop_weights = loop_attention(q, k, v, mask)
    assert close(out, loop_out) and close(weights, loop_weights)


B, H, NQ, NK = 2, 3, 4, 5
# Every shape the contract lets a mask have for (batch, heads, n_q, n_k) scores: 2-D or 4-D
# (and a keys-only (n_k,) mask); a 3-D mask is ambiguous (batch or heads first?) and refused.
MASK_SHAPES = [(NQ, NK), (1, NK), (NK,), (B, 1, 1, NK), (B, H, NQ, NK), (B, 1, NQ, NK),
               (1, 1, 1, 1), (1, H, 1, NK)]


def random_mask(shape, generator=None):
    """Random bool mask of ``shape`` in which every row keeps its last key."""
    mask = torch.rand(*shape, generator=generator) < 0.5
    mask[..., -1] = True
    return mask


@pytest.mark.parametrize("mask_shape", MASK_SHAPES, ids=str)
def test_every_broadcastable_mask_shape(mask_shape):
    q, k, v = randn(B, H, NQ, 6), randn(B, H, NK, 6), randn(B, H, NK, 7)
    mask = random_mask(mask_shape)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_weights = ref_attention(q, k, v, mask)
    assert out.shape == (B, H, NQ, 7) and weights.shape == (B, H, NQ, NK)
    assert close(out, ref_out) and close(weights, ref_weights)
    blocked = ~mask.expand(weights.shape)
    assert bool((weights[blocked] == 0).all()), "exactly 0 on masked cells"
    assert close(weights.sum(-1), torch.ones(B, H, NQ)), "rows sum to 1"
    torch_mask = mask.expand(NQ, NK) if mask.dim() == 1 else mask  # PyTorch needs >= 2-D
    assert close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=torch_mask))
    assert close(fused_attention(q, k, v, mask), out), "the fused path reads the mask the same"


@pytest.mark.parametrize(
    "bad_shape", [(NK, NQ), (B, NK), (3, 1, 1, NK), (B, H, NQ, NK + 1), (1, B, H, NQ, NK), ()],
    ids=str,
)
def test_wrong_mask_shapes_raise_and_name_the_shapes(bad_shape):
    q, k, v = randn(B, H, NQ, 6), randn(B, H, NK, 6), randn(B, H, NK, 6)
    mask = torch.ones(bad_shape, dtype=torch.bool)
    with pytest.raises(ValueError) as error:
        scaled_dot_product_attention(q, k, v, mask)
    assert str(tuple(bad_shape)) in str(error.value), "the message names the mask's shape"
    assert str((B, H, NQ, NK)) in str(error.value), "and the shape it should fit"


@pytest.mark.parametrize(
    "shapes",
    [((3, 4), (5, 3), (5, 2)), ((3, 4), (5, 4), (6, 2)), ((2, 3, 4), (3, 5, 4), (3, 5, 2)),
     ((4,), (5, 4), (5, 2))],
    ids=str,
)
def test_mismatched_qkv_raise_and_name_the_shapes(shapes):
    q, k, v = (randn(*s) for s in shapes)
    with pytest.raises(ValueError) as error:
        scaled_dot_product_attention(q, k, v)
    message = str(error.value)
    assert any(str(tuple(s)) in message for s in shapes), message


def test_float64_is_computed_in_float64():
    q, k, v = randn(2, 5, 3, dtype=torch.float64), randn(2, 4, 3, dtype=torch.float64), randn(
        2, 4, 6, dtype=torch.float64
    )
    mask = random_mask((5, 4))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    ref_out, ref_weights = ref_attention(q, k, v, mask)
    assert out.dtype == torch.float64
    assert close(out, ref_out, atol=1e-12, rtol=1e-12)
    assert close(weights, ref_weights, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_on_cpu(dtype):
    q, k, v = randn(2, 4, 8, dtype=dtype), randn(2, 6, 8, dtype=dtype), randn(2, 6, 3, dtype=dtype)
    mask = random_mask((2, 4, 6))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert out.dtype == weights.dtype == dtype
    ref_out, ref_weights = ref_attention(q, k, v, mask)
    assert close(out, ref_out, atol=3e-2, rtol=3e-2) and close(weights, ref_weights, atol=2e-2)
    assert bool((weights[~mask] == 0).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_large_scores_stay_finite(dtype):
    # Scores of order 1e4 (1e4 even in float16's range limit would overflow exp without the max).
    scale = 1e2 if dtype == torch.float16 else 1e4
    q = (randn(3, 5, 4) * scale).to(dtype)
    k = (randn(3, 6, 4)).to(dtype)
    v = randn(3, 6, 2, dtype=dtype)
    mask = random_mask((5, 6))
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert bool(torch.isfinite(out).all() and torch.isfinite(weights).all())
    ref_out, ref_weights = ref_attention(q, k, v, mask)
    atol = 2e-2 if dtype == torch.float16 else 1e-4
    assert close(weights, ref_weights, atol=atol), "a (near) one-hot softmax, no overflow"
    assert bool((weights[~mask.expand(weights.shape)] == 0).all())


def test_fully_masked_rows_give_zeros_not_nan():
    """Documented behaviour: a query with no key to attend to gets zero weights and output."""
    q, k, v = randn(2, 3, 4, 5), randn(2, 3, 6, 5), randn(2, 3, 6, 2)
    mask = random_mask((2, 1, 4, 6))
    mask[0, :, 1] = False  # query 1 of sequence 0 sees nothing
    mask[1] = False  # sequence 1 sees nothing at all
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert bool(torch.isfinite(out).all() and torch.isfinite(weights).all())
    assert bool((weights[0, :, 1] == 0).all() and (out[0, :, 1] == 0).all())
    assert bool((weights[1] == 0).all() and (out[1] == 0).all())
    ref_out, ref_weights = ref_attention(q, k, v, mask)
    assert close(out, ref_out) and close(weights, ref_weights)
    mha = MultiHeadAttention(6, 2).eval()
    x = randn(2, 4, 6)
    full, _ = mha(x, x, x, mask[:, :, :, :4])
    fast, _ = mha(x, x, x, mask[:, :, :, :4], need_weights=False)
    assert bool(torch.isfinite(fast).all()) and close(full, fast), "both paths agree, no NaN"


def test_gradients_finite_under_masks():
    q, k, v = (randn(2, 4, 5, dtype=torch.float64).requires_grad_() for _ in range(3))
    mask = random_mask((2, 4, 4))[..., :4]
    mask[0, 2] = False  # a fully masked row too
    mask[1, :, 1:] = False  # only key 0 is visible in sequence 1
    mask[1, :, 0] = True
    q5, k5, v5 = q[..., :4, :], k[..., :4, :], v[..., :4, :]
    out, weights = scaled_dot_product_attention(q5, k5, v5, mask)
    (out.square().sum() + weights.square().sum()).backward()
    for t in (q, k, v):
        assert bool(torch.isfinite(t.grad).all())
    # Without fully masked rows, the gradients equal PyTorch's.
    q2, k2, v2 = (randn(3, 4, 5, dtype=torch.float64).requires_grad_() for _ in range(3))
    mask2 = random_mask((3, 4, 4))
    ours = scaled_dot_product_attention(q2, k2, v2, mask2)[0]
    theirs = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=mask2)
    grad_ours = torch.autograd.grad(ours.sum(), (q2, k2, v2))
    grad_theirs = torch.autograd.grad(theirs.sum(), (q2, k2, v2))
    for a, b in zip(grad_ours, grad_theirs, strict=True):
        assert close(a, b, atol=1e-10)


def test_inputs_are_not_modified():
    q, k, v = randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 4)
    mask = random_mask((3, 5))
    copies = [t.clone() for t in (q, k, v, mask)]
    scaled_dot_product_attention(q, k, v, mask)
    MultiHeadAttention(4, 2)(q, k, v, mask[None, None])
    for original, copy in zip((q, k, v, mask), copies, strict=True):
        assert torch.equal(original, copy)


# ---------------------------------------------------------------------------------------------
# causal_mask and key-padding masks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_causal_mask_is_lower_triangle_with_diagonal(n):
    mask = causal_mask(n)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    expected = torch.tensor([[j <= i for j in range(n)] for i in range(n)])
    assert torch.equal(mask, expected)


def test_causal_mask_of_one_position():  # its refusals of bad sizes: rows of test_bad_inputs.py
    assert torch.equal(causal_mask(1), torch.tensor([[True]]))


def test_causal_mask_blocks_the_future_in_attention():
    q, k, v = randn(1, 6, 4), randn(1, 6, 4), randn(1, 6, 3)
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(6))
    k2, v2 = k.clone(), v.clone()
    k2[:, 4:] += 10.0
    v2[:, 4:] -= 10.0
    out2, _ = scaled_dot_product_attention(q, k2, v2, causal_mask(6))
    assert torch.equal(out[:, :4], out2[:, :4]), "later keys cannot change earlier outputs"


def test_key_padding_mask_from_lengths():
    lengths = [3, 1, 5]
    mask = key_padding_mask(lengths)
    assert mask.dtype == torch.bool and mask.shape == (3, 1, 1, 5)
    expected = torch.tensor([[j < n for j in range(5)] for n in lengths])
    assert torch.equal(mask[:, 0, 0], expected)
    assert key_padding_mask(torch.tensor(lengths), 7).shape == (3, 1, 1, 7)
    with pytest.raises(ValueError, match="2"):
        key_padding_mask(lengths, 2)


# ---------------------------------------------------------------------------------------------
# split_heads / merge_heads
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention against nn.MultiheadAttention
# ---------------------------------------------------------------------------------------------


def torch_masks(mask, batch, heads, n_q, n_k):
    """Our True = may-attend mask as PyTorch's (batch * heads, n_q, n_k) True = blocked mask."""
    return (~mask.expand(batch, heads, n_q, n_k)).reshape(batch * heads, n_q, n_k)


MHA_CASES = [
    # d_model, heads, kwargs, n_q, n_k, mask shape
    (8, 2, {}, 3, 3, None),  # n_q == n_k, no kdim: self-attention, key = value = query
    (8, 4, {"batch_first": False}, 5, 5, (2, 1, 1, 5)),  # self-attention, padded, seq-first
    (8, 2, {"bias": False}, 4, 6, (4, 6)),
    (6, 3, {"kdim": 4, "vdim": 5}, 2, 7, (2, 1, 1, 7)),
    (6, 6, {"kdim": 3, "vdim": 3, "bias": False}, 5, 1, (2, 6, 5, 1)),
    (5, 1, {"batch_first": False}, 4, 3, (2, 1, 4, 3)),
    (12, 4, {"batch_first": False, "kdim": 7, "vdim": 2}, 1, 5, (1, 5)),
    (3, 3, {"bias": False}, 1, 1, (2, 1, 1, 1)),  # d_head = 1, one token
    (4, 2, {"kdim": 3, "vdim": 6}, 5, 2, (2, 2, 5, 2)),  # a mask per example and per head
    (6, 2, {}, 4, 4, (2, 1, 4, 4)),  # self-attention under a causal-and-padding-like mask
]


@pytest.mark.parametrize("d_model,heads,kwargs,n_q,n_k,mask_shape", MHA_CASES)
@pytest.mark.parametrize("train", [False, True])
def test_mha_from_torch_matches(d_model, heads, kwargs, n_q, n_k, mask_shape, train):
    batch = 2
    torch_kwargs = {"batch_first": True, **kwargs}
    theirs = nn.MultiheadAttention(d_model, heads, dropout=0.0, **torch_kwargs).double()
    theirs.train(train)
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.training == train
    kdim, vdim = kwargs.get("kdim", d_model), kwargs.get("vdim", d_model)
    query = randn(batch, n_q, d_model, dtype=torch.float64).requires_grad_()
    key = randn(batch, n_k, kdim, dtype=torch.float64).requires_grad_()
    value = randn(batch, n_k, vdim, dtype=torch.float64).requires_grad_()
    if "kdim" not in kwargs and n_q == n_k:  # self-attention: gradients from all three uses
        key = value = query
    mask = None if mask_shape is None else random_mask(mask_shape)
    attn_mask = None if mask is None else torch_masks(mask, batch, heads, n_q, n_k)
    args = (query, key, value)
    if not torch_kwargs["batch_first"]:
        args = tuple(t.transpose(0, 1) for t in args)
    ref_out, ref_weights = theirs(*args, attn_mask=attn_mask, average_attn_weights=False)
    if not torch_kwargs["batch_first"]:
        ref_out = ref_out.transpose(0, 1)
    out, weights = ours(query, key, value, mask)
    assert out.shape == (batch, n_q, d_model) and weights.shape == (batch, heads, n_q, n_k)
    assert close(out, ref_out, atol=1e-10) and close(weights, ref_weights, atol=1e-10)
    fast, none = ours(query, key, value, mask, need_weights=False)
    assert none is None and close(fast, ref_out, atol=1e-10)
    inputs = tuple({id(t): t for t in (query, key, value)}.values())  # each distinct tensor once
    grad_out = randn(*out.shape, dtype=torch.float64)
    expected = torch.autograd.grad(ref_out, inputs, grad_out, retain_graph=True)
    for path, result in (("weights", out), ("fast", fast)):
        for got, want in zip(torch.autograd.grad(result, inputs, grad_out, retain_graph=True),
                             expected, strict=True):
            assert close(got, want, atol=1e-10), f"input gradients, {path} path"


@pytest.mark.parametrize("mask_shape", [(4, 5), (1, 5), (5,), (2, 1, 1, 5), (2, 3, 4, 5),
                                        (2, 1, 4, 5), (1, 3, 1, 5)], ids=str)
def test_mha_cross_attention_every_mask_shape_both_paths(mask_shape):
    batch, heads, n_q, n_k = 2, 3, 4, 5
    theirs = nn.MultiheadAttention(6, heads, batch_first=True, kdim=2, vdim=7).double().eval()
    ours = MultiHeadAttention.from_torch(theirs)
    query = randn(batch, n_q, 6, dtype=torch.float64)
    key, value = randn(batch, n_k, 2, dtype=torch.float64), randn(batch, n_k, 7, dtype=torch.float64)
    mask = random_mask(mask_shape)
    ref_out, ref_weights = theirs(query, key, value, average_attn_weights=False,
                                  attn_mask=torch_masks(mask, batch, heads, n_q, n_k))
    out, weights = ours(query, key, value, mask)
    fast, _ = ours(query, key, value, mask, need_weights=False)
    assert close(out, ref_out, atol=1e-10) and close(weights, ref_weights, atol=1e-10)
    assert close(fast, ref_out, atol=1e-10), "the fast path gives the same output"


def test_fast_path_gradients_finite_with_fully_masked_rows():
    mha = MultiHeadAttention(4, 2).double()
    x = randn(2, 3, 4, dtype=torch.float64).requires_grad_()
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    for need_weights in (True, False):
        out, _ = mha(x, x, x, mask, need_weights=need_weights)
        (grad,) = torch.autograd.grad(out.sum(), x)
        assert bool(torch.isfinite(out).all() and torch.isfinite(grad).all()), need_weights


def test_mha_key_padding_equals_torch_key_padding_mask():
    theirs = nn.MultiheadAttention(8, 4, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs)
    x = randn(3, 5, 8)
    lengths = torch.tensor([5, 2, 4])
    padding = torch.arange(5)[None, :] >= lengths[:, None]  # PyTorch: True = padding
    ref_out, ref_weights = theirs(x, x, x, key_padding_mask=padding, average_attn_weights=False)
    out, weights = ours(x, x, x, key_padding_mask(lengths))
    assert close(out, ref_out) and close(weights, ref_weights)
    averaged = theirs(x, x, x, key_padding_mask=padding)[1]
    assert close(weights.mean(dim=1), averaged), "torch's default averages our per-head maps"


def test_mha_gradients_match_torch():
    theirs = nn.MultiheadAttention(6, 2, batch_first=True, kdim=4, vdim=3).double()
    ours = MultiHeadAttention.from_torch(theirs)
    q, k, v = randn(2, 3, 6, dtype=torch.float64), randn(2, 5, 4, dtype=torch.float64), randn(
        2, 5, 3, dtype=torch.float64
    )
    mask = random_mask((3, 5))
    theirs(q, k, v, attn_mask=~mask)[0].pow(2).sum().backward()
    ours(q, k, v, mask)[0].pow(2).sum().backward()
    assert close(ours.q_proj.weight.grad, theirs.q_proj_weight.grad, atol=1e-10)
    assert close(ours.k_proj.weight.grad, theirs.k_proj_weight.grad, atol=1e-10)
    assert close(ours.v_proj.weight.grad, theirs.v_proj_weight.grad, atol=1e-10)
    assert close(ours.out_proj.weight.grad, theirs.out_proj.weight.grad, atol=1e-10)


def test_mha_dropout_only_in_training():
    mha = MultiHeadAttention(8, 2, dropout=0.5)
    x = randn(2, 6, 8)
    mha.eval()
    out1, w1 = mha(x, x, x)
    out2, _ = mha(x, x, x)
    assert torch.equal(out1, out2) and close(w1.sum(-1), torch.ones(2, 2, 6))
    fast, _ = mha(x, x, x, need_weights=False)
    assert close(fast, out1)
    mha.train()
    _, w_train = mha(x, x, x)
    assert bool((w_train == 0).any()), "dropout zeroes some weights in training"


# ---------------------------------------------------------------------------------------------
# sinusoidal_encoding
# ---------------------------------------------------------------------------------------------


def test_sinusoidal_encoding_wavelengths():
    d_model = 8
    table = sinusoidal_encoding(200, d_model).double()
    for i in range(d_model // 2):
        wavelength = 2 * math.pi * 10000 ** (2 * i / d_model)
        pos = torch.arange(200, dtype=torch.float64)
        assert close(table[:, 2 * i], torch.sin(2 * math.pi * pos / wavelength), atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Encoder and decoder layers against PyTorch
# ---------------------------------------------------------------------------------------------

LAYER_SETTINGS = [
    # norm_first, activation, bias, batch_first, eps
    (False, "relu", True, True, 1e-5),
    (True, "gelu", True, False, 1e-3),
    (False, F.gelu, False, True, 0.1),
    (True, nn.ReLU(), False, False, 1e-6),  # the settings cover every pair of option values
    (False, nn.GELU(), True, False, 1e-2),
    (True, torch.relu, True, True, 1e-5),
]


def _layer_ids(setting):
    norm_first, act, bias, batch_first, eps = setting
    name = act if isinstance(act, str) else getattr(act, "__name__", type(act).__name__)
    return f"{'pre' if norm_first else 'post'}-{name}-bias{bias}-bf{batch_first}-eps{eps}"


def _bf(t, batch_first):
    return t if batch_first else t.transpose(0, 1)


@pytest.mark.parametrize("setting", LAYER_SETTINGS, ids=_layer_ids)
@pytest.mark.parametrize("train", [False, True])
def test_encoder_layer_from_torch(setting, train):
    norm_first, activation, bias, batch_first, eps = setting
    theirs = nn.TransformerEncoderLayer(
        6, 3, 10, dropout=0.0, activation=activation, layer_norm_eps=eps, batch_first=batch_first,
        norm_first=norm_first, bias=bias,
    ).double().train(train)
    ours = EncoderLayer.from_torch(theirs)
    assert ours.training == train and ours.norm1.eps == eps
    x = (randn(3, 5, 6, dtype=torch.float64) * 3 + 1).requires_grad_()
    lengths = torch.tensor([5, 3, 1])
    padding = torch.arange(5)[None, :] >= lengths[:, None]  # PyTorch: True = padding
    ref = _bf(theirs(_bf(x, batch_first), src_key_padding_mask=padding), batch_first)
    out = ours(x, key_padding_mask(lengths))
    real = ~padding  # PyTorch's fast path may zero the padded positions: compare real ones
    assert close(out[real], ref[real], atol=1e-10)
    # Gradients: of the input, and of a copied weight (it gets the same gradient as torch's).
    grad_out = randn(*out.shape, dtype=torch.float64) * real[..., None]
    mine = torch.autograd.grad(out, (x, ours.feed_forward.linear1.weight), grad_out)
    theirs_grads = torch.autograd.grad(ref, (x, theirs.linear1.weight), grad_out)
    assert close(mine[0], theirs_grads[0], atol=1e-10) and close(mine[1], theirs_grads[1],
                                                                    atol=1e-10)
    x = x.detach()
    ref_causal = _bf(theirs(_bf(x, batch_first), src_mask=~causal_mask(5)), batch_first)
    assert close(ours(x, causal_mask(5)), ref_causal, atol=1e-10)
    assert close(ours(x, causal_mask(5), need_weights=True), ref_causal, atol=1e-10)


@pytest.mark.parametrize("setting", LAYER_SETTINGS, ids=_layer_ids)
def test_decoder_layer_from_torch(setting):
    norm_first, activation, bias, batch_first, eps = setting
    theirs = nn.TransformerDecoderLayer(
        8, 2, 12, dropout=0.0, activation=activation, layer_norm_eps=eps, batch_first=batch_first,
        norm_first=norm_first, bias=bias,
    ).double().train()
    ours = DecoderLayer.from_torch(theirs)
    x = randn(2, 4, 8, dtype=torch.float64).requires_grad_()
    memory = randn(2, 7, 8, dtype=torch.float64).requires_grad_()  # n_src != n_tgt
    src_lengths, tgt_lengths = torch.tensor([7, 3]), torch.tensor([4, 2])
    memory_padding = torch.arange(7)[None, :] >= src_lengths[:, None]
    tgt_padding = torch.arange(4)[None, :] >= tgt_lengths[:, None]
    ref = _bf(theirs(
        _bf(x, batch_first), _bf(memory, batch_first), tgt_mask=~causal_mask(4),
        tgt_key_padding_mask=tgt_padding, memory_key_padding_mask=memory_padding,
    ), batch_first)
    tgt_mask = causal_mask(4) & key_padding_mask(tgt_lengths)  # (batch, 1, n_tgt, n_tgt)
    out = ours(x, memory, tgt_mask, key_padding_mask(src_lengths))
    assert close(out, ref, atol=1e-10)
    grad_out = randn(*out.shape, dtype=torch.float64)
    mine = torch.autograd.grad(out, (x, memory), grad_out)
    theirs_grads = torch.autograd.grad(ref, (x, memory), grad_out)
    assert close(mine[0], theirs_grads[0], atol=1e-10) and close(mine[1], theirs_grads[1],
                                                                    atol=1e-10)
    x, memory = x.detach(), memory.detach()
    # A full (n_tgt, n_src) memory mask, in PyTorch's form and in ours.
    memory_mask = random_mask((4, 7))
    ref2 = theirs(_bf(x, batch_first), _bf(memory, batch_first), memory_mask=~memory_mask)
    assert close(ours(x, memory, None, memory_mask), _bf(ref2, batch_first), atol=1e-10)
