"""The grader's process helpers that need neither torch nor the checkers: a pipe read with a
deadline, a cap on a process's data, death with its parent, the size of a submission.

Apart from :mod:`._batch` (which re-exports them) so that the class hub's submit service, which
parses each submission in a forked process with them (:mod:`course_tools.classroom.submit`),
does not import the grader: torch and the checkers would add ~220 MiB to the service at the
class's first submission.
"""

from __future__ import annotations

import os
import re
import select
import signal
import time
from pathlib import Path

__all__ = ["MAX_SUBMISSION_BYTES"]

MAX_SUBMISSION_BYTES = 16 * 2**20  # 20 times the course's largest notebook with its outputs
_REPORT_BYTES = 4 * 2**20  # a report is a few kB; more is a broken grading process


def _read_line(fd: int, deadline: float, limit: int = _REPORT_BYTES) -> bytes | None:
    """Bytes from ``fd`` up to the first newline (or the end), ``None`` past the deadline or
    the limit."""
    chunks, size = [], 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 2**16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            return b"".join(chunks).split(b"\n", 1)[0]
        if size > limit:
            return None


def _limit_memory(budget: int) -> None:
    """Cap this process's data (heap and private mappings: ``RLIMIT_DATA``, which holds for root
    too) at what it holds now plus ``budget``: parsing a submission, decoding its answers and
    rebuilding its model then raise MemoryError instead of taking the machine."""
    import resource

    try:
        status = Path("/proc/self/status").read_text()
        held = int(re.search(r"^VmData:\s+(\d+) kB", status, re.M).group(1)) * 1024
    except (OSError, AttributeError, ValueError):
        held = 0
    limit = held + budget
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _die_with(parent: int) -> None:
    """SIGKILL this process when ``parent`` (the thread that forked it) ends (Linux's
    ``PR_SET_PDEATHSIG``); if it has already ended, end now."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)
