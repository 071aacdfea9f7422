"""Positional encodings (section 03): sinusoidal table and module, learned embedding, rotary."""

from __future__ import annotations

import inspect
import math

import pytest
import torch
from torch import nn

from lectures_lib.attention import MultiHeadAttention
from lectures_lib.cache import KeyValueCache, kv_cache_problem
from lectures_lib.masks import causal_mask
from lectures_lib.positional import (
    LearnedPositionalEmbedding,
    RotaryAttention,
    RotaryEmbedding,
    RotarySelfAttention,
    SinusoidalEncoding,
    apply_rotary,
    sinusoidal_encoding,
)

from .references import sinusoid_formula


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---------------------------------------------------------------------------------------------
# sinusoidal_encoding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n_positions", "d_model"), [(1, 1), (1, 6), (4, 1), (5, 1), (6, 2), (9, 2),
                                                   (9, 3), (5, 7), (13, 7), (40, 16), (30, 512)])
def test_sinusoidal_matches_the_formula(n_positions, d_model):
    table = sinusoidal_encoding(n_positions, d_model)
    assert table.shape == (n_positions, d_model)
    assert table.dtype == torch.float32
    reference = sinusoid_formula(n_positions, d_model)
    assert torch.allclose(table.double(), reference, atol=1e-6, rtol=0)
    exact = sinusoidal_encoding(n_positions, d_model, dtype=torch.float64)
    assert torch.allclose(exact, reference, atol=1e-12, rtol=0)


def test_positions_start_at_zero():
    for d_model in (1, 2, 6, 7):
        row_zero = sinusoidal_encoding(4, d_model)[0]
        expected = torch.tensor([float(j % 2) for j in range(d_model)])  # [0, 1, 0, 1, ...]
        assert torch.equal(row_zero, expected)


def test_odd_d_model_ends_with_a_lone_sin():
    table = sinusoidal_encoding(30, 7, dtype=torch.float64)
    positions = torch.arange(30, dtype=torch.float64)
    assert torch.allclose(table[:, 6], torch.sin(positions / 10000 ** (6 / 7)))
    # the frequencies depend on d_model: d = 7 is not the d = 6 table plus one column
    assert not torch.allclose(table[:, :6], sinusoidal_encoding(30, 6, dtype=torch.float64))


def test_large_positions_stay_accurate_in_float32():
    """Angles are computed in float64: pos * omega at pos ~ 1e4 would lose ~1e-3 in float32."""
    table = sinusoidal_encoding(10001, 4)
    positions = torch.tensor([9999.0, 10000.0], dtype=torch.float64)
    expected = torch.stack((torch.sin(positions), torch.cos(positions)), dim=1)
    assert torch.allclose(table[-2:, :2].double(), expected, atol=1e-6, rtol=0)


def test_sinusoidal_device_and_dtype_arguments():
    table = sinusoidal_encoding(3, 4, dtype=torch.float16, device="cpu")
    assert table.dtype == torch.float16 and table.device.type == "cpu"


def test_shift_is_a_fixed_rotation_and_dot_products_depend_on_offset_only():
    d_model, n = 16, 120
    table = sinusoidal_encoding(n, d_model, dtype=torch.float64)
    omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    for k in (1, 5, 37):
        blocks = [
            torch.tensor([[math.cos(k * w), math.sin(k * w)], [-math.sin(k * w), math.cos(k * w)]])
            for w in omega.tolist()
        ]
        rotation = torch.block_diag(*blocks).double()  # R_k: (d_model, d_model)
        assert torch.allclose(table[k:], table[: n - k] @ rotation.T, atol=1e-10)
        dots = (table[: n - k] * table[k:]).sum(dim=1)  # PE(pos) . PE(pos + k) for every pos
        assert torch.allclose(dots, torch.cos(k * omega).sum().expand_as(dots), atol=1e-10)


# ---------------------------------------------------------------------------------------------
# SinusoidalEncoding
# ---------------------------------------------------------------------------------------------


def test_sinusoidal_module_adds_the_table():
    module = SinusoidalEncoding(6, max_len=10)
    x = torch.randn(3, 7, 6)
    assert torch.allclose(module(x), x + sinusoidal_encoding(7, 6))
    assert list(module.parameters()) == []


def test_sinusoidal_module_buffer_is_not_persistent_and_follows_dtype():
    module = SinusoidalEncoding(6, max_len=10)
    assert "table" in dict(module.named_buffers())
    assert module.state_dict() == {}, "a table derived from a formula is not saved"
    module.load_state_dict({}, strict=True)  # old checkpoints without the table load fine
    module = module.double()
    assert module.table.dtype == torch.float64
    x = torch.randn(2, 5, 6, dtype=torch.float64)
    out = module(x)
    assert out.dtype == torch.float64
    assert torch.allclose(out - x, sinusoid_formula(5, 6), atol=1e-12)


def test_sinusoidal_module_keeps_the_input_dtype():
    module = SinusoidalEncoding(4, max_len=8)
    x = torch.randn(1, 3, 4, dtype=torch.float64)
    assert module(x).dtype == torch.float64  # float32 table cast to the input's dtype


# ---------------------------------------------------------------------------------------------
# LearnedPositionalEmbedding
# ---------------------------------------------------------------------------------------------


def test_learned_embedding_adds_one_trained_vector_per_position():
    module = LearnedPositionalEmbedding(max_len=8, d_model=4)
    x = torch.randn(2, 5, 4)
    assert torch.allclose(module(x), x + module.embedding.weight[:5])
    assert "embedding.weight" in module.state_dict()
    module(x).sum().backward()
    grad = module.embedding.weight.grad
    assert grad[:5].abs().sum() > 0 and torch.equal(grad[5:], torch.zeros(3, 4)), (
        "positions that no sequence reached get no gradient"
    )


def test_learned_embedding_init_std():
    module = LearnedPositionalEmbedding(max_len=4000, d_model=8, init_std=0.02)
    assert abs(module.embedding.weight.std().item() - 0.02) < 0.002


# ---------------------------------------------------------------------------------------------
# Rotary
# ---------------------------------------------------------------------------------------------


def rotary_by_complex_numbers(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Independent RoPE: feature pairs as complex numbers times e^{i m theta}."""
    d_head = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    z = torch.complex(x[..., 0::2].double(), x[..., 1::2].double())
    z = z * torch.polar(torch.ones_like(theta), positions.double()[..., None] * theta)
    return torch.stack((z.real, z.imag), dim=-1).flatten(-2).to(x.dtype)


def test_apply_rotary_matches_complex_multiplication():
    x = torch.randn(2, 3, 7, 8)
    assert torch.allclose(apply_rotary(x), rotary_by_complex_numbers(x, torch.arange(7)), atol=1e-5)
    positions = torch.tensor([3, 0, 11, 250, 4, 4, 9])
    assert torch.allclose(
        apply_rotary(x, positions), rotary_by_complex_numbers(x, positions), atol=1e-5
    )
    per_sequence = torch.randint(0, 100, (2, 1, 7))  # (batch, 1, seq): broadcast over heads
    assert torch.allclose(
        apply_rotary(x, per_sequence), rotary_by_complex_numbers(x, per_sequence), atol=1e-5
    )


def test_apply_rotary_float64_is_exact():
    x = torch.randn(5, 6, dtype=torch.float64)
    positions = torch.arange(5) * 1000
    out = apply_rotary(x, positions)
    assert out.dtype == torch.float64
    assert torch.allclose(out, rotary_by_complex_numbers(x, positions), atol=1e-12)


def test_apply_rotary_half_precision_at_large_positions():
    """Angles are computed in float32 and only cos/sin cast: a float16 angle of 1000 rad would be
    off by up to 0.25 rad."""
    x = torch.randn(3, 8)
    positions = torch.tensor([997, 1000, 1003])
    expected = rotary_by_complex_numbers(x.double(), positions)
    assert torch.allclose(apply_rotary(x.half(), positions).double(), expected, atol=2e-2)


def test_apply_rotary_keeps_norms_and_position_zero():
    x = torch.randn(4, 9, 16)
    out = apply_rotary(x)
    assert torch.allclose(out.norm(dim=-1), x.norm(dim=-1), atol=1e-5), "rotations keep norms"
    assert torch.equal(out[:, 0], x[:, 0]), "position 0 is not rotated"


def test_rotary_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    positions = torch.arange(60)
    queries = apply_rotary(q.expand(60, 16), positions)  # R_m q for m = 0..59
    keys = apply_rotary(k.expand(60, 16), positions)  # R_n k
    scores = queries @ keys.T  # (m, n)
    for offset in range(-59, 60):
        diagonal = torch.diagonal(scores, offset=offset)  # all (m, n) with n - m = offset
        assert torch.allclose(diagonal, diagonal[0].expand_as(diagonal), atol=1e-10), offset
    # shifting every position by the same amount changes nothing
    shifted = apply_rotary(q.expand(60, 16), positions + 1000) @ apply_rotary(
        k.expand(60, 16), positions + 1000
    ).T
    assert torch.allclose(shifted, scores, atol=1e-9)
    # ... but the absolute scores do depend on the offset (the test could fail)
    assert (scores[0] - scores[0, 0]).abs().max() > 0.1


def test_rotary_embedding_module_equals_function():
    module = RotaryEmbedding(8, max_len=6)
    assert module.state_dict() == {}, "cos/sin tables are derived, not saved"
    for seq in (1, 6, 9):  # inside and beyond the cache
        x = torch.randn(2, 3, seq, 8)
        assert torch.allclose(module(x), apply_rotary(x), atol=1e-6)
    x = torch.randn(4, 8)
    positions = torch.tensor([5, 2, 0, 40])
    assert torch.allclose(module(x, positions), apply_rotary(x, positions), atol=1e-6)
    x64 = torch.randn(3, 8, dtype=torch.float64)
    assert torch.allclose(module(x64), rotary_by_complex_numbers(x64, torch.arange(3)), atol=1e-12)


def test_rotary_attention_without_rotation_is_multi_head_attention():
    torch.manual_seed(0)
    rotary = RotaryAttention(16, num_heads=2)
    plain = MultiHeadAttention(16, 2)
    plain.load_state_dict(rotary.state_dict())  # same parameters, the rotation adds none
    x = torch.randn(3, 5, 16)
    same_position = torch.zeros(5, dtype=torch.long)
    out, weights = rotary(x, x, x, positions=same_position)
    expected, expected_weights = plain(x, x, x)
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.allclose(weights, expected_weights, atol=1e-6)
    rotated, _ = rotary(x, x, x)
    assert not torch.allclose(rotated, expected, atol=1e-3), "default positions do rotate"


def test_rotary_attention_from_torch():
    torch.manual_seed(1)
    reference = nn.MultiheadAttention(8, 2, batch_first=True)
    ours = RotaryAttention.from_torch(reference)
    x = torch.randn(2, 4, 8)
    out, _ = ours(x, x, x, positions=torch.zeros(4))
    expected, _ = reference(x, x, x)
    assert torch.allclose(out, expected, atol=1e-6)


def test_rotary_attention_is_translation_invariant_and_masks():
    torch.manual_seed(0)
    attention = RotaryAttention(16, num_heads=4).eval()
    x = torch.randn(2, 6, 16)
    out, weights = attention(x, x, x)
    shifted, shifted_weights = attention(x, x, x, positions=torch.arange(6) + 97)
    assert torch.allclose(out, shifted, atol=1e-5), "only offsets matter, not absolute positions"
    assert torch.allclose(weights, shifted_weights, atol=1e-5)
    per_sequence = torch.stack((torch.arange(6), torch.arange(6) + 50))  # (batch, seq)
    assert torch.allclose(attention(x, x, x, positions=per_sequence)[0], out, atol=1e-5)
    # padding: the last two keys of sequence 1 may not be attended to
    mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    mask[1, ..., 4:] = False
    masked_out, masked_weights = attention(x, x, x, mask)
    assert torch.equal(masked_weights[1, :, :, 4:], torch.zeros(4, 6, 2))
    x_short = x[1:, :4]
    truncated, _ = attention(x_short, x_short, x_short)
    assert torch.allclose(masked_out[1, :4], truncated[0], atol=1e-5)
    fast, none = attention(x, x, x, mask, need_weights=False)
    assert none is None and torch.allclose(fast, masked_out, atol=1e-5)


def test_rotary_attention_gradients():
    attention = RotaryAttention(8, num_heads=2)
    x = torch.randn(2, 3, 8, requires_grad=True)
    attention(x, x, x)[0].sum().backward()
    assert x.grad is not None and attention.q_proj.weight.grad.abs().sum() > 0


def test_rotary_attention_is_an_override_of_project_only():
    # The seam: RotaryAttention changes how queries and keys are formed, nothing else.
    assert RotaryAttention.attend is MultiHeadAttention.attend
    assert RotaryAttention.project is not MultiHeadAttention.project
    torch.manual_seed(0)
    attention = RotaryAttention(8, num_heads=2)
    x = torch.randn(2, 5, 8)
    q, k, v = attention.project(x, x, x)  # (batch, heads, seq, d_head) each
    plain_q, plain_k, plain_v = MultiHeadAttention.project(attention, x, x, x)
    assert torch.equal(v, plain_v), "values are not rotated"
    assert torch.allclose(q[:, :, 0], plain_q[:, :, 0]), "position 0 is not rotated"
    assert torch.allclose(q.norm(dim=-1), plain_q.norm(dim=-1), atol=1e-6), "rotations keep norms"
    assert not torch.allclose(k, plain_k), "later positions are rotated"


# ---------------------------------------------------------------------------------------------
# Why any of this: attention alone is permutation-equivariant
# ---------------------------------------------------------------------------------------------


def test_positions_break_permutation_equivariance():
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2).eval()
    encode = SinusoidalEncoding(8, max_len=16)
    x = torch.randn(1, 7, 8)
    perm = torch.randperm(7)
    out = attention(x, x, x)[0]
    out_permuted = attention(x[:, perm], x[:, perm], x[:, perm])[0]
    assert torch.allclose(out_permuted, out[:, perm], atol=1e-6)
    with_positions = encode(x)
    with_positions_permuted = encode(x[:, perm])
    out = attention(with_positions, with_positions, with_positions)[0]
    out_permuted = attention(*(with_positions_permuted,) * 3)[0]
    assert not torch.allclose(out_permuted, out[:, perm], atol=1e-3)


# ---- positions through the seam (project) ------------------------------------------------


def test_rotary_attention_is_init_plus_project():
    own = {name for name, value in vars(RotaryAttention).items() if callable(value)}
    assert own <= {"__init__", "project", "from_torch"}, own
    assert "positions" in inspect.signature(MultiHeadAttention.project).parameters
    assert "_positions" not in vars(RotaryAttention(8, 2)), "no positions stashed on the module"



def test_positions_reach_project_through_forward():
    torch.manual_seed(0)
    module = RotaryAttention(8, 2).eval()
    x = _randn(2, 5, 8)
    positions = torch.tensor([3, 1, 4, 1, 5])
    seen = {}
    original = module.project

    def spy(query, key, value, positions=None):
        seen["positions"] = positions
        return original(query, key, value, positions)

    module.project = spy
    out, _ = module(x, x, x, positions=positions)
    assert seen["positions"] is positions
    queries, keys, _ = MultiHeadAttention.project(module, x, x, x)
    expected_q = apply_rotary(queries, positions)
    torch.testing.assert_close(original(x, x, x, positions)[0], expected_q)
    # a shift of every position changes nothing: scores see offsets only
    shifted, _ = module(x, x, x, positions=positions + 7)
    torch.testing.assert_close(shifted, out, atol=1e-5, rtol=1e-4)



def test_forward_cached_hands_project_the_cache_offset():
    torch.manual_seed(0)
    module = RotaryAttention(8, 2).eval()
    x = _randn(2, 6, 8)
    full, _ = module(x, x, x, causal_mask(6))
    cache = KeyValueCache()
    steps = [module.forward_cached(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache)
             for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)



def test_rotary_self_attention_is_a_deprecated_alias():
    with pytest.warns(DeprecationWarning, match="RotaryAttention"):
        old = RotarySelfAttention(8, 2)
    assert isinstance(old, RotaryAttention)
    assert kv_cache_problem(old) is None

