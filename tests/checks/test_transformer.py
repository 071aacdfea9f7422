"""The section-04 checkers accept correct implementations and name each classic mistake."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.checks import check_layer_norm, check_sublayer_connection
from lectures_lib.layers import layer_norm, sublayer_connection

torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------------
# layer_norm: correct implementations
# ---------------------------------------------------------------------------------------------


def ln_functional(x, gamma, beta, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)


def ln_var_mean(x, gamma, beta, eps=1e-5):
    variance, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)
    return gamma * (x - mean) * torch.rsqrt(variance + eps) + beta


def ln_loops(x, gamma, beta, eps=1e-5):
    flat = x.reshape(-1, x.shape[-1])
    rows = []
    for token in flat:
        d = token.shape[0]
        mean = sum(token[j] for j in range(d)) / d
        variance = sum((token[j] - mean) ** 2 for j in range(d)) / d
        rows.append(torch.stack([
            gamma[j] * (token[j] - mean) / (variance + eps) ** 0.5 + beta[j] for j in range(d)
        ]))
    return torch.stack(rows).reshape(x.shape)


def ln_einsum_default_eps_1e6(x, gamma, beta, eps=1e-6):
    centred = x - x.mean(-1, keepdim=True)
    variance = torch.einsum("...j,...j->...", centred, centred)[..., None] / x.shape[-1]
    return torch.einsum("...j,j->...j", centred / torch.sqrt(variance + eps), gamma) + beta


@pytest.mark.parametrize(
    "fn", [layer_norm, ln_functional, ln_var_mean, ln_loops, ln_einsum_default_eps_1e6]
)
def test_layer_norm_accepts_correct_implementations(fn):
    result = check_layer_norm(fn)
    assert result.passed, result


# ---------------------------------------------------------------------------------------------
# layer_norm: mistakes
# ---------------------------------------------------------------------------------------------


def _norm(x, dims, eps, unbiased=False):
    return (x - x.mean(dims, keepdim=True)) / torch.sqrt(x.var(dims, unbiased=unbiased, keepdim=True) + eps)


def batch_axis(x, gamma, beta, eps=1e-5):
    return gamma * _norm(x, 0, eps) + beta


def batch_norm_like(x, gamma, beta, eps=1e-5):
    return gamma * _norm(x, (0, 1), eps) + beta


def sequence_axis(x, gamma, beta, eps=1e-5):
    return gamma * _norm(x, 1, eps) + beta


def unbiased(x, gamma, beta, eps=1e-5):
    return gamma * _norm(x, -1, eps, unbiased=True) + beta


def eps_outside(x, gamma, beta, eps=1e-5):
    centred = x - x.mean(-1, keepdim=True)
    return gamma * centred / (x.std(-1, unbiased=False, keepdim=True) + eps) + beta


def eps_ignored(x, gamma, beta, eps=1e-5):
    return gamma * _norm(x, -1, 0.0) + beta


def no_affine(x, gamma, beta, eps=1e-5):
    return _norm(x, -1, eps)


def swapped(x, gamma, beta, eps=1e-5):
    return beta * _norm(x, -1, eps) + gamma


def no_beta(x, gamma, beta, eps=1e-5):
    return gamma * _norm(x, -1, eps)


def no_centering(x, gamma, beta, eps=1e-5):
    return gamma * x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) + beta


def only_3d(x, gamma, beta, eps=1e-5):
    return gamma * _norm(x, 2, eps) + beta


def wrong_shape(x, gamma, beta, eps=1e-5):
    return _norm(x, -1, eps)[..., 0]


def in_place(x, gamma, beta, eps=1e-5):
    x -= x.mean(-1, keepdim=True)
    return gamma * x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) + beta


def not_implemented(x, gamma, beta, eps=1e-5):
    raise NotImplementedError()


def returns_numpy(x, gamma, beta, eps=1e-5):
    return layer_norm(x, gamma, beta, eps).numpy()


def off_by_constant(x, gamma, beta, eps=1e-5):
    return layer_norm(x, gamma, beta, eps) + 0.01


@pytest.mark.parametrize(
    "fn,code",
    [
        (batch_axis, "wrong_axis"),
        (batch_norm_like, "wrong_axis"),
        (sequence_axis, "wrong_axis"),
        (unbiased, "unbiased_variance"),
        (eps_outside, "eps_outside_sqrt"),
        (eps_ignored, "eps_ignored"),
        (no_affine, "no_affine"),
        (swapped, "gamma_beta_swapped"),
        (no_beta, "no_beta"),
        (no_centering, "no_centering"),
        (only_3d, "fixed_rank"),
        (wrong_shape, "wrong_shape"),
        (in_place, "modified_input"),
        (not_implemented, "not_implemented"),
        (returns_numpy, "wrong_return_type"),
        (off_by_constant, "wrong_values"),
    ],
)
def test_layer_norm_names_the_mistake(fn, code):
    result = check_layer_norm(fn)
    assert not result.passed
    assert result.mistake == code, result
    assert "layer_norm" in str(result)


# ---------------------------------------------------------------------------------------------
# sublayer_connection
# ---------------------------------------------------------------------------------------------


def connection_if_else(x, sublayer, norm, norm_first=False):
    if not norm_first:
        return norm(x + sublayer(x))
    hidden = norm(x)
    return x + sublayer(hidden)


def always_post(x, sublayer, norm, norm_first=False):
    return norm(x + sublayer(x))


def swapped_orders(x, sublayer, norm, norm_first=False):
    return norm(x + sublayer(x)) if norm_first else x + sublayer(norm(x))


def no_residual(x, sublayer, norm, norm_first=False):
    return sublayer(norm(x)) if norm_first else norm(sublayer(x))


def norm_on_output(x, sublayer, norm, norm_first=False):
    return x + norm(sublayer(x)) if norm_first else norm(x + sublayer(x))


def no_norm(x, sublayer, norm, norm_first=False):
    return x + sublayer(x)


def connection_not_implemented(x, sublayer, norm, norm_first=False):
    raise NotImplementedError()


@pytest.mark.parametrize("fn", [sublayer_connection, connection_if_else])
def test_sublayer_connection_accepts_correct(fn):
    result = check_sublayer_connection(fn)
    assert result.passed, result


@pytest.mark.parametrize(
    "fn,code",
    [
        (always_post, "orders_swapped"),
        (swapped_orders, "orders_swapped"),
        (no_residual, "residual_missing"),
        (norm_on_output, "norm_on_output"),
        (no_norm, "norm_missing"),
        (connection_not_implemented, "not_implemented"),
    ],
)
def test_sublayer_connection_names_the_mistake(fn, code):
    result = check_sublayer_connection(fn)
    assert not result.passed and result.mistake == code, result
