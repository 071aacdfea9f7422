r"""Checker for section 06's efficient exercise: causal window attention without the N x N matrix.

Used in ``06_attention_variants.ipynb``. The student writes
``my_causal_window_attention(q, k, v, past)``: ``q``, ``k``, ``v`` ``(..., n, d)`` (``v`` may be
wider) -> ``(..., n, d_v)``, where query :math:`i` attends to the keys
:math:`i - \text{past} \le j \le i` only (a streaming recogniser's window, exercise 1's mask with
``future = 0``):

.. math::
    \text{out}_i = \sum_{j = \max(0, i - p)}^{i} \operatorname{softmax}_j
    \Big(\frac{q_i \cdot k_j}{\sqrt d}\Big) v_j

The checker compares it with dense attention under that mask, names the classic mistakes (a
look-ahead, a window one too wide or narrow, a score of 0 where a weight of 0 was meant, the
zero padding taken for keys, a missing scaling) and measures its memory at a length where an
``N x N`` matrix would not fit its budget: in the learner's process by counting its tensors, in
the grader's sandbox (where the grader cannot see them) under the memory limit the kernel holds.
"""

from __future__ import annotations

import math

import torch

from ..measure import peak_tensor_memory
from ._base import Mistake, call, checker, expect_finite, expect_tensor, probe_generator
from ._compare import agree  # the checkers' one tolerance table

__all__ = ["check_causal_window_attention"]

# (leading shape, n, past, d, d_v): heads and batch, past = 0 (only itself), a window wider than
# the sequence, one position, a window of 1. The hidden tests add other shapes, float64 and seeds.
_CASES = (((2,), 10, 3, 4, 4), ((2, 3), 9, 0, 5, 3), ((1,), 5, 9, 3, 6), ((), 1, 2, 4, 4),
          ((3,), 12, 1, 8, 8))
_HIDDEN_CASES = (((2, 2), 17, 5, 6, 2), ((4,), 8, 7, 3, 5), ((), 30, 11, 2, 4), ((1, 1), 3, 1, 7, 7))
# The memory probe: at this length the dense weights alone are N^2 * 4 bytes = 4 MiB.
_MEMORY_N, _MEMORY_HEADS, _MEMORY_PAST, _MEMORY_D = 1024, 1, 2, 4


def _window(n: int, past: int, future: int = 0) -> torch.Tensor:
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # (n, n): j - i
    return (offset >= -past) & (offset <= future)


def _dense(q, k, v, allowed, *, scale=True):
    scores = q @ k.transpose(-2, -1)  # (..., n, n)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v


def _zero_scores(q, k, v, past):  # the notes' "value置为0" read as a *score* of 0
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~_window(q.shape[-2], past), 0.0).softmax(-1) @ v


def _not_renormalised(q, k, v, past):  # softmax over every key, then the outside cells dropped
    weights = ((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])).softmax(-1)
    return (weights * _window(q.shape[-2], past)) @ v


def _padding_attended(q, k, v, past):  # the past zero-padding slots kept as keys (score 0, value 0)
    n = q.shape[-2]
    pad_k = torch.cat([k.new_zeros(*k.shape[:-2], past, k.shape[-1]), k], dim=-2)
    pad_v = torch.cat([v.new_zeros(*v.shape[:-2], past, v.shape[-1]), v], dim=-2)
    allowed = _window(n + past, past)[past:]  # (n, n + past): query i is row past + i
    return _dense(q, pad_k, pad_v, allowed)


def _explain(got, q, k, v, past, label) -> None:
    n = q.shape[-2]

    def matches(expected):
        return expected is not None and agree(got, expected)

    suspects = [
        ("looks_ahead", lambda: _dense(q, k, v, _window(n, past, past)),
         "your window looks ahead as well (|i - j| <= past, the symmetric local window): a "
         "streaming query may only see keys j <= i."),
        ("looks_ahead", lambda: _dense(q, k, v, _window(n, 0, past)),
         "your window looks ahead instead of back (i <= j <= i + past): row i is the query, the "
         "keys it may see are i - past ... i."),
        ("window_off_by_one", lambda: _dense(q, k, v, _window(n, past + 1)),
         "your window is one key too wide: query i sees i - past ... i, that is past + 1 keys."),
        ("window_off_by_one", lambda: _dense(q, k, v, _window(n, past - 1)) if past else None,
         "your window is one key too narrow: query i sees i - past ... i, that is past + 1 keys, "
         "itself included."),
        ("score_zero_not_weight_zero", lambda: _zero_scores(q, k, v, past),
         "you set the scores outside the window to 0: a score of 0 is a weight of e^0 / Z, not 0. "
         "Outside the window the *weight* must be 0, i.e. the score -inf (or leave those keys "
         "out of the softmax)."),
        ("not_renormalised", lambda: _not_renormalised(q, k, v, past),
         "you took the softmax over all keys and then dropped those outside the window: the "
         "remaining weights no longer sum to 1. Take the softmax over the window's keys only."),
        ("padding_attended", lambda: _padding_attended(q, k, v, past),
         "the first queries also attend to the zero padding before position 0 (a zero key has "
         "score 0 and takes weight): mask the padded slots, they are not keys."),
        ("missing_scaling", lambda: _dense(q, k, v, _window(n, past), scale=False),
         "the scores are not divided by sqrt(d) (d = the width of q and k)."),
    ]
    for code, expected, message in suspects:
        if matches(expected()):
            raise Mistake(code, f"{label}: {message}")
    error = (got - _dense(q, k, v, _window(n, past))).abs().max().item()
    raise Mistake("wrong_values", f"{label}: the output differs from dense attention under the "
                  f"causal window i - past <= j <= i by up to {error:.2e}.")


@checker("causal_window_attention")
def check_causal_window_attention(student_fn, hidden: bool = False) -> str:
    """Check ``student_fn(q, k, v, past) -> (..., n, d_v)`` against dense attention under the
    causal window, then its memory where its code runs: in this process, every tensor it makes
    at N = 1024 (1 head, past 2, d 4), where the N x N weights alone would take 4 MiB; in the
    grader's sandbox (``student_fn`` a stand-in whose type names ``sandbox_memory_bytes``), a call
    at a length where the N x N weights need twice the sandbox's memory limit must return the
    right answer. ``hidden=True`` adds shapes, float64 and a seed the student never saw.

    Mistake codes: ``not_implemented``, ``raised``, ``timed_out``, ``returned_none``,
    ``wrong_return_type``, ``wrong_shape``, ``nan``, ``looks_ahead``, ``window_off_by_one``,
    ``score_zero_not_weight_zero`` (the notes' "value置为0" read as a score), ``not_renormalised``,
    ``padding_attended``, ``missing_scaling``, ``wrong_values``, ``quadratic_memory``.
    """
    generator = probe_generator(19 if hidden else 6)
    cases = _CASES + (_HIDDEN_CASES if hidden else ())
    for index, (lead, n, past, d, d_v) in enumerate(cases):
        dtype = torch.float64 if hidden and index % 2 else torch.float32
        q, k = (torch.randn(*lead, n, d, dtype=dtype, generator=generator) for _ in range(2))
        v = torch.randn(*lead, n, d_v, dtype=dtype, generator=generator)
        label = (f"my_causal_window_attention on q, k of shape {(*lead, n, d)}, v of shape "
                 f"{(*lead, n, d_v)}, past = {past}")
        got = expect_tensor(call(student_fn, q, k, v, past), label, shape=(*lead, n, d_v))
        expect_finite(got, label)
        if not agree(got.to(dtype), _dense(q, k, v, _window(n, past))):
            _explain(got.to(dtype), q, k, v, past, label)

    extra = f" and {len(_HIDDEN_CASES)} hidden cases" if hidden else ""
    summary = f"equal to dense attention under the causal window on {len(_CASES)} cases{extra}"
    memory_limit = getattr(type(student_fn), "sandbox_memory_bytes", None)
    if memory_limit is not None:  # the grader: the code runs in a sandbox, measured there
        return f"{summary}, and {_fits_the_sandbox(student_fn, memory_limit(student_fn), generator)}"
    return f"{summary}, and {_measured_here(student_fn, generator)}"


def _measured_here(student_fn, generator: torch.Generator) -> str:
    """The memory probe where the student's code runs in this process (the notebook): every
    tensor it makes is counted (:func:`~lectures_lib.measure.peak_tensor_memory`)."""
    n, heads, past, d = _MEMORY_N, _MEMORY_HEADS, _MEMORY_PAST, _MEMORY_D
    q, k, v = (torch.randn(1, heads, n, d, generator=generator) for _ in range(3))

    def measured(q, k, v, past):
        with torch.no_grad():
            return peak_tensor_memory(lambda: student_fn(q, k, v, past))

    report = call(measured, q, k, v, past)
    budget = 32 * n * heads * (past + 1 + d) * 4  # bytes: a few tensors of (n, past + 1 + d)
    dense_bytes = n * n * heads * 4
    largest = math.prod(report.largest_tensor_shape) if report.largest_tensor_shape else 0
    if report.peak_bytes > budget or largest >= n * n:
        raise Mistake(
            "quadratic_memory",
            f"at N = {n} (heads = {heads}, past = {past}, d = {d}) your function's tensors peaked at "
            f"{report.peak_bytes / 2**20:.1f} MiB (largest {tuple(report.largest_tensor_shape)}); "
            f"the budget is {budget / 2**20:.1f} MiB, and the N x N weights alone would be "
            f"{dense_bytes / 2**20:.0f} MiB. {_ADVICE}",
        )
    return (f"at N = {n} its tensors peaked at {report.peak_bytes / 2**20:.1f} MiB (the N x N "
            f"weights alone would be {dense_bytes / 2**20:.0f} MiB).")


_ADVICE = ("Never build (n, n): give each query only its past + 1 keys (pad past zero rows in "
           "front and take sliding windows, e.g. `unfold`, or work in blocks of the band).")
# What a call that ran out of memory in the sandbox comes back as (the error's name, or words of
# its message: torch's allocator, the process killed at its limit).
_OUT_OF_MEMORY = ("MemoryError", "can't allocate memory", "not enough memory", "SandboxError",
                  "process ended")


def _fit_length(memory_bytes: int) -> int:
    """The sequence length at which one float32 N x N matrix needs twice ``memory_bytes``."""
    n = 1024
    while n * n * 4 < 2 * memory_bytes:
        n *= 2
    return n


def banded_reference(q, k, v, past: int) -> torch.Tensor:
    """Causal window attention without the N x N matrix: each query's past + 1 keys, by
    ``unfold`` over the keys padded with ``past`` rows in front (the padded slots masked)."""
    n, d = q.shape[-2], q.shape[-1]
    pad_k = torch.nn.functional.pad(k, (0, 0, past, 0))  # (..., past + n, d)
    pad_v = torch.nn.functional.pad(v, (0, 0, past, 0))  # (..., past + n, d_v)
    keys = pad_k.unfold(-2, past + 1, 1)  # (..., n, d, past + 1): query i's keys i - past ... i
    values = pad_v.unfold(-2, past + 1, 1)  # (..., n, d_v, past + 1)
    scores = (q.unsqueeze(-1) * keys).sum(-2) / math.sqrt(d)  # (..., n, past + 1)
    slot = torch.arange(past + 1)[None, :] + torch.arange(n)[:, None] - past  # (n, past + 1): j
    weights = scores.masked_fill(slot < 0, float("-inf")).softmax(-1)  # (..., n, past + 1)
    return (values * weights.unsqueeze(-2)).sum(-1)  # (..., n, d_v)


def _fits_the_sandbox(student_fn, memory_bytes: int, generator: torch.Generator) -> str:
    """The memory probe where the student's code runs in the grader's sandbox: nothing measured
    here could see its tensors, and a measurement inside would be the submission's to fake.
    Instead the call runs at a length where one N x N matrix needs twice the sandbox's memory
    limit (which the kernel holds, :class:`~course_tools.grading.sandbox.Limits`), and must
    return the right answer there."""
    n, heads, past, d = _fit_length(memory_bytes), _MEMORY_HEADS, _MEMORY_PAST, _MEMORY_D
    q, k, v = (torch.randn(1, heads, n, d, generator=generator) for _ in range(3))
    dense = f"{n * n * heads * 4 / 2**30:.0f} GiB"
    limit = f"{memory_bytes / 2**30:.1f} GiB"
    label = f"my_causal_window_attention at N = {n} (heads = {heads}, past = {past}, d = {d})"
    try:
        got = call(student_fn, q, k, v, past)
    except Mistake as mistake:
        if mistake.code == "raised" and any(word in str(mistake) for word in _OUT_OF_MEMORY):
            raise Mistake("quadratic_memory", f"{label} ran out of memory under the grader's "
                          f"limit of {limit}, where the N x N weights alone would be {dense}. "
                          f"{_ADVICE}") from None
        if mistake.code == "timed_out":
            raise Mistake("timed_out", f"{label}: {mistake} A window of past + 1 keys per query "
                          "takes well under a second there; work over all N keys per query "
                          "(N^2 time, even in blocks) is what this exercise avoids.") from None
        raise
    got = expect_tensor(got, label, shape=(1, heads, n, d))
    expected = banded_reference(q, k, v, past)
    if not agree(got.to(expected.dtype), expected):
        raise Mistake("wrong_values", f"{label}: the output differs from attention under the "
                      "causal window (it was right on the small cases: does it change with N?).")
    return (f"at N = {n} it returned the right answer within the grader's memory limit of "
            f"{limit}, where the N x N weights alone would be {dense}.")
