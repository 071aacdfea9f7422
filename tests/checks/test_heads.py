"""The section-02 checkers: accept every correct version, name each classic mistake."""

import math

import pytest
import torch

from lectures_lib.attention import merge_heads, multi_head_attention, split_heads
from lectures_lib.checks import (
    CheckResult,
    check_merge_heads,
    check_multi_head_attention,
    check_split_heads,
)
from lectures_lib.checks.heads import (
    MERGE_PROBES,
    MISTAKE_CODES,
    SPLIT_PROBES,
    merge_catalogue,
    split_catalogue,
)
from lectures_lib.checks.multi_head import mha_catalogue, mha_probes

# ---------------------------------------------------------------------------------------------
# split_heads / merge_heads
# ---------------------------------------------------------------------------------------------


def split_view(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, num_heads, d_model // num_heads).permute(0, 2, 1, 3)


def split_chunks(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def split_loop(x, num_heads):
    d_head = x.shape[-1] // num_heads
    return torch.stack([x[..., h * d_head : (h + 1) * d_head] for h in range(num_heads)], dim=1)


def merge_cat(x):
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)


def merge_permute(x):
    batch, heads, seq, d_head = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(batch, seq, heads * d_head)


@pytest.mark.parametrize("fn", [split_heads, split_view, split_chunks, split_loop])
def test_split_checker_accepts_correct_versions(fn):
    result = check_split_heads(fn)
    assert isinstance(result, CheckResult)
    assert result.passed, result


@pytest.mark.parametrize("fn", [merge_heads, merge_cat, merge_permute])
def test_merge_checker_accepts_correct_versions(fn):
    result = check_merge_heads(fn)
    assert result.passed, result


def _not_implemented(*args):
    raise NotImplementedError()


def _in_place_split(x, num_heads):
    x.mul_(2)
    return split_heads(x, num_heads)


SPLIT_MISTAKES = {
    "reshape_without_transpose": lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1),
    "transpose_before_reshape": lambda x, h: x.transpose(1, 2).reshape(
        x.shape[0], h, x.shape[1], -1
    ),
    "heads_mixing_channels": lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(
        0, 3, 1, 2
    ),
    "wrong_shape": lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1),
    "wrong_return_type": lambda x, h: split_heads(x, h).tolist(),
    "wrong_dtype": lambda x, h: split_heads(x, h).double(),
    "wrong_values": lambda x, h: split_heads(x, h).flip(2),
    "modified_input": _in_place_split,
    "not_implemented": _not_implemented,
    "raised": lambda x, h: x.view(7, 7),
}


@pytest.mark.parametrize("code", sorted(SPLIT_MISTAKES))
def test_split_checker_names_each_mistake(code):
    result = check_split_heads(SPLIT_MISTAKES[code])
    assert not result.passed
    assert result.mistake == code, result
    assert code in MISTAKE_CODES


MERGE_MISTAKES = {
    "reshape_without_transpose": lambda x: x.reshape(x.shape[0], x.shape[2], -1),
    "transpose_before_reshape": lambda x: x.reshape(x.shape[0], -1, x.shape[2]).transpose(1, 2),
    "heads_mixing_channels": lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1),
    "wrong_shape": lambda x: x.transpose(1, 2),
    "wrong_return_type": lambda x: merge_heads(x).tolist(),
    "returned_none": lambda x: None,  # a forgotten `return`
    "not_implemented": _not_implemented,
}


@pytest.mark.parametrize("code", sorted(MERGE_MISTAKES))
def test_merge_checker_names_each_mistake(code):
    result = check_merge_heads(MERGE_MISTAKES[code])
    assert not result.passed
    assert result.mistake == code, result


def test_split_and_merge_catalogues_are_distinct_on_the_first_probe():
    (shape, num_heads) = SPLIT_PROBES[0]
    x = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
    predictions = [split_heads(x, num_heads)] + [p for _, p in split_catalogue(x, num_heads)]
    merge_x = torch.arange(math.prod(MERGE_PROBES[0]), dtype=torch.float32).reshape(MERGE_PROBES[0])
    merge_predictions = [merge_heads(merge_x)] + [p for _, p in merge_catalogue(merge_x)]
    for group in (predictions, merge_predictions):
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                assert not torch.equal(group[i], group[j]), (i, j)


# ---------------------------------------------------------------------------------------------
# multi_head_attention
# ---------------------------------------------------------------------------------------------


def mha_loops(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """Head by head, as in the lecture, with einsum and a -1e9 masking constant."""
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    outs, maps = [], []
    for h in range(num_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols]
        scores = torch.einsum("bid,bjd->bij", q, k) / math.sqrt(d_head)
        if mask is not None:
            allowed = mask.expand(batch, num_heads, seq, seq)[:, h]
            scores = scores.masked_fill(allowed == 0, -1e9)
        attn = scores.softmax(dim=-1)
        outs.append(attn @ v)
        maps.append(attn)
    return torch.cat(outs, dim=-1) @ w_o, torch.stack(maps, dim=1)


def mha_finfo(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """Batched over heads with einsum and the dtype's most negative number as the fill."""
    b, n, d = x.shape
    q, k, v = (torch.einsum("bnd,de->bne", x, w).view(b, n, num_heads, -1) for w in (w_q, w_k, w_v))
    scores = torch.einsum("bihd,bjhd->bhij", q, k) * (num_heads / d) ** 0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
    attn = torch.softmax(scores, dim=-1)
    heads = torch.einsum("bhij,bjhd->bihd", attn, v).reshape(b, n, d)
    return heads @ w_o, attn


@pytest.mark.parametrize("fn", [multi_head_attention, mha_loops, mha_finfo])
def test_mha_checker_accepts_correct_versions(fn):
    result = check_multi_head_attention(fn)
    assert result.passed, result


def _variant(**changes):
    """A learner's function with one mistake, built from the checker-independent pieces."""

    def fn(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        b, n, d = x.shape
        d_head = d // num_heads
        ws = [w.T for w in (w_q, w_k, w_v, w_o)] if changes.get("transposed") else (
            w_q, w_k, w_v, w_o)
        if changes.get("split") == "reshape":
            q, k, v = (
                (x @ w).reshape(b, num_heads, n, d_head) for w in ws[:3]
            )
        else:
            q, k, v = (split_heads(x @ w, num_heads) for w in ws[:3])
        scale = math.sqrt(d if changes.get("scale") == "d_model" else d_head)
        if changes.get("scale") == "none":
            scale = 1.0
        scores = q @ k.transpose(-2, -1) / scale
        if mask is not None and not changes.get("ignore_mask"):
            used = mask if not changes.get("invert_mask") else ~mask
            scores = scores.masked_fill(~used, float("-inf"))
        attn = scores.softmax(dim=changes.get("softmax_dim", -1))
        heads = merge_heads(attn @ v)
        out = heads if changes.get("no_projection") else heads @ ws[3]
        if changes.get("average"):
            attn = attn.mean(dim=1)
        return out, attn

    return fn


def _single_tensor(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    return multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask)[0]


def _no_mask_argument(x, w_q, w_k, w_v, w_o, num_heads):
    return multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads)


MHA_MISTAKES = {
    "scaled_by_d_model": _variant(scale="d_model"),
    "missing_scaling": _variant(scale="none"),
    "missing_output_projection": _variant(no_projection=True),
    "reshape_without_transpose": _variant(split="reshape"),
    "transposed_weights": _variant(transposed=True),
    "softmax_wrong_axis": _variant(softmax_dim=-2),
    "weights_averaged": _variant(average=True),
    "mask_ignored": _variant(ignore_mask=True),
    "mask_inverted": _variant(invert_mask=True),
    "wrong_return_type": _single_tensor,
    "wrong_signature": _no_mask_argument,
    "not_implemented": _not_implemented,
}


@pytest.mark.parametrize("code", sorted(MHA_MISTAKES))
def test_mha_checker_names_each_mistake(code):
    result = check_multi_head_attention(MHA_MISTAKES[code])
    assert not result.passed
    assert result.mistake == code, result
    assert code in MISTAKE_CODES


def test_mha_checker_names_heads_mixing_channels():
    def strided(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        b, n, d = x.shape
        q, k, v = (
            (x @ w).reshape(b, n, d // num_heads, num_heads).permute(0, 3, 1, 2)
            for w in (w_q, w_k, w_v)
        )
        attn = (q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)).softmax(-1)
        return merge_heads(attn @ v) @ w_o, attn

    result = check_multi_head_attention(strided)
    assert result.mistake == "heads_mixing_channels", result


def test_mha_catalogue_predictions_differ_where_they_are_used():
    """On every probe that diagnoses, each mistake's prediction differs from the right answer
    (or is skipped by the checker because it does not) and from every other mistake's."""
    tol = dict(rtol=1e-6, atol=1e-8)
    first = mha_probes()[0]
    codes_on_first = {code for code, _, _ in mha_catalogue(first)}
    assert {"scaled_by_d_model", "missing_scaling", "missing_output_projection",
            "reshape_without_transpose", "heads_mixing_channels", "transposed_weights",
            "softmax_wrong_axis"} <= codes_on_first
    for probe in mha_probes():
        ref_out, ref_weights = probe.reference()
        used = []
        for _code, _, (out, weights) in mha_catalogue(probe):
            same_as_ref = torch.allclose(out, ref_out, **tol) and torch.allclose(
                weights, ref_weights, **tol)
            if probe is first:
                assert not same_as_ref, _code
            if not same_as_ref:
                used.append((out, weights))
        for i in range(len(used)):
            for j in range(i + 1, len(used)):
                assert not (torch.allclose(used[i][0], used[j][0], **tol)
                            and torch.allclose(used[i][1], used[j][1], **tol)), (probe.title, i, j)


def test_mha_checker_reference_equals_library():
    probe = mha_probes()[0]
    expected = multi_head_attention(probe.x, *probe.weights, probe.num_heads)
    ref = probe.reference()
    for a, b in zip(ref, expected, strict=True):
        torch.testing.assert_close(a, b)
