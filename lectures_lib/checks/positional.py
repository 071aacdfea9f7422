r"""Checker for the section-03 exercise: the sinusoidal positional encoding (正弦位置编码).

The student writes ``sinusoidal_encoding(n_positions, d_model) -> (n_positions, d_model)`` with
the library's contract (:func:`lectures_lib.positional.sinusoidal_encoding`):

.. math::
    PE_{pos,\,2i} = \sin\!\big(pos / 10000^{2i/d}\big), \qquad
    PE_{pos,\,2i+1} = \cos\!\big(pos / 10000^{2i/d}\big), \qquad pos = 0, 1, \dots

(sin on even, cos on odd feature indices; for an odd ``d_model`` the last feature is a lone sin).

How the checker works. It calls the student's function on a list of *probes* ``(n_positions,
d_model)``: even sizes first (one small, one with larger positions, ``d_model = 2``), then odd
``d_model``. ``n_positions`` never equals ``d_model``, so a transposed table shows in its shape.
Each answer must be a floating ``torch.Tensor`` (any float dtype; loops, vectorised code and
NumPy converted with ``torch.from_numpy`` are all fine) equal to the float64 reference. When an
answer on an even probe is wrong, the checker recomputes what each classic mistake would return
(the *diagnostic catalogue*: sin/cos swapped, halves instead of interleaving, wrong frequency
exponent, positions from 1) and names the one that matches; otherwise it tests whether each
feature pair is still a sinusoid with a wrong frequency; otherwise it reports the first wrong
entry. When every even probe passes but an odd one fails, the mistake is ``odd_d_model``.
``tests/checks/test_positional.py`` asserts that the catalogue's predictions are pairwise far
apart on the diagnostic probes.

Mistake codes (``result.mistake``) are listed in :data:`MISTAKE_CODES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ._base import Mistake, call, checker
from ._compare import close, coarsest  # the checkers' one tolerance table

__all__ = ["check_sinusoidal_encoding"]

MISTAKE_CODES: dict[str, str] = {
    "not_implemented": "the function still raises NotImplementedError",
    "timed_out": "the function did not return within the time limit (a loop, a sleep)",
    "returned_none": "the function returned None (a forgotten `return`)",
    "not_callable": "something other than a function was passed to the checker",
    "raised": "the function crashed on one of the (even d_model) probes",
    "not_a_tensor": "returned a NumPy array, list or other non-tensor",
    "not_floating": "returned an integer, bool or complex tensor",
    "extra_batch_dimension": "returned (1, n_positions, d_model) instead of (n_positions, d_model)",
    "transposed": "returned (d_model, n_positions): rows must be positions, columns features",
    "wrong_shape": "returned another wrong shape",
    "not_finite": "NaN or inf in the table",
    "sin_cos_swapped": "cos on even and sin on odd features",
    "not_interleaved": "first half sin, second half cos (tensor2tensor layout) instead of "
    "interleaving sin/cos feature by feature",
    "wrong_frequency": "the frequencies 1 / 10000^(2i/d) are wrong (e.g. 10000^(i/d), or 2i/d "
    "with i the feature index instead of the pair index)",
    "positions_from_one": "positions counted from 1 instead of 0",
    "odd_d_model": "right for even d_model, wrong (or crashing) for odd d_model",
    "wrong_values": "differs from the reference in a way the catalogue does not recognise",
}

# Probes: (n_positions, d_model). Even ones first (diagnosed), then odd ones.
EVEN_PROBES: tuple[tuple[int, int], ...] = ((12, 8), (50, 16), (10, 2))
ODD_PROBES: tuple[tuple[int, int], ...] = ((7, 5), (20, 9), (4, 3))

_BASE = 10000.0


def _precision(dtype: torch.dtype) -> torch.dtype:
    """The dtype whose row of the checkers' one table (``_compare.TOLERANCES``) a table of
    ``dtype`` is compared at: the coarser of ``dtype`` and float32. As in every checker, the
    coarser of the inputs' and the result's dtype; the probes are sizes, not tensors, and the
    contract's table is float32 (``sinusoidal_encoding``'s default dtype), so a float64 table is
    held to float32's precision (one computed through float32, then cast, is right) and a half
    table to its own."""
    return coarsest(dtype, torch.float32)


# ---------------------------------------------------------------------------------------------
# The reference and the diagnostic catalogue (all float64)
# ---------------------------------------------------------------------------------------------


def _table(
    n_positions: int,
    d_model: int,
    sin_exponent: Callable[[torch.Tensor], torch.Tensor],
    cos_exponent: Callable[[torch.Tensor], torch.Tensor],
    *,
    first_position: int = 0,
    swap: bool = False,
    multiply: bool = False,
) -> torch.Tensor:
    """A table built like the reference but with the given pieces (each may be a mistake).

    ``sin_exponent(j)`` / ``cos_exponent(j)`` give the exponent ``e`` of ``10000^e`` for the
    feature indices ``j`` that hold the sin (even ``j``) and the cos (odd ``j``).
    """
    positions = torch.arange(
        first_position, first_position + n_positions, dtype=torch.float64
    )[:, None]  # (n_positions, 1)
    sin_features = torch.arange(0, d_model, 2, dtype=torch.float64)  # j = 0, 2, 4, ...
    cos_features = torch.arange(1, d_model, 2, dtype=torch.float64)  # j = 1, 3, 5, ...
    sign = 1.0 if multiply else -1.0
    sin_angles = positions * _BASE ** (sign * sin_exponent(sin_features))  # (n, ceil(d/2))
    cos_angles = positions * _BASE ** (sign * cos_exponent(cos_features))  # (n, d // 2)
    table = torch.empty(n_positions, d_model, dtype=torch.float64)
    even_fn, odd_fn = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    table[:, 0::2] = even_fn(sin_angles)
    table[:, 1::2] = odd_fn(cos_angles)
    return table


def _pair_exponent(d_model: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """The correct exponent 2i/d, where i = j // 2 is the *pair* index of feature j."""
    return lambda j: 2 * torch.div(j, 2, rounding_mode="floor") / d_model


def reference(n_positions: int, d_model: int) -> torch.Tensor:
    """The float64 reference table (same formula as the library, built independently)."""
    exponent = _pair_exponent(d_model)
    return _table(n_positions, d_model, exponent, exponent)


def _halves(n_positions: int, d_model: int, sin_first: bool) -> torch.Tensor:
    """tensor2tensor layout: all sin features, then all cos features (same frequencies)."""
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    n_sin = (d_model + 1) // 2
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (n_sin,)
    angles = positions * _BASE ** (-two_i / d_model)  # (n, n_sin)
    sines, cosines = torch.sin(angles), torch.cos(angles[:, : d_model - n_sin])
    parts = (sines, cosines) if sin_first else (cosines, sines)
    return torch.cat(parts, dim=1)  # (n, d_model)


@dataclass(frozen=True)
class Candidate:
    """What one classic mistake returns on a probe (float64)."""

    code: str
    message: str
    table: torch.Tensor


def catalogue(n_positions: int, d_model: int) -> list[Candidate]:
    """The classic mistakes' tables for one probe, in the order they are tried."""
    n, d = n_positions, d_model
    right = _pair_exponent(d)
    frequency_hint = (
        " Each sin/cos pair (features 2i and 2i+1) shares one frequency "
        "1 / 10000^(2i/d_model), with i the pair index 0, 1, 2, ...: e.g. "
        "`10000 ** (torch.arange(0, d_model, 2) / d_model)` gives the 10000^(2i/d) of every pair."
    )
    return [
        Candidate(
            "sin_cos_swapped",
            "your table has cos on the even features and sin on the odd ones: it is the other "
            "way round, PE[pos, 2i] = sin(...) and PE[pos, 2i+1] = cos(...). (Row 0 must be "
            "[0, 1, 0, 1, ...] because sin 0 = 0 and cos 0 = 1.)",
            _table(n, d, right, right, swap=True),
        ),
        Candidate(
            "not_interleaved",
            "your table puts all the sines in the first half and all the cosines in the second "
            "half (the tensor2tensor layout). The course's contract, like the paper's formula, "
            "interleaves them: sin in features 0, 2, 4, ... and cos in features 1, 3, 5, ... "
            "(`table[:, 0::2] = sin`, `table[:, 1::2] = cos`).",
            _halves(n, d, sin_first=True),
        ),
        Candidate(
            "not_interleaved",
            "your table puts all the cosines in the first half and all the sines in the second "
            "half. The contract interleaves them: sin in features 0, 2, 4, ... and cos in "
            "features 1, 3, 5, ... (`table[:, 0::2] = sin`, `table[:, 1::2] = cos`).",
            _halves(n, d, sin_first=False),
        ),
        Candidate(
            "wrong_frequency",
            "your frequencies use 10000^(i/d_model) with i the pair index: the exponent is "
            "2i/d_model." + frequency_hint,
            _table(n, d, lambda j: right(j) / 2, lambda j: right(j) / 2),
        ),
        Candidate(
            "wrong_frequency",
            "your frequencies use 10000^(2j/d_model) with j the *feature* index (0, 1, 2, 3, "
            "...), so the cos of a pair turns at another speed than its sin and every "
            "frequency is too low." + frequency_hint,
            _table(n, d, lambda j: 2 * j / d, lambda j: 2 * j / d),
        ),
        Candidate(
            "wrong_frequency",
            "your frequencies use 10000^(j/d_model) with j the feature index: right for the "
            "sines (j = 2i), wrong for the cosines (j = 2i+1 instead of 2i)." + frequency_hint,
            _table(n, d, lambda j: j / d, lambda j: j / d),
        ),
        Candidate(
            "wrong_frequency",
            "your angles are pos * 10000^(2i/d_model): they must be divided by 10000^(2i/d), "
            "not multiplied (the wavelengths grow with i, from 2*pi to 10000 * 2*pi)."
            + frequency_hint,
            _table(n, d, right, right, multiply=True),
        ),
        Candidate(
            "positions_from_one",
            "your rows are the encodings of positions 1, 2, ..., n_positions: positions count "
            "from 0, so row 0 must be [sin 0, cos 0, ...] = [0, 1, 0, 1, ...] "
            "(use `torch.arange(n_positions)`).",
            _table(n, d, right, right, first_position=1),
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Checking one answer
# ---------------------------------------------------------------------------------------------


def _as_float64(result: object, n: int, d: int, odd: bool) -> tuple[torch.Tensor, torch.dtype]:
    """Type, dtype and shape checks; returns the result as float64 on the CPU and the dtype it is compared at."""
    if isinstance(result, np.ndarray):
        raise Mistake(
            "not_a_tensor",
            f"your function returned a NumPy array (dtype {result.dtype}); the contract asks for "
            "a torch.Tensor. Computing with NumPy is fine: convert at the end with "
            "`torch.from_numpy(table)`.",
        )
    if not isinstance(result, torch.Tensor):
        raise Mistake(
            "not_a_tensor",
            f"your function returned {type(result).__name__}; it should return a torch.Tensor "
            f"of shape (n_positions, d_model) (build it with torch.zeros / torch.empty, or "
            "convert a list with torch.tensor).",
        )
    if not result.is_floating_point():
        raise Mistake(
            "not_floating",
            f"your table has dtype {result.dtype}; it must be a floating tensor (sin and cos are "
            "between -1 and 1). A table created with an integer dtype (e.g. torch.zeros(..., "
            "dtype=torch.long)) silently truncates every value you write into it.",
        )
    shape = tuple(result.shape)
    if shape == (1, n, d):
        raise Mistake(
            "extra_batch_dimension",
            f"for n_positions={n}, d_model={d} your table has shape {shape}; the contract is "
            f"({n}, {d}) without the leading batch dimension (drop the `.unsqueeze(0)`; the "
            "modules add the table to (batch, seq, d_model) inputs by broadcasting).",
        )
    if shape == (d, n):
        raise Mistake(
            "transposed",
            f"for n_positions={n}, d_model={d} your table has shape {shape}, the transpose of "
            f"({n}, {d}): row pos must be the vector of position pos, column j feature j.",
        )
    if shape != (n, d):
        if odd and len(shape) == 2 and shape[0] == n and abs(shape[1] - d) == 1:
            raise Mistake(
                "odd_d_model",
                f"for the odd d_model={d} your table has shape {shape} instead of ({n}, {d}). "
                "With an odd d_model there is one more sin feature than cos features: the last "
                "feature is a lone sin (e.g. `table[:, 1::2] = torch.cos(angles[:, : d_model // "
                "2])`).",
            )
        raise Mistake(
            "wrong_shape",
            f"for n_positions={n}, d_model={d} your table should have shape ({n}, {d}), "
            f"got {shape}.",
        )
    precision = _precision(result.dtype)
    values = result.detach().to(device="cpu", dtype=torch.float64)
    if not bool(torch.isfinite(values).all()):
        raise Mistake(
            "not_finite",
            f"for n_positions={n}, d_model={d} your table contains NaN or inf (is something "
            "divided by zero, or 10000 raised to a huge power?).",
        )
    return values, precision


def _pair_frequencies(values: torch.Tensor) -> torch.Tensor | None:
    """If every feature pair of ``values`` is ``(sin(pos w), cos(pos w))`` for *some* w, the w's.

    Returns the ``(d // 2,)`` angles turned per position, read off row 1 (in ``(-pi, pi]``:
    at integer positions a frequency is only visible modulo 2 pi), or ``None`` when the table is
    not of that form (it is then something else than a frequency mistake).
    """
    n, d = values.shape
    if n < 3 or d < 2:
        return None
    pairs = d // 2
    sines, cosines = values[:, 0 : 2 * pairs : 2], values[:, 1 : 2 * pairs : 2]  # (n, pairs)
    frequencies = torch.atan2(sines[1], cosines[1])  # (pairs,): the angle of position 1
    angles = torch.arange(n, dtype=torch.float64)[:, None] * frequencies  # (n, pairs)
    # A test of the table's form, not the comparison (that is close()): the frequency read off
    # row 1 carries the table's rounding, multiplied by each position, hence a loose 1e-3.
    is_sinusoid = torch.allclose(sines, torch.sin(angles), rtol=0, atol=1e-3) and torch.allclose(
        cosines, torch.cos(angles), rtol=0, atol=1e-3
    )
    return frequencies if is_sinusoid else None


def _first_difference(values: torch.Tensor, expected: torch.Tensor) -> str:
    errors = (values - expected).abs()
    pos, feature = divmod(int(errors.argmax()), values.shape[1])
    return (
        f"PE[{pos}, {feature}] should be {expected[pos, feature]:.4f}, yours is "
        f"{values[pos, feature]:.4f}"
    )


def _diagnose(values: torch.Tensor, expected: torch.Tensor, precision: torch.dtype) -> None:
    """Raise the Mistake that explains a wrong table of an even-d_model probe."""
    n, d = values.shape
    for candidate in catalogue(n, d):
        if close(values, candidate.table, precision):
            raise Mistake(candidate.code, candidate.message)
    row_zero_ok = close(values[0], expected[0], precision)
    frequencies = _pair_frequencies(values)
    if row_zero_ok and frequencies is not None:
        two_i = torch.arange(0, 2 * (d // 2), 2, dtype=torch.float64)
        right = _BASE ** (-two_i / d)  # the contract's frequencies, all in (0, 1]
        wrong = int((frequencies - right).abs().argmax())
        raise Mistake(
            "wrong_frequency",
            f"every sin/cos pair of your table is a sinusoid of the position, but with the "
            f"wrong frequency: for d_model={d}, pair i={wrong} (features {2 * wrong} and "
            f"{2 * wrong + 1}) should turn by 1 / 10000^({2 * wrong}/{d}) = {right[wrong]:.4g} "
            f"rad per position, yours by {frequencies[wrong]:.4g}. Use 10000^(2i/d_model) with "
            "i the pair index.",
        )
    hint = ""
    if not row_zero_ok:
        row = ", ".join(f"{v:.2f}" for v in values[0, :6].tolist())
        hint = (
            f" Hint: row 0 (position 0) should be [0, 1, 0, 1, ...] (sin 0 = 0, cos 0 = 1); "
            f"yours starts [{row}, ...]."
        )
    raise Mistake(
        "wrong_values",
        f"for n_positions={n}, d_model={d} your table differs from the formula: "
        f"{_first_difference(values, expected)}.{hint}",
    )


def _check_probe(student_fn: Callable, n: int, d: int, odd: bool) -> None:
    result = call(student_fn, n, d)
    values, precision = _as_float64(result, n, d, odd)
    expected = reference(n, d)
    if close(values, expected, precision):
        return
    if odd:
        raise Mistake(
            "odd_d_model",
            f"your table is right for even d_model but not for the odd d_model={d} "
            f"(n_positions={n}): {_first_difference(values, expected)}. With an odd d_model "
            "the features are sin, cos, ..., sin: the last one is a lone sin of pair "
            f"i={d // 2}, with the same frequency rule 1 / 10000^(2i/d_model).",
        )
    _diagnose(values, expected, precision)


@checker("sinusoidal_encoding")
def check_sinusoidal_encoding(student_fn: Callable) -> str:
    """Check ``student_fn(n_positions, d_model) -> (n_positions, d_model)`` sinusoidal table."""
    for n, d in EVEN_PROBES:
        _check_probe(student_fn, n, d, odd=False)
    for n, d in ODD_PROBES:
        try:
            _check_probe(student_fn, n, d, odd=True)
        except Mistake as mistake:
            if mistake.code in ("raised", "not_implemented", "wrong_shape", "not_finite"):
                raise Mistake(
                    "odd_d_model",
                    f"your table is right for even d_model, but for the odd d_model={d}: "
                    f"{mistake} With an odd d_model there is one more sin than cos: e.g. "
                    "`table[:, 1::2] = torch.cos(angles[:, : d_model // 2])`.",
                ) from None
            raise
    probes = ", ".join(f"({n}, {d})" for n, d in EVEN_PROBES + ODD_PROBES)
    return (
        "sin on even and cos on odd features, frequencies 1 / 10000^(2i/d_model), positions "
        f"from 0, odd d_model handled: your table matches the formula for (n_positions, d_model) "
        f"= {probes}."
    )
