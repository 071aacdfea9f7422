r"""Checker for section 04's exercise: RMSNorm (Zhang & Sennrich 2019), LayerNorm's neighbour.

Section 04 derives LayerNorm. RMSNorm, used by most large models today, drops the centring and
the shift:

.. math::
    \operatorname{RMSNorm}(x) = \gamma \odot \frac{x}{\sqrt{\tfrac1d \sum_f x_f^2 + \varepsilon}}

The student writes ``rms_norm(x, gamma, eps=1e-6)`` for ``x (..., d)`` and ``gamma (d,)``. Used in
``04_transformer_encoder.ipynb``.
"""

from __future__ import annotations

import torch

from ._base import checker, probe_generator
from ._compare import Probe, Wrong, compare

__all__ = ["check_rms_norm", "rms_norm_reference"]

DEFAULT_EPS = 1e-6


def _rms(x, gamma, eps, dim=-1, centre=False, eps_inside=True, square_mean=True):
    if centre:
        x = x - x.mean(dim=dim, keepdim=True)
    mean_square = (x * x).mean(dim=dim, keepdim=True) if square_mean else x.abs().mean(
        dim=dim, keepdim=True) ** 2
    if eps_inside:
        return gamma * x / torch.sqrt(mean_square + eps)
    return gamma * x / (torch.sqrt(mean_square) + eps)


def rms_norm_reference(x, gamma, eps=DEFAULT_EPS):
    """The reference answer (same shape as ``x``)."""
    return _rms(x, gamma, eps)


def _probes(hidden: bool) -> list[Probe]:
    gen = probe_generator(9 if hidden else 2019)

    def randn(*shape, dtype=torch.float32, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale + shift).to(dtype)

    x = randn(3, 4, 6, scale=2.0, shift=1.5)  # an offset, so that centring shows
    tiny = randn(2, 5, scale=0.05, shift=0.02)  # tiny values: where eps goes shows with eps = 0.1
    probes = [
        Probe("(batch, seq, d), eps=1e-5", (x, randn(6, shift=1.0), 1e-5)),
        # Values near eps in size: the default eps shows (mean(x²) ≈ 2.5e-5).
        Probe("default eps (not passed), tiny values", (randn(2, 3, 6, scale=0.005),
                                                        randn(6, shift=1.0))),
        Probe("tiny values with eps=0.1", (tiny, randn(5, shift=1.0), 0.1)),
        Probe("float64, 4 dimensions", (randn(2, 3, 2, 8, dtype=torch.float64, shift=-1.0),
                                        randn(8, dtype=torch.float64), 1e-6)),
    ]
    if hidden:
        probes += [
            Probe("one feature", (randn(4, 1, scale=3.0), randn(1), 1e-3)),
            Probe("float64, eps=0.5", (randn(5, 7, dtype=torch.float64, scale=0.3),
                                       randn(7, dtype=torch.float64), 0.5)),
        ]
    return probes


def _catalogue(probe: Probe) -> list[Wrong]:
    x = probe.args[0]
    eps = probe.args[2] if len(probe.args) > 2 else DEFAULT_EPS
    wrongs = [
        Wrong("centred", "you subtracted the mean: that is LayerNorm. RMSNorm divides x itself "
              "by its root mean square, without centring (and has no beta)",
              lambda x, g, eps=DEFAULT_EPS: _rms(x, g, eps, centre=True)),
        Wrong("eps_outside_sqrt", "eps is added outside the square root: divide by "
              "sqrt(mean(x²) + eps)",
              lambda x, g, eps=DEFAULT_EPS: _rms(x, g, eps, eps_inside=False)),
        Wrong("no_gamma", "gamma is not applied: multiply the normalised x by gamma",
              lambda x, g, eps=DEFAULT_EPS: _rms(x, torch.ones_like(g), eps)),
        Wrong("mean_abs", "you used the mean of |x| (squared) instead of the mean of x²",
              lambda x, g, eps=DEFAULT_EPS: _rms(x, g, eps, square_mean=False)),
        Wrong("wrong_default_eps", f"called without eps, your function used another default "
              f"than eps={DEFAULT_EPS:g}",
              lambda x, g, eps=1e-5: _rms(x, g, eps)),
    ]
    for used in (1e-5, 1e-6, 1e-8, 0.0):
        if used != eps:
            wrongs.append(Wrong(
                "eps_hard_coded", f"this probe passed eps={eps:g}, but your result matches "
                f"eps={used:g}: use the `eps` argument, not a constant",
                lambda x, g, eps=DEFAULT_EPS, used=used: _rms(x, g, used)))
    if x.dim() >= 2:
        wrongs.append(Wrong("wrong_axis", "you normalised over another axis than the features "
                            "(the last one): use dim=-1 with keepdim=True",
                            lambda x, g, eps=DEFAULT_EPS: _rms(x, g, eps, dim=0)))
    return wrongs


@checker("rms_norm")
def check_rms_norm(student_fn, hidden: bool = False) -> str:
    """Check ``rms_norm(x, gamma, eps=1e-6)``; ``hidden=True`` adds one feature and eps = 0.5.

    Mistakes named: centring (LayerNorm), eps outside the root, a hard-coded eps (the message
    says which eps the probe passed), the wrong default, no gamma, mean |x|, the wrong axis, NaN.
    """
    probes = _probes(hidden)
    compare(student_fn, probes, rms_norm_reference, _catalogue, ("the result",),
            "y = gamma * x / sqrt(mean(x², last dim) + eps).")
    return f"all {len(probes)} probes agree: x / sqrt(mean(x²) + eps) * gamma over the last " \
        "dimension, any leading shape."
