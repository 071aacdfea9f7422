"""lectures_lib.variants.sinkhorn: Sinkhorn normalisation converges to a doubly stochastic matrix;
SinkhornAttention equals its explicit quadratic form, is full attention with one block, never
builds N x N, and trains through the factory."""

from __future__ import annotations

import math

import pytest
import torch

from lectures_lib.attention import MultiHeadAttention
from lectures_lib.masks import key_padding_mask
from lectures_lib.variants import SinkhornAttention, sinkhorn

from .factory_helpers import retrieval_accuracy
from .helpers import LargestTensor


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 6, 6), (2, 2, 9, 9)])
def test_sinkhorn_converges_to_doubly_stochastic(shape):
    scores = 3 * torch.randn(*shape, dtype=torch.float64)
    matrix = sinkhorn(scores, n_iters=200)
    ones = torch.ones(shape[:-1], dtype=torch.float64)
    torch.testing.assert_close(matrix.sum(-1), ones, atol=1e-6, rtol=0)
    torch.testing.assert_close(matrix.sum(-2), ones, atol=1e-12, rtol=0)
    assert bool((matrix >= 0).all())


def test_sinkhorn_row_error_shrinks_and_matches_the_plain_algorithm():
    scores = 2 * torch.randn(6, 6, dtype=torch.float64)
    errors = [float((sinkhorn(scores, n).sum(-1) - 1).abs().max()) for n in (1, 3, 10, 30)]
    assert errors == sorted(errors, reverse=True) and errors[-1] < errors[0] / 100, errors
    # The plain (not log-space) algorithm on exp(scores): the same matrix.
    plain = scores.exp()
    for _ in range(10):
        plain = plain / plain.sum(-1, keepdim=True)
        plain = plain / plain.sum(-2, keepdim=True)
    torch.testing.assert_close(sinkhorn(scores, 10), plain)


def test_sinkhorn_is_stable_for_huge_scores_and_sorts_at_low_temperature():
    permutation = torch.tensor([2, 0, 3, 1])
    scores = torch.full((4, 4), -1.0)
    scores[torch.arange(4), permutation] = 1.0
    hard = sinkhorn(scores / 1e-3, 20)  # scores of 1000: exp would overflow float32
    assert torch.isfinite(hard).all()
    torch.testing.assert_close(hard, torch.eye(4)[permutation], atol=1e-6, rtol=0)


def explicit_sinkhorn_heads(module, q, k, v, key_valid=None):
    """Quadratic reference: each query of block i attends to the keys of block i and to the
    mixture sum_j P_ij K_j, written with Python loops over blocks."""
    b, n = module.block_size, q.shape[-2]
    n_b = math.ceil(n / b)
    pad = n_b * b - n
    valid = torch.ones(q.shape[0], n, dtype=q.dtype) if key_valid is None else key_valid.to(q.dtype)
    keep = valid[:, None, :, None]

    def blocks(x):
        x = torch.cat([x, x.new_zeros(*x.shape[:-2], pad, x.shape[-1])], dim=-2)
        return [x[..., i * b:(i + 1) * b, :] for i in range(n_b)]

    qb, kb, vb = blocks(q), blocks(k * keep), blocks(v * keep)
    mb = blocks(valid[:, None, :, None].expand(-1, q.shape[1], -1, 1))
    q_summary = torch.stack([x.mean(-2) for x in blocks(q * keep)], -2)
    k_summary = torch.stack([x.mean(-2) for x in kb], -2)
    scores = module.sort_proj(q_summary) @ k_summary.transpose(-2, -1) / math.sqrt(q.shape[-1])
    p = sinkhorn(scores / module.temperature, module.n_iters)
    outs = []
    for i in range(n_b):
        mixed_k = sum(p[..., i, j, None, None] * kb[j] for j in range(n_b))
        mixed_v = sum(p[..., i, j, None, None] * vb[j] for j in range(n_b))
        mixed_m = sum(p[..., i, j, None, None] * mb[j] for j in range(n_b))
        keys, values = torch.cat([kb[i], mixed_k], -2), torch.cat([vb[i], mixed_v], -2)
        weight = torch.cat([mb[i], mixed_m], -2)[..., 0]  # (batch, heads, 2b)
        s = qb[i] @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
        s = s + weight.log()[..., None, :]
        outs.append(torch.softmax(s, -1) @ values)
    return torch.cat(outs, -2)[..., :n, :]


@pytest.mark.parametrize(("n", "block_size"), [(8, 4), (10, 4), (7, 3), (5, 16)])
def test_sinkhorn_attention_equals_its_explicit_form(n, block_size):
    module = SinkhornAttention(8, 2, block_size=block_size).double()
    q, k, v = (torch.randn(3, 2, n, 4, dtype=torch.float64) for _ in range(3))
    out, weights = module.attend(q, k, v, None, True)
    assert weights is None
    torch.testing.assert_close(out, explicit_sinkhorn_heads(module, q, k, v))
    lengths = torch.tensor([n, n - 1, 2])
    mask = key_padding_mask(lengths, n)
    out, _ = module.attend(q, k, v, mask, False)
    valid = torch.arange(n)[None, :] < lengths[:, None]
    torch.testing.assert_close(out, explicit_sinkhorn_heads(module, q, k, v, valid))


def test_sinkhorn_attention_with_one_block_is_full_attention():
    torch.manual_seed(1)
    full = MultiHeadAttention(12, 3).double()
    ours = SinkhornAttention(12, 3, block_size=20).double()
    ours.load_state_dict(full.state_dict(), strict=False)
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    torch.testing.assert_close(ours(x, x, x)[0], full(x, x, x)[0])
    mask = key_padding_mask(torch.tensor([9, 4]), 9)
    torch.testing.assert_close(ours(x, x, x, mask)[0][0], full(x, x, x, mask)[0][0])
    torch.testing.assert_close(ours(x, x, x, mask)[0][1, :4], full(x, x, x, mask)[0][1, :4])


def test_padding_content_never_reaches_real_tokens():
    module = SinkhornAttention(8, 2, block_size=3).double()
    x = torch.randn(2, 10, 8, dtype=torch.float64)
    mask = key_padding_mask(torch.tensor([10, 6]), 10)
    out = module(x, x, x, mask)[0]
    y = x.clone()
    y[1, 6:] = 100 * torch.randn(4, 8, dtype=torch.float64)
    torch.testing.assert_close(module(y, y, y, mask)[0][1, :6], out[1, :6])


def test_sinkhorn_attention_gradients_reach_the_sorting_network():
    module = SinkhornAttention(16, 2, block_size=4)
    x = torch.randn(2, 16, 16, requires_grad=True)
    module(x, x, x)[0].square().sum().backward()
    assert x.grad is not None and bool(x.grad.abs().sum() > 0)
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None and bool(parameter.grad.abs().sum() > 0), name
    # Against finite differences in float64.
    small = SinkhornAttention(4, 1, block_size=2).double()
    x = torch.randn(1, 5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: small(t, t, t)[0], (x,))


def test_sinkhorn_attention_memory_is_o_n_block():
    module = SinkhornAttention(16, 1, block_size=16)
    sizes = {}
    for n in (2048, 4096):
        x = torch.randn(1, n, 16)
        with LargestTensor() as probe:
            module(x, x, x, need_weights=False)
        sizes[n] = probe.largest
        assert probe.largest <= 2 * n * 16 * 2, (n, probe.largest)
    assert sizes[4096] / sizes[2048] <= 2.2, sizes


@pytest.mark.slow
def test_sinkhorn_attention_trains_through_the_factory():
    accuracy = retrieval_accuracy(SinkhornAttention)
    assert accuracy > 0.9, f"SinkhornAttention reached only {accuracy:.2f} (chance 0.25)"
