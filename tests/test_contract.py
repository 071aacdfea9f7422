"""Adversarial tests of the course's *contract*: the names, shapes, masks and mistakes that
README.md states ("The library: `lectures_lib`", the paragraph "Conventions (the course's
contract)"), written from the project's specification (``../shared/COURSE_SPEC.md`` beside the
repository, not in it: section "Contract: names the tests, notebooks and exercises rely on").

Everything here is checked against references written independently of the library: float64
attention by einsum and by explicit loops, sinusoid tables from the formula, masks from
``j <= i``, and PyTorch's own modules (``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer``/``DecoderLayer``, ``F.scaled_dot_product_attention``). The
shapes, masks, dtypes and mistakes are deliberately unlike the ones the library's own tests use.
The checkers are probed with correct implementations written in several ways and with each
classic mistake, and with functions that misbehave (crash, return garbage, print, mutate).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lectures_lib import checks
from lectures_lib.attention import (
    MultiHeadAttention,
    causal_mask,
    fused_attention,
    key_padding_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from lectures_lib.layers import DecoderLayer, EncoderLayer
from lectures_lib.positional import sinusoidal_encoding

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


def loop_attention(q, k, v, mask=None):
    """Python loops over one unbatched (n_q, d) problem, float64 with math.exp."""
    n_q, n_k = q.shape[0], k.shape[0]
    weights = torch.zeros(n_q, n_k, dtype=torch.float64)
    for i in range(n_q):
        scores = [
            float(q[i].double() @ k[j].double()) / math.sqrt(q.shape[1])
            if mask is None or bool(mask[i, j])
            else None
            for j in range(n_k)
        ]
        top = max(s for s in scores if s is not None)
        exps = [0.0 if s is None else math.exp(s - top) for s in scores]
        for j in range(n_k):
            weights[i, j] = exps[j] / sum(exps)
    return weights @ v.double(), weights


def ref_table(n_positions, d_model):
    """Sinusoid table straight from the formula, with Python's math in float64."""
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    for pos in range(n_positions):
        for j in range(d_model):
            i = j // 2
            angle = pos / 10000 ** (2 * i / d_model)
            table[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return table


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


@pytest.mark.parametrize("three_d", [(H, NQ, NK), (B, NQ, NK), (1, NQ, NK), (1, 1, NK)], ids=str)
def test_three_dimensional_masks_are_refused_with_both_fixes(three_d):
    q, k, v = randn(B, H, NQ, 6), randn(B, H, NK, 6), randn(B, H, NK, 6)
    mask = torch.ones(three_d, dtype=torch.bool)
    with pytest.raises(ValueError) as error:
        scaled_dot_product_attention(q, k, v, mask)
    message = str(error.value)
    assert str(tuple(three_d)) in message and "mask[:, None]" in message and "mask[None]" in message
    module = MultiHeadAttention(6, 3)
    x = randn(B, NQ, 6)
    with pytest.raises(ValueError, match=r"mask\[:, None\]"):
        module(x, x, x, torch.ones(B, NQ, NQ, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.uint8])
def test_non_bool_masks_are_rejected(dtype):
    q, k, v = randn(NQ, 6), randn(NK, 6), randn(NK, 6)
    mask = torch.ones(NQ, NK, dtype=dtype)
    with pytest.raises(TypeError, match=str(dtype).replace("torch.", "")):
        scaled_dot_product_attention(q, k, v, mask)


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


def test_causal_mask_one_and_bad_sizes():
    assert torch.equal(causal_mask(1), torch.tensor([[True]]))
    for bad in (0, -3):
        with pytest.raises(ValueError, match=str(bad)):
            causal_mask(bad)
    for bad in (2.0, "3", None):
        with pytest.raises(TypeError):
            causal_mask(bad)


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


@pytest.mark.parametrize("batch,seq,d_model,heads", [(1, 1, 1, 1), (2, 3, 12, 4), (3, 5, 6, 6),
                                                     (2, 4, 10, 1)])
def test_split_and_merge_heads(batch, seq, d_model, heads):
    x = randn(batch, seq, d_model)
    split = split_heads(x, heads)
    d_head = d_model // heads
    assert split.shape == (batch, heads, seq, d_head)
    for h in range(heads):
        assert torch.equal(split[:, h], x[..., h * d_head : (h + 1) * d_head])
    assert torch.equal(merge_heads(split), x)


def test_split_heads_errors_name_the_numbers():
    with pytest.raises(ValueError, match=r"10.*4|4.*10"):
        split_heads(randn(2, 3, 10), 4)
    with pytest.raises(ValueError, match=r"\(3, 10\)"):
        split_heads(randn(3, 10), 2)
    with pytest.raises(ValueError, match=r"\(2, 3, 10\)"):
        merge_heads(randn(2, 3, 10))


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


@pytest.mark.parametrize("d_model,heads", [(10, 3), (7, 2), (4, 8)])
def test_mha_rejects_non_divisible_heads(d_model, heads):
    with pytest.raises(ValueError) as error:
        MultiHeadAttention(d_model, heads)
    assert str(d_model) in str(error.value) and str(heads) in str(error.value)


def test_mha_rejects_bad_inputs_with_shapes():
    mha = MultiHeadAttention(8, 2, kdim=4)
    q, k, v = randn(2, 3, 8), randn(2, 5, 4), randn(2, 5, 8)
    cases = [
        ((randn(3, 8), k, v, None), r"\(3, 8\)"),  # unbatched
        ((randn(2, 3, 6), k, v, None), r"\(2, 3, 6\)"),  # wrong d_model
        ((q, randn(2, 5, 8), v, None), r"\(2, 5, 8\)"),  # wrong kdim
        ((q, k, randn(2, 4, 8), None), r"\(2, 4, 8\)"),  # keys and values of other lengths
        ((q, randn(3, 5, 4), randn(3, 5, 8), None), r"\(3, 5, 4\)"),  # batch mismatch
        ((q, k, v, torch.ones(2, 5, dtype=torch.bool)), r"\(2, 5\)"),  # (batch, n_k) padding
        ((q, k, v, torch.ones(5, 3, dtype=torch.bool)), r"\(5, 3\)"),  # transposed mask
    ]
    for args, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            mha(*args)
    with pytest.raises(TypeError, match="float32"):
        mha(q, k, v, torch.ones(3, 5))


# ---------------------------------------------------------------------------------------------
# sinusoidal_encoding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_positions,d_model", [(1, 1), (1, 6), (4, 1), (6, 2), (9, 3), (5, 7),
                                                 (30, 512)])
def test_sinusoidal_encoding_equals_the_formula(n_positions, d_model):
    table = sinusoidal_encoding(n_positions, d_model)
    assert table.shape == (n_positions, d_model) and table.is_floating_point()
    assert close(table, ref_table(n_positions, d_model), atol=1e-6, rtol=0)
    expected_row0 = torch.tensor([float(j % 2) for j in range(d_model)])
    assert torch.equal(table[0].float(), expected_row0), "position 0: sin 0 = 0, cos 0 = 1"


def test_sinusoidal_encoding_wavelengths():
    d_model = 8
    table = sinusoidal_encoding(200, d_model).double()
    for i in range(d_model // 2):
        wavelength = 2 * math.pi * 10000 ** (2 * i / d_model)
        pos = torch.arange(200, dtype=torch.float64)
        assert close(table[:, 2 * i], torch.sin(2 * math.pi * pos / wavelength), atol=1e-5)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_sinusoidal_encoding_rejects_bad_sizes(bad):
    with pytest.raises((TypeError, ValueError)):
        sinusoidal_encoding(bad, 4)
    with pytest.raises((TypeError, ValueError)):
        sinusoidal_encoding(4, bad)


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


def test_decoder_layer_rejects_wrong_masks():
    layer = DecoderLayer(8, 2, 16)
    x, memory = randn(2, 4, 8), randn(2, 7, 8)
    with pytest.raises(ValueError, match=r"\(4, 4\)"):
        layer(x, memory, None, torch.ones(4, 4, dtype=torch.bool))  # memory mask of tgt shape
    with pytest.raises(ValueError, match=r"\(2, 7\)"):
        layer(x, memory, None, torch.ones(2, 7, dtype=torch.bool))  # (batch, n_src) padding
    with pytest.raises(TypeError):
        layer(x, memory, torch.ones(4, 4))  # float mask
    with pytest.raises(ValueError, match=r"\(3, 7, 8\)"):
        layer(x, randn(3, 7, 8))  # batch mismatch
    with pytest.raises(ValueError, match=r"\(2, 4, 6\)"):
        EncoderLayer(8, 2, 16)(randn(2, 4, 6))
    with pytest.raises(ValueError, match=r"8.*3|3.*8"):
        EncoderLayer(8, 3, 16)


# ---------------------------------------------------------------------------------------------
# Checkers: correct implementations pass
# ---------------------------------------------------------------------------------------------


def sdpa_loops(q, k, v, mask=None):
    """Loops over every leading index, float64 Python math, results cast back."""
    *batch, n_q, _ = q.shape
    n_k, d_v = v.shape[-2:]
    flat_q, flat_k, flat_v = q.reshape(-1, n_q, q.shape[-1]), k.reshape(-1, n_k, k.shape[-1]), \
        v.reshape(-1, n_k, d_v)
    full_mask = None if mask is None else mask.expand(*batch, n_q, n_k).reshape(-1, n_q, n_k)
    outs, weights = [], []
    for b in range(flat_q.shape[0]):
        o, w = loop_attention(flat_q[b], flat_k[b], flat_v[b],
                              None if full_mask is None else full_mask[b])
        outs.append(o)
        weights.append(w)
    out = torch.stack(outs).reshape(*batch, n_q, d_v).to(q.dtype)
    return out, torch.stack(weights).reshape(*batch, n_q, n_k).to(q.dtype)


def sdpa_einsum_additive(q, k, v, mask=None):
    """einsum and an additive -1e9 mask built with torch.where."""
    scores = torch.einsum("...id,...jd->...ij", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = scores + torch.where(mask, 0.0, -1e9).to(scores.dtype)
    weights = scores.softmax(dim=-1)
    return torch.einsum("...ij,...jd->...id", weights, v), weights


def sdpa_float64_inside(q, k, v, mask=None):
    """Computes in float64 and returns float64: a correct, more precise result."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.mT / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -math.inf)
    weights = F.softmax(scores, -1)
    return (weights @ v, weights)


def sdpa_scaled_keys_in_place_on_copy(q, k, v, mask=None):
    """Scales a *copy* of the keys in place (allowed), masks with finfo.min, returns a list."""
    k = k.clone()
    k.div_(math.sqrt(k.shape[-1]))
    scores = q @ k.transpose(-1, -2)
    if mask is not None:
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    weights = torch.exp(scores - scores.logsumexp(-1, keepdim=True))
    return [weights @ v, weights]


def sdpa_float32_buffer(q, k, v, mask=None):
    """A learner's version that fills default-dtype (float32) buffers: right values."""
    scores = torch.zeros(*q.shape[:-1], k.shape[-2])
    scores[...] = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v.float(), weights


def causal_loops(n):
    return torch.tensor([[j <= i for j in range(n)] for i in range(n)])


def causal_numpy(n):
    return torch.from_numpy(np.tri(n, dtype=bool))


def causal_not_future(n):
    return ~torch.ones(n, n, dtype=torch.bool).triu(1)


def causal_compare(n):
    return torch.arange(n).unsqueeze(-1) >= torch.arange(n).unsqueeze(0)


def sin_loops(n_positions, d_model):
    rows = []
    for pos in range(n_positions):
        row = []
        for j in range(d_model):
            angle = pos / 10000 ** ((j - j % 2) / d_model)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows)


def sin_exp_log(n_positions, d_model):
    pos = torch.arange(n_positions, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)[:, : d_model // 2]
    return pe


def sin_numpy_float64(n_positions, d_model):
    pos = np.arange(n_positions)[:, None]
    i = np.arange(d_model)[None, :] // 2
    angles = pos / np.power(10000.0, 2 * i / d_model)
    return torch.from_numpy(np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles)))


def sin_stack_interleave(n_positions, d_model):
    pos = torch.arange(n_positions)[:, None].double()
    freqs = 1.0 / 10000 ** (torch.arange(0, d_model + 1, 2).double() / d_model)
    angles = pos * freqs
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(n_positions, -1)[:, :d_model]


def split_einops_style(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).movedim(2, 1)


def split_loop_cat(x, num_heads):
    d_head = x.shape[-1] // num_heads
    return torch.cat([x[None, :, :, h * d_head:(h + 1) * d_head] for h in range(num_heads)]) \
        .transpose(0, 1).contiguous()


def split_float64_roundtrip(x, num_heads):
    b, s, d = x.shape
    return x.double().view(b, s, num_heads, d // num_heads).permute(0, 2, 1, 3).to(x.dtype)


def merge_unflatten(x):
    return x.movedim(1, 2).flatten(2)


def merge_loop(x):
    return torch.stack([torch.cat(list(x[:, :, i].unbind(1)), dim=-1) for i in range(x.shape[2])],
                       dim=1)


def merge_einsum_identity(x):
    b, h, s, d = x.shape
    return torch.einsum("bhsd->bshd", x).reshape(b, s, h * d)


def mha_vectorised(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    b, s, d = x.shape
    q, k, v = ((x @ w).view(b, s, num_heads, -1).transpose(1, 2) for w in (w_q, w_k, w_v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    return (weights @ v).transpose(1, 2).reshape(b, s, d) @ w_o, weights


def mha_lecture_loops(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """The lecture's form: one small attention per head on its slice of the projections."""
    d_head = x.shape[-1] // num_heads
    heads, maps = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        scores = torch.einsum("bid,bjd->bij", q, k) / d_head**0.5
        if mask is not None:
            scores = scores.masked_fill(~mask.expand(x.shape[0], 1, *scores.shape[-2:])[:, 0],
                                        -1e9)
        alpha = torch.softmax(scores, dim=-1)
        heads.append(alpha @ v)
        maps.append(alpha)
    return torch.cat(heads, dim=-1) @ w_o, torch.stack(maps, dim=1)


def mha_float64_inside(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    out, weights = mha_vectorised(x.double(), w_q.double(), w_k.double(), w_v.double(),
                                  w_o.double(), num_heads, mask)
    return out, weights


def layer_norm_manual(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta


def layer_norm_torch(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def layer_norm_rsqrt(x, gamma, beta, eps=1e-5):
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * gamma + beta


def sublayer_if(x, sublayer, norm, norm_first=False):
    if norm_first:
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))


def sublayer_one_line(x, sublayer, norm, norm_first=False):
    return x + sublayer(norm(x)) if norm_first else norm(sublayer(x) + x)


def sublayer_residual_name(x, sublayer, norm, norm_first=False):
    residual = x
    h = norm(x) if norm_first else x
    h = residual + sublayer(h)
    return h if norm_first else norm(h)


CORRECT = {
    "scaled_dot_product_attention": [
        scaled_dot_product_attention, sdpa_loops, sdpa_einsum_additive, sdpa_float64_inside,
        sdpa_scaled_keys_in_place_on_copy, sdpa_float32_buffer,
    ],
    "causal_mask": [causal_mask, causal_loops, causal_numpy, causal_not_future, causal_compare],
    "sinusoidal_encoding": [
        sinusoidal_encoding, sin_loops, sin_exp_log, sin_numpy_float64, sin_stack_interleave,
    ],
    "split_heads": [split_heads, split_einops_style, split_loop_cat, split_float64_roundtrip],
    "merge_heads": [merge_heads, merge_unflatten, merge_loop, merge_einsum_identity],
    "multi_head_attention": [mha_vectorised, mha_lecture_loops, mha_float64_inside],
    "layer_norm": [layer_norm_manual, layer_norm_torch, layer_norm_rsqrt],
    "sublayer_connection": [sublayer_if, sublayer_one_line, sublayer_residual_name],
}

CHECKERS = {name: getattr(checks, f"check_{name}") for name in CORRECT}


@pytest.mark.parametrize(
    "name,fn", [(name, fn) for name, fns in CORRECT.items() for fn in fns],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_checkers_accept_correct_implementations(name, fn):
    result = CHECKERS[name](fn)
    assert result.passed, result
    assert result.mistake is None and str(result)


# ---------------------------------------------------------------------------------------------
# Checkers: classic mistakes are named
# ---------------------------------------------------------------------------------------------


def _softmax_attention(scores, v, mask, fill=float("-inf")):
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    weights = scores.softmax(-1)
    return weights @ v, weights


def _scores(q, k, divisor=None):
    return q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if divisor is None else divisor)


def _not_implemented(*args, **kwargs):
    raise NotImplementedError


SDPA_MISTAKES = [
    ("no scaling", lambda q, k, v, mask=None: _softmax_attention(_scores(q, k, 1.0), v, mask),
     "missing_scaling", "scal"),
    ("scaled by d_k", lambda q, k, v, mask=None: _softmax_attention(
        _scores(q, k, q.shape[-1]), v, mask), "wrong_scaling", "d_k"),
    ("softmax over queries", lambda q, k, v, mask=None: (
        _scores(q, k).softmax(-2) @ v, _scores(q, k).softmax(-2)), "softmax_wrong_axis", "dim"),
    ("mask ignored", lambda q, k, v, mask=None: _softmax_attention(_scores(q, k), v, None),
     "mask_ignored", "mask"),
    ("mask inverted", lambda q, k, v, mask=None: _softmax_attention(
        _scores(q, k), v, None if mask is None else ~mask), "mask_inverted", "invert"),
    ("mask after softmax", lambda q, k, v, mask=None: (
        lambda w: (w @ v, w))(_scores(q, k).softmax(-1) * (1 if mask is None else mask)),
     "mask_after_softmax", "after"),
    ("naive exp", lambda q, k, v, mask=None: (
        lambda e: (e / e.sum(-1, keepdim=True) @ v, e / e.sum(-1, keepdim=True)))(
        _scores(q, k).masked_fill(~mask, -1e9).exp() if mask is not None else _scores(q, k).exp()),
     "overflow", "large"),
    ("weights transposed", lambda q, k, v, mask=None: (
        lambda o, w: (o, w.transpose(-2, -1)))(*_softmax_attention(_scores(q, k), v, mask)),
     "weights_transposed", "n_q"),
    ("scales q in place", lambda q, k, v, mask=None: _softmax_attention(
        q.mul_(q.shape[-1] ** -0.5) @ k.transpose(-2, -1), v, mask), "modified_input", "place"),
    ("not implemented", _not_implemented, "not_implemented", "implemented"),
    ("returns out only", lambda q, k, v, mask=None: _softmax_attention(_scores(q, k), v, mask)[0],
     "wrong_return_type", "weights"),
    ("returns a dict", lambda q, k, v, mask=None: dict(
        zip(("out", "weights"), _softmax_attention(_scores(q, k), v, mask), strict=True)),
     "wrong_return_type", "dict"),
]


def _bad_causal(fn):
    return fn


CAUSAL_MISTAKES = [
    ("future visible", lambda n: torch.ones(n, n, dtype=torch.bool), "future_visible", "j > i"),
    ("upper triangle", lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "future_visible",
     "later"),
    ("diagonal missing", lambda n: torch.ones(n, n, dtype=torch.bool).tril(-1),
     "diagonal_missing", "diagonal"),
    ("torch polarity", lambda n: torch.ones(n, n, dtype=torch.bool).triu(1), "inverted_polarity",
     "MultiheadAttention"),
    ("float mask", lambda n: torch.ones(n, n).tril(), "wrong_dtype", "bool"),
    ("int mask", lambda n: torch.ones(n, n, dtype=torch.int64).tril(), "wrong_dtype", "bool"),
    ("not implemented", _not_implemented, "not_implemented", "implemented"),
    ("numpy", lambda n: np.tri(n, dtype=bool), "wrong_return_type", "ndarray"),
    ("batched", lambda n: torch.ones(1, n, n, dtype=torch.bool).tril(), "wrong_shape", "shape"),
]


def _table(n, d, *, swap=False, halves=False, exponent=None, first=0, transpose=False):
    pos = torch.arange(first, first + n, dtype=torch.float64)[:, None]
    j = torch.arange(d, dtype=torch.float64)
    expo = (2 * (j // 2) / d) if exponent is None else exponent(j, d)
    angles = pos / 10000**expo
    if halves:
        half = (d + 1) // 2
        pair = torch.arange(half, dtype=torch.float64)
        a = pos / 10000 ** (2 * pair / d)
        table = torch.cat([a.sin(), a.cos()[:, : d - half]], dim=1)
    else:
        even = (j % 2 == 0)
        table = torch.where(even ^ swap, angles.sin(), angles.cos())
    return table.T.contiguous() if transpose else table


SIN_MISTAKES = [
    ("sin/cos swapped", lambda n, d: _table(n, d, swap=True), "sin_cos_swapped", "cos"),
    ("halves", lambda n, d: _table(n, d, halves=True), "not_interleaved", "interleave"),
    ("exponent i/d", lambda n, d: _table(n, d, exponent=lambda j, d: (j // 2) / d),
     "wrong_frequency", "2i"),
    ("exponent 2j/d", lambda n, d: _table(n, d, exponent=lambda j, d: 2 * j / d),
     "wrong_frequency", "frequen"),
    ("positions from 1", lambda n, d: _table(n, d, first=1), "positions_from_one", "0"),
    ("transposed", lambda n, d: _table(n, d, transpose=True), "transposed", "transpose"),
    ("not implemented", _not_implemented, "not_implemented", "implemented"),
    ("base 1000", lambda n, d: _table(n, d, exponent=lambda j, d: 2 * (j // 2) / d * 0.75),
     "wrong_frequency", "frequen"),
]

SPLIT_MISTAKES = [
    ("reshape without transpose", lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1),
     "reshape_without_transpose", "transpose"),
    ("heads mixing channels", lambda x, h: x.view(*x.shape[:2], -1, h).permute(0, 3, 1, 2),
     "heads_mixing_channels", "contiguous"),
    ("scaled by sqrt(d_head)", lambda x, h: split_heads(x, h) / math.sqrt(x.shape[-1] // h),
     None, "scal"),
    ("not implemented", _not_implemented, "not_implemented", "implemented"),
    ("no transpose at all", lambda x, h: x.view(*x.shape[:2], h, -1), "wrong_shape",
     "transpose"),
]

MERGE_MISTAKES = [
    ("reshape without transpose", lambda x: x.reshape(x.shape[0], x.shape[2], -1),
     "reshape_without_transpose", "transpose"),
    ("not implemented", _not_implemented, "not_implemented", "implemented"),
    ("heads interleaved", lambda x: x.permute(0, 2, 3, 1).flatten(2), "heads_mixing_channels",
     "contiguous"),
]


def _mha_with(**change):
    def fn(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        b, s, d = x.shape
        d_head = d // num_heads

        def split(t):
            if change.get("split") == "reshape":
                return t.reshape(b, num_heads, s, d_head)
            return t.reshape(b, s, num_heads, d_head).transpose(1, 2)

        q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
        divisor = math.sqrt(d if change.get("scale") == "d_model" else d_head)
        scores = q @ k.transpose(-2, -1) / divisor
        if mask is not None and change.get("mask") != "ignore":
            used = ~mask if change.get("mask") == "invert" else mask
            scores = scores.masked_fill(~used, -1e9)
        weights = scores.softmax(-1)
        merged = (weights @ v).transpose(1, 2).reshape(b, s, d)
        out = merged if change.get("no_out_proj") else merged @ w_o
        if change.get("average"):
            weights = weights.mean(1)
        return out, weights

    return fn


MHA_MISTAKES = [
    ("scaled by d_model", _mha_with(scale="d_model"), "scaled_by_d_model", "d_model"),
    ("reshape without transpose", _mha_with(split="reshape"), "reshape_without_transpose",
     "transpose"),
    ("no output projection", _mha_with(no_out_proj=True), "missing_output_projection", "W^O"),
    ("mask inverted", _mha_with(mask="invert"), "mask_inverted", "invert"),
    ("mask ignored", _mha_with(mask="ignore"), "mask_ignored", "mask"),
    ("weights averaged", _mha_with(average=True), "weights_averaged", "average"),
    ("not implemented", _not_implemented, "not_implemented", "implemented"),
]

LAYER_NORM_MISTAKES = [
    ("over the batch", lambda x, g, b, eps=1e-5: g * (x - x.mean(0, keepdim=True)) / torch.sqrt(
        x.var(0, unbiased=False, keepdim=True) + eps) + b, "wrong_axis", "last dimension"),
    ("unbiased variance", lambda x, g, b, eps=1e-5: g * (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        x.var(-1, keepdim=True) + eps) + b, "unbiased_variance", "biased"),
    ("not implemented", _not_implemented, "not_implemented", "implemented"),
]

SUBLAYER_MISTAKES = [
    ("orders swapped", lambda x, s, n, norm_first=False: sublayer_if(x, s, n, not norm_first),
     "orders_swapped", "Pre-LN"),
    ("no residual", lambda x, s, n, norm_first=False: n(s(x)) if not norm_first else s(n(x)),
     "residual_missing", "residual"),
    ("not implemented", _not_implemented, "not_implemented", "implemented"),
]

MISTAKES = {
    "scaled_dot_product_attention": SDPA_MISTAKES,
    "causal_mask": CAUSAL_MISTAKES,
    "sinusoidal_encoding": SIN_MISTAKES,
    "split_heads": SPLIT_MISTAKES,
    "merge_heads": MERGE_MISTAKES,
    "multi_head_attention": MHA_MISTAKES,
    "layer_norm": LAYER_NORM_MISTAKES,
    "sublayer_connection": SUBLAYER_MISTAKES,
}


@pytest.mark.parametrize(
    "name,title,fn,code,word",
    [(name, *case) for name, cases in MISTAKES.items() for case in cases],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_checkers_name_the_mistake(name, title, fn, code, word):
    result = CHECKERS[name](fn)
    assert not result.passed, f"{title} must fail"
    assert result.mistake, f"{title}: a mistake code is set"
    if code is not None:
        assert result.mistake == code, f"{title}: {result.mistake} != {code}: {result}"
    assert result.mistake not in ("wrong_values", "checker_error"), f"{title}: {result}"
    message = str(result)
    assert len(result.message) > 30 and word.lower() in message.lower(), message


# ---------------------------------------------------------------------------------------------
# Checkers: robust against anything a learner may pass
# ---------------------------------------------------------------------------------------------

_GLOBAL_COUNTER = {"calls": 0}


def _returns_none(*args, **kwargs):
    return None


def _raises_value_error(*args, **kwargs):
    raise ValueError("boom")


def _raises_system_exit(*args, **kwargs):
    raise SystemExit(1)


def _no_arguments():
    return torch.zeros(1)


def _prints(*args, **kwargs):
    print("hello from the student", *[getattr(a, "shape", a) for a in args])
    return None


def _returns_numpy(*args, **kwargs):
    return np.zeros((2, 2)), np.zeros((2, 2))


def _returns_single_numpy(*args, **kwargs):
    return np.zeros((3, 3))


def _modifies_global(*args, **kwargs):
    _GLOBAL_COUNTER["calls"] += 1
    return torch.zeros(2, 3)


def _wrong_shape(*args, **kwargs):
    return torch.zeros(2, 3), torch.zeros(2, 3)


def _returns_nan(*args, **kwargs):
    tensor = next(a for a in args if isinstance(a, torch.Tensor)) if any(
        isinstance(a, torch.Tensor) for a in args) else torch.zeros(4, 4)
    return torch.full_like(tensor.float(), math.nan), torch.full_like(tensor.float(), math.nan)


def _returns_string(*args, **kwargs):
    return "attention"


def _returns_generator(*args, **kwargs):
    return (t for t in args)


def _infinite_recursion(*args, **kwargs):
    return _infinite_recursion(*args, **kwargs)


GARBAGE = [
    _returns_none, _raises_value_error, _raises_system_exit, _no_arguments, _prints,
    _returns_numpy, _returns_single_numpy, _modifies_global, _wrong_shape, _returns_nan,
    _returns_string, _returns_generator, _infinite_recursion,
    lambda *args: None, lambda a, b, c, d, e, f, g, h: None,
    "not a function", None, 42, torch.zeros(3),
]


@pytest.mark.parametrize("name", list(CORRECT))
def test_checkers_never_raise_on_garbage(name, capsys):
    rng_before = torch.random.get_rng_state()
    for fn in GARBAGE:
        result = CHECKERS[name](fn)
        assert isinstance(result, checks.CheckResult)
        assert result.passed is False, (fn, result)
        assert result.mistake and result.mistake != "checker_error", (fn, result)
        assert str(result) and result._repr_html_()
    assert torch.equal(torch.random.get_rng_state(), rng_before), "the caller's RNG is untouched"


@pytest.mark.parametrize("name", list(CORRECT))
def test_checkers_never_mutate_or_keep_student_state(name):
    """A correct function that records its inputs: the checker's later probes are unaffected,
    and a correct function that prints still passes."""
    seen = []
    reference = CORRECT[name][0]

    def recording(*args, **kwargs):
        print("student output")
        seen.append([a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        return reference(*args, **kwargs)

    assert CHECKERS[name](recording).passed
    assert seen, "the student's function was called"
