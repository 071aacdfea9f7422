"""lectures_lib.attention against PyTorch's own attention: values, weights, masks and gradients."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lectures_lib.attention import (
    MultiHeadAttention,
    SelfAttention,
    attention_scores,
    causal_mask,
    fused_attention,
    key_padding_mask,
    masked_softmax,
    merge_heads,
    multi_head_attention,
    scaled_dot_product_attention,
    split_heads,
)

DOUBLE = torch.float64


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def randn(*shape, dtype=DOUBLE, requires_grad=False):
    return torch.randn(*shape, dtype=dtype, requires_grad=requires_grad)


def random_mask(*shape):
    """A bool mask whose every row (last dim) has at least one allowed key."""
    mask = torch.rand(*shape) < 0.5
    mask[..., 0] = True
    return mask


# ---------------------------------------------------------------------------------------------
# scaled_dot_product_attention vs F.scaled_dot_product_attention
# ---------------------------------------------------------------------------------------------

QKV_SHAPES = [
    ((3, 4), (5, 4), (5, 2)),  # unbatched, n_q != n_k, d_k != d_v
    ((2, 3, 4), (2, 6, 4), (2, 6, 5)),  # (batch, seq, d)
    ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)),  # (batch, heads, seq, d_head)
]


@pytest.mark.parametrize("shapes", QKV_SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdpa_matches_torch_without_mask(shapes, dtype):
    q, k, v = (randn(*s, dtype=dtype) for s in shapes)
    out, weights = scaled_dot_product_attention(q, k, v)
    expected = F.scaled_dot_product_attention(q, k, v)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    assert out.shape == expected.shape and out.dtype == dtype
    assert weights.shape == (*q.shape[:-1], k.shape[-2])
    torch.testing.assert_close(out, expected, rtol=tol, atol=tol)
    torch.testing.assert_close(weights.sum(-1), torch.ones(q.shape[:-1], dtype=dtype))


def test_sdpa_weights_are_softmax_of_scaled_scores():
    q, k, v = randn(2, 3, 5), randn(2, 4, 5), randn(2, 4, 3)
    _, weights = scaled_dot_product_attention(q, k, v)
    manual = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(5), dim=-1)
    torch.testing.assert_close(weights, manual)


def test_sdpa_is_stable_for_large_scores():
    q, k, v = randn(2, 5, 4) * 1e3, randn(2, 7, 4) * 1e3, randn(2, 7, 3)
    for dtype in (torch.float32, torch.float64):
        out, weights = scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype))
        assert torch.isfinite(out).all() and torch.isfinite(weights).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5, dtype=dtype))
    out, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_sdpa_gradients_match_torch():
    q, k, v = randn(2, 2, 4, 3, requires_grad=True), randn(2, 2, 5, 3, requires_grad=True), \
        randn(2, 2, 5, 6, requires_grad=True)
    mask = random_mask(2, 1, 4, 5)
    grad_out = randn(2, 2, 4, 6)
    ours = torch.autograd.grad(scaled_dot_product_attention(q, k, v, mask)[0], (q, k, v), grad_out)
    theirs = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), grad_out
    )
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)


def test_fully_masked_queries_give_zeros_not_nan_in_both_paths():
    q, k, v = (randn(1, 2, 3, 4, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    fast = fused_attention(q, k, v, mask)
    for result in (out, fast):
        assert torch.isfinite(result).all()
        assert torch.all(result[..., 1, :] == 0), "a query with no key to attend to outputs 0"
    assert torch.all(weights[..., 1, :] == 0)
    torch.testing.assert_close(weights[..., [0, 2], :].sum(-1), torch.ones(1, 2, 2, dtype=DOUBLE))
    torch.testing.assert_close(fast, out)
    (out.sum() + fast.sum()).backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


@pytest.mark.parametrize(
    "mask",
    [None, causal_mask(5), random_mask(2, 1, 5, 5), torch.tensor([True, True, False, False, True])],
    ids=["none", "causal", "per-example", "keys"],
)
def test_fast_path_equals_explicit_path_values_and_gradients(mask):
    q, k, v = (randn(2, 3, 5, 4, requires_grad=True) for _ in range(3))
    grad_out = randn(2, 3, 5, 4)
    explicit, _ = scaled_dot_product_attention(q, k, v, mask)
    fast = fused_attention(q, k, v, mask)
    torch.testing.assert_close(fast, explicit)
    grads_explicit = torch.autograd.grad(explicit, (q, k, v), grad_out)
    grads_fast = torch.autograd.grad(fast, (q, k, v), grad_out)
    for a, b in zip(grads_fast, grads_explicit, strict=True):
        torch.testing.assert_close(a, b)


def test_sdpa_dropout_only_when_asked():
    q, k, v = randn(2, 4, 3), randn(2, 6, 3), randn(2, 6, 3)
    _, plain = scaled_dot_product_attention(q, k, v)
    torch.manual_seed(0)
    _, dropped = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    kept = dropped != 0
    assert not kept.all(), "dropout 0.5 drops some weights"
    torch.testing.assert_close(dropped[kept], plain[kept] * 2)  # survivors scaled by 1 / (1 - p)


# ---------------------------------------------------------------------------------------------
# SelfAttention, split/merge, functional multi-head attention
# ---------------------------------------------------------------------------------------------


def test_self_attention_is_the_lecture_formula():
    torch.manual_seed(1)
    layer = SelfAttention(6, d_k=4, d_v=3).double()
    x = randn(2, 5, 6)
    out, weights = layer(x, causal_mask(5))
    q, k, v = x @ layer.w_q.weight.T, x @ layer.w_k.weight.T, x @ layer.w_v.weight.T
    scores = (q @ k.transpose(-2, -1) / 2.0).masked_fill(~causal_mask(5), float("-inf"))
    torch.testing.assert_close(weights, torch.softmax(scores, -1))
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ v)
    assert out.shape == (2, 5, 3)


@pytest.mark.parametrize(("batch", "seq", "d_model", "num_heads"),
                         [(2, 5, 12, 3), (1, 1, 1, 1), (2, 3, 12, 4), (3, 5, 6, 6), (2, 4, 10, 1)])
def test_split_and_merge_heads_shapes_and_inverse(batch, seq, d_model, num_heads):
    x = torch.arange(batch * seq * d_model, dtype=torch.float32).reshape(batch, seq, d_model)
    heads = split_heads(x, num_heads)
    d_head = d_model // num_heads
    assert heads.shape == (batch, num_heads, seq, d_head)
    for h in range(num_heads):
        block = x[..., d_head * h : d_head * (h + 1)]
        assert torch.equal(heads[:, h], block), "head h = feature block h"
    assert torch.equal(merge_heads(heads), x)


def test_functional_multi_head_attention_equals_module_without_bias():
    torch.manual_seed(2)
    module = MultiHeadAttention(8, 2, bias=False).double()
    x = randn(3, 4, 8)
    weights = [m.weight.T for m in (module.q_proj, module.k_proj, module.v_proj, module.out_proj)]
    mask = causal_mask(4)
    out, attn = multi_head_attention(x, *weights, 2, mask)
    expected_out, expected_attn = module(x, x, x, mask)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(attn, expected_attn)


# ---------------------------------------------------------------------------------------------
# MultiHeadAttention (its equality with nn.MultiheadAttention, values and gradients: test_contract.py)
# ---------------------------------------------------------------------------------------------


def test_from_torch_copies_dtype_and_dropout():
    reference = nn.MultiheadAttention(8, 2, dropout=0.25, batch_first=True)
    ours = MultiHeadAttention.from_torch(reference)
    assert ours.dropout == 0.25 and ours.q_proj.weight.dtype == torch.float32
    assert ours.num_heads == 2 and ours.d_head == 4


def test_dropout_acts_in_training_only():
    torch.manual_seed(3)
    module = MultiHeadAttention(8, 2, dropout=0.5).double()
    x = randn(2, 6, 8)
    module.eval()
    out_eval, weights_eval = module(x, x, x)
    torch.testing.assert_close(weights_eval.sum(-1), torch.ones(2, 2, 6, dtype=DOUBLE))
    torch.testing.assert_close(module(x, x, x, need_weights=False)[0], out_eval)
    module.train()
    _, weights_train = module(x, x, x)
    assert (weights_train == 0).any(), "dropout 0.5 in training zeroes some attention weights"


def test_padded_batch_gives_the_same_outputs_as_each_sequence_alone():
    torch.manual_seed(4)
    module = MultiHeadAttention(8, 2).double().eval()
    lengths = [5, 3, 1]
    x = randn(3, 5, 8)
    mask = key_padding_mask(lengths, 5)  # (3, 1, 1, 5)
    out, weights = module(x, x, x, mask)
    for b, length in enumerate(lengths):
        alone, _ = module(x[b : b + 1, :length], x[b : b + 1, :length], x[b : b + 1, :length])
        torch.testing.assert_close(out[b, :length], alone[0])
        assert torch.all(weights[b, :, :, length:] == 0)


# ---------------------------------------------------------------------------------------------
# The named steps and the seam
# ---------------------------------------------------------------------------------------------


def test_the_steps_compose_to_scaled_dot_product_attention():
    q, k, v = randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 5)
    mask = random_mask(2, 1, 4, 6)
    scores = attention_scores(q, k)
    torch.testing.assert_close(scores, q @ k.transpose(-2, -1) / math.sqrt(8))
    weights = masked_softmax(scores, mask)
    out, expected_weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(weights @ v, out)
    torch.testing.assert_close(masked_softmax(scores), torch.softmax(scores, dim=-1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_masked_keys_never_get_weight_even_when_every_allowed_score_overflows(dtype):
    scores = torch.tensor([[-math.inf, -math.inf, 3.0], [1.0, 2.0, 3.0]], dtype=dtype)
    mask = torch.tensor([[True, True, False], [True, True, False]])
    weights = masked_softmax(scores, mask)
    assert not bool((weights[:, 2] > 0).any()), "a masked key never wins the row's weight"
    assert weights[1, 2] == 0, "and gets exactly 0 wherever the row is defined"
    expected = torch.softmax(torch.tensor([1.0, 2.0]), dim=-1)
    torch.testing.assert_close(weights[1, :2].float(), expected, atol=1e-2, rtol=1e-2)
    no_key = masked_softmax(scores, torch.zeros(2, 3, dtype=torch.bool))
    assert torch.equal(no_key, torch.zeros_like(no_key)), "no allowed key: an all-zero row"


def test_forward_is_project_then_attend_then_merge_then_out_proj():
    mha = MultiHeadAttention(8, 2).double().eval()
    query, memory = randn(2, 3, 8), randn(2, 5, 8)
    mask = random_mask(2, 1, 1, 5)
    q, k, v = mha.project(query, memory, memory)
    assert q.shape == (2, 2, 3, 4) and k.shape == v.shape == (2, 2, 5, 4)
    heads, weights = mha.attend(q, k, v, mask, True)
    out, forward_weights = mha(query, memory, memory, mask)
    torch.testing.assert_close(out, mha.out_proj(merge_heads(heads)))
    torch.testing.assert_close(weights, forward_weights)
    fused_heads, none = mha.attend(q, k, v, mask, False)
    assert none is None
    torch.testing.assert_close(fused_heads, heads)


def test_inputs_are_checked_once_at_the_door(monkeypatch):
    import lectures_lib._validate.attention as validate_module  # attention.py's door checks

    calls = []
    real_check_qkv = validate_module.check_qkv
    monkeypatch.setattr(validate_module, "check_qkv", lambda *t: calls.append(1) or real_check_qkv(*t))
    q, k, v = randn(2, 3, 4, 8), randn(2, 3, 6, 8), randn(2, 3, 6, 5)
    scaled_dot_product_attention(q, k, v)
    assert len(calls) == 1, "a direct call checks its inputs (once, not again in each step)"
    calls.clear()
    MultiHeadAttention(8, 2).double()(randn(2, 3, 8), randn(2, 5, 8), randn(2, 5, 8))
    assert calls == [], "inside MultiHeadAttention the heads were built by the library: trusted"
    with pytest.raises(ValueError, match="same feature size"):
        scaled_dot_product_attention(q, k[..., :4], v)  # and a learner's direct call still checks


# ---- key_padding_mask= (PyTorch's separate argument, ours True = a real token) ------------


@pytest.mark.parametrize("need_weights", [True, False])
def test_key_padding_mask_is_the_4d_padding_mask(need_weights):
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2).eval()
    query, memory = _randn(3, 3, 8, seed=1), _randn(3, 5, 8, seed=2)
    lengths = torch.tensor([5, 2, 4])
    real = key_padding_mask(lengths)  # (3, 1, 1, 5)
    expected, expected_w = module(query, memory, memory, real, need_weights)
    out, weights = module(query, memory, memory, key_padding_mask=real[:, 0, 0], need_weights=need_weights)
    torch.testing.assert_close(out, expected)
    if need_weights:
        torch.testing.assert_close(weights, expected_w)
        assert bool((weights[1, :, :, 2:] == 0).all()), "padded keys get no weight"



def test_batch_equal_to_n_queries_cannot_confuse_key_padding_mask():
    # the trap of notebook 02: batch == n_queries makes (batch, n_keys) look like (n_q, n_k)
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2).eval()
    x = _randn(3, 3, 8)
    padding = torch.tensor([[True, True, True], [True, False, False], [True, True, False]])
    read_as_pattern, _ = module(x, x, x, padding)  # silently (n_q, n_k): not what was meant
    right, weights = module(x, x, x, key_padding_mask=padding)
    torch.testing.assert_close(right, module(x, x, x, padding[:, None, None, :])[0])
    assert not torch.allclose(read_as_pattern, right)
    assert bool((weights[1, :, :, 1:] == 0).all())



def test_key_padding_mask_and_mask_combine():
    torch.manual_seed(0)
    module = MultiHeadAttention(8, 2).eval()
    x = _randn(2, 4, 8)
    padding = torch.tensor([[True] * 4, [True, True, False, False]])
    both, _ = module(x, x, x, causal_mask(4), key_padding_mask=padding)
    torch.testing.assert_close(both, module(x, x, x, causal_mask(4) & padding[:, None, None, :])[0])



def test_pytorch_key_padding_mask_is_the_opposite():
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs).eval()
    x = _randn(2, 4, 8)
    padded = torch.tensor([[False] * 4, [False, False, True, True]])  # PyTorch: True = padding
    expected, _ = theirs(x, x, x, key_padding_mask=padded)
    got, _ = ours(x, x, x, key_padding_mask=~padded)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
