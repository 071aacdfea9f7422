"""The seam's last leaks closed (issue 18): positions through ``project``, ``key_padding_mask=``,
``decode`` with the source mask, ``Transformer(positional_encoding=)``, ``bias`` reaching a
factory, the cache rule as ``__init_subclass__``, guards apart from the maths, and the property
tests of the newer APIs (forward_cached, one_cycle)."""

from __future__ import annotations

import ast
import inspect
import sys
from functools import partial
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lectures_lib._validate import masks as mask_rules
from lectures_lib.attention import MultiHeadAttention
from lectures_lib.cache import KeyValueCache, kv_cache_problem
from lectures_lib.layers import EncoderLayer
from lectures_lib.masks import causal_mask, key_padding_mask
from lectures_lib.models import Transformer, make_src_mask
from lectures_lib.positional import RotaryAttention, RotarySelfAttention, apply_rotary
from lectures_lib.training import lr_schedule

ROOT = Path(__file__).resolve().parent.parent


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---- key_padding_mask ------------------------------------------------------------------------


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


# ---- positions through the seam --------------------------------------------------------------


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


# ---- decode takes the source mask; positional_encoding; bias reaches the factory -------------


def _transformer(**kwargs):
    torch.manual_seed(0)
    return Transformer(7, 9, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=2,
                       d_ff=32, **kwargs).eval()


def test_decode_with_src_mask_equals_decode_with_src_and_is_not_rebuilt(monkeypatch):
    model = _transformer()
    src = torch.tensor([[3, 4, 5, 0, 0], [6, 2, 3, 4, 1]])
    tgt = torch.tensor([[1, 5, 6], [1, 2, 0]])
    src_mask = make_src_mask(src, 0)
    memory = model.encode(src, src_mask)
    torch.testing.assert_close(model.decode(tgt, memory, src_mask), model.decode(tgt, memory, src=src))
    import lectures_lib.models as models_module

    calls = []
    real = models_module.make_src_mask
    monkeypatch.setattr(models_module, "make_src_mask", lambda *a: calls.append(1) or real(*a))
    cache = model.init_cache()
    for t in range(3):
        model.decode_step(tgt[:, t : t + 1], memory, cache, src_mask)
    assert calls == [], "decode_step with src_mask builds no mask from src"


def test_decoders_build_the_source_mask_once(monkeypatch):
    import lectures_lib.models as models_module
    from lectures_lib.decoding import beam_search, greedy_decode

    model = _transformer()
    src = torch.tensor([[3, 4, 5, 0, 0], [6, 2, 3, 4, 1]])
    for decode in (greedy_decode, partial(beam_search, beam_width=2)):
        for use_cache in (True, False):
            calls = []
            real = models_module.make_src_mask
            def spy(tokens, pad_id, real=real, calls=calls):
                if tokens.shape[1] == src.shape[1]:  # a source mask (targets stay shorter)
                    calls.append(1)
                return real(tokens, pad_id)

            monkeypatch.setattr(models_module, "make_src_mask", spy)
            decode(model, src, max_len=3, bos_id=1, eos_id=2, pad_id=0, use_cache=use_cache)
            monkeypatch.undo()
            assert len(calls) == 1, f"{decode}: the source mask is built once, got {len(calls)}"


def test_transformer_positional_encoding_option():
    rotary = _transformer(encoder_attention=RotaryAttention, decoder_attention=RotaryAttention,
                          positional_encoding=False)
    assert rotary.src_embed.positional is None and rotary.tgt_embed.positional is None
    assert _transformer().src_embed.positional is not None
    src, tgt = torch.tensor([[3, 4, 5]]), torch.tensor([[1, 5]])
    assert rotary(src, tgt).shape == (1, 2, 9)


def test_bias_false_reaches_the_factory():
    layer = EncoderLayer(8, 2, 16, bias=False, attention=partial(RotaryAttention, max_len=64))
    assert layer.self_attn.q_proj.bias is None and layer.self_attn.out_proj.bias is None
    assert EncoderLayer(8, 2, 16, attention=RotaryAttention).self_attn.q_proj.bias is not None


def test_the_cache_rule_is_init_subclass():
    class Plain(MultiHeadAttention):
        pass

    class Changed(MultiHeadAttention):
        def attend(self, q, k, v, mask, need_weights):
            return super().attend(q, k, v, mask, need_weights)

    class Vouched(Changed):
        supports_kv_cache = True

    class ChangedAgain(Vouched):
        def project(self, query, key, value, positions=None):
            return super().project(query, key, value, positions)

    assert Plain.supports_kv_cache and kv_cache_problem(Plain(8, 2)) is None
    assert Changed.supports_kv_cache is False
    assert "Changed overrides `attend`" in kv_cache_problem(Changed(8, 2))
    assert kv_cache_problem(Vouched(8, 2)) is None
    assert "ChangedAgain overrides `project`" in kv_cache_problem(ChangedAgain(8, 2))


# ---- guards apart from the maths -------------------------------------------------------------


def test_guards_are_at_most_a_few_percent_of_the_taught_code():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import guard_share
    finally:
        sys.path.pop(0)
    rows = guard_share.table()
    code = sum(r[2] for r in rows)
    checks = sum(r[3] for r in rows)
    assert checks / code <= 0.07, f"guards are {checks / code:.1%} of the taught code"
    for name, _, module_code, module_checks in rows:
        assert module_checks / module_code <= 0.10, f"{name}: {module_checks}/{module_code}"


def test_no_taught_module_keeps_boundary_blocks():
    for name in ("attention", "masks", "positional", "layers", "models", "decoding", "training"):
        tree = ast.parse((ROOT / "lectures_lib" / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                "at_boundary", "inside_library"
            ):
                raise AssertionError(f"{name}.py:{node.lineno} still calls {node.func.id}()")


def test_the_validators_keep_the_messages_of_the_door():
    with pytest.raises(ValueError, match="is not divisible by num_heads=3"):
        MultiHeadAttention(8, 3)
    assert mask_rules.check_mask is __import__("lectures_lib.masks").masks.check_mask


# ---- properties of the newer APIs ------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(total_steps=st.integers(1, 60), warmup=st.floats(0.0, 0.99))
def test_one_cycle_never_divides_by_zero(total_steps, warmup):
    optimizer = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    scheduler = lr_schedule(optimizer, total_steps, "one_cycle", warmup)
    rates = []
    for _ in range(total_steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert all(0 < rate <= 1e-3 * (1 + 1e-9) for rate in rates), rates


@pytest.mark.parametrize("total_steps,warmup", [(10, 0.1), (2, 0.5), (20, 0.05), (4, 0.25)])
def test_one_cycle_with_a_one_step_warmup(total_steps, warmup):
    # warmup * total_steps == 1: PyTorch's OneCycleLR alone raises ZeroDivisionError here
    with pytest.raises(ZeroDivisionError):
        torch.optim.lr_scheduler.OneCycleLR(
            torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3), max_lr=1e-3,
            total_steps=total_steps, pct_start=warmup,
        )
    optimizer = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    scheduler = lr_schedule(optimizer, total_steps, "one_cycle", warmup)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 / 25), "step 0: peak / 25"
    optimizer.step()
    scheduler.step()
    if total_steps > 2:
        assert optimizer.param_groups[0]["lr"] > 0.5e-3, "the decay starts near the peak"


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 3), n_new=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       seed=st.integers(0, 10**6))
def test_forward_cached_equals_forward_on_the_prefix(batch, n_new, seed):
    torch.manual_seed(seed)
    module = MultiHeadAttention(8, 2).eval()
    total = sum(n_new)
    x = _randn(batch, total, 8, seed=seed)
    full, _ = module(x, x, x, causal_mask(total), need_weights=False)
    cache, outs, start = KeyValueCache(), [], 0
    for n in n_new:
        piece = x[:, start : start + n]
        step_mask = causal_mask(start + n)[start:]  # (n, start + n)
        outs.append(module.forward_cached(piece, piece, piece, cache, step_mask))
        start += n
    torch.testing.assert_close(torch.cat(outs, dim=1), full, atol=1e-5, rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(bad=st.sampled_from(["float mask", "int mask", "static str", "batch changes", "wide query"]))
def test_forward_cached_refuses_bad_input_clearly(bad):
    module, cache = MultiHeadAttention(8, 2), KeyValueCache()
    x = _randn(2, 1, 8)
    module.forward_cached(x, x, x, cache)
    call = {
        "float mask": lambda: module.forward_cached(x, x, x, cache, torch.ones(1, 2)),
        "int mask": lambda: module.forward_cached(x, x, x, cache, torch.ones(1, 2, dtype=torch.long)),
        "static str": lambda: module.forward_cached(x, x, x, cache, static="False"),
        "batch changes": lambda: module.forward_cached(x[:1], x[:1], x[:1], cache),
        "wide query": lambda: module.forward_cached(_randn(2, 1, 9), x, x, cache),
    }[bad]
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    assert "lectures_lib" in Path(caught.traceback[-1].path).parts, "refused by the library"
    assert len(cache) == 1, "a refused call leaves the cache as it was"
