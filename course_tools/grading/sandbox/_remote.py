"""The grader's stand-ins for the submission's objects, and the errors that cross back.

A :class:`Remote` is what the grader holds for an object that lives in the sandbox (a function, a
model, a module): calling it, or asking it for an attribute, a length, an iterator or a
signature, sends a request through its :class:`~course_tools.grading.sandbox.Session` and
brings back plain data (:mod:`course_tools.grading.sandbox.wire`). An error the submission's code raised
comes back as its *name* and message only (:func:`_error`), never as its class.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any, Protocol

from course_tools.grading.sandbox import wire


class Session(Protocol):
    """What a :class:`Remote` needs of the session it talks through (the sandbox's ``Session``
    is one): this module imports nothing of the session's, which imports it."""

    limits: Any  # a sandbox Limits: memory_bytes
    call_timeout: float
    generation: int

    def request(self, message: dict, timeout: float | None = None) -> dict: ...

    def value(self, reply: dict, generation: int | None = None) -> Any: ...


PRINTED = 4000  # characters of what one call printed that the grader shows

class SandboxError(RuntimeError):
    """The submission's process broke, ran out of time or broke the protocol."""


class RemoteError(Exception):
    """Base of the errors the submission's code raised (re-created by name in the grader)."""

    student_location: tuple[int, str] = (0, "?")


_ERROR_TYPES: dict[str, type] = {}


def _error(info: dict) -> BaseException:
    """An exception of the submission's error's name (never the class itself: only its name)."""
    name = str(info.get("type", "Error"))
    name = name if name.isidentifier() and len(name) <= 60 else "Error"
    message = str(info.get("message", ""))[:2000]
    base = NotImplementedError if info.get("not_implemented") is True else RemoteError
    key = f"{base.__name__}.{name}"
    if key not in _ERROR_TYPES:
        _ERROR_TYPES[key] = type(name, (base,) if base is RemoteError else (base, RemoteError), {})
    error = _ERROR_TYPES[key](message)
    line, where = info.get("line", 0), info.get("name", "?")
    error.student_location = (line if type(line) is int else 0, str(where)[:80])
    return error




def _current_call_timeout(session: Session) -> float:
    """The running check's limit for one call of the student's code (training: longer)."""
    from lectures_lib.checks.grader import call_timeout

    return call_timeout(session.call_timeout)


class Remote:
    """The grader's stand-in for an object of the submission: calls cross as data."""

    __slots__ = ("_session", "_number", "_generation", "__weakref__")

    def __init__(self, session: Session, number: int, generation: int) -> None:
        self._session, self._number, self._generation = session, number, generation

    def sandbox_memory_bytes(self) -> int:
        """The memory limit the submission's process runs under (the kernel holds it): what a
        check that must know where the code runs reads off the stand-in's *type*
        (``type(fn).sandbox_memory_bytes(fn)``; never a request to the submission)."""
        return int(self._session.limits.memory_bytes)

    def _ask(self, op: str, **fields) -> dict:
        if self._generation != self._session.generation:
            raise SandboxError("this object belonged to a run of the submission that was stopped")
        return self._session.request({"op": op, "handle": self._number, **fields},
                                     timeout=_current_call_timeout(self._session))

    def _send(self, value):
        def handle_of(obj):
            if isinstance(obj, Remote) and obj._session is self._session:
                return obj._number
            raise wire.WireError(f"cannot send a {type(obj).__name__} to the submission")

        return wire.encode(value, handle_of)

    def __call__(self, *args, **kwargs):
        reply = self._ask("call", args=self._send(list(args)), kwargs=self._send(dict(kwargs)))
        printed = reply.get("printed")
        if type(printed) is str and printed:
            sys.stdout.write(printed[:PRINTED])  # the check's capture, as if it printed here
        value = self._session.value(reply, self._generation)
        if isinstance(reply.get("after"), (tuple, list)):
            _copy_back([list(args), dict(kwargs)], self._session.value(
                {"ok": reply["after"]}, self._generation))
        return value

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # no special protocol is asked of the submission
        reply = self._ask("getattr", name=name)
        if reply.get("missing") is True:
            raise AttributeError(f"the submission's object has no attribute {name!r}")
        return self._session.value(reply, self._generation)

    def __len__(self) -> int:
        value = self._session.value(self._ask("len"), self._generation)
        if type(value) is not int or value < 0:
            raise TypeError("len() of the submission's object is not a non-negative int")
        return value

    def __iter__(self):
        iterator = self._session.value(self._ask("iter"), self._generation)
        if not isinstance(iterator, Remote):
            raise TypeError("the submission's object gave no iterator")
        return iterator

    def __next__(self):
        reply = self._ask("next")
        if reply.get("missing") is True:
            raise StopIteration
        return self._session.value(reply, self._generation)

    @property
    def __signature__(self) -> inspect.Signature:
        reply = self._ask("signature")
        if reply.get("missing") is True:
            raise ValueError("no signature")
        text = self._session.value(reply, self._generation)
        try:
            rows = json.loads(text) if type(text) is str and len(text) < 2**16 else None
            parameters = []
            for i, (name, kind, has_default) in enumerate(rows[:256]):
                name = name if type(name) is str and name.isidentifier() else f"arg{i}"
                parameters.append(inspect.Parameter(
                    name, inspect._ParameterKind(kind if type(kind) is int else 1),
                    default=None if has_default else inspect.Parameter.empty))
            return inspect.Signature(parameters)
        except (TypeError, ValueError) as error:
            raise ValueError(f"no signature ({type(error).__name__})") from None

    def __repr__(self) -> str:
        return f"<the submission's object #{self._number}>"


def _copy_back(sent, after) -> None:
    """Write the submission's view of the arguments after the call into the grader's copies.

    The checker compares them with the originals, so a function that changes its inputs in
    place is still told so (only same-shaped tensors are copied: nothing else can change)."""
    import torch

    if isinstance(sent, torch.Tensor):
        if (isinstance(after, torch.Tensor) and after.shape == sent.shape
                and after.dtype == sent.dtype):
            sent.copy_(after)
    elif isinstance(sent, (list, tuple)) and isinstance(after, (list, tuple)):
        for a, b in zip(sent, after):
            _copy_back(a, b)
    elif isinstance(sent, dict) and isinstance(after, dict):
        for key in sent:
            if key in after:
                _copy_back(sent[key], after[key])
