"""Seeding, device selection and the input checks every public function uses.

Defined for the whole course; first used in ``01_self_attention.ipynb``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence

import numpy as np
import torch

__all__ = [
    "seed_everything",
    "get_device",
    "check_tensor",
    "check_positive_int",
]


def seed_everything(seed: int = 0, num_threads: int | None = 1) -> int:
    """Seed Python, NumPy and PyTorch, and pin the number of CPU threads.

    Call it once at the top of a notebook: the same run then prints the same numbers.

    ``num_threads=1`` is deliberate: the course's models are tiny, and on a busy 2-core machine
    two OpenMP threads can make them *much* slower (and float sums can change in the last digit
    with the thread count). Pass ``None`` to keep PyTorch's default.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if num_threads is not None:
        check_positive_int(num_threads, "num_threads")
        torch.set_num_threads(num_threads)
    return seed


def get_device(prefer: str | None = None) -> torch.device:
    """The device to compute on: CUDA when present, otherwise the CPU.

    ``prefer="cpu"`` forces the CPU. The environment variable ``LECTURES_DEVICE`` overrides both
    (``LECTURES_DEVICE=cpu make test`` runs everything on the CPU).
    """
    choice = os.environ.get("LECTURES_DEVICE", prefer)
    if choice is not None:
        device = torch.device(choice)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"device {choice!r} was asked for, but CUDA is not available")
        return device
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _describe(x: object) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    return f"an object of type {type(x).__name__}"


def check_tensor(
    x: object,
    name: str,
    *,
    ndim: int | Sequence[int] | None = None,
    dtype: str | torch.dtype | None = None,
    shape: Sequence[int | None] | None = None,
) -> torch.Tensor:
    """Raise a learner-readable error unless ``x`` is a tensor of the expected rank/dtype/shape.

    ``dtype`` is a ``torch.dtype`` or one of ``"floating"``, ``"integer"``, ``"bool"``.
    ``shape`` may hold ``None`` for "any size" in that dimension.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {_describe(x)}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.dim() not in allowed:
            expected = " or ".join(str(a) for a in allowed)
            raise ValueError(
                f"{name} must have {expected} dimensions, got {x.dim()} (shape {tuple(x.shape)})"
            )
    if dtype is not None:
        ok = {
            "floating": x.is_floating_point(),
            "integer": not x.is_floating_point() and not x.is_complex() and x.dtype != torch.bool,
            "bool": x.dtype == torch.bool,
        }.get(dtype) if isinstance(dtype, str) else x.dtype == dtype
        if ok is None:
            raise ValueError(f"unknown dtype class {dtype!r}")
        if not ok:
            raise TypeError(f"{name} must have dtype {dtype}, got {x.dtype}")
    if shape is not None:
        expected_shape = tuple(shape)
        if x.dim() != len(expected_shape) or any(
            e is not None and e != a for e, a in zip(expected_shape, x.shape)
        ):
            pretty = "(" + ", ".join("*" if e is None else str(e) for e in expected_shape) + ")"
            raise ValueError(f"{name} must have shape {pretty}, got {tuple(x.shape)}")
    return x


def check_positive_int(value: object, name: str, *, allow_zero: bool = False) -> int:
    """Raise unless ``value`` is an int > 0 (or >= 0 with ``allow_zero``)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    low = 0 if allow_zero else 1
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)
