"""An IPython extension of the sandboxed kernel: after each cell, the memory it freed goes back.

glibc's ``free`` keeps the pages of freed memory in the process unless they are at the top of its
heap, and it raises its threshold for ``mmap`` (up to 32 MiB) each time a large block is freed, so
the tensors of a training loop soon come from the heap too. After notebook 01 a kernel held
~70 MiB of pages it no longer used (``benchmarks/class_sizing.py``: each active student of a
class holds one kernel). ``malloc_trim(0)`` after each cell gives them back to the system (a
few milliseconds); during a cell nothing changes. Measured the other way, a fixed ``mmap``
threshold (``MALLOC_MMAP_THRESHOLD_``) gave as much back after 01 but cost notebook 05 about a
tenth more CPU time.

The kernel loads it as it starts inside the sandbox (:func:`.kernel._inner`); where the C
library has no ``malloc_trim`` (not glibc) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["load_ipython_extension", "give_back"]


def _malloc_trim():
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_TRIM = _malloc_trim()


def give_back(result=None) -> None:
    """Return the free pages of every malloc arena to the system (IPython's ``post_run_cell``)."""
    if _TRIM is not None:
        _TRIM(0)


def load_ipython_extension(ipython) -> None:
    ipython.events.register("post_run_cell", give_back)


def unload_ipython_extension(ipython) -> None:
    ipython.events.unregister("post_run_cell", give_back)
