"""Seeding, device selection, ``eval_mode`` and the input checks every public function uses.

Defined for the whole course; first used in ``01_self_attention.ipynb``.

**Checks live at the door.** A public function or module validates its arguments once, with a
message that names the argument, the expected and the actual value. When the library's own code
calls another public piece of the library (an ``Encoder`` calling its layers, a layer calling its
attention, attention calling ``split_heads``), the inputs were already checked at the door, so the
inner calls skip their checks: :func:`inside_library` marks such a region and
:func:`at_boundary` tells a function whether it is called from outside (check) or from inside
(trust). A learner who calls any piece directly still gets every check.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import os
import random
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np
import torch

from .plain_checks import check_bool, check_path  # no torch: the kernel's launcher uses them

F = TypeVar("F", bound=Callable[..., object])

__all__ = [
    "seed_everything",
    "get_device",
    "eval_mode",
    "at_boundary",
    "validated",
    "inside_library",
    "check_tensor",
    "check_positive_int",
    "check_non_negative_int",
    "check_bool",
    "check_probability",
    "check_positive_float",
    "check_seed",
    "check_path",
    "check_device",
    "check_qkv",
]


def seed_everything(seed: int = 0, num_threads: int | None = 1) -> int:
    """Seed Python, NumPy and PyTorch, and pin the number of CPU threads.

    Call it once at the top of a notebook: the same run then prints the same numbers.

    ``num_threads=1`` is deliberate: the course's models are tiny, and on a busy 2-core machine
    two OpenMP threads can make them *much* slower (and float sums can change in the last digit
    with the thread count). Pass ``None`` to keep PyTorch's default.
    """
    seed = check_seed(seed)
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
    (``LECTURES_DEVICE=cpu make test`` runs everything on the CPU). A device is named by a
    string such as ``"cpu"``, ``"cuda"`` or ``"cuda:1"`` (or given as a ``torch.device``).
    """
    if prefer is not None and not isinstance(prefer, (str, torch.device)):
        raise TypeError(
            f"prefer must be None, a device name such as 'cpu' or 'cuda', or a torch.device, "
            f"got {type(prefer).__name__} ({prefer!r})"
        )
    if prefer is not None:
        _parse_device(prefer, "prefer", available=False)  # a bad name is an error even when
        # the variable overrides it; an unavailable one is not (LECTURES_DEVICE=cpu on a laptop)
    if "LECTURES_DEVICE" in os.environ:
        return _parse_device(os.environ["LECTURES_DEVICE"], "the environment variable LECTURES_DEVICE")
    if prefer is not None:
        return _parse_device(prefer, "prefer")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _parse_device(choice: str | torch.device, name: str, available: bool = True) -> torch.device:
    """``choice`` as a ``torch.device`` (cpu, cuda, mps), which must be on this machine if
    ``available``."""
    try:
        device = torch.device(choice)
    except RuntimeError:
        raise ValueError(
            f"{name} must name a device such as 'cpu', 'cuda' or 'cuda:0', got {choice!r}"
        ) from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"{name} must name a 'cpu', 'cuda' or 'mps' device, got {choice!r}")
    if not available:
        return device
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {choice!r} was asked for, but CUDA is not available")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"device {choice!r} was asked for, but MPS is not available")
    return device


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
            sizes = ["*" if e is None else str(e) for e in expected_shape]
            pretty = "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"
            raise ValueError(f"{name} must have shape {pretty}, got {tuple(x.shape)}")
    return x


def _check_int(value: object, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def check_positive_int(value: object, name: str) -> int:
    """Raise unless ``value`` is an int > 0 (a bool is not an int here); return it as ``int``."""
    return _check_int(value, name, 1)


def check_non_negative_int(value: object, name: str) -> int:
    """Raise unless ``value`` is an int >= 0 (a bool is not an int here); return it as ``int``."""
    return _check_int(value, name, 0)


def check_probability(value: object, name: str = "dropout_p") -> float:
    """Raise unless ``value`` is a real number in ``[0, 1)`` (a dropout probability)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a float in [0, 1), got {type(value).__name__} ({value!r})")
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return float(value)


def check_positive_float(value: object, name: str) -> float:
    """Raise unless ``value`` is a finite real number > 0 (an epsilon, a scale, a base, a rate)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number > 0, got {type(value).__name__} ({value!r})")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_seed(seed: object, name: str = "seed") -> int:
    """Raise unless ``seed`` is an int (a bool or a float is not a seed); return it."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(seed).__name__} ({seed!r})")
    return int(seed)


def check_device(device: object, name: str = "device") -> torch.device | None:
    """Raise unless ``device`` is None or names a device this machine has ("cpu", "cuda:0", a
    ``torch.device``); return it as a ``torch.device`` (or None)."""
    if device is None:
        return None
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            f"{name} must be None, a device name such as 'cpu' or a torch.device, got "
            f"{type(device).__name__} ({device!r})"
        )
    return _parse_device(device, name)


def check_qkv(q: object, k: object, v: object) -> None:
    """Queries, keys and values for attention: floating tensors ``(..., n, d)`` that fit together.

    ``q`` ``(..., n_q, d_k)``, ``k`` ``(..., n_k, d_k)``, ``v`` ``(..., n_k, d_v)``, the same
    leading (batch, head) dimensions and the same dtype.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(t, name, dtype="floating")
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., seq, features), "
                f"got shape {tuple(t.shape)}"
            )
        if t.shape[-1] == 0:
            raise ValueError(
                f"{name} must have at least one feature (last dimension >= 1), "
                f"got shape {tuple(t.shape)}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "queries and keys must have the same feature size d_k to take dot products: "
            f"q has shape {tuple(q.shape)}, k has shape {tuple(k.shape)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "keys and values must come in pairs (same number of positions): "
            f"k has shape {tuple(k.shape)}, v has shape {tuple(v.shape)}"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            "q, k and v must have the same leading (batch/head) dimensions: got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")


# ---------------------------------------------------------------------------------------------
# Checks at the door, trust inside
# ---------------------------------------------------------------------------------------------

_INSIDE_LIBRARY: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "lectures_lib_inside_library", default=False
)


def at_boundary() -> bool:
    """True when the caller is outside the library (so a public function must check its inputs);
    False inside a region marked by :func:`inside_library` (inputs were checked at the door)."""
    return not _INSIDE_LIBRARY.get()


@contextlib.contextmanager
def inside_library() -> Iterator[None]:
    """Mark a region in which the library calls its own public pieces with checked inputs.

    Public functions called inside it skip their input checks (:func:`at_boundary` is False).
    The mark is a context variable: it is undone on exit, even after an exception, and it does
    not leak into other threads.
    """
    token = _INSIDE_LIBRARY.set(True)
    try:
        yield
    finally:
        _INSIDE_LIBRARY.reset(token)


def validated(validator: Callable[..., object] | str, *, trusted: bool = True) -> Callable[[F], F]:
    """Decorate a public function or ``forward`` so that ``validator`` checks its arguments once,
    at the door, and the body runs as the trusted core.

    ``validator`` takes the same arguments as the function (``self`` included for a method) and
    raises on bad input; it runs only when the call comes from outside the library
    (:func:`at_boundary`). The body then runs inside :func:`inside_library`, so the library's own
    pieces it calls skip their checks. A learner reading the function sees the maths and one
    decorator line naming its validator (kept apart from the maths, as PyTorch keeps
    ``_mha_shape_check`` apart from ``multi_head_attention_forward``)::

        @validated(rules.local_qkv)
        def local_attention(q, k, v, window): ...

    Callables that come from the user (a feature map, a learner's ``attend``) must not run inside
    the trusted region unchecked: validate what they return where they are called.
    ``validator`` may also name a method of ``self`` (``@validated("check_inputs")``): that
    overridable hook is the door, and a subclass that extends it is checked the same way.
    ``trusted=False`` runs the body outside the trusted region (only the door check is shared):
    for functions whose body calls a model or a callback the user gave (``fit``, the decoders),
    whose own doors must stay open.
    """

    if isinstance(validator, str):  # a method of ``self`` is the door: the hook itself
        hook = validator
        validator = lambda self, *args, **kwargs: getattr(self, hook)(*args, **kwargs)  # noqa: E731
    if not callable(validator):
        raise TypeError(
            f"validator must be a callable taking the function's arguments, got "
            f"{type(validator).__name__}"
        )
    check_bool(trusted, "trusted")

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def door(*args: object, **kwargs: object) -> object:
            if not at_boundary():
                return function(*args, **kwargs)
            validator(*args, **kwargs)
            if not trusted:
                return function(*args, **kwargs)
            with inside_library():
                return function(*args, **kwargs)

        door.__validator__ = validator  # type: ignore[attr-defined]
        return door  # type: ignore[return-value]

    return decorate


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """Put ``model`` in evaluation mode (no dropout) for the ``with`` block, then restore the
    mode every sub-module had before, even when the block raises::

        with eval_mode(model):
            logits = model(tokens)
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, was_training in modes:
            module.training = was_training
