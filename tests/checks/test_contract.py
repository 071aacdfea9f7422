"""The checkers' half of the course's contract (README.md, "Exercises and checkers": every
checker returns a result, never raises because of the student's code, never mutates the student's
inputs, accepts every correct implementation and names the mistake when there is one).

The checkers are probed with correct implementations written in several ways, with each classic
mistake, and with functions that misbehave (crash, return garbage, print, mutate). The library's
half (attention, masks, heads, MultiHeadAttention, the sinusoid, the layers against PyTorch) is
``tests/test_contract.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lectures_lib import checks
from lectures_lib.attention import (
    causal_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from lectures_lib.positional import sinusoidal_encoding

from ..references import loop_attention

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


def _draws_random_numbers(*args, **kwargs):
    """Consumes the global RNG (the checker must restore the caller's state) and returns noise."""
    return torch.rand(3, 3), torch.rand(3, 3)


def _returning(value):
    """A function of any signature that returns ``value``: a result of the wrong kind."""
    def returns(*args, **kwargs):
        return value
    returns.__name__ = f"returns {value!r:.30}"
    return returns


#: Results of the wrong kind: tuples of the wrong length or type, integer, complex or 0-d
#: tensors, NaN scalars, objects.
ODD_RESULTS = [
    None, "attention", (None, None), ("out", 1), 3.0, object(),
    (torch.zeros(2, dtype=torch.long), torch.zeros(3, dtype=torch.long)),
    ((torch.zeros(1),), [torch.zeros(1)]), (torch.tensor(math.nan), torch.tensor(math.nan)),
    torch.zeros(()), torch.zeros(3, 3, dtype=torch.complex64),
]


GARBAGE = [
    _returns_none, _raises_value_error, _raises_system_exit, _no_arguments, _prints,
    _returns_numpy, _returns_single_numpy, _modifies_global, _wrong_shape, _returns_nan,
    _returns_string, _returns_generator, _infinite_recursion, _draws_random_numbers,
    *map(_returning, ODD_RESULTS),
    lambda *args: None, lambda a, b, c, d, e, f, g, h: None,
    "not a function", None, 42, torch.zeros(3), "my_scaled_dot_product_attention", torch.ones(2),
]


@pytest.mark.parametrize("name", list(CORRECT))
def test_checkers_never_raise_on_garbage(name, capsys):
    """Every checker, given garbage (not callable, crashing, printing, recursing, drawing random
    numbers, returning results of the wrong kind), returns a failed result naming a mistake and
    leaves the caller's RNG as it was."""
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
