r"""Checkers for the section-02 exercises: heads (多头) split, merged, and a whole forward pass.

The three exercises of ``02_multi_head_attention.ipynb`` have the library's signatures:

* ``split_heads(x, num_heads)``: ``(batch, seq, d_model)`` -> ``(batch, heads, seq, d_head)``, head
  ``h`` holding features ``h * d_head ... (h + 1) * d_head - 1`` of every position
  (:func:`lectures_lib.attention.split_heads`);
* ``merge_heads(x)``: its inverse, ``(batch, heads, seq, d_head)`` -> ``(batch, seq, heads *
  d_head)``, the concatenation (拼接) ``[b^{i,1}; b^{i,2}; ...]`` of every position
  (:func:`lectures_lib.attention.merge_heads`);
* ``multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None) -> (out, weights)``:
  multi-head self-attention with weight matrices in the row convention ``y = x @ W`` and per-head
  weights ``(batch, heads, seq, seq)`` (:func:`lectures_lib.attention.multi_head_attention`).

How the checkers work. Each calls the student's function on fixed *probes* whose sizes all differ
(batch, seq, heads, d_head), so that every rearrangement of the entries shows, and compares the
answer with the reference. When an answer is wrong, it recomputes what each classic mistake would
have returned on that probe (the *diagnostic catalogue*) and names the one that matches.
``split_heads``/``merge_heads`` only move entries, so their probes hold distinct numbers and are
compared exactly. ``tests/test_checks_heads.py`` asserts that the catalogue's predictions differ
from each other and from the right answer on the probes where they are used.

Mistake codes (``result.mistake``) are listed in :data:`MISTAKE_CODES`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..attention import merge_heads as _merge_reference
from ..attention import multi_head_attention as _mha_reference
from ..attention import split_heads as _split_reference
from ._base import Mistake, call, checker

__all__ = ["check_split_heads", "check_merge_heads", "check_multi_head_attention"]

MISTAKE_CODES: dict[str, str] = {
    "not_implemented": "the function still raises NotImplementedError",
    "timed_out": "the function did not return within the time limit (a loop, a sleep)",
    "returned_none": "the function returned None (a forgotten `return`)",
    "not_callable": "something other than a function was passed to the checker",
    "raised": "the function crashed on one of the probes",
    "modified_input": "an input tensor was changed in place",
    "wrong_signature": "multi_head_attention does not accept the mask argument",
    "wrong_return_type": "not a tensor (split/merge) or not a pair (out, weights) of tensors",
    "wrong_shape": "a result of the wrong shape",
    "wrong_dtype": "split/merge changed the dtype, or multi_head_attention's result is not "
    "floating-point",
    "reshape_without_transpose": "heads and positions reshaped into each other without transpose",
    "transpose_before_reshape": "transposed (seq, d_model) first, then reshaped",
    "heads_mixing_channels": "head h took every num_heads-th feature instead of a contiguous block",
    "scaled_values": "split/merge multiplied the entries by a factor (e.g. 1/sqrt(d_head))",
    "scaled_by_d_model": "scores divided by sqrt(d_model) instead of sqrt(d_head)",
    "missing_scaling": "scores not divided by sqrt(d_head)",
    "missing_output_projection": "the concatenated heads not multiplied by W^O",
    "transposed_weights": "x @ W.T (nn.Linear's layout) instead of x @ W",
    "softmax_wrong_axis": "softmax over the queries instead of the keys",
    "weights_averaged": "weights averaged over the heads (nn.MultiheadAttention's default)",
    "mask_ignored": "the mask has no effect",
    "mask_inverted": "True treated as 'blocked' (PyTorch's nn.MultiheadAttention convention)",
    "wrong_values": "differs from the reference in a way the catalogue does not recognise",
}

_LAYOUT = {
    "reshape_without_transpose": (
        "you reshaped straight between (batch, seq, ...) and (batch, heads, ...) without "
        "transposing: the shape comes out right but positions and heads get mixed. Reshape "
        "(batch, seq, d_model) to (batch, seq, heads, d_head) first, then `.transpose(1, 2)`"
    ),
    "transpose_before_reshape": (
        "you transposed x to (batch, d_model, seq) and reshaped that: the entries of different "
        "features and positions get mixed. Reshape to (batch, seq, heads, d_head) first, then "
        "`.transpose(1, 2)`"
    ),
    "heads_mixing_channels": (
        "head h got features h, h + heads, h + 2·heads, ... (every heads-th feature) instead of "
        "the contiguous block h·d_head ... (h+1)·d_head − 1: the features dimension d_model splits "
        "as (heads, d_head), in that order, not (d_head, heads)"
    ),
}


_MERGE_LAYOUT = {
    "reshape_without_transpose": (
        "you reshaped (batch, heads, seq, d_head) straight to (batch, seq, d_model) without "
        "transposing: the shape comes out right but positions and heads get mixed. Transpose to "
        "(batch, seq, heads, d_head) first (`.transpose(1, 2)`), then reshape"
    ),
    "transpose_before_reshape": (
        "you reshaped to (batch, d_model, seq) and transposed that: the entries of different "
        "positions and features get mixed. Transpose heads and seq first, then reshape"
    ),
    "heads_mixing_channels": (
        "the heads are interleaved feature by feature (feature j of head h landed at h + j·heads) "
        "instead of concatenated: head h's d_head features must form the contiguous block "
        "h·d_head … (h+1)·d_head − 1, i.e. `.transpose(1, 2)` then reshape, not a permute that "
        "puts d_head before heads"
    ),
}


def _distinct(*shape: int) -> torch.Tensor:
    """A float tensor of ``shape`` whose entries are all different (0, 1, 2, ...)."""
    return torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)


def _describe(shape: tuple[int, ...], names: str) -> str:
    return "(" + ", ".join(f"{n}={s}" for n, s in zip(names.split(), shape, strict=True)) + ")"


def _check_not_scaled(got: torch.Tensor, expected: torch.Tensor, probe: str, what: str) -> None:
    """Raise ``scaled_values`` when ``got`` is ``expected`` times a factor other than 1."""
    got, expected = got.double(), expected.double()
    factor = float((got * expected).sum() / (expected * expected).sum())
    if abs(factor - 1.0) > 1e-6 and torch.allclose(got, factor * expected, rtol=1e-6, atol=1e-6):
        raise Mistake(
            "scaled_values",
            f"for {probe} every entry is where it belongs but multiplied by {factor:.4g}: "
            f"{what} only rearranges entries, it must not scale them. The 1/√d_head scaling "
            "belongs to the attention scores Q Kᵀ, inside the attention itself.",
        )


def _expect_tensor_result(result: object, what: str) -> torch.Tensor:
    if not isinstance(result, torch.Tensor):
        raise Mistake(
            "wrong_return_type",
            f"{what} should return a torch.Tensor, got {type(result).__name__}",
        )
    return result


# ---------------------------------------------------------------------------------------------
# split_heads
# ---------------------------------------------------------------------------------------------

# (batch, seq, d_model), num_heads. The first probe has batch, seq, heads, d_head all different.
SPLIT_PROBES: tuple[tuple[tuple[int, int, int], int], ...] = (
    ((2, 5, 12), 3),
    ((1, 7, 8), 2),
    ((3, 4, 6), 1),
    ((2, 3, 6), 6),
)


def split_catalogue(x: torch.Tensor, num_heads: int) -> list[tuple[str, torch.Tensor]]:
    """``(code, prediction)`` of each classic ``split_heads`` mistake on ``x``."""
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    return [
        ("reshape_without_transpose", x.reshape(batch, num_heads, seq, d_head)),
        ("transpose_before_reshape", x.transpose(1, 2).reshape(batch, num_heads, seq, d_head)),
        ("heads_mixing_channels", x.reshape(batch, seq, d_head, num_heads).permute(0, 3, 1, 2)),
    ]


@checker("split_heads")
def check_split_heads(student_fn: Callable) -> str:
    """Check ``split_heads(x, num_heads)``: ``(batch, seq, d_model)`` -> ``(batch, heads, seq,
    d_head)``. Never raises; returns a :class:`~lectures_lib.checks.CheckResult`."""
    for (batch, seq, d_model), num_heads in SPLIT_PROBES:
        d_head = d_model // num_heads
        x = _distinct(batch, seq, d_model)
        expected = _split_reference(x, num_heads)  # (batch, heads, seq, d_head)
        probe = f"x of shape {tuple(x.shape)} and num_heads={num_heads}"
        got = _expect_tensor_result(call(student_fn, x, num_heads), "split_heads")
        if got.shape != expected.shape:
            hint = ""
            if tuple(got.shape) == (batch, seq, num_heads, d_head):
                hint = (
                    " That is (batch, seq, heads, d_head): the features are cut into heads, but "
                    "the heads dimension must then move in front of seq: `.transpose(1, 2)`."
                )
            elif tuple(got.shape) == (batch, num_heads, d_head, seq):
                hint = " That is (batch, heads, d_head, seq): the last two dimensions are swapped."
            raise Mistake(
                "wrong_shape",
                f"for {probe} the result should have shape (batch, heads, seq, d_head) = "
                f"{_describe(tuple(expected.shape), 'batch heads seq d_head')}, got "
                f"{tuple(got.shape)}.{hint}",
            )
        if got.dtype != x.dtype:
            raise Mistake(
                "wrong_dtype",
                f"for {probe} (dtype {x.dtype}) the result has dtype {got.dtype}: splitting "
                "only moves entries, keep the dtype",
            )
        got = got.detach().cpu()
        if torch.equal(got, expected):
            continue
        for code, prediction in split_catalogue(x, num_heads):
            if not torch.equal(prediction, expected) and torch.equal(got, prediction):
                raise Mistake(code, f"for {probe}: {_LAYOUT[code]}.")
        _check_not_scaled(got, expected, probe, "split_heads")
        raise Mistake(
            "wrong_values",
            f"for {probe} the shape is right but the entries are not where they belong: "
            f"result[b, h, i] must be x[b, i, h·d_head:(h+1)·d_head] (here d_head={d_head}).",
        )
    return (
        "split_heads(x, num_heads) gives (batch, heads, seq, d_head), head h holding features "
        "h·d_head … (h+1)·d_head − 1 of every position, on all "
        f"{len(SPLIT_PROBES)} probes."
    )


# ---------------------------------------------------------------------------------------------
# merge_heads
# ---------------------------------------------------------------------------------------------

# (batch, heads, seq, d_head). The first probe has all four sizes different.
MERGE_PROBES: tuple[tuple[int, int, int, int], ...] = (
    (2, 3, 5, 4),
    (1, 2, 7, 4),
    (3, 1, 4, 6),
    (2, 6, 3, 1),
)


def merge_catalogue(x: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """``(code, prediction)`` of each classic ``merge_heads`` mistake on ``x``."""
    batch, num_heads, seq, d_head = x.shape
    d_model = num_heads * d_head
    return [
        ("reshape_without_transpose", x.reshape(batch, seq, d_model)),
        ("transpose_before_reshape", x.reshape(batch, d_model, seq).transpose(1, 2)),
        ("heads_mixing_channels", x.permute(0, 2, 3, 1).reshape(batch, seq, d_model)),
    ]


@checker("merge_heads")
def check_merge_heads(student_fn: Callable) -> str:
    """Check ``merge_heads(x)``: ``(batch, heads, seq, d_head)`` -> ``(batch, seq, heads *
    d_head)``, the inverse of ``split_heads``. Never raises."""
    for batch, num_heads, seq, d_head in MERGE_PROBES:
        x = _distinct(batch, num_heads, seq, d_head)
        expected = _merge_reference(x)  # (batch, seq, d_model)
        probe = f"x of shape {tuple(x.shape)}"
        got = _expect_tensor_result(call(student_fn, x), "merge_heads")
        if got.shape != expected.shape:
            hint = ""
            if tuple(got.shape) == (batch, seq, num_heads, d_head):
                hint = " That is (batch, seq, heads, d_head): the last two dimensions still need "
                hint += "to be joined with a reshape."
            elif tuple(got.shape) == (batch, num_heads, seq * d_head):
                hint = " That is (batch, heads, seq·d_head): transpose heads and seq first."
            raise Mistake(
                "wrong_shape",
                f"for {probe} the result should have shape (batch, seq, heads·d_head) = "
                f"{_describe(tuple(expected.shape), 'batch seq d_model')}, got "
                f"{tuple(got.shape)}.{hint}",
            )
        if got.dtype != x.dtype:
            raise Mistake(
                "wrong_dtype",
                f"for {probe} (dtype {x.dtype}) the result has dtype {got.dtype}: merging only "
                "moves entries, keep the dtype",
            )
        got = got.detach().cpu()
        if torch.equal(got, expected):
            continue
        for code, prediction in merge_catalogue(x):
            if not torch.equal(prediction, expected) and torch.equal(got, prediction):
                raise Mistake(code, f"for {probe}: {_MERGE_LAYOUT[code]}.")
        _check_not_scaled(got, expected, probe, "merge_heads")
        raise Mistake(
            "wrong_values",
            f"for {probe} the shape is right but the entries are not where they belong: "
            f"result[b, i, h·d_head:(h+1)·d_head] must be x[b, h, i] (here d_head={d_head}), "
            "i.e. merge_heads(split_heads(y, heads)) == y.",
        )
    return (
        "merge_heads(x) gives (batch, seq, heads·d_head), the heads of each position "
        f"concatenated in order, on all {len(MERGE_PROBES)} probes."
    )


# ---------------------------------------------------------------------------------------------
# multi_head_attention
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MHAProbe:
    """One call ``fn(x, w_q, w_k, w_v, w_o, num_heads[, mask])`` (float64 unless said)."""

    title: str
    x: torch.Tensor
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # w_q, w_k, w_v, w_o
    num_heads: int
    mask: torch.Tensor | None = None
    diagnose: bool = True

    def args(self) -> tuple:
        args = (self.x, *self.weights, self.num_heads)
        return args if self.mask is None else (*args, self.mask)

    def describe(self) -> str:
        batch, seq, d_model = self.x.shape
        text = (
            f"{self.title}: x {tuple(self.x.shape)}, num_heads={self.num_heads} "
            f"(d_head={d_model // self.num_heads}), {str(self.x.dtype).replace('torch.', '')}"
        )
        return text if self.mask is None else text + f", mask {tuple(self.mask.shape)}"

    def reference(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The library's answer, in float64."""
        x = self.x.double()
        weights = [w.double() for w in self.weights]
        return _mha_reference(x, *weights, self.num_heads, self.mask)


def _mha_variant(
    probe: MHAProbe,
    *,
    scale: str = "d_head",
    split: str = "right",
    merge: str = "right",
    output_projection: bool = True,
    transpose_weights: bool = False,
    softmax_dim: int = -1,
    mask: str = "use",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head self-attention with one classic mistake switched on (float64)."""
    x = probe.x.double()
    w_q, w_k, w_v, w_o = (w.double().T if transpose_weights else w.double() for w in probe.weights)
    batch, seq, d_model = x.shape
    heads = probe.num_heads
    d_head = d_model // heads

    def split_fn(t: torch.Tensor) -> torch.Tensor:  # (batch, seq, d_model) -> (b, heads, seq, d)
        if split == "reshape":
            return t.reshape(batch, heads, seq, d_head)
        if split == "strided":
            return t.reshape(batch, seq, d_head, heads).permute(0, 3, 1, 2)
        return t.reshape(batch, seq, heads, d_head).transpose(1, 2)

    def merge_fn(t: torch.Tensor) -> torch.Tensor:  # (b, heads, seq, d) -> (batch, seq, d_model)
        if merge == "reshape":
            return t.reshape(batch, seq, d_model)
        if merge == "strided":
            return t.permute(0, 2, 3, 1).reshape(batch, seq, d_model)
        return t.transpose(1, 2).reshape(batch, seq, d_model)

    queries, keys, values = split_fn(x @ w_q), split_fn(x @ w_k), split_fn(x @ w_v)
    divisor = {"d_head": math.sqrt(d_head), "d_model": math.sqrt(d_model), "none": 1.0}[scale]
    scores = queries @ keys.transpose(-2, -1) / divisor  # (batch, heads, seq, seq)
    used_mask = probe.mask if mask == "use" else (~probe.mask if mask == "invert" else None)
    if used_mask is not None:
        scores = scores.masked_fill(~used_mask, float("-inf"))
    attn = torch.softmax(scores, dim=softmax_dim)
    out = merge_fn(attn @ values)  # (batch, seq, d_model)
    return (out @ w_o if output_projection else out), attn


_MHA_MESSAGES = {
    "scaled_by_d_model": (
        "the scores are divided by √d_model; each head is a small attention on d_head = d_model "
        "/ num_heads features, so divide q·k by √d_head"
    ),
    "missing_scaling": "the scores are not scaled: divide each head's q·k by √d_head",
    "missing_output_projection": (
        "out is the concatenation of the heads without the output projection: multiply it by "
        "W^O (`merged @ w_o`), as in the lecture's last step (拼接, then W^O)"
    ),
    "transposed_weights": (
        "the weights are used as x @ W.T (the layout of nn.Linear.weight); this exercise uses "
        "the row convention y = x @ W with W of shape (d_model_in, d_model_out)"
    ),
    "softmax_wrong_axis": (
        "the softmax normalises over the queries (dim=-2): each query's weights over the keys "
        "(a row) must sum to 1, use dim=-1"
    ),
    "mask_ignored": (
        "the mask has no effect: fill the scores where the mask is False with -inf (or "
        "torch.finfo(dtype).min) before the softmax"
    ),
    "mask_inverted": (
        "the mask is inverted: in this course True means 'may attend' (as in "
        "F.scaled_dot_product_attention); nn.MultiheadAttention's True means 'blocked'. Fill "
        "where the mask is False: `scores.masked_fill(~mask, float('-inf'))`"
    ),
}


def mha_catalogue(probe: MHAProbe) -> list[tuple[str, str, tuple[torch.Tensor, torch.Tensor]]]:
    """``(code, message, (out, weights))`` of each classic mistake on ``probe``, tried in order."""
    if not probe.diagnose:
        return []
    if probe.mask is not None:  # the unmasked probes came first: only the mask can be wrong here
        return [
            ("mask_ignored", _MHA_MESSAGES["mask_ignored"], _mha_variant(probe, mask="ignore")),
            ("mask_inverted", _MHA_MESSAGES["mask_inverted"], _mha_variant(probe, mask="invert")),
        ]
    found = []

    def add(code: str, message: str | None = None, **variant) -> None:
        found.append((code, message or _MHA_MESSAGES[code], _mha_variant(probe, **variant)))

    add("scaled_by_d_model", scale="d_model")
    add("missing_scaling", scale="none")
    add("missing_output_projection", output_projection=False)
    layout = [("reshape", "right", "in split_heads"), ("right", "reshape", "in merge_heads"),
              ("reshape", "reshape", "in split_heads and merge_heads")]
    for split, merge, where in layout:
        add("reshape_without_transpose", f"{where}: {_LAYOUT['reshape_without_transpose']}",
            split=split, merge=merge)
    for split, merge, where in (("strided", "right", "in split_heads"),
                                ("strided", "strided", "in split_heads and merge_heads")):
        add("heads_mixing_channels", f"{where}: {_LAYOUT['heads_mixing_channels']}",
            split=split, merge=merge)
    add("transposed_weights", transpose_weights=True)
    add("softmax_wrong_axis", softmax_dim=-2)
    return found


def mha_probes() -> list[MHAProbe]:
    """The fixed probes of :func:`check_multi_head_attention`, in the order they are tried."""
    generator = torch.Generator().manual_seed(2022)

    def make(title, batch, seq, d_model, num_heads, mask=None, dtype=torch.float64, diagnose=True):
        x = torch.randn(batch, seq, d_model, generator=generator, dtype=torch.float64)
        weights = tuple(
            torch.randn(d_model, d_model, generator=generator, dtype=torch.float64)
            / math.sqrt(d_model)
            for _ in range(4)
        )
        return MHAProbe(title, x.to(dtype), tuple(w.to(dtype) for w in weights), num_heads, mask,
                        diagnose)

    def mask_with_both(n: int) -> torch.Tensor:  # every row has an allowed and a blocked key
        mask = torch.rand(n, n, generator=generator) < 0.5
        rows = torch.arange(n)
        mask[rows, rows] = True
        mask[rows, (rows + 1) % n] = False
        return mask  # (n, n)

    lengths = torch.tensor([4, 2])  # key padding: sequence b has lengths[b] real keys (of 5)
    padding = (torch.arange(5)[None, :] < lengths[:, None])[:, None, None, :]  # (2, 1, 1, 5)
    return [
        # batch, seq, heads, d_head all different: every layout mistake shows.
        make("3 heads", 2, 5, 12, 3),
        make("2 heads", 1, 6, 8, 2),
        make("one head", 3, 4, 6, 1),
        make("d_head = 1", 2, 3, 6, 6),
        make("a (seq, seq) mask", 2, 5, 12, 3, mask_with_both(5)),
        make("a key-padding mask (batch, 1, 1, seq)", 2, 5, 12, 3, padding),
        make("float32 inputs", 2, 4, 8, 2, dtype=torch.float32, diagnose=False),
    ]


# multi_head_attention's results are compared at the tolerances of the coarser of x's and the
# result's dtype: any floating result is accepted (computing in float64, or filling float32
# buffers, is right), at the precision it carries.
_TOLERANCES = {
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (3e-2, 1e-2),
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-7, 1e-9),
}


def _coarsest(*dtypes: torch.dtype) -> torch.dtype:
    """The least precise of the given floating dtypes (the one with the largest eps)."""
    return max(dtypes, key=lambda dtype: torch.finfo(dtype).eps)


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> bool:
    rtol, atol = _TOLERANCES.get(dtype, _TOLERANCES[torch.float32])
    return actual.shape == expected.shape and bool(
        torch.allclose(actual, expected, rtol=rtol, atol=atol)
    )


def _unpack_mha(
    result: object, probe: MHAProbe
) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """``(out, weights)`` as float64 and the dtype whose precision they are compared at."""
    batch, seq, d_model = probe.x.shape
    heads = probe.num_heads
    if isinstance(result, torch.Tensor):
        raise Mistake(
            "wrong_return_type",
            "your function returned one tensor; return both: `return out, weights`",
        )
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise Mistake(
            "wrong_return_type",
            f"your function should return a pair `(out, weights)`, got {type(result).__name__}"
            + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""),
        )
    for position, value in zip(("first (out)", "second (weights)"), result, strict=True):
        if not isinstance(value, torch.Tensor):
            raise Mistake(
                "wrong_return_type",
                f"the {position} value should be a torch.Tensor, got {type(value).__name__}",
            )
    out, weights = result
    where = f"on {probe.describe()}"
    if tuple(out.shape) != (batch, seq, d_model):
        raise Mistake(
            "wrong_shape",
            f"{where}: out should have shape (batch, seq, d_model) = {(batch, seq, d_model)}, "
            f"got {tuple(out.shape)}",
        )
    if tuple(weights.shape) != (batch, heads, seq, seq):
        hint = ""
        if tuple(weights.shape) == (batch, seq, seq):
            hint = (
                " That is (batch, seq, seq): one map for all heads. Return every head's weights,"
                " not their average (nn.MultiheadAttention averages by default)."
            )
        elif tuple(weights.shape) == (batch * heads, seq, seq):
            hint = " That is (batch·heads, seq, seq): keep batch and heads as two dimensions."
        raise Mistake(
            "wrong_shape",
            f"{where}: weights should have shape (batch, heads, seq, seq) = "
            f"{(batch, heads, seq, seq)}, got {tuple(weights.shape)}.{hint}",
        )
    for name, value in (("out", out), ("weights", weights)):
        if not value.is_floating_point():
            raise Mistake(
                "wrong_dtype",
                f"{where}: {name} has dtype {value.dtype} but should be floating-point like x "
                f"({probe.x.dtype})",
            )
    dtype = _coarsest(probe.x.dtype, out.dtype, weights.dtype)
    return out.detach().cpu().double(), weights.detach().cpu().double(), dtype


def _check_mha_probe(student_fn: Callable, probe: MHAProbe) -> None:
    result = call(student_fn, *probe.args())
    if isinstance(result, (tuple, list)) and len(result) == 2:
        _, weights = result
        batch, seq, _ = probe.x.shape
        if isinstance(weights, torch.Tensor) and tuple(weights.shape) == (batch, seq, seq):
            ref_weights = probe.reference()[1]
            averaged = ref_weights.mean(dim=1)  # (batch, seq, seq)
            dtype = _coarsest(probe.x.dtype, weights.dtype) if weights.is_floating_point() \
                else probe.x.dtype
            if probe.num_heads > 1 and _close(weights.detach().cpu().double(), averaged, dtype):
                raise Mistake(
                    "weights_averaged",
                    f"on {probe.describe()}: the weights are averaged over the heads "
                    "(what nn.MultiheadAttention returns by default). Return the per-head "
                    "weights, shape (batch, heads, seq, seq): each head has its own map.",
                )
    out, weights, dtype = _unpack_mha(result, probe)
    ref_out, ref_weights = probe.reference()
    if _close(out, ref_out, dtype) and _close(weights, ref_weights, dtype):
        return
    if not (torch.isfinite(out).all() and torch.isfinite(weights).all()):
        raise Mistake(
            "wrong_values",
            f"on {probe.describe()}: the result holds NaN or inf (no query of this probe has "
            "all its keys masked).",
        )
    for code, message, (cand_out, cand_weights) in mha_catalogue(probe):
        if _close(cand_out, ref_out, dtype) and _close(cand_weights, ref_weights, dtype):
            continue  # this mistake makes no difference on this probe
        if _close(out, cand_out, dtype) and _close(weights, cand_weights, dtype):
            raise Mistake(code, f"on {probe.describe()}: {message}.")
    which = [
        name for name, ok in (("out", _close(out, ref_out, dtype)),
                              ("weights", _close(weights, ref_weights, dtype))) if not ok
    ]
    largest = max(float((out - ref_out).abs().max()), float((weights - ref_weights).abs().max()))
    raise Mistake(
        "wrong_values",
        f"on {probe.describe()}: {' and '.join(which)} differ from the reference (largest "
        f"difference {largest:.3g}). "
        "Check each step's shape: Q = x @ w_q, split into (batch, heads, seq, d_head), softmax of "
        "Q Kᵀ / √d_head over the keys, weights @ V, merge to (batch, seq, d_model), then @ w_o.",
    )


@checker("multi_head_attention")
def check_multi_head_attention(student_fn: Callable) -> str:
    """Check ``multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None) -> (out,
    weights)`` (row convention ``y = x @ W``, per-head weights). Never raises."""
    probes = mha_probes()
    for probe in probes:
        if probe.mask is not None:
            try:
                inspect.signature(student_fn).bind(*probe.args())
            except TypeError:
                raise Mistake(
                    "wrong_signature",
                    "your function must also accept a mask as its 7th argument: "
                    "`def my_multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None)`",
                ) from None
            except ValueError:  # no signature available (a builtin): just call it
                pass
        _check_mha_probe(student_fn, probe)
    return (
        "out and per-head weights match the reference on all "
        f"{len(probes)} probes (1 to 6 heads, a (seq, seq) mask, a key-padding mask, float32)."
    )
