"""What the sandboxed kernel's relay lets through to nbgrader on the iopub channel.

nbgrader keeps every output of every cell in memory, in the notebook it is grading, and a few
times over while it writes it (200 MiB of ``print`` grew its process to ~1 GiB). The relay of
:mod:`course_tools.grading.sandbox.kernel` passes each iopub message through
:class:`OutputCap`. Every message counts, whatever its type (output, ``error``, ``status``,
``comm``, ...), in bytes, toward its request's allowance (the parent message:
:data:`CELL_OUTPUT_BYTES`) and the kernel's (:data:`KERNEL_OUTPUT_BYTES`); a message within both
is forwarded whole. Past either, a request gets at most one of each of what nbgrader needs to
grade it, and nothing more: one note on its stderr that its output was cut (or its stream cut
there), one ``error``, shortened to :data:`ERROR_BYTES` (nbgrader grades a test cell by its
error), and one ``busy`` and one ``idle`` status (nbgrader waits for ``idle``). A *request*
there is one that the kernel's client really sent on its shell or control channel
(:class:`Requests`, recorded by the relay of those channels): a message whose parent is any other
id (the kernel chooses its messages' parents) gets nothing past the caps. So what reaches
nbgrader from one notebook is bounded by the caps plus a few kB per cell nbgrader runs (8,000
signed ``error`` messages made a 253 MiB autograded notebook when errors were not counted).
Notes and shortened errors are signed with the kernel's key, as every message nbgrader accepts.

What it does not bound: one message is held whole while it crosses (ZeroMQ receives a frame at
once), up to :data:`MAX_FRAME_BYTES` (a larger one is dropped by ZeroMQ, which also drops the
connection for a moment). The kernel is the student's: it can still lie in what it forwards,
as it can without this (see the README on what nbgrader cannot prevent).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import uuid
from collections import OrderedDict
from datetime import datetime, timezone

__all__ = ["CELL_OUTPUT_BYTES", "KERNEL_OUTPUT_BYTES", "MAX_FRAME_BYTES", "OutputCap",
           "Requests", "REQUESTS"]

CELL_OUTPUT_BYTES = 4 * 2**20  # one cell's output that reaches nbgrader (plots are ~100 kB)
KERNEL_OUTPUT_BYTES = 32 * 2**20  # all of one kernel's (one notebook's) output
MAX_FRAME_BYTES = 256 * 2**20  # the largest frame the relay receives at all (ZMQ_MAXMSGSIZE)
STATUS_BYTES = 2**16  # a status message is a few hundred bytes
ERROR_BYTES = 2**16  # what is kept of an error past the cap
DELIMITER = b"<IDS|MSG>"
STATES = ("busy", "idle")  # the statuses a request gets past the caps, one of each


def _message_id(frames: list[bytes], part: int) -> str | None:
    """The ``msg_id`` of a message's header (``part`` 2) or parent header (3), None if none."""
    try:
        at = frames.index(DELIMITER)
        found = json.loads(frames[at + part]).get("msg_id")
    except (ValueError, IndexError, TypeError, AttributeError):
        return None
    return found if isinstance(found, str) and found else None


class Requests:
    """The ids of the requests a kernel's client sent (on shell and control), the last
    ``limit`` of them: the parents that count as requests for :class:`OutputCap`."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, frames: list[bytes]) -> None:
        """Note the request in ``frames`` (a message from the client, as ZeroMQ gives it)."""
        found = _message_id(frames, 2)
        if found is None:
            return
        with self._lock:
            self._ids[found] = None
            while len(self._ids) > self.limit:
                self._ids.popitem(last=False)

    def __contains__(self, message_id: object) -> bool:
        with self._lock:
            return message_id in self._ids


REQUESTS = Requests()  # the launcher's (one kernel per launcher process)


def _mib(size: int) -> str:
    return f"{size / 2**20:g} MiB"


class OutputCap:
    """Filters the kernel's iopub messages (ZeroMQ frames) on their way to nbgrader.

    ``key`` and ``scheme`` are the connection file's ``key`` and ``signature_scheme``: the notes
    and shortened errors it writes are signed as the kernel's own messages are."""

    def __init__(self, key: bytes, scheme: str = "hmac-sha256", *,
                 cell_bytes: int = CELL_OUTPUT_BYTES,
                 kernel_bytes: int = KERNEL_OUTPUT_BYTES,
                 requests: Requests = REQUESTS) -> None:
        if not scheme.startswith("hmac-") or scheme[5:] not in hashlib.algorithms_available:
            raise ValueError(f"signature_scheme must be hmac-<a hashlib digest>, got {scheme!r}")
        self.key, self.digest = key, scheme[5:]
        self.cell_bytes, self.kernel_bytes = cell_bytes, kernel_bytes
        self.requests = requests
        self.kernel_used = 0
        # each request's allowance: the bytes it used and what it got past the caps (its
        # "note", its "error", its statuses), the last CELLS requests (oldest dropped first)
        self.cells: OrderedDict[str, dict] = OrderedDict()
        self.cell: dict = {"used": 0, "past": set()}

    CELLS = 4096

    @property
    def cell_used(self) -> int:
        return self.cell["used"]

    def filter(self, frames: list[bytes]) -> list[list[bytes]]:
        """The messages to forward in place of ``frames`` (none, it, a shortened copy, a note)."""
        try:
            at = frames.index(DELIMITER)
            header, parent = json.loads(frames[at + 2]), json.loads(frames[at + 3])
            kind, parent_id = str(header["msg_type"]), str(parent.get("msg_id", ""))
        except (ValueError, IndexError, KeyError, TypeError, AttributeError):
            return []  # not a message of the protocol: nbgrader would refuse it anyway
        size = sum(len(frame) for frame in frames)
        if kind == "status" and size > STATUS_BYTES:
            return []  # a status is a few hundred bytes
        request = parent_id in self.requests
        if not request and self.kernel_used + size > self.kernel_bytes:
            return []  # past the caps only the client's own requests get anything
        self.cell = self._cell(parent_id)
        if not self._over(size):
            return [self._count(frames)]
        if not request:
            return []
        past = self.cell["past"]
        if kind == "status":
            state = self._state(frames, at)
            if state not in STATES or state in past:
                return []
            past.add(state)
            return [self._count(frames)]
        if kind == "error":
            if "error" in past:
                return []  # one error per request
            past.add("error")
            return [self._count(self._shortened_error(frames, at))]
        if "note" in past:
            return []
        past.add("note")
        room = min(self.cell_bytes - self.cell_used, self.kernel_bytes - self.kernel_used)
        frames = self._cut_stream(frames, at, room, size) if kind == "stream" \
            else self._note(frames, at, header, size)
        return [self._count(frames)]

    def _cell(self, parent_id: str) -> dict:
        """The allowance of the request ``parent_id`` (a fresh one for a request not seen)."""
        cell = self.cells.get(parent_id)
        if cell is None:
            cell = self.cells[parent_id] = {"used": 0, "past": set()}
            while len(self.cells) > self.CELLS:
                self.cells.popitem(last=False)
        self.cells.move_to_end(parent_id)
        return cell

    def _count(self, frames: list[bytes]) -> list[bytes]:
        """``frames``, forwarded: counted toward the request's and the kernel's output."""
        size = sum(len(frame) for frame in frames)
        self.cell["used"] += size
        self.kernel_used += size
        return frames

    @staticmethod
    def _state(frames: list[bytes], at: int) -> str | None:
        try:
            state = json.loads(frames[at + 5]).get("execution_state")
        except (ValueError, IndexError, TypeError, AttributeError):
            return None
        return state if isinstance(state, str) else None

    def _over(self, size: int) -> bool:
        return (self.cell_used + size > self.cell_bytes
                or self.kernel_used + size > self.kernel_bytes)

    def _signed(self, identities: list[bytes], parts: list[bytes]) -> list[bytes]:
        signature = b""
        if self.key:
            mac = hmac.new(self.key, digestmod=self.digest)
            for part in parts:
                mac.update(part)
            signature = mac.hexdigest().encode()
        return [*identities, DELIMITER, signature, *parts]

    def _note_text(self, size: int) -> str:
        whose = "this cell's" if self.cell_used + size > self.cell_bytes else "this notebook's"
        return (f"\n[lectures-sandbox: output was cut here: {whose} output passed "
                f"{_mib(self.cell_bytes)} a cell, {_mib(self.kernel_bytes)} a notebook; the "
                "rest is not sent to nbgrader, which would keep it all in memory]\n")

    def _cut_stream(self, frames: list[bytes], at: int, room: int, size: int) -> list[bytes]:
        """The stream message cut to ``room`` bytes in all, its text first, the note after it."""
        note = self._note_text(size)
        try:
            content = json.loads(frames[at + 5])
            text, name = str(content["text"]), str(content.get("name", "stdout"))
        except (ValueError, IndexError, KeyError, TypeError):
            return self._note(frames, at, json.loads(frames[at + 2]), size)
        # what is not the text: the other frames, the signature, the note, the JSON around them
        room -= size - len(frames[at + 5]) + len(note.encode()) + len(name) + 64
        text = text[:max(0, room)]
        while text:  # each character takes a byte or more (several: escaped, or not ASCII)
            over = len(json.dumps(text, ensure_ascii=False).encode()) - room
            if over <= 0:
                break
            text = text[: len(text) - over]
        content = {"name": name, "text": text + note}
        return self._signed(frames[:at], [*frames[at + 2:at + 5],
                                          json.dumps(content, ensure_ascii=False).encode()])

    def _note(self, frames: list[bytes], at: int, header: dict, size: int) -> list[bytes]:
        """A stream message on the cell's stderr that says its output was cut, and why."""
        text = self._note_text(size)
        note = {"msg_id": uuid.uuid4().hex, "msg_type": "stream",
                "username": str(header.get("username", "kernel")),
                "session": str(header.get("session", "")),
                "date": datetime.now(timezone.utc).isoformat(),
                "version": str(header.get("version", "5.3"))}
        return self._signed(frames[:at], [json.dumps(note).encode(), frames[at + 3], b"{}",
                                          json.dumps({"name": "stderr", "text": text}).encode()])

    def _shortened_error(self, frames: list[bytes], at: int) -> list[bytes]:
        """The error message with its value and traceback cut to :data:`ERROR_BYTES` in all."""
        try:
            content = json.loads(frames[at + 5])
        except (ValueError, IndexError):
            content = {}
        content = content if isinstance(content, dict) else {}
        share = ERROR_BYTES // 4
        traceback = content.get("traceback") if isinstance(content.get("traceback"), list) else []
        kept, left = [], share
        for line in traceback:
            line = str(line)[:left]
            kept.append(line)
            left -= len(line)
            if left <= 0:
                break
        cut = "\n[lectures-sandbox: this error was shortened on its way to nbgrader]"
        content = {"ename": str(content.get("ename", "Error"))[:200],
                   "evalue": str(content.get("evalue", ""))[:share] + cut,
                   "traceback": kept + [cut.strip()]}
        return self._signed(frames[:at], [*frames[at + 2:at + 5], json.dumps(content).encode()])
