"""Checkers for section 04 (Transformer encoder): ``layer_norm`` and ``sublayer_connection``.

Each probes the student's function with random inputs, compares with the reference in
:mod:`lectures_lib.transformer`, and, when the values differ, recomputes the classic wrong
versions to name the mistake (normalising over the wrong axis, unbiased variance, eps outside the
square root, gamma/beta missing or swapped; Post-LN and Pre-LN swapped, residual or norm missing).
"""

from __future__ import annotations

import numpy as np
import torch

from ..layers import layer_norm, sublayer_connection
from ._base import Mistake, call, checker, expect_tensor
from ._compare import agree  # the checkers' one tolerance table

__all__ = ["check_layer_norm", "check_sublayer_connection"]


# ---------------------------------------------------------------------------------------------
# layer_norm(x, gamma, beta, eps=1e-5)
# ---------------------------------------------------------------------------------------------


def _normalise(x, dims, eps, unbiased=False, eps_inside=True):
    mean = x.mean(dim=dims, keepdim=True)
    variance = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    if eps_inside:
        return (x - mean) / torch.sqrt(variance + eps)
    return (x - mean) / (torch.sqrt(variance) + eps)


def _layer_norm_mistakes(x, gamma, beta, eps):
    """Wrong versions of layer_norm a learner often writes: ``[(code, message, output)]``."""
    right = _normalise(x, (-1,), eps)
    axes = {
        (0,): "the batch dimension (dim 0): that is BatchNorm's axis, not LayerNorm's",
        (1,): "the sequence dimension (dim 1): each feature over the tokens of one sequence",
        (0, 1): "the batch and sequence dimensions: that is BatchNorm (statistics per feature)",
        (1, 2): "the sequence and the features together (one mean per sequence)",
        (0, 1, 2): "every entry of the tensor at once",
    }
    mistakes = []
    for dims, where in axes.items() if x.dim() == 3 else ():
        mistakes.append((
            "wrong_axis",
            f"you normalised over {where}. LayerNorm normalises each token over its own "
            "features: mean and variance over the last dimension only "
            "(`x.mean(dim=-1, keepdim=True)`).",
            gamma * _normalise(x, dims, eps) + beta,
        ))
    mistakes += [
        (
            "unbiased_variance",
            "you used the unbiased variance (divide by d - 1, `torch.var`'s default). LayerNorm "
            "uses the biased one (divide by d): `x.var(dim=-1, unbiased=False, keepdim=True)`.",
            gamma * _normalise(x, (-1,), eps, unbiased=True) + beta,
        ),
        (
            "eps_outside_sqrt",
            "eps is added outside the square root. LayerNorm divides by sqrt(variance + eps), "
            "not by sqrt(variance) + eps.",
            gamma * _normalise(x, (-1,), eps, eps_inside=False) + beta,
        ),
        (
            "eps_ignored",
            "your result ignores eps (it matches eps = 0). Divide by sqrt(variance + eps) with "
            "the eps you are given.",
            gamma * _normalise(x, (-1,), 0.0) + beta,
        ),
    ]
    for used in (1e-5, 1e-6, 1e-12):
        if used != eps:
            mistakes.append((
                "eps_hard_coded",
                f"this probe passed eps={eps:g}, but your result matches eps={used:g}: use the "
                "`eps` argument, not a constant.",
                gamma * _normalise(x, (-1,), used) + beta,
            ))
    mistakes += [
        (
            "no_affine",
            "gamma and beta are not applied: return gamma * normalised + beta.",
            right,
        ),
        (
            "gamma_beta_swapped",
            "gamma and beta are swapped: gamma scales (multiplies) and beta shifts (is added): "
            "gamma * normalised + beta.",
            beta * right + gamma,
        ),
        ("no_gamma", "gamma is not applied (only beta is added): multiply by gamma.", right + beta),
        ("no_beta", "beta is not added (only gamma scales): add beta.", gamma * right),
        (
            "no_centering",
            "you did not subtract the mean before dividing: normalised = (x - mean) / "
            "sqrt(variance + eps).",
            gamma * x / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps) + beta,
        ),
        (
            "std_not_variance",
            "you divided by sqrt(std + eps): divide by the standard deviation "
            "sqrt(variance + eps).",
            gamma * (x - x.mean(-1, keepdim=True))
            / torch.sqrt(x.std(-1, unbiased=False, keepdim=True) + eps) + beta,
        ),
    ]
    return mistakes


def _probe_layer_norm(student_fn, x, gamma, beta, eps, pass_eps=True):
    args = (x, gamma, beta, eps) if pass_eps else (x, gamma, beta)
    out = expect_tensor(call(student_fn, *args), "layer_norm's result", shape=tuple(x.shape))
    expected = layer_norm(x, gamma, beta, eps)
    if agree(out, expected):
        return
    if torch.isnan(out).any():
        raise Mistake("nan", f"your result contains NaN (eps={eps:g} in this probe): look for "
                      "0 / 0 or the square root of a negative number; the variance must be "
                      "computed from squares, and eps added inside the root.")
    if not torch.isfinite(out).all():
        raise Mistake("not_finite", "your result contains inf: check the division.")
    for code, message, wrong in _layer_norm_mistakes(x, gamma, beta, eps):
        if agree(out, wrong):
            raise Mistake(code, message)
    position = int((out.double() - expected.double()).abs().argmax())
    index = tuple(int(i) for i in np.unravel_index(position, tuple(out.shape)))
    raise Mistake(
        "wrong_values",
        f"wrong values, e.g. at index {index}: expected {expected[index].item():.5f}, got "
        f"{out[index].item():.5f}. y = gamma * (x - mean) / sqrt(var + eps) + beta, with mean "
        "and the biased var over the last dimension.",
    )


@checker("layer_norm")
def check_layer_norm(student_fn) -> str:
    """Probe ``layer_norm(x, gamma, beta, eps=1e-5)`` on ``(batch, seq, d)`` and other shapes."""
    generator = torch.Generator().manual_seed(0)
    batch, seq, d = 3, 4, 6

    def random(*shape, scale=1.0, shift=0.0):
        return torch.randn(*shape, generator=generator) * scale + shift

    # Features with a large offset and scale, so no mistake can look right by accident.
    x = random(batch, seq, d, scale=3.0, shift=2.0)
    gamma, beta = random(d, scale=0.5, shift=1.0), random(d)
    _probe_layer_norm(student_fn, x, gamma, beta, 1e-5)
    # A large eps and a token with tiny variance: where eps goes, and whether it is used, shows.
    x_small = x.clone()
    x_small[0, 0] = 1.0 + 0.05 * random(d)
    _probe_layer_norm(student_fn, x_small, gamma, beta, 0.1)
    # The default eps: calling without it must give the same as eps=1e-5.
    _probe_layer_norm(student_fn, x, gamma, beta, 1e-5, pass_eps=False)
    # Other shapes: one token (batch, d), four dimensions, other d; float64 too.
    for shape in [(5, d), (2, 3, 2, 8), (1, 1, 3)]:
        d_other = shape[-1]
        x_other = random(*shape, scale=2.0, shift=-1.0).double()
        gamma_other = random(d_other, shift=1.0).double()
        beta_other = random(d_other).double()
        try:
            _probe_layer_norm(student_fn, x_other, gamma_other, beta_other, 1e-5)
        except Mistake as mistake:
            if mistake.code == "not_implemented":
                raise
            raise Mistake(
                "fixed_rank",
                f"right on (batch, seq, d) inputs, but not on one of shape {shape} (float64): "
                f"{mistake} LayerNorm works on any shape (..., d): use dim=-1 for the last "
                "dimension.",
            ) from None
    return "each token is normalised over its features, with the biased variance, eps inside " \
        "the square root, then scaled by gamma and shifted by beta."


# ---------------------------------------------------------------------------------------------
# sublayer_connection(x, sublayer, norm, norm_first=False)
# ---------------------------------------------------------------------------------------------


@checker("sublayer_connection")
def check_sublayer_connection(student_fn) -> str:
    """Probe ``sublayer_connection(x, sublayer, norm, norm_first)`` in both orders."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, generator=generator) * 2 + 1
    weight = torch.randn(4, 4, generator=generator)

    def sublayer(h):  # a stand-in for attention or the feed-forward network
        return torch.tanh(h @ weight)

    def norm(h):  # a plain LayerNorm without learned parameters
        return torch.nn.functional.layer_norm(h, (4,))

    post = sublayer_connection(x, sublayer, norm, norm_first=False)
    pre = sublayer_connection(x, sublayer, norm, norm_first=True)
    candidates = {
        "residual_missing": [norm(sublayer(x)), sublayer(norm(x))],
        "norm_missing": [x + sublayer(x)],
        "norm_on_output": [x + norm(sublayer(x))],
        "norm_twice": [norm(x + sublayer(norm(x)))],
    }
    messages = {
        "residual_missing": "the residual connection is missing: add the input x back, "
        "Y = X + H(X).",
        "norm_missing": "the LayerNorm is missing: call norm(...) once.",
        "norm_on_output": "you normalised the sub-layer's output only, x + norm(sublayer(x)): "
        "Post-LN normalises the sum, norm(x + sublayer(x)); Pre-LN the sub-layer's input, "
        "x + sublayer(norm(x)).",
        "norm_twice": "you applied the LayerNorm both before and after: Post-LN normalises the "
        "sum only, Pre-LN the sub-layer's input only.",
    }
    for norm_first, expected, other, name in [
        (False, post, pre, "Post-LN (norm_first=False)"),
        (True, pre, post, "Pre-LN (norm_first=True)"),
    ]:
        out = expect_tensor(
            call(student_fn, x, sublayer, norm, norm_first), f"the {name} result", x.shape
        )
        if agree(out, expected):
            continue
        if agree(out, other):
            raise Mistake(
                "orders_swapped",
                f"for {name} you returned the other order. Post-LN (the paper): "
                "norm(x + sublayer(x)); Pre-LN: x + sublayer(norm(x)).",
            )
        for code, wrongs in candidates.items():
            if any(agree(out, wrong) for wrong in wrongs):
                raise Mistake(code, f"{name}: {messages[code]}")
        raise Mistake(
            "wrong_values",
            f"{name} gives wrong values. Post-LN: norm(x + sublayer(x)); "
            "Pre-LN: x + sublayer(norm(x)).",
        )
    return "Post-LN normalises the residual sum, Pre-LN normalises the sub-layer's input."
