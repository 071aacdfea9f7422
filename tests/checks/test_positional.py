"""The section-03 checker accepts every correct sinusoidal table and names each classic mistake."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lectures_lib.checks import check_sinusoidal_encoding
from lectures_lib.checks.positional import (
    EVEN_PROBES,
    MISTAKE_CODES,
    ODD_PROBES,
    catalogue,
    reference,
)
from lectures_lib.positional import sinusoidal_encoding

from ..references import sinusoid_formula

# ---------------------------------------------------------------------------------------------
# Correct implementations, written the ways students write them
# ---------------------------------------------------------------------------------------------


def loops(n_positions, d_model):  # entry by entry in Python floats, into a float32 table
    return sinusoid_formula(n_positions, d_model).float()


def vectorised_exp_log(n_positions, d_model):  # the PyTorch-tutorial form
    position = torch.arange(n_positions).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(position * div_term)
    table[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return table


def float64_stack(n_positions, d_model):
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]
    pairs = (d_model + 1) // 2
    angles = positions / 10000 ** (2 * torch.arange(pairs, dtype=torch.float64) / d_model)
    table = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).flatten(1)
    return table[:, :d_model]  # drop the last cos when d_model is odd


def numpy_converted(n_positions, d_model):
    positions = np.arange(n_positions)[:, None]
    j = np.arange(d_model)[None, :]
    angles = positions / np.power(10000, (2 * (j // 2)) / d_model)
    table = np.where(j % 2 == 0, np.sin(angles), np.cos(angles))
    return torch.from_numpy(table)


def list_of_rows(n_positions, d_model):
    rows = [
        [
            math.sin(pos / 10000 ** (j / d_model))
            if j % 2 == 0
            else math.cos(pos / 10000 ** ((j - 1) / d_model))
            for j in range(d_model)
        ]
        for pos in range(n_positions)
    ]
    return torch.tensor(rows)


def float32_cast_to_float64(n_positions, d_model):  # held to float32's precision, the contract's
    return vectorised_exp_log(n_positions, d_model).double()


def half_precision(n_positions, d_model):
    return vectorised_exp_log(n_positions, d_model).half()


def bfloat16(n_positions, d_model):
    return float64_stack(n_positions, d_model).bfloat16()


@pytest.mark.parametrize(
    "implementation",
    [
        loops,
        vectorised_exp_log,
        float64_stack,
        numpy_converted,
        list_of_rows,
        float32_cast_to_float64,
        half_precision,
        bfloat16,
        sinusoidal_encoding,
    ],
)
def test_accepts_correct_implementations(implementation):
    result = check_sinusoidal_encoding(implementation)
    assert result.passed, result
    assert result.mistake is None


def test_reference_equals_library_and_independent_formula():
    for n, d in EVEN_PROBES + ODD_PROBES:
        assert torch.allclose(reference(n, d), sinusoidal_encoding(n, d, dtype=torch.float64))
        assert torch.allclose(reference(n, d), numpy_converted(n, d))


def test_catalogue_predictions_are_pairwise_far_apart():
    """On the diagnostic probes every classic mistake predicts a different table (and none
    predicts the right one), so a match names one mistake and only one."""
    for n, d in EVEN_PROBES[:2]:
        tables = [("reference", reference(n, d))] + [
            (f"{c.code}#{k}", c.table) for k, c in enumerate(catalogue(n, d))
        ]
        for a in range(len(tables)):
            for b in range(a + 1, len(tables)):
                gap = (tables[a][1] - tables[b][1]).abs().max().item()
                assert gap > 0.05, f"{tables[a][0]} and {tables[b][0]} differ by only {gap}"


# ---------------------------------------------------------------------------------------------
# Mistakes
# ---------------------------------------------------------------------------------------------


def not_implemented(n_positions, d_model):
    raise NotImplementedError()


def crashes(n_positions, d_model):
    raise ValueError("oops")


def returns_numpy(n_positions, d_model):
    return numpy_converted(n_positions, d_model).numpy()


def returns_list(n_positions, d_model):
    return loops(n_positions, d_model).tolist()


def integer_table(n_positions, d_model):
    table = torch.zeros(n_positions, d_model, dtype=torch.long)
    table[:] = vectorised_exp_log(n_positions, d_model)  # truncated to 0 / 1 / -0
    return table


def with_batch_dimension(n_positions, d_model):
    return vectorised_exp_log(n_positions, d_model).unsqueeze(0)


def transposed(n_positions, d_model):
    return vectorised_exp_log(n_positions, d_model).T


def wrong_shape(n_positions, d_model):
    return vectorised_exp_log(n_positions, d_model + 2)


def with_nan(n_positions, d_model):
    table = vectorised_exp_log(n_positions, d_model)
    table[0, 0] = float("nan")
    return table


def swapped(n_positions, d_model):
    table = vectorised_exp_log(n_positions, d_model)
    out = torch.empty_like(table)
    angles = torch.arange(n_positions)[:, None] / 10000 ** (
        torch.arange(0, d_model, 2) / d_model
    )
    out[:, 0::2] = torch.cos(angles)
    out[:, 1::2] = torch.sin(angles[:, : d_model // 2])
    return out


def halves(n_positions, d_model, sin_first=True):
    angles = torch.arange(n_positions)[:, None] / 10000 ** (
        torch.arange(0, d_model, 2) / d_model
    )
    sines, cosines = torch.sin(angles), torch.cos(angles[:, : d_model // 2])
    return torch.cat((sines, cosines) if sin_first else (cosines, sines), dim=1)


def cos_first_halves(n_positions, d_model):
    return halves(n_positions, d_model, sin_first=False)


def with_frequencies(exponent):
    """A table with the right layout but 10000 ** exponent(j, d) in feature j's angle."""

    def student(n_positions, d_model):
        positions = torch.arange(n_positions, dtype=torch.float32)[:, None]
        j = torch.arange(d_model)
        angles = positions / 10000.0 ** exponent(j, d_model)
        return torch.where(j % 2 == 0, torch.sin(angles), torch.cos(angles))

    return student


pair_index_without_two = with_frequencies(lambda j, d: (j // 2) / d)
feature_index_with_two = with_frequencies(lambda j, d: 2 * j / d)
feature_index_without_two = with_frequencies(lambda j, d: j / d)
base_1000 = with_frequencies(lambda j, d: 0.75 * (2 * (j // 2)) / d)  # 1000 = 10000 ** 0.75


def multiplied(n_positions, d_model):
    positions = torch.arange(n_positions, dtype=torch.float32)[:, None]
    j = torch.arange(d_model)
    angles = positions * 10000.0 ** (2 * (j // 2) / d_model)
    return torch.where(j % 2 == 0, torch.sin(angles), torch.cos(angles))


def from_one(n_positions, d_model):
    return vectorised_exp_log(n_positions + 1, d_model)[1:]


def even_only_crash(n_positions, d_model):  # the classic odd-d bug: shapes do not match
    position = torch.arange(n_positions).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(position * div_term)
    table[:, 1::2] = torch.cos(position * div_term)
    return table


def odd_not_implemented(n_positions, d_model):
    if d_model % 2:
        raise NotImplementedError("odd d_model")
    return vectorised_exp_log(n_positions, d_model)


def odd_one_column_too_many(n_positions, d_model):
    return float64_stack(n_positions, d_model + d_model % 2)


def odd_last_feature_cos(n_positions, d_model):
    table = vectorised_exp_log(n_positions, d_model)
    if d_model % 2:
        angle = torch.arange(n_positions) / 10000 ** ((d_model - 1) / d_model)
        table[:, -1] = torch.cos(angle)
    return table


def odd_d_minus_one_frequencies(n_positions, d_model):  # divides by d_model - 1 when odd
    d = d_model - d_model % 2
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]
    j = torch.arange(d_model)
    angles = positions / 10000.0 ** (2 * (j // 2) / d)
    return torch.where(j % 2 == 0, torch.sin(angles), torch.cos(angles))


def all_zeros(n_positions, d_model):
    return torch.zeros(n_positions, d_model)


def random_values(n_positions, d_model):
    return torch.rand(n_positions, d_model)


MISTAKES = [
    (not_implemented, "not_implemented"),
    (crashes, "raised"),
    (returns_numpy, "not_a_tensor"),
    (returns_list, "not_a_tensor"),
    (integer_table, "not_floating"),
    (with_batch_dimension, "extra_batch_dimension"),
    (transposed, "transposed"),
    (wrong_shape, "wrong_shape"),
    (with_nan, "not_finite"),
    (swapped, "sin_cos_swapped"),
    (halves, "not_interleaved"),
    (cos_first_halves, "not_interleaved"),
    (pair_index_without_two, "wrong_frequency"),
    (feature_index_with_two, "wrong_frequency"),
    (feature_index_without_two, "wrong_frequency"),
    (base_1000, "wrong_frequency"),
    (multiplied, "wrong_frequency"),
    (from_one, "positions_from_one"),
    (even_only_crash, "odd_d_model"),
    (odd_not_implemented, "odd_d_model"),
    (odd_one_column_too_many, "odd_d_model"),
    (odd_last_feature_cos, "odd_d_model"),
    (odd_d_minus_one_frequencies, "odd_d_model"),
    (all_zeros, "wrong_values"),
    (random_values, "wrong_values"),
]


@pytest.mark.parametrize(("implementation", "code"), MISTAKES)
def test_names_each_mistake(implementation, code):
    result = check_sinusoidal_encoding(implementation)
    assert not result.passed
    assert result.mistake == code, result
    assert code in MISTAKE_CODES
    assert str(result).startswith("[FAILED] sinusoidal_encoding:")


def test_every_documented_code_is_exercised():
    exercised = {code for _, code in MISTAKES} | {"not_callable"}  # not_callable: test below
    exercised |= {"timed_out", "returned_none"}  # the shared machinery: test_checks_grading.py
    assert exercised == set(MISTAKE_CODES)


def test_probes_cover_the_cases_the_brief_names():
    probes = EVEN_PROBES + ODD_PROBES
    assert all(n != d for n, d in probes), "a square probe would hide a transposed table"
    assert any(d == 2 for _, d in probes)
    assert any(d % 2 for _, d in probes)
