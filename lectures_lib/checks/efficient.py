"""Checker for the exercise of section 07: trigonometric random features for the softmax kernel.

Used in ``07_efficient_attention.ipynb``. The student writes ``my_trig_features(x, projection)``:
``x`` ``(..., n, d)``, ``projection`` :math:`W` ``(m, d)`` -> ``(..., n, 2m)`` with

.. math::
    \\phi(x) = \\frac{e^{\\|x\\|^2/2}}{\\sqrt m}\\big[\\sin(Wx);\\ \\cos(Wx)\\big], \\qquad
    \\phi(x)^\\top\\phi(y) = \\frac{e^{(\\|x\\|^2 + \\|y\\|^2)/2}}{m}\\sum_i \\cos\\big(w_i^\\top(x - y)\\big)

whose expectation is :math:`e^{x^\\top y}`. The features may come in any order (sin and cos
interleaved or stacked): only the products :math:`\\phi(x)^\\top\\phi(y)` are compared.
"""

from __future__ import annotations

import math

import torch

from ._base import Mistake, call, checker, expect_tensor, probe_generator

__all__ = ["check_trig_features"]


def _reference(x: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    angles = x @ projection.T  # (..., n, m)
    scale = torch.exp(x.square().sum(-1, keepdim=True) / 2) / math.sqrt(projection.shape[0])
    return scale * torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)  # (..., n, 2m)


def _gram(features: torch.Tensor) -> torch.Tensor:
    return features @ features.transpose(-2, -1)  # (..., n, n): phi(x_i) . phi(x_j)


# (shape of x, m) probed; the hidden tests add two leading dimensions, d = 1 with m > n, and
# m = 1 on a longer sequence.
_CASES = (((3, 4), 6), ((2, 5, 3), 4), ((1, 1), 1))
_HIDDEN_CASES = (((2, 3, 4, 2), 5), ((6, 1), 9), ((1, 7, 5), 1))


@checker("trig_features")
def check_trig_features(student_fn, hidden: bool = False) -> str:
    """Check ``student_fn(x, projection) -> (..., n, 2m)`` on the products
    :math:`\\phi(x_i)^\\top\\phi(x_j)` (any order of the features); ``hidden=True`` adds shapes
    and another seed the student never saw.

    Mistake codes: ``not_implemented``, ``raised``, ``wrong_return_type``, ``wrong_shape``,
    ``missing_normalisation``, ``missing_scale``, ``wrong_sign``, ``wrong_values``.
    """
    generator = probe_generator(11 if hidden else 2007)
    for shape, m in _CASES + (_HIDDEN_CASES if hidden else ()):
        x = torch.randn(*shape, dtype=torch.float64, generator=generator) / 2
        projection = torch.randn(m, shape[-1], dtype=torch.float64, generator=generator)
        expected = _reference(x, projection)
        got = expect_tensor(call(student_fn, x, projection), f"my_trig_features on x of shape "
                            f"{shape} with m = {m}", shape=tuple(expected.shape))
        got_gram, expected_gram = _gram(got.to(torch.float64)), _gram(expected)
        if torch.allclose(got_gram, expected_gram, rtol=1e-6, atol=1e-9):
            continue
        if torch.allclose(got_gram, expected_gram * m, rtol=1e-6, atol=1e-9):
            raise Mistake("missing_normalisation", "the products are m times too large: divide "
                          "the features by sqrt(m) (the estimate is an average over m features).")
        norms = x.square().sum(-1)
        no_scale = expected_gram / torch.exp((norms[..., :, None] + norms[..., None, :]) / 2)
        if torch.allclose(got_gram, no_scale, rtol=1e-6, atol=1e-9):
            raise Mistake("missing_scale", "sin and cos alone estimate exp(-|x - y|^2 / 2) (the "
                          "Gaussian kernel); multiply by exp(|x|^2 / 2) to get exp(x . y).")
        if torch.allclose(got_gram, no_scale / torch.exp((norms[..., :, None] + norms[..., None, :]) / 2),
                          rtol=1e-6, atol=1e-9):
            raise Mistake("wrong_sign", "the scale is exp(+|x|^2 / 2), not exp(-|x|^2 / 2) (that "
                          "sign belongs to the positive features, exp(w . x - |x|^2 / 2)).")
        raise Mistake("wrong_values", f"on x of shape {shape}, phi(x_i) . phi(x_j) differs from "
                      "exp(|x_i|^2/2 + |x_j|^2/2) / m * sum_k cos(w_k . (x_i - x_j)) by up to "
                      f"{(got_gram - expected_gram).abs().max().item():.2e}.")
    return "your features estimate exp(x . y) exactly as the reference does."
