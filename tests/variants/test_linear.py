"""lectures_lib.variants.linear: linear attention equals its quadratic form, in O(N) memory."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.attention import MultiHeadAttention, scaled_dot_product_attention
from lectures_lib.masks import causal_mask, key_padding_mask
from lectures_lib.variants import (
    LinearAttention,
    PerformerAttention,
    elu_feature_map,
    linear_attention,
    performer_features,
    random_projection,
)

from .factory_helpers import retrieval_accuracy
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


# --- section 07: causal, float16, the stable feature map, the modules, Performer ---------------




def causal_quadratic_linear_attention(q, k, v, feature_map=elu_feature_map):
    similarity = feature_map(q) @ feature_map(k).transpose(-2, -1)
    similarity = similarity * causal_mask(q.shape[-2])
    return similarity / similarity.sum(-1, keepdim=True) @ v


@pytest.mark.parametrize("n", [1, 5, 64, 65, 150])
def test_causal_linear_attention_equals_the_masked_quadratic_form(n):
    q, k, v = random_qkv(2, 3, n=n)
    torch.testing.assert_close(linear_attention(q, k, v, causal=True),
                               causal_quadratic_linear_attention(q, k, v))
    upstream = torch.randn(2, 3, n, 5, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    (linear_attention(*leaves, causal=True) * upstream).sum().backward()
    reference = [t.clone().requires_grad_() for t in (q, k, v)]
    (causal_quadratic_linear_attention(*reference) * upstream).sum().backward()
    for name, ours, theirs in zip("qkv", leaves, reference):
        torch.testing.assert_close(ours.grad, theirs.grad, msg=f"causal gradient wrt {name}")


def test_causal_linear_attention_is_an_rnn():
    """Query i from the running state (S_i, z_i), one step at a time."""
    q, k, v = random_qkv(n=9)
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
    state, normaliser, rows = torch.zeros(4, 5, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), []
    for i in range(9):
        state = state + torch.outer(phi_k[i], v[i])
        normaliser = normaliser + phi_k[i]
        rows.append(phi_q[i] @ state / (phi_q[i] @ normaliser))
    torch.testing.assert_close(linear_attention(q, k, v, causal=True), torch.stack(rows))


def test_elu_feature_map_stays_positive_where_elu_plus_one_cancels():
    x = torch.tensor([-20.0, -50.0, -80.0, 3.0])
    assert float((torch.nn.functional.elu(x) + 1)[0]) == 0.0, "the naive form cancels at -20"
    phi = elu_feature_map(x)
    assert bool((phi > 0).all()), phi
    torch.testing.assert_close(phi, torch.where(x > 0, x + 1, x.double().exp().float()))
    x = torch.linspace(-5, 5, 11, dtype=torch.float64, requires_grad=True)
    elu_feature_map(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.where(x > 0, 1.0, x.detach().exp()))


def test_linear_attention_float16_at_4096_is_finite_and_accurate():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 4096, 16) for _ in range(3))
    v = v * 30  # large values: sum_j phi(k_j) v_j in float16 would overflow 65504
    exact = linear_attention(q, k, v)
    for causal in (False, True):
        half = linear_attention(q.half(), k.half(), v.half(), causal=causal)
        assert half.dtype == torch.float16 and bool(torch.isfinite(half).all()), causal
    torch.testing.assert_close(linear_attention(q.half(), k.half(), v.half()).float(), exact,
                               atol=0.1, rtol=0.01)


@pytest.mark.slow
def test_causal_linear_attention_memory_is_o_n():
    d = 16
    sizes = {n: largest_tensors(lambda q, k, v: linear_attention(q, k, v, causal=True), n, d)
             for n in (4096, 8192)}
    for n, (produced, saved) in sizes.items():
        assert max(produced, saved) <= 2 * n * d, (n, produced, saved)
    assert sizes[8192][0] / sizes[4096][0] <= 2.2


def copy_weights(module):
    full = MultiHeadAttention(module.d_model, module.num_heads).double()
    module.double().load_state_dict(full.state_dict(), strict=False)
    return module


def test_linear_attention_module_equals_the_function_per_head():
    module = copy_weights(LinearAttention(12, 3))
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    q, k, v = module.project(x, x, x)
    lengths = torch.tensor([7, 4])
    out, weights = module.attend(q, k, v, key_padding_mask(lengths, 7), True)
    expected = torch.stack([linear_attention(q[b], k[b, :, :n], v[b, :, :n])
                            for b, n in enumerate(lengths.tolist())])
    torch.testing.assert_close(out, expected)
    # the weights asked for are the quadratic form's: out = weights @ v, padded keys get 0
    torch.testing.assert_close(weights @ v, out)
    assert weights.shape == (2, 3, 7, 7) and not weights[1, :, :, 4:].any()
    causal_and_padding = causal_mask(7) & key_padding_mask(lengths, 7)  # (batch, 1, 7, 7)
    out = module.attend(q, k, v, causal_and_padding, False)[0]
    for b in range(2):
        similarity = elu_feature_map(q[b]) @ elu_feature_map(k[b]).transpose(-2, -1)
        similarity = similarity * causal_and_padding[b]
        torch.testing.assert_close(out[b], similarity / similarity.sum(-1, keepdim=True) @ v[b])


@pytest.mark.slow
@pytest.mark.parametrize("factory", [LinearAttention, PerformerAttention])
def test_linear_modules_train_through_the_factory(factory):
    accuracy = retrieval_accuracy(factory)
    assert accuracy > 0.9, f"{factory.__name__} reached only {accuracy:.2f} (chance 0.25)"


def test_random_projection_is_gaussian_and_orthogonal_in_blocks():
    generator = torch.Generator().manual_seed(0)
    w = random_projection(10, 4, generator=generator, dtype=torch.float64)
    assert w.shape == (10, 4)
    for start in (0, 4, 8):
        block = w[start:start + 4]
        gram = block @ block.T
        torch.testing.assert_close(gram - torch.diag(gram.diagonal()), torch.zeros_like(gram))
    many = random_projection(4000, 8, generator=generator, dtype=torch.float64)
    assert abs(float(many.square().mean()) - 1) < 0.05, "rows are N(0, I) in distribution"
    independent = random_projection(8, 8, orthogonal=False, generator=generator)
    assert float((independent @ independent.T).triu(1).abs().max()) > 1e-3


def test_performer_features_estimate_the_softmax_kernel():
    generator = torch.Generator().manual_seed(0)
    # Small inputs: the estimator's relative variance grows like exp(|x + y|^2).
    x, y = torch.randn(6, 4, dtype=torch.float64) / 4, torch.randn(5, 4, dtype=torch.float64) / 4
    w = random_projection(20000, 4, generator=generator, dtype=torch.float64)
    estimate = performer_features(x, w) @ performer_features(y, w).T
    torch.testing.assert_close(estimate, (x @ y.T).exp(), rtol=0.05, atol=0)
    assert bool((performer_features(x, w) > 0).all())


def test_performer_attention_equals_linear_attention_with_its_features():
    module = copy_weights(PerformerAttention(8, 2, n_features=16))
    q, k, v = (torch.randn(2, 2, 9, 4, dtype=torch.float64) for _ in range(3))
    w = module.projection.double()

    def features(x):
        return performer_features(x / 4**0.25, w)

    out, _ = module.attend(q, k, v, None, False)
    torch.testing.assert_close(out, linear_attention(q, k, v, features))
    torch.testing.assert_close(module.attend(q, k, v, causal_mask(9), False)[0],
                               linear_attention(q, k, v, features, causal=True))


def test_performer_attention_approaches_softmax_attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 1, 32, 8, dtype=torch.float64) / 2 for _ in range(3))
    exact, _ = scaled_dot_product_attention(q, k, v)
    errors = {}
    for m in (16, 1024):
        runs = [float((PerformerAttention(8, 1, n_features=m).double().attend(q, k, v, None, False)[0]
                       - exact).abs().mean()) for _ in range(5)]
        errors[m] = sum(runs) / len(runs)
    assert errors[1024] < errors[16] / 4, errors


def test_performer_gradients_and_memory():
    module = PerformerAttention(8, 2, n_features=8)
    x = torch.randn(2, 10, 8, requires_grad=True)
    module(x, x, x)[0].square().sum().backward()
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None and bool(parameter.grad.abs().sum() > 0), name
    assert "projection" not in dict(module.named_parameters()), "W is drawn, not learned"
    head = PerformerAttention(16, 1, n_features=16)
    sizes = {n: largest_tensors(lambda q, k, v: head.attend(q[None], k[None], v[None], None,
                                                            False)[0], n, 16) for n in (4096, 8192)}
    for n, (produced, saved) in sizes.items():
        assert max(produced, saved) <= 2 * n * 16, (n, produced, saved)
