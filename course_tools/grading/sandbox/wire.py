"""What crosses between the grader and a sandboxed submission: plain data, never objects.

A message is a tree of tensors, numbers, strings, ``None``, lists, tuples and dicts with string
keys, written with ``torch.save`` and read with ``torch.load(weights_only=True)`` (PyTorch's
restricted unpickler: it builds tensors and containers, never an arbitrary class, so a message
cannot run code in the grader). :func:`decode` then rebuilds the tree from a fixed set of tags and
refuses anything else, so what the grader ends up holding is plain data whatever bytes arrived.

Anything else the submission's side holds (a function, a model, a cache) travels as a *handle*:
an opaque number the grader can only send back (``("h", n)``); the object stays in the sandbox.
Frames are an 8-byte length and the payload; a frame over :data:`MAX_FRAME` bytes is refused.

A reply of a few kB could still *decode to* gigabytes (a stride-0 tensor made dense, one tensor
or subtree referenced many times by the pickle's memo, a storage compressed in the zip), so the
grader never trusts its shapes or its sharing: :func:`loads` accepts only an uncompressed zip
whose records fit in the frame and a small pickle, and :func:`decode` walks the tree under a
:class:`Budget` (nodes, depth, tensor elements and bytes, string bytes), counting every tensor at
its dense size and every shared reference each time it is reached, and refuses *before* it
allocates anything; past the call's deadline it stops too.
"""

from __future__ import annotations

import io
import math
import os
import struct
import time
import zipfile
from dataclasses import dataclass

import torch

__all__ = ["MAX_FRAME", "MAX_PICKLE", "Budget", "WireError", "Handle", "encode", "decode", "dumps",
           "loads", "write_frame", "read_frame"]

MAX_FRAME = 256 * 2**20  # bytes: far more than any probe's answer, far less than the grader's memory
MAX_PICKLE = 2 * 2**20  # bytes of a message's pickle (its structure: tensors' data lie beside it)
_DEPTH = 32
# Every dtype by its name, read once from torch's own namespace: a name that crosses is looked up
# in this table only, never with getattr on a module.
_DTYPES = {name: value for name, value in vars(torch).items() if isinstance(value, torch.dtype)}


@dataclass(frozen=True)
class Budget:
    """What one message may decode to; every tensor counts at its dense size, every reference
    to a shared object each time it is reached."""

    nodes: int = 1_000_000
    depth: int = _DEPTH
    elements: int = 2**28
    bytes: int = MAX_FRAME
    seconds: float | None = None  # a deadline in time.monotonic() seconds, or None


class _Spent:
    __slots__ = ("budget", "nodes", "elements", "bytes")

    def __init__(self, budget: Budget) -> None:
        self.budget, self.nodes, self.elements, self.bytes = budget, 0, 0, 0

    def node(self, depth: int) -> None:
        budget = self.budget
        if depth > budget.depth:
            raise WireError(f"data nested deeper than {budget.depth} levels")
        self.nodes += 1
        if self.nodes > budget.nodes:
            raise WireError(f"a message of more than {budget.nodes} items")
        if budget.seconds is not None and self.nodes % 1024 == 0 and \
                time.monotonic() > budget.seconds:
            raise WireError("decoding the message ran past the call's time limit")

    def take(self, elements: int, size: int) -> None:
        self.elements += elements
        self.bytes += size
        if self.elements > self.budget.elements:
            raise WireError(f"a message of more than {self.budget.elements} tensor elements")
        if self.bytes > self.budget.bytes:
            raise WireError(f"a message that decodes to more than {self.budget.bytes} bytes")
_LENGTH = struct.Struct(">Q")


class WireError(RuntimeError):
    """A message that is not plain data, too large or truncated (the other side broke the rules)."""


class Handle:
    """The grader's name for an object that lives in the sandbox (only its number crosses)."""

    __slots__ = ("number",)

    def __init__(self, number: int) -> None:
        self.number = number


def _plain_tensor(value: torch.Tensor) -> torch.Tensor:
    if value.layout != torch.strided:
        raise WireError(f"only dense tensors cross the sandbox, got layout {value.layout}")
    value = value.detach().cpu()
    if type(value) is not torch.Tensor:  # a Parameter or any subclass: its data only
        value = value.as_subclass(torch.Tensor)
    return value.contiguous()


def encode(value, handle_of=None, depth: int = 0):
    """A tree of tagged plain data; objects become handles through ``handle_of(obj) -> int``."""
    if depth > _DEPTH:
        raise WireError(f"data nested deeper than {_DEPTH} levels")
    if value is None:
        return ("v", None)
    for kind in (bool, int, float, str):  # bool first: it is an int; subclasses lose their class
        if isinstance(value, kind):
            return ("v", kind(value))
    if isinstance(value, torch.Tensor):
        return ("t", _plain_tensor(value))
    if isinstance(value, torch.dtype):
        return ("dtype", str(value).removeprefix("torch."))
    if isinstance(value, Handle):
        return ("h", int(value.number))
    if isinstance(value, tuple):  # named tuples too: their fields, in order
        return ("T", [encode(item, handle_of, depth + 1) for item in value])
    if isinstance(value, list):
        return ("L", [encode(item, handle_of, depth + 1) for item in value])
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return ("D", [[str(key), encode(item, handle_of, depth + 1)] for key, item in value.items()])
    if handle_of is None:
        raise WireError(f"cannot send a {type(value).__name__}: only plain data crosses")
    return ("h", int(handle_of(value)))


def _checked_tensor(value: torch.Tensor, spent: _Spent) -> torch.Tensor:
    """``value`` as a dense CPU tensor, its dense size charged to the budget before any copy."""
    if type(value) is not torch.Tensor and not isinstance(value, torch.nn.Parameter):
        raise WireError(f"only plain tensors cross the sandbox, got {type(value).__name__}")
    if value.layout != torch.strided or value.device.type != "cpu" or value.is_quantized:
        raise WireError(f"only dense CPU tensors cross the sandbox, got layout {value.layout} "
                        f"on {value.device}")
    elements = math.prod(int(n) for n in value.shape)
    spent.take(elements, elements * value.element_size())
    return _plain_tensor(value)


def decode(tree, object_of=None, budget: Budget | None = None):
    """The plain data a tagged tree describes; a handle becomes ``object_of(number)``.

    Raises :class:`WireError` for anything but the tags :func:`encode` writes, and as soon as the
    tree would decode to more than ``budget`` allows (:class:`Budget`'s defaults if None)."""
    return _decode(tree, object_of, _Spent(budget or Budget()), 0)


def _decode(tree, object_of, spent: _Spent, depth: int):
    spent.node(depth)
    if not (type(tree) in (tuple, list) and len(tree) == 2 and type(tree[0]) is str):
        raise WireError("malformed message")
    tag, body = tree
    if tag == "v" and (body is None or type(body) in (bool, int, float, str)):
        if type(body) is str:
            spent.take(0, len(body))
        elif type(body) is int:
            spent.take(0, body.bit_length() // 8)
        return body
    if tag == "t" and isinstance(body, torch.Tensor):
        return _checked_tensor(body, spent)
    if tag == "dtype" and type(body) is str and body in _DTYPES:
        return _DTYPES[body]
    if tag == "h" and type(body) is int:
        return Handle(body) if object_of is None else object_of(body)
    if tag in ("T", "L") and type(body) is list:
        items = [_decode(item, object_of, spent, depth + 1) for item in body]
        return tuple(items) if tag == "T" else items
    if tag == "D" and type(body) is list:
        result = {}
        for pair in body:
            spent.node(depth + 1)
            if not (type(pair) is list and len(pair) == 2 and type(pair[0]) is str):
                raise WireError("malformed message (a dict entry)")
            spent.take(0, len(pair[0]))
            result[pair[0]] = _decode(pair[1], object_of, spent, depth + 1)
        return result
    raise WireError(f"malformed message (tag {str(tag)[:20]!r})")


def dumps(message: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    return buffer.getvalue()


def _check_archive(data: bytes) -> None:
    """Refuse, before ``torch.load`` reads it, a frame that is not ``torch.save``'s plain zip: a
    compressed record (a zip bomb), records larger than the frame, or a large pickle."""
    if data[:4] != b"PK\x03\x04":  # not a zip: torch.load would read the legacy format
        raise WireError("not a plain-data message (not torch.save's zip format)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            records = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise WireError(f"not a plain-data message ({type(error).__name__})") from None
    if len(records) > 100_000:
        raise WireError("a message of too many records")
    total = 0
    for record in records:
        if record.compress_type != zipfile.ZIP_STORED or record.compress_size != record.file_size:
            raise WireError("a message with a compressed record (only torch.save's stored "
                            "records cross)")
        total += record.file_size
        if record.filename.endswith("data.pkl") and record.file_size > MAX_PICKLE:
            raise WireError(f"a message whose structure is over {MAX_PICKLE} bytes")
    if total > len(data):
        raise WireError("a message whose records are larger than the message")


def loads(data: bytes) -> dict:
    _check_archive(data)
    try:
        message = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as error:  # the restricted unpickler refused it, or it is garbage
        raise WireError(f"not a plain-data message ({type(error).__name__})") from None
    if type(message) is not dict or not all(type(key) is str for key in message):
        raise WireError("a message must be a dict with string keys")
    return message


def write_frame(fd: int, message: dict) -> None:
    data = dumps(message)
    if len(data) > MAX_FRAME:
        raise WireError(f"message of {len(data)} bytes is over the limit of {MAX_FRAME}")
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd: int, size: int, wait) -> bytes:
    chunks, left = [], size
    while left:
        wait()
        chunk = os.read(fd, min(left, 2**20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, wait=lambda: None) -> dict:
    """One message from ``fd``; ``wait()`` runs before each read (it may raise on a deadline)."""
    (size,) = _LENGTH.unpack(_read_exactly(fd, _LENGTH.size, wait))
    if size > MAX_FRAME:
        raise WireError(f"message of {size} bytes is over the limit of {MAX_FRAME}")
    return loads(_read_exactly(fd, size, wait))
