r"""Measure what a computation costs: the peak memory of the tensors it creates, and its time.

Used from ``01_self_attention.ipynb`` (the :math:`N \times N` cost) and section 06 (efficient
attention must really be efficient). On a GPU PyTorch counts memory itself
(``torch.cuda.max_memory_allocated``); on a CPU it does not, so :func:`peak_tensor_memory` counts
it by watching every tensor operation (a ``TorchDispatchMode``): each new result adds the bytes of
its storage, each storage freed subtracts them, and the largest running total is the peak.
What it sees:

* every tensor an operation creates while ``fn`` runs, down to the basic operations a composite
  one is made of (so the :math:`N \times N` scores inside dense attention are counted), views
  without new storage counted once;
* not the tensors that existed before (inputs, parameters), and not the scratch memory inside one
  fused kernel (``F.scaled_dot_product_attention`` on the CPU is one operation).

It is a measurement, not a formula from the shapes: a method that builds an :math:`N \times N`
matrix somewhere shows it, whatever the code claims.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .utils import check_bool

__all__ = ["MemoryReport", "count_parameters", "peak_tensor_memory", "median_time"]


@dataclass
class MemoryReport:
    """What :func:`peak_tensor_memory` saw: ``peak_bytes`` (the most bytes alive at once),
    ``largest_tensor_bytes`` and ``largest_tensor_shape`` (the biggest single result), and the
    function's return value ``result``."""

    peak_bytes: int
    largest_tensor_bytes: int
    largest_tensor_shape: tuple[int, ...]
    result: Any = None


class _LiveTensorBytes(TorchDispatchMode):
    """Counts the bytes of the storages created inside the mode that are still alive."""

    def __init__(self) -> None:
        super().__init__()
        self.live: dict[int, list[int]] = {}  # storage pointer -> [bytes, tensors referring to it]
        self.current = 0
        self.peak = 0
        self.largest = (0, ())
        self.known: set[int] = set()  # storages that existed before (inputs): never counted

    def _release(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[key]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        for tensor in tree_leaves((args, kwargs)):
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                key = tensor.untyped_storage().data_ptr()
                if key not in self.live:
                    self.known.add(key)
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor) or tensor.device.type == "meta":
                continue
            storage = tensor.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if key in self.known or size == 0:
                continue
            if key in self.live:
                self.live[key][1] += 1  # a view of a storage we already count
            else:
                self.live[key] = [size, 1]
                self.current += size
                self.peak = max(self.peak, self.current)
                if size > self.largest[0]:
                    self.largest = (size, tuple(tensor.shape))
            weakref.finalize(tensor, self._release, key)
        return out


def count_parameters(model: torch.nn.Module, *, trainable_only: bool = False) -> int:
    """Number of scalar parameters of ``model`` (only those with ``requires_grad`` if asked).
    First used in ``01_self_attention.ipynb`` (a window MLP's parameters grow with the window)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_bool(trainable_only, "trainable_only")
    return sum(
        parameter.numel() for parameter in model.parameters()
        if parameter.requires_grad or not trainable_only
    )


def peak_tensor_memory(fn: Callable[[], Any]) -> MemoryReport:
    """Run ``fn()`` once and report the peak bytes of the tensors it created (see the module
    docstring for what is counted). Run it under ``torch.no_grad()`` to measure inference; with
    autograd the tensors saved for the backward pass stay alive and count too."""
    if not callable(fn):
        raise TypeError(f"fn must be a callable taking no arguments, got {type(fn).__name__}")
    mode = _LiveTensorBytes()
    with mode:
        result = fn()
    return MemoryReport(mode.peak, mode.largest[0], mode.largest[1], result)


def median_time(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1,
                clock: str = "wall") -> float:
    """Median seconds of ``repeats`` calls of ``fn()`` after ``warmup`` calls (CUDA work is
    synchronised). For notebooks and benchmarks; never assert a wall-clock time in a test.

    ``clock="wall"``: wall-clock seconds (``time.perf_counter``). ``clock="cpu"``: the calling
    thread's CPU seconds (``time.thread_time``): with PyTorch on one CPU thread, the work itself,
    not the moments another process held the core (on a busy machine the wall clock of a short
    call can double); it does not see work done on other threads or on a GPU."""
    if not callable(fn):
        raise TypeError(f"fn must be a callable taking no arguments, got {type(fn).__name__}")
    for name, value, low in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    clocks = {"wall": time.perf_counter, "cpu": time.thread_time}
    if clock not in clocks:
        raise ValueError(f"clock must be one of {sorted(clocks)}, got {clock!r}")
    now = clocks[clock]
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        start = now()
        fn()
        sync()
        times.append(now() - start)
    return sorted(times)[len(times) // 2]
