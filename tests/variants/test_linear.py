"""lectures_lib.variants.linear: linear attention equals its quadratic form, in O(N) memory."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.attention import scaled_dot_product_attention
from lectures_lib.variants import elu_feature_map, linear_attention

from .helpers import DEVICES, largest_tensors, random_qkv


def quadratic_linear_attention(q, k, v, feature_map=lambda x: F.elu(x) + 1):
    """The N x N form: similarities phi(q_i) . phi(k_j), each row normalised, times V."""
    similarity = torch.einsum("...qf,...kf->...qk", feature_map(q), feature_map(k))
    weights = similarity / similarity.sum(dim=-1, keepdim=True)
    return weights @ v


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
@pytest.mark.parametrize(("n_q", "n_k"), [(1, 1), (7, 7), (4, 9), (9, 2)])
def test_linear_attention_equals_the_quadratic_form(device, batch, n_q, n_k):
    q, k, v = random_qkv(*batch, n=n_q, n_k=n_k, device=device)
    out = linear_attention(q, k, v)
    assert out.shape == (*batch, n_q, v.shape[-1])
    torch.testing.assert_close(out, quadratic_linear_attention(q, k, v))


def test_linear_attention_gradients_equal_the_quadratic_form():
    q, k, v = random_qkv(2, n=6, n_k=8)
    upstream = torch.randn(2, 6, 5, dtype=torch.float64)

    def grads(attention):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        (attention(*leaves) * upstream).sum().backward()
        return [t.grad for t in leaves]

    for name, g_ours, g_quad in zip("qkv", grads(linear_attention),
                                    grads(quadratic_linear_attention)):
        torch.testing.assert_close(g_ours, g_quad, msg=f"gradient wrt {name} differs")


def test_linear_attention_with_another_feature_map():
    q, k, v = random_qkv(2, n=5, n_k=6)
    projection = torch.randn(4, 11, dtype=torch.float64)  # 4 features -> 11 positive features

    def feature_map(x):
        return torch.exp(x @ projection / 4)  # positive random features, Performer-style

    torch.testing.assert_close(linear_attention(q, k, v, feature_map),
                               quadratic_linear_attention(q, k, v, feature_map))


def test_elu_feature_map_is_positive_and_matches_the_formula():
    x = torch.linspace(-30, 30, 101, dtype=torch.float64)
    phi = elu_feature_map(x)
    assert bool((phi > 0).all()), "elu(x) + 1 > 0 everywhere"
    expected = torch.where(x > 0, x + 1, torch.exp(x))  # elu(x) + 1 = x + 1 or exp(x)
    torch.testing.assert_close(phi, expected)


def test_linear_attention_properties():
    q, k, v = random_qkv(2, n=6, n_k=9)
    out = linear_attention(q, k, v)
    # Outputs are convex combinations of the values (weights >= 0 summing to 1).
    assert bool((out <= v.amax(dim=-2, keepdim=True) + 1e-12).all())
    assert bool((out >= v.amin(dim=-2, keepdim=True) - 1e-12).all())
    # Permuting the key-value pairs together changes nothing; permuting queries permutes outputs.
    key_order, query_order = torch.randperm(9), torch.randperm(6)
    torch.testing.assert_close(linear_attention(q, k[:, key_order], v[:, key_order]), out)
    torch.testing.assert_close(linear_attention(q[:, query_order], k, v), out[:, query_order])
    # Constant values come out unchanged; the output is linear in v.
    constant = torch.ones_like(v) * 3.5
    torch.testing.assert_close(linear_attention(q, k, constant), torch.full_like(out, 3.5))
    torch.testing.assert_close(linear_attention(q, k, 2 * v - 1), 2 * out - 1)


def test_linear_attention_with_no_keys_gives_zeros_not_nan():
    q, k, v = random_qkv(2, n=3, n_k=0)
    out = linear_attention(q, k, v)
    assert out.shape == (2, 3, 5) and torch.equal(out, torch.zeros_like(out))


def test_linear_attention_is_not_softmax_attention():
    """It is a different model, not an approximation that happens to be exact."""
    q, k, v = random_qkv(n=8)
    softmax_out, _ = scaled_dot_product_attention(q, k, v)
    assert not torch.allclose(linear_attention(q, k, v), softmax_out, atol=1e-3)


def test_linear_attention_memory_is_o_n():
    d = 16
    sizes = {n: largest_tensors(linear_attention, n, d) for n in (8192, 16384)}
    for n, (produced, saved) in sizes.items():
        assert max(produced, saved) <= 2 * n * d, (n, produced, saved)
    growth = sizes[16384][0] / sizes[8192][0]
    assert growth <= 2.2, f"doubling n must double memory, not quadruple it (grew {growth:.2f}x)"
