"""What crosses between the grader and a sandboxed submission: plain data, never objects.

A message is a tree of tensors, numbers, strings, ``None``, lists, tuples and dicts with string
keys, written with ``torch.save`` and read with ``torch.load(weights_only=True)`` (PyTorch's
restricted unpickler: it builds tensors and containers, never an arbitrary class, so a message
cannot run code in the grader). :func:`decode` then rebuilds the tree from a fixed set of tags and
refuses anything else, so what the grader ends up holding is plain data whatever bytes arrived.

Anything else the submission's side holds (a function, a model, a cache) travels as a *handle*:
an opaque number the grader can only send back (``("h", n)``); the object stays in the sandbox.
Frames are an 8-byte length and the payload; a frame over :data:`MAX_FRAME` bytes is refused.
"""

from __future__ import annotations

import io
import os
import struct

import torch

__all__ = ["MAX_FRAME", "WireError", "Handle", "encode", "decode", "dumps", "loads",
           "write_frame", "read_frame"]

MAX_FRAME = 256 * 2**20  # bytes: far more than any probe's answer, far less than the grader's memory
_DEPTH = 32
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


def decode(tree, object_of=None, depth: int = 0):
    """The plain data a tagged tree describes; a handle becomes ``object_of(number)``."""
    if depth > _DEPTH:
        raise WireError(f"data nested deeper than {_DEPTH} levels")
    if not (isinstance(tree, (tuple, list)) and len(tree) == 2 and isinstance(tree[0], str)):
        raise WireError("malformed message")
    tag, body = tree
    if tag == "v" and (body is None or type(body) in (bool, int, float, str)):
        return body
    if tag == "t" and isinstance(body, torch.Tensor):
        return _plain_tensor(body)
    if tag == "dtype" and isinstance(body, str) and isinstance(getattr(torch, body, None),
                                                               torch.dtype):
        return getattr(torch, body)
    if tag == "h" and type(body) is int:
        return Handle(body) if object_of is None else object_of(body)
    if tag in ("T", "L") and isinstance(body, list):
        items = [decode(item, object_of, depth + 1) for item in body]
        return tuple(items) if tag == "T" else items
    if tag == "D" and isinstance(body, list) and all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in body
    ):
        return {key: decode(item, object_of, depth + 1) for key, item in body}
    raise WireError(f"malformed message (tag {tag!r:.20})")


def dumps(message: dict) -> bytes:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    return buffer.getvalue()


def loads(data: bytes) -> dict:
    try:
        message = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as error:  # the restricted unpickler refused it, or it is garbage
        raise WireError(f"not a plain-data message ({type(error).__name__})") from None
    if not isinstance(message, dict) or not all(isinstance(key, str) for key in message):
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
