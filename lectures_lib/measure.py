"""Counting what a model costs: parameters, and the CPU memory a computation allocates.

First used in ``01_self_attention.ipynb`` (§3 and §8: the window MLP's parameters grow with the
window; self-attention's memory grows as N²).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from torch import nn

__all__ = ["count_parameters", "peak_memory_bytes"]


def count_parameters(model: nn.Module, *, trainable_only: bool = False) -> int:
    """Number of scalar parameters of ``model`` (only those with ``requires_grad`` if asked)."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return sum(
        parameter.numel() for parameter in model.parameters()
        if parameter.requires_grad or not trainable_only
    )


@contextlib.contextmanager
def _quiet_stderr():
    """Silence C-level writes to stderr (the profiler logs its start and stop there)."""
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def peak_memory_bytes(fn: Callable[..., object], *args: object, **kwargs: object) -> int:
    """Peak of the CPU memory held by tensors that ``fn(*args, **kwargs)`` allocates, in bytes, as
    recorded by
    PyTorch's allocator under ``torch.profiler`` (``profile_memory=True``).

    The allocations and frees of every operator are replayed in time order and the largest running
    total is returned; memory allocated and freed *inside* one operator is not seen, so this is a
    lower bound of the true peak. Tensors that exist before the call (``args`` included) do not
    count. The result of the call is discarded (freed) at the end, after the peak.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn(*args, **kwargs)
    live = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += event.self_cpu_memory_usage  # + allocated, - freed by this operator itself
        peak = max(peak, live)
    return peak
