"""lectures_lib.variants.local: local attention equals dense attention under ``local_mask``
(values, weights, gradients; the course's explicit path and PyTorch's), in O(N * window) memory."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.attention import scaled_dot_product_attention
from lectures_lib.variants import band_to_dense, linear_attention, local_attention, local_mask

from .helpers import DEVICES, largest_tensors, matmul_flops, random_qkv


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


def test_local_and_linear_attention_time_is_linear_in_n():
    n, window, d = 1024, 4, 16
    dense_mask = local_mask(n, window)
    dense = matmul_flops(lambda q, k, v: scaled_dot_product_attention(q, k, v, dense_mask), n, d)
    assert dense >= 4 * n * n * d, "Q K^T and weights V: 2 n^2 d multiply-adds each"
    # Blocks of w queries against 3 key blocks: scores and weighted sum over 3w keys per query,
    # 2 n (3w) d multiply-adds each (the band's 2w + 1 plus the block corners), linear in n.
    local = matmul_flops(lambda q, k, v: local_attention(q, k, v, window), n, d)
    assert 0 < local <= 4 * n * 3 * max(window, 1) * d, local
    # phi(K)^T V, phi(Q) (phi(K)^T V) and the two normalising products: about 4 n d^2.
    linear = matmul_flops(linear_attention, n, d)
    assert 0 < linear <= 4 * n * d * (d + 1), linear


def test_scaled_dot_product_attention_reference_is_what_we_think():
    """Guard the reference used above: dense attention with local_mask, by hand."""
    q, k, v = random_qkv(n=5)
    scores = q @ k.T / math.sqrt(4)
    scores[~local_mask(5, 1)] = -math.inf
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, local_mask(5, 1))[0],
                               torch.softmax(scores, -1) @ v)


# -- key padding and the LocalAttention module (section 06) ------------------------------------


@pytest.mark.parametrize(("n", "window"), [(1, 0), (6, 0), (6, 2), (11, 3), (11, 20)])
def test_local_attention_with_key_padding_equals_dense(n, window):
    from lectures_lib.variants import LocalAttention  # noqa: F401  (imported for the module test)

    q, k, v = random_qkv(3, 2, n=n)
    lengths = torch.tensor([n, max(n - 2, 1), 1])
    key_mask = (torch.arange(n)[None, :] < lengths[:, None])[:, None, :]  # (3, 1, n)
    mask = local_mask(n, window) & key_mask[..., None, :]
    expected, expected_weights = scaled_dot_product_attention(q, k, v, mask)
    out, band = local_attention(q, k, v, window, need_weights=True, key_mask=key_mask)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(band_to_dense(band), expected_weights)
    # A padding query far from every real key sees nothing: zeros, as dense attention gives.
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("window", [0, 1, 3, 30])
@pytest.mark.parametrize(("batch", "n"), [(1, 1), (2, 7), (3, 12)])
def test_local_attention_module_equals_dense_under_local_mask(window, batch, n):
    from lectures_lib.variants import LocalAttention

    from .helpers import assert_module_equals_dense, assert_module_gradients_equal_dense

    torch.manual_seed(n + window)
    module = LocalAttention(12, 3, window=window).double()
    x = torch.randn(batch, n, 12, dtype=torch.float64)
    lengths = torch.randint(1, n + 1, (batch,))
    padding = (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :]  # (batch, 1, 1, n)
    for mask in (None, padding, padding[0, 0, 0], torch.ones(n, n, dtype=torch.bool).tril()):
        pattern = assert_module_equals_dense(module, x, mask)
        assert torch.equal(pattern, local_mask(n, window))
    assert_module_gradients_equal_dense(module, x, padding)


def test_local_attention_module_dropout_only_while_training():
    from lectures_lib.variants import LocalAttention

    module = LocalAttention(8, 2, dropout=0.5, window=2)
    x = torch.randn(2, 9, 8)
    module.eval()
    torch.testing.assert_close(module(x, x, x)[0], module(x, x, x)[0])
    module.train()
    torch.manual_seed(0)
    first = module(x, x, x, need_weights=False)[0]
    assert not torch.allclose(first, module(x, x, x, need_weights=False)[0])
