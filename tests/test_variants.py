"""Attention variants (section 06): local / stride / global masks, local and linear attention.

Local attention is checked against dense attention under the same mask (the course's explicit
path and PyTorch's ``F.scaled_dot_product_attention``), values and gradients; linear attention
against its quadratic form written out. The memory claims are measured: every tensor an op
produces (forward and backward) and every tensor autograd saves is recorded, and the largest must
grow like N * window (local) or N (linear), never N^2; the same probe sees N^2 on the dense path.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from lectures_lib.attention import scaled_dot_product_attention
from lectures_lib.variants import (
    band_to_dense,
    elu_feature_map,
    global_mask,
    linear_attention,
    local_attention,
    local_mask,
    stride_mask,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def random_qkv(*batch, n=7, d_k=4, d_v=5, n_k=None, dtype=torch.float64, device="cpu"):
    n_k = n if n_k is None else n_k
    q = torch.randn(*batch, n, d_k, dtype=dtype, device=device)
    k = torch.randn(*batch, n_k, d_k, dtype=dtype, device=device)
    v = torch.randn(*batch, n_k, d_v, dtype=dtype, device=device)
    return q, k, v


# ---------------------------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "window"), [(1, 0), (1, 3), (6, 0), (6, 1), (9, 2), (9, 8), (5, 7)])
def test_local_mask_is_the_band_abs_i_minus_j_le_window(n, window):
    mask = local_mask(n, window)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    for i in range(n):
        for j in range(n):
            assert bool(mask[i, j]) == (abs(i - j) <= window), (n, window, i, j)


def test_local_mask_extremes():
    assert torch.equal(local_mask(6, 0), torch.eye(6, dtype=torch.bool)), "window 0 = identity"
    for window in (5, 6, 100):
        assert bool(local_mask(6, window).all()), f"window {window} >= n - 1 sees everything"
    assert not bool(local_mask(6, 4).all()), "window n - 2 misses the two corners"


@pytest.mark.parametrize(("n", "stride"), [(1, 1), (7, 1), (7, 2), (9, 3), (5, 8)])
def test_stride_mask_is_multiples_of_the_stride(n, stride):
    mask = stride_mask(n, stride)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    for i in range(n):
        for j in range(n):
            assert bool(mask[i, j]) == ((i - j) % stride == 0), (n, stride, i, j)


def test_global_mask_rows_and_columns_of_global_tokens():
    n, positions = 7, [0, 4]
    mask = global_mask(n, positions)
    assert mask.dtype == torch.bool and mask.shape == (n, n)
    for i in range(n):
        for j in range(n):
            assert bool(mask[i, j]) == (i in positions or j in positions), (i, j)
    assert torch.equal(global_mask(n, torch.tensor([4, 0, 4])), mask), "tensor input, duplicates"
    assert not bool(global_mask(n, []).any()), "no global token: nothing allowed"
    longformer = local_mask(n, 1) | global_mask(n, [0])
    assert bool(longformer.all(dim=1).any()) and bool(longformer.all(dim=0).any())


def test_masks_are_built_on_the_requested_device():
    for make in (lambda: local_mask(4, 1, device="cpu"), lambda: stride_mask(4, 2, device="cpu"),
                 lambda: global_mask(4, [1], device="cpu")):
        assert make().device == torch.device("cpu")


# ---------------------------------------------------------------------------------------------
# Local attention == dense attention under local_mask
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
@pytest.mark.parametrize(("n", "window"), [(1, 0), (1, 2), (8, 0), (8, 1), (8, 3), (8, 7),
                                           (8, 8), (8, 20), (13, 4)])
def test_local_attention_equals_dense_masked_attention(device, batch, n, window):
    q, k, v = random_qkv(*batch, n=n, device=device)
    mask = local_mask(n, window, device=device)
    dense_out, dense_weights = scaled_dot_product_attention(q, k, v, mask)
    torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    out, band = local_attention(q, k, v, window, need_weights=True)
    assert out.shape == (*batch, n, v.shape[-1])
    assert band.shape == (*batch, n, 2 * min(window, n - 1) + 1)
    torch.testing.assert_close(out, dense_out, msg="local attention != dense masked attention")
    torch.testing.assert_close(out, torch_out, msg="local attention != PyTorch's masked kernel")
    torch.testing.assert_close(band_to_dense(band), dense_weights)
    torch.testing.assert_close(band.sum(-1), torch.ones_like(band.sum(-1)))
    assert torch.equal(local_attention(q, k, v, window), out), "default return is out alone"


def test_local_attention_float32_and_large_scores():
    q, k, v = random_qkv(2, n=11, dtype=torch.float32)
    q = q * 300.0  # scores in the thousands: the softmax must stay finite
    out = local_attention(q, k, v, 2)
    dense_out, _ = scaled_dot_product_attention(q, k, v, local_mask(11, 2))
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, dense_out)


def test_local_attention_full_window_is_full_attention():
    q, k, v = random_qkv(2, n=6)
    full_out, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(local_attention(q, k, v, 5), full_out)
    torch.testing.assert_close(local_attention(q, k, v, 50), full_out)


@pytest.mark.parametrize(("n", "window"), [(9, 0), (9, 2), (9, 9)])
def test_local_attention_gradients_equal_dense(n, window):
    q, k, v = random_qkv(2, 2, n=n)
    upstream = torch.randn(2, 2, n, v.shape[-1], dtype=torch.float64)

    def grads(attention):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        (attention(*leaves) * upstream).sum().backward()
        return [t.grad for t in leaves]

    mask = local_mask(n, window)
    ours = grads(lambda q_, k_, v_: local_attention(q_, k_, v_, window))
    dense = grads(lambda q_, k_, v_: scaled_dot_product_attention(q_, k_, v_, mask)[0])
    for name, g_ours, g_dense in zip("qkv", ours, dense):
        torch.testing.assert_close(g_ours, g_dense, msg=f"gradient wrt {name} differs")


def test_local_attention_ignores_keys_outside_the_window():
    n, window, i = 12, 2, 6
    q, k, v = random_qkv(n=n)
    out = local_attention(q, k, v, window)
    far = (torch.arange(n) - i).abs() > window  # positions query i must not see
    k2, v2 = k.clone(), v.clone()
    k2[far] += 10 * torch.randn_like(k2[far])
    v2[far] += 10 * torch.randn_like(v2[far])
    out2 = local_attention(q, k2, v2, window)
    torch.testing.assert_close(out2[i], out[i], msg="a key outside the window changed query i")
    assert not torch.allclose(out2, out), "perturbing keys must change *some* output"


def test_band_to_dense_layout():
    band = torch.arange(1.0, 16.0).reshape(5, 3)  # n = 5, window 1
    dense = band_to_dense(band)
    for i in range(5):
        for j in range(5):
            expected = float(band[i, j - i + 1]) if abs(i - j) <= 1 else 0.0
            assert float(dense[i, j]) == expected, (i, j)


def test_local_attention_on_an_empty_sequence():
    q, k, v = random_qkv(2, n=0)
    out, band = local_attention(q, k, v, 3, need_weights=True)
    assert out.shape == (2, 0, 5) and band.shape == (2, 0, 1)


# ---------------------------------------------------------------------------------------------
# Memory: never N x N
# ---------------------------------------------------------------------------------------------


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an operation returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(result):
            if isinstance(leaf, torch.Tensor):
                self.largest = max(self.largest, leaf.numel())
        return result


def largest_tensors(attention, n, d):
    """(largest tensor produced, largest tensor saved for backward) in a forward + backward."""
    q, k, v = (torch.randn(1, n, d, requires_grad=True) for _ in range(3))
    saved = []

    def pack(tensor):
        saved.append(tensor.numel())
        return tensor

    with LargestTensor() as probe, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attention(q, k, v).sum().backward()
    assert q.grad is not None and k.grad is not None and v.grad is not None
    return probe.largest, max(saved)


def test_the_probe_sees_the_n_by_n_matrix_of_dense_attention():
    n, window, d = 512, 4, 16
    mask = local_mask(n, window)
    produced, saved = largest_tensors(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0], n, d
    )
    assert produced >= n * n and saved >= n * n, "dense attention must show up as n^2 tensors"


def test_local_attention_memory_is_o_n_window():
    window, d = 4, 16
    band = 2 * window + 1
    sizes = {n: largest_tensors(lambda q, k, v: local_attention(q, k, v, window), n, d)
             for n in (8192, 16384)}
    for n, (produced, saved) in sizes.items():
        # The largest tensors are the (n, d, 2w + 1) neighbourhoods of keys and values.
        assert max(produced, saved) <= 2 * n * band * d, (n, produced, saved)
        assert max(produced, saved) * 10 < n * n, "nothing close to an n x n matrix"
    growth = sizes[16384][0] / sizes[8192][0]
    assert growth <= 2.2, f"doubling n must double memory, not quadruple it (grew {growth:.2f}x)"


def test_linear_attention_memory_is_o_n():
    d = 16
    sizes = {n: largest_tensors(linear_attention, n, d) for n in (8192, 16384)}
    for n, (produced, saved) in sizes.items():
        assert max(produced, saved) <= 2 * n * d, (n, produced, saved)
    growth = sizes[16384][0] / sizes[8192][0]
    assert growth <= 2.2, f"doubling n must double memory, not quadruple it (grew {growth:.2f}x)"


def matmul_flops(attention, n, d):
    q, k, v = (torch.randn(1, n, d) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        attention(q, k, v)
    return counter.get_total_flops()


def test_local_and_linear_attention_time_is_linear_in_n():
    n, window, d = 1024, 4, 16
    dense_mask = local_mask(n, window)
    dense = matmul_flops(lambda q, k, v: scaled_dot_product_attention(q, k, v, dense_mask), n, d)
    assert dense >= 4 * n * n * d, "Q K^T and weights V: 2 n^2 d multiply-adds each"
    # Scores and weighted sum over 2w + 1 neighbours: 2 n (2w + 1) d multiply-adds in all.
    local = matmul_flops(lambda q, k, v: local_attention(q, k, v, window), n, d)
    assert 0 < local <= 4 * n * (2 * window + 1) * d, local
    # phi(K)^T V, phi(Q) (phi(K)^T V) and the two normalising products: about 4 n d^2.
    linear = matmul_flops(linear_attention, n, d)
    assert 0 < linear <= 4 * n * d * (d + 1), linear


# ---------------------------------------------------------------------------------------------
# Linear attention == its quadratic form
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: local_mask(0, 1), ValueError, "n must be >= 1"),
        (lambda: local_mask(4, -1), ValueError, "window must be >= 0"),
        (lambda: local_mask(4, 1.5), TypeError, "window must be an int"),
        (lambda: local_mask(4, True), TypeError, "window must be an int"),
        (lambda: stride_mask(4, 0), ValueError, "stride must be >= 1"),
        (lambda: global_mask(4, [4]), ValueError, r"global_positions must lie in \[0, 3\]"),
        (lambda: global_mask(4, [-1]), ValueError, "global_positions must lie"),
        (lambda: global_mask(4, torch.tensor([0.0])), TypeError, "global_positions must have"),
        (lambda: global_mask(4, [1.5]), TypeError, "global_positions must have dtype integer"),
        (lambda: global_mask(4, [[1]]), ValueError, "global_positions must have 1 dimensions"),
        (lambda: band_to_dense(torch.ones(3, 4)), ValueError, "odd last dimension"),
        (lambda: band_to_dense(torch.ones(3)), ValueError, r"got \(3,\)"),
    ],
)
def test_mask_and_band_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_attention_errors_name_the_shapes():
    q, k, v = random_qkv(2, n=5)
    with pytest.raises(ValueError, match="window must be >= 0"):
        local_attention(q, k, v, -1)
    with pytest.raises(TypeError, match="window must be an int"):
        local_attention(q, k, v, 2.0)
    with pytest.raises(ValueError, match=r"as many queries as keys.*\(2, 4, 4\)"):
        local_attention(q[:, :4], k, v, 1)
    with pytest.raises(TypeError, match="need_weights must be a bool"):
        local_attention(q, k, v, 1, need_weights=1)
    for attention in (lambda *t: local_attention(*t, 1), linear_attention):
        with pytest.raises(ValueError, match="same feature size d_k"):
            attention(q, k[..., :3], v)
        with pytest.raises(ValueError, match="keys and values must come in pairs"):
            attention(q, k, v[:, :4])
        with pytest.raises(ValueError, match="same leading"):
            attention(q, k, v[:1])
        with pytest.raises(ValueError, match="at least 2 dimensions"):
            attention(q[0, 0], k, v)
        with pytest.raises(TypeError, match="dtype floating"):
            attention(q.long(), k.long(), v.long())
        with pytest.raises(TypeError, match="share a dtype"):
            attention(q, k.float(), v)
        with pytest.raises(TypeError, match="must be a torch.Tensor"):
            attention(q.tolist(), k, v)
    with pytest.raises(TypeError, match="feature_map must be callable"):
        linear_attention(q, k, v, feature_map="elu")
    with pytest.raises(ValueError, match="same number of features"):
        # 3 queries -> 2 features, 5 keys -> 4 features
        linear_attention(q[:, :3], k, v, feature_map=lambda x: x[..., : x.shape[-2] - 1].exp())


def test_scaled_dot_product_attention_reference_is_what_we_think():
    """Guard the reference used above: dense attention with local_mask, by hand."""
    q, k, v = random_qkv(n=5)
    scores = q @ k.T / math.sqrt(4)
    scores[~local_mask(5, 1)] = -math.inf
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, local_mask(5, 1))[0],
                               torch.softmax(scores, -1) @ v)
