"""What the sandboxed kernel's relay lets through to nbgrader on the iopub channel.

nbgrader keeps every output of every cell in memory, in the notebook it is grading, and a few
times over while it writes it (200 MiB of ``print`` grew its process to ~1 GiB). The relay of
:mod:`course_tools.grading.sandbox.kernel` passes each iopub message through
:class:`OutputCap`, which forwards a cell's output (everything but ``status``, counted in bytes
per request: the parent message) up to :data:`CELL_OUTPUT_BYTES`, and a kernel's up to
:data:`KERNEL_OUTPUT_BYTES` in all; past that, the cell gets one note on its stderr (signed with
the kernel's key, as every message nbgrader accepts) and nothing more. An ``error`` always
arrives, shortened past the cap (nbgrader grades a test cell by its error); a ``status`` message
(nbgrader waits for ``idle``) always arrives, unless it is absurdly large.

What it does not bound: one message is held whole while it crosses (ZeroMQ receives a frame at
once), up to :data:`MAX_FRAME_BYTES` (a larger one is dropped by ZeroMQ, which also drops the
connection for a moment). The kernel is the student's: it can still lie in what it forwards,
as it can without this (see the README on what nbgrader cannot prevent).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from datetime import datetime, timezone

__all__ = ["CELL_OUTPUT_BYTES", "KERNEL_OUTPUT_BYTES", "MAX_FRAME_BYTES", "OutputCap"]

CELL_OUTPUT_BYTES = 4 * 2**20  # one cell's output that reaches nbgrader (plots are ~100 kB)
KERNEL_OUTPUT_BYTES = 32 * 2**20  # all of one kernel's (one notebook's) output
MAX_FRAME_BYTES = 256 * 2**20  # the largest frame the relay receives at all (ZMQ_MAXMSGSIZE)
STATUS_BYTES = 2**16  # a status message is a few hundred bytes
ERROR_BYTES = 2**16  # what is kept of an error past the cap
DELIMITER = b"<IDS|MSG>"


def _mib(size: int) -> str:
    return f"{size / 2**20:g} MiB"


class OutputCap:
    """Filters the kernel's iopub messages (ZeroMQ frames) on their way to nbgrader.

    ``key`` and ``scheme`` are the connection file's ``key`` and ``signature_scheme``: the notes
    and shortened errors it writes are signed as the kernel's own messages are."""

    def __init__(self, key: bytes, scheme: str = "hmac-sha256", *,
                 cell_bytes: int = CELL_OUTPUT_BYTES,
                 kernel_bytes: int = KERNEL_OUTPUT_BYTES) -> None:
        if not scheme.startswith("hmac-") or scheme[5:] not in hashlib.algorithms_available:
            raise ValueError(f"signature_scheme must be hmac-<a hashlib digest>, got {scheme!r}")
        self.key, self.digest = key, scheme[5:]
        self.cell_bytes, self.kernel_bytes = cell_bytes, kernel_bytes
        self.parent: bytes | None = None  # the request whose output is being counted
        self.cell_used = self.kernel_used = 0
        self.noted = False

    def filter(self, frames: list[bytes]) -> list[list[bytes]]:
        """The messages to forward in place of ``frames`` (none, it, a shortened copy, a note)."""
        try:
            at = frames.index(DELIMITER)
            header, parent = json.loads(frames[at + 2]), json.loads(frames[at + 3])
            kind, parent_id = str(header["msg_type"]), str(parent.get("msg_id", ""))
        except (ValueError, IndexError, KeyError, TypeError, AttributeError):
            return []  # not a message of the protocol: nbgrader would refuse it anyway
        size = sum(len(frame) for frame in frames)
        if kind == "status":
            return [frames] if size <= STATUS_BYTES else []
        if parent_id.encode() != self.parent:  # the next request: a fresh allowance
            self.parent, self.cell_used, self.noted = parent_id.encode(), 0, False
        if kind == "error" and self._over(size):
            frames = self._shortened_error(frames, at)
            size = sum(len(frame) for frame in frames)
        elif self._over(size):
            if self.noted:
                return []
            self.noted = True
            room = min(self.cell_bytes - self.cell_used, self.kernel_bytes - self.kernel_used)
            frames = self._cut_stream(frames, at, room, size) if kind == "stream" \
                else self._note(frames, at, header, size)
            size = sum(len(frame) for frame in frames)
        self.cell_used += size
        self.kernel_used += size
        return [frames]

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
