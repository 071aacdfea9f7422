r"""Checker for the section-02 exercise ``multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads,
mask=None) -> (out, weights)``: multi-head self-attention with weight matrices in the row
convention ``y = x @ W`` (:func:`lectures_lib.attention.multi_head_attention`).

It works as the heads checkers do (:mod:`lectures_lib.checks.heads`, whose mistake codes it
shares): fixed probes whose sizes all differ, compared with the reference, and a diagnostic
catalogue naming the classic mistake an answer matches.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..attention import multi_head_attention as _mha_reference
from ._base import Mistake, call, checker
from ._compare import close as _close
from ._compare import coarsest as _coarsest
from .heads import _LAYOUT

__all__ = ["check_multi_head_attention"]


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
# result's dtype (the checkers' one table, _compare.TOLERANCES): any floating result is accepted
# (computing in float64, or filling float32 buffers, is right), at the precision it carries.


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
