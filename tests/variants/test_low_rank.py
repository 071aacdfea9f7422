"""lectures_lib.variants.low_rank: Linformer with k = N and identity projections is full attention,
compressed attention with stride 1 and identity convolutions is full attention; both never build
N x N, pass gradients, honour key padding, refuse causal masks, and train through the factory."""

from __future__ import annotations

import pytest
import torch

from lectures_lib.attention import MultiHeadAttention, scaled_dot_product_attention
from lectures_lib.masks import key_padding_mask
from lectures_lib.variants import CompressedAttention, LinformerAttention

from .factory_helpers import retrieval_accuracy
from .helpers import LargestTensor


def linformer_like(full, n, k=None):
    ours = LinformerAttention(full.d_model, full.num_heads, seq_len=n, k=k or n).double()
    ours.load_state_dict(full.state_dict(), strict=False)
    return ours


def test_linformer_with_identity_projections_is_full_attention():
    full = MultiHeadAttention(12, 3).double()
    ours = linformer_like(full, 9)
    with torch.no_grad():
        ours.key_projection.copy_(torch.eye(9))
        ours.value_projection.copy_(torch.eye(9))
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    torch.testing.assert_close(ours(x, x, x)[0], full(x, x, x)[0])
    # Cross-attention: 5 queries, 9 keys.
    y = torch.randn(2, 5, 12, dtype=torch.float64)
    torch.testing.assert_close(ours(y, x, x)[0], full(y, x, x)[0])


def test_linformer_equals_attention_over_projected_keys():
    """The quadratic form of the method: softmax(Q (E K)^T / sqrt(d)) (F V), per head, with the
    first n columns of E and F for a shorter sequence and padded keys zeroed first."""
    ours = LinformerAttention(8, 2, seq_len=12, k=5).double()
    q, k, v = (torch.randn(3, 2, 10, 4, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor([10, 7, 1])
    valid = (torch.arange(10)[None, :] < lengths[:, None])[:, None, :, None]
    e, f = ours.key_projection[:, :10], ours.value_projection[:, :10]
    expected, _ = scaled_dot_product_attention(q, e @ (k * valid), f @ (v * valid))
    out, weights = ours.attend(q, k, v, key_padding_mask(lengths, 10), True)
    assert weights is None
    torch.testing.assert_close(out, expected)
    k2 = torch.where(valid, k, 1e3 * torch.randn_like(k))  # padding content: anything
    torch.testing.assert_close(ours.attend(q, k2, v, key_padding_mask(lengths, 10), False)[0], out)


def test_linformer_gradients_and_shared_kv():
    ours = LinformerAttention(8, 2, seq_len=16, k=4)
    x = torch.randn(2, 16, 8, requires_grad=True)
    ours(x, x, x)[0].square().sum().backward()
    for name, parameter in ours.named_parameters():
        assert parameter.grad is not None and bool(parameter.grad.abs().sum() > 0), name
    shared = LinformerAttention(8, 2, seq_len=16, k=4, share_kv=True)
    assert shared.key_projection is shared.value_projection
    assert sum(p.numel() for p in shared.parameters()) == sum(
        p.numel() for p in ours.parameters()) - 4 * 16
    small = LinformerAttention(4, 1, seq_len=6, k=3).double()
    x = torch.randn(1, 6, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: small(t, t, t)[0], (x,))


def test_compressed_attention_with_stride_1_and_identity_is_full_attention():
    full = MultiHeadAttention(12, 3).double()
    ours = CompressedAttention(12, 3, stride=1).double()
    ours.load_state_dict(full.state_dict(), strict=False)
    with torch.no_grad():
        for conv in (ours.key_conv, ours.value_conv):
            conv.weight.copy_(torch.eye(4)[:, :, None])
            conv.bias.zero_()
    x = torch.randn(2, 7, 12, dtype=torch.float64)
    torch.testing.assert_close(ours(x, x, x)[0], full(x, x, x)[0])
    mask = key_padding_mask(torch.tensor([7, 3]), 7)
    torch.testing.assert_close(ours(x, x, x, mask)[0], full(x, x, x, mask)[0])


@pytest.mark.parametrize(("n", "stride"), [(8, 4), (10, 4), (3, 5)])
def test_compressed_attention_equals_its_quadratic_form(n, stride):
    ours = CompressedAttention(8, 2, stride=stride).double()
    q, k, v = (torch.randn(2, 2, n, 4, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor([n, 2])
    valid = torch.arange(n)[None, :] < lengths[:, None]  # (batch, n)
    n_c = -(-n // stride)

    def compress(conv, x):  # window c covers positions c*s ... c*s + s - 1 (zeros past the end)
        x = x * valid[:, None, :, None]
        padded = torch.cat([x, x.new_zeros(2, 2, n_c * stride - n, 4)], -2)
        rows = [torch.einsum("oik,bhki->bho", conv.weight, padded[:, :, c * stride:(c + 1) * stride])
                + conv.bias for c in range(n_c)]
        return torch.stack(rows, -2)

    window_valid = torch.stack([valid[:, c * stride:(c + 1) * stride].any(-1) for c in range(n_c)], -1)
    expected, _ = scaled_dot_product_attention(
        q, compress(ours.key_conv, k), compress(ours.value_conv, v), window_valid[:, None, None, :])
    out, _ = ours.attend(q, k, v, key_padding_mask(lengths, n), False)
    torch.testing.assert_close(out, expected)


def test_compressed_attention_gradients():
    ours = CompressedAttention(8, 2, stride=3)
    x = torch.randn(2, 11, 8, requires_grad=True)
    ours(x, x, x)[0].square().sum().backward()
    for name, parameter in ours.named_parameters():
        assert parameter.grad is not None and bool(parameter.grad.abs().sum() > 0), name


def test_linformer_memory_is_o_n_k():
    sizes = {}
    for n in (2048, 4096):
        module, x = LinformerAttention(16, 1, seq_len=n, k=32), torch.randn(1, n, 16)
        with LargestTensor() as probe:
            module(x, x, x, need_weights=False)
        sizes[n] = probe.largest
        assert probe.largest <= 2 * n * 32, (n, probe.largest)
    assert sizes[4096] / sizes[2048] <= 2.2, sizes


def test_compressed_attention_memory_is_n_squared_over_stride():
    """Compressed attention only divides the N x N cost by the stride: still quadratic in N."""
    stride = 16
    for n in (1024, 2048):
        module, x = CompressedAttention(16, 1, stride=stride), torch.randn(1, n, 16)
        with LargestTensor() as probe:
            module(x, x, x, need_weights=False)
        assert probe.largest <= max(n * n // stride, n * 16), (n, probe.largest)
        assert probe.largest * stride // 2 < n * n, "the scores must be N x N / stride"


def test_linformer_needs_its_seq_len():
    """Linformer's projection is (k, seq_len): it has no default (Python refuses the call; the
    library's refusals of these modules are rows of tests/test_bad_inputs.py)."""
    with pytest.raises(TypeError, match="seq_len"):
        LinformerAttention(8, 2)


@pytest.mark.slow
@pytest.mark.parametrize("factory", [
    lambda d, h, p: LinformerAttention(d, h, p, seq_len=16, k=8),
    lambda d, h, p: CompressedAttention(d, h, p, stride=2),
], ids=["linformer", "compressed"])
def test_low_rank_trains_through_the_factory(factory):
    """On the one-pair retrieval (with four pairs to tell apart by key, 12 epochs are too few for
    these mixtures of positions: about 0.5 measured)."""
    accuracy = retrieval_accuracy(factory, n_keys=1)
    assert accuracy > 0.9, f"reached only {accuracy:.2f} (chance 0.25)"
