"""The instructor's grading secret and the task variant a submission is graded on (issue 33).

:mod:`._base` re-exports every name here; the checkers' probe seeds derived from the secret
(:func:`~lectures_lib.checks._base.probe_seed`) stay there, beside the running check they name."""

from __future__ import annotations

import hashlib
import hmac
import os

import torch

# The instructor's grading secret (set by ``grade --secret-file``, or by hand): with it, every
# checker draws its probes from seeds derived from the secret instead of the public ones.
SECRET_ENV = "LECTURES_GRADING_SECRET"


def _secret() -> bytes | None:
    secret = os.environ.get(SECRET_ENV, "")
    return secret.encode() if secret else None


def secret_fingerprint() -> str | None:
    """A short, non-reversible name of the grading secret in use (None: the public probes)."""
    secret = _secret()
    if secret is None:
        return None
    return hashlib.sha256(b"lectures-fingerprint:" + secret).hexdigest()[:12]


# The task variant of the submission being graded (issue 33): the trained exercises' data helpers
# (``checks.trained``) draw their data from it, in the sandbox (the worker sets it from the job's
# spec before the submission's first cell) and in the grader (the checker's held-out data), so
# weights trained before the grading, on the public task, do not fit. None: the public task.
_TASK_VARIANT: list[str | None] = [None]


def task_key(content: str) -> str | None:
    """The key of the task variant a submission is graded on (None without a grading secret).

    HMAC-SHA256 of the instructor's secret and the SHA-256 of ``content`` (the submission's
    cells), so it is never the secret itself, and a key seen in one graded run (the student's
    code can read it in the sandbox) is no use to another submission: pasting the weights trained
    on it changes the content, hence the key."""
    secret = _secret()
    if secret is None:
        return None
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
    return hmac.new(secret, f"task-variant/{digest}".encode(), hashlib.sha256).hexdigest()[:32]


def set_task_variant(key: str | None) -> None:
    """Make ``key`` (a :func:`task_key`, or None: the public task) this process's task variant."""
    if key is not None and (not isinstance(key, str) or not key.isalnum() or len(key) > 64):
        raise ValueError(f"key must be a task_key() (hex digits) or None, got {key!r:.80}")
    _TASK_VARIANT[0] = key


def task_variant() -> str | None:
    """This process's task variant key (None: the public task)."""
    return _TASK_VARIANT[0]


def task_variant_generator(task: str) -> torch.Generator | None:
    """A CPU generator for the variant of ``task`` (a data helper's name), or None (public)."""
    key = _TASK_VARIANT[0]
    if key is None:
        return None
    digest = hashlib.sha256(f"{key}/{task}".encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") & (2**63 - 1))
