"""The door checks that need neither torch nor numpy: a bool, a path.

Defined for the whole course, with the others in :mod:`lectures_lib.utils`, which re-exports
these two; they live apart so that a process that needs only them (the sandboxed kernel's
launcher, a relay outside the sandbox, one for each kernel of every student of a class) does not
import torch for them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["check_bool", "check_path"]


def check_bool(value: object, name: str) -> bool:
    """Raise unless ``value`` is a ``bool`` (``"yes"``, ``1`` or ``None`` are not)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool (True or False), got {type(value).__name__} ({value!r})")
    return value


def check_path(value: object, name: str) -> Path:
    """Raise unless ``value`` is a path (a ``str`` or an ``os.PathLike``); return it as a Path."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got "
                        f"{type(value).__name__} ({value!r:.60})")
    return Path(value)
