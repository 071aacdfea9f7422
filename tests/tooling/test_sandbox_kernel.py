"""nbgrader's sandboxed kernel harms nothing on the host (issue 33, item 5), one cause at a time:

1. its only folder that is not a sized memory mount, ``/kernel`` (the connection file and the
   sockets), was a host folder bound writable: a notebook wrote 768 MiB onto the host's disk
   there. It is now a tmpfs of :data:`~course_tools.grading.sandbox.kernel.KERNEL_FOLDER_BYTES`;
2. the relay forwarded every byte of output to nbgrader, which keeps it all (200 MiB of output
   grew nbgrader's process to ~1 GiB): a cell's output beyond
   :data:`~course_tools.grading.sandbox._kernel_output.CELL_OUTPUT_BYTES` is dropped with a note, an
   error still arrives as an error (nbgrader grades by it), and the kernel keeps serving.

Each test drives the real kernel through ``jupyter_client``, as nbgrader does (a full
``nbgrader autograde`` through this kernel is tests/tooling/test_nbgrader_sandbox.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from course_tools.grading.sandbox import kernel as sandbox_kernel

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

# skips naming the package without it, fails under CI (tests/conftest.py)
needs_sandbox = pytest.mark.system_package("bubblewrap")
MiB = 2**20


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A started ``lectures-sandbox`` kernel and a client, in a scratch folder (not a course)."""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    kernels = tmp_path_factory.mktemp("kernels")
    assert sandbox_kernel.main(["--install", "--prefix", str(kernels)]) == 0
    specs = KernelSpecManager(kernel_dirs=[str(kernels / "share" / "jupyter" / "kernels")])
    manager = KernelManager(kernel_name=sandbox_kernel.KERNEL_NAME, kernel_spec_manager=specs)
    root = Path(__file__).resolve().parents[2]
    manager.start_kernel(cwd=str(tmp_path_factory.mktemp("notebook")),
                         env=dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1"))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=180)
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run(client, code: str) -> tuple[list[dict], dict]:
    """Run ``code``; returns the iopub messages nbgrader would keep (outputs) and the reply."""
    outputs: list[dict] = []

    def keep(message: dict) -> None:
        if message["msg_type"] in ("stream", "display_data", "execute_result", "error"):
            outputs.append(message)

    reply = client.execute_interactive(code, output_hook=keep, timeout=240)
    return outputs, reply["content"]


def _text(outputs: list[dict]) -> str:
    return "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")


@needs_sandbox
def test_the_kernel_folder_holds_no_more_than_its_size(kernel):
    outputs, reply = _run(kernel, """
import os
written = 0
try:
    with open("/kernel/filler", "wb") as file:
        for _ in range(32):
            file.write(b"x" * 2**20)
            file.flush()
            written += 2**20
except OSError as error:
    print("STOPPED", type(error).__name__, error.errno)
os.sync()
print("WRITTEN", written)
print("SOCKETS", sorted(name for name in os.listdir("/kernel") if name.startswith("socket")))
""")
    text = _text(outputs)
    assert reply["status"] == "ok", (reply, text)
    assert "STOPPED OSError 28" in text, text  # ENOSPC: the mount is full, not the host's disk
    written = int(text.split("WRITTEN ")[1].split()[0])
    assert written < 1 * MiB and written <= sandbox_kernel.KERNEL_FOLDER_BYTES, text
    assert "socket-1" in text, "the kernel's sockets live in its sized /kernel"


CELL_OUTPUT_BYTES = 4 * MiB  # the cap the README and _kernel_output.CELL_OUTPUT_BYTES state


@needs_sandbox
def test_a_cells_output_reaches_nbgrader_only_up_to_its_cap(kernel):
    outputs, reply = _run(kernel, f"""
for _ in range({12 * CELL_OUTPUT_BYTES // MiB}):
    print("x" * ({MiB} - 1))
""")
    text = _text(outputs)
    assert reply["status"] == "ok"
    kept = sum(len(m["content"].get("text", "")) for m in outputs)
    assert CELL_OUTPUT_BYTES // 2 <= kept <= CELL_OUTPUT_BYTES + 4096, (
        kept, [(m["content"].get("name"), len(m["content"].get("text", ""))) for m in outputs])
    assert "output was cut" in text and "4 MiB" in text.split("output was cut")[1], text[-300:]
    # One print far past the cap, then an error: nbgrader still sees the cell fail.
    outputs, reply = _run(kernel, f"print('y' * {2 * CELL_OUTPUT_BYTES})\n"
                                  f"raise ValueError('v' * {2 * CELL_OUTPUT_BYTES})")
    assert reply["status"] == "error"
    errors = [m for m in outputs if m["msg_type"] == "error"]
    assert len(errors) == 1 and errors[0]["content"]["ename"] == "ValueError", outputs
    assert sum(len(str(m["content"])) for m in outputs) <= CELL_OUTPUT_BYTES + 2 * 2**16
    # The next cell starts a fresh allowance, and the kernel still answers.
    outputs, reply = _run(kernel, "print('still here')")
    assert reply["status"] == "ok" and _text(outputs) == "still here\n", outputs
    from course_tools.grading.sandbox._kernel_output import CELL_OUTPUT_BYTES as documented

    assert documented == CELL_OUTPUT_BYTES


@needs_sandbox
def test_signed_errors_from_the_notebook_count_toward_the_cap(kernel):
    """Issue 38, cause 8, through the real kernel and its relay: the notebook signs error
    messages with its own session (8,000 made a 253 MiB autograded notebook). Past the cap,
    one reaches nbgrader; the cell's output stays within its allowance."""
    count, size = 300, 40_000  # 12 MB of errors, three times a cell's cap
    outputs, reply = _run(kernel, f"""
kernel = get_ipython().kernel
for i in range({count}):
    kernel.session.send(kernel.iopub_socket, "error",
                        {{"ename": "AssertionError", "evalue": str(i) + "e" * {size},
                          "traceback": []}}, parent=kernel.get_parent("shell"))
print("sent")
""")
    assert reply["status"] == "ok", reply
    errors = [m for m in outputs if m["msg_type"] == "error"]
    kept = sum(len(json.dumps(m["content"])) for m in outputs)
    assert kept <= CELL_OUTPUT_BYTES + 2 * 2**16, (len(errors), kept)
    assert 1 <= len(errors) < CELL_OUTPUT_BYTES // size + 2, len(errors)
    # the next cell starts a fresh allowance, and the kernel still answers
    outputs, reply = _run(kernel, "print('still here')")
    assert reply["status"] == "ok" and _text(outputs) == "still here\n", outputs


# ------------------------------------------------------------------------------------------
# The cap on its own: what it writes is signed as the kernel's messages are
# ------------------------------------------------------------------------------------------


def _frames(session, kind: str, content: dict, parent: dict) -> list[bytes]:
    return session.serialize(session.msg(kind, content=content, parent=parent), ident=[b"topic"])


DIRTY = ("def dirty():\n"
         "    rollup = open('/proc/self/smaps_rollup').read().splitlines()[1:]\n"
         "    return int(dict(l.split(':', 1) for l in rollup)['Private_Dirty'].split()[0]) * 1024\n")


@needs_sandbox
def test_the_kernel_gives_back_what_a_cell_freed(kernel):
    """After each cell the kernel returns the pages the cell freed (the launcher loads
    ``_kernel_memory``): a class holds one kernel per active student (benchmarks/class_sizing.py)."""
    _run(kernel, DIRTY + "before = dirty()")
    outputs, reply = _run(kernel, "blocks = [bytearray(4000) for _ in range(50_000)]\n"
                                  "pin = bytearray(4000)  # the heap's top stays in use\n"
                                  "held = dirty() - before\n"
                                  "del blocks")
    assert reply["status"] == "ok", outputs
    outputs, reply = _run(kernel, "print(held, dirty() - before)")
    held, after = map(int, _text(outputs).split())
    assert held > 150 * MiB, "the cell held its ~200 MB"
    assert after < held / 4, f"the freed pages stayed in the kernel: {after / MiB:.0f} MiB"


@needs_sandbox
def test_the_launcher_maps_no_torch(kernel):
    """The launcher (outside the sandbox, one per kernel) relays messages: it loads no torch
    (tests/test_light_processes.py checks its imports; this, the running process)."""
    launchers = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"course_tools.grading.sandbox.kernel" in command and b"launch" in command
                and kernel.connection_file.encode() in command):
            launchers.append(entry)
    assert len(launchers) == 1, launchers
    maps = (launchers[0] / "maps").read_text()
    assert "libzmq" in maps, "the scan reads the launcher's mappings"
    assert "libtorch" not in maps


def test_the_cap_signs_what_it_writes_and_lets_status_and_errors_through():
    from jupyter_client.session import Session

    from course_tools.grading.sandbox._kernel_output import OutputCap, Requests

    key = b"a-connection-key"
    kernel, nbgrader = Session(key=key), Session(key=key)
    requests = Requests()
    cap = OutputCap(key, "hmac-sha256", cell_bytes=10_000, kernel_bytes=25_000,
                    requests=requests)

    def sent(kind: str) -> dict:  # a request nbgrader sent on shell (the relay notes it)
        message = nbgrader.msg(kind, content={"code": ""})
        requests.record(nbgrader.serialize(message))
        return message

    request = sent("execute_request")

    def through(kind: str, content: dict, parent=request) -> list[dict]:
        messages = cap.filter(_frames(kernel, kind, content, parent))
        return [nbgrader.deserialize(nbgrader.feed_identities(frames)[1]) for frames in messages]

    first = through("stream", {"name": "stdout", "text": "a" * 6000})
    assert [m["content"]["text"] for m in first] == ["a" * 6000]
    (cut,) = through("stream", {"name": "stdout", "text": "b" * 6000})  # crosses the cap: cut
    assert cut["content"]["text"].startswith("b" * 1000) and "output was cut" in \
        cut["content"]["text"] and len(cut["content"]["text"]) < 4000
    assert through("stream", {"name": "stdout", "text": "c"}) == []  # past it: nothing
    assert through("display_data", {"data": {"text/plain": "d" * 20_000}, "metadata": {}}) == []
    (status,) = through("status", {"execution_state": "idle"})
    assert status["content"] == {"execution_state": "idle"}
    # A new request starts a fresh allowance for its cell, within the notebook's.
    following = sent("execute_request")
    kept = through("stream", {"name": "stdout", "text": "f" * 9000}, following)
    assert [m["content"]["text"] for m in kept] == ["f" * 9000]
    (note,) = through("stream", {"name": "stdout", "text": "g" * 9000},
                      sent("execute_request"))
    assert "this notebook's output passed" in note["content"]["text"]
    # Past both caps an error still arrives, as an error, shortened.
    (error,) = through("error", {"ename": "ValueError", "evalue": "e" * 10**6,
                                 "traceback": ["t" * 10**6]})
    assert error["msg_type"] == "error" and error["content"]["ename"] == "ValueError"
    assert error["content"]["evalue"].startswith("e" * 1000)
    assert len(json.dumps(error["content"])) < 2**16 + 1000
    # A forged or foreign message (no delimiter, not JSON) is not forwarded.
    assert cap.filter([b"topic", b"not a message"]) == []


def test_past_the_cap_a_request_gets_one_error_and_errors_count():
    """Issue 38, cause 8: 8,000 signed ``error`` messages made a 253 MiB autograded notebook,
    since errors were never counted nor stopped. Every message counts; past the caps a request
    gets one error (and one note, one busy, one idle), a parent nbgrader never sent nothing."""
    from jupyter_client.session import Session

    from course_tools.grading.sandbox._kernel_output import ERROR_BYTES, OutputCap, Requests

    key = b"a-connection-key"
    kernel, nbgrader = Session(key=key), Session(key=key)
    requests = Requests()
    cell_bytes, kernel_bytes = 200_000, 500_000
    cap = OutputCap(key, "hmac-sha256", cell_bytes=cell_bytes, kernel_bytes=kernel_bytes,
                    requests=requests)

    def sent() -> dict:
        message = nbgrader.msg("execute_request", content={"code": ""})
        requests.record(nbgrader.serialize(message))
        return message

    def through(kind: str, content: dict, parent: dict) -> list[dict]:
        messages = cap.filter(_frames(kernel, kind, content, parent))
        return [nbgrader.deserialize(nbgrader.feed_identities(frames)[1]) for frames in messages]

    def error(number: int) -> dict:
        return {"ename": "AssertionError", "evalue": f"{number} " + "e" * 10_000,
                "traceback": ["t" * 10_000]}

    def flood(parent: dict, count: int = 2000) -> list[dict]:
        return [m for i in range(count) for m in through("error", error(i), parent)]

    first = sent()
    got = flood(first)
    size = sum(len(json.dumps(m["content"])) for m in got)
    assert size <= cell_bytes + ERROR_BYTES + 1000, (len(got), size)  # was every one of them
    assert 1 <= sum("shortened" in m["content"]["evalue"] for m in got) <= 1, len(got)
    # errors counted toward the cell's allowance: its output is now cut
    (cut,) = through("stream", {"name": "stdout", "text": "x"}, first)  # the note, once
    assert "output was cut" in cut["content"]["text"], cut
    assert through("stream", {"name": "stdout", "text": "x"}, first) == []
    # statuses: one busy and one idle past the cap, then nothing
    states = [m["content"]["execution_state"] for state in ("busy", "idle", "idle", "busy")
              for m in through("status", {"execution_state": state}, first)]
    assert states == ["busy", "idle"], states
    # interleaving another parent does not give the request a fresh allowance of errors
    forged = kernel.msg("execute_request", content={"code": ""})  # never sent by nbgrader
    for _ in range(3):
        through("stream", {"name": "stdout", "text": "y"}, forged)
        assert through("error", error(0), first) == []
    # a request nbgrader sends later: its own fresh cell allowance within the kernel's, then
    # past the kernel's cap, one error each; a parent nbgrader never sent gets nothing
    for _ in range(5):
        flood(sent(), 200)
    assert cap.kernel_used > kernel_bytes - 50_000
    assert flood(forged, 50) == []
    last = sent()
    assert len(flood(last, 500)) == 1
    (idle,) = [m for state in ("idle", "idle") for m in
               through("status", {"execution_state": state}, last)]
    assert idle["content"]["execution_state"] == "idle"
    assert through("status", {"execution_state": "idle"}, forged) == []
    total = cap.kernel_used
    assert total <= kernel_bytes + 8 * (ERROR_BYTES + 5000), total


def test_the_relay_connects_only_to_a_socket_itself(tmp_path):
    """The relay reaches the kernel's sockets through /proc/<pid>/root/kernel, where an absolute
    symlink resolves on the host's side: it connects only to a socket that is not a link (and,
    once connected, never reconnects: RECONNECT_IVL -1)."""
    import socket

    real = tmp_path / "socket-1"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(real))
    server.listen()
    try:
        assert sandbox_kernel._kernel_socket_ready(str(real), seconds=2)
        link = tmp_path / "socket-2"
        link.symlink_to(real)
        with pytest.raises(RuntimeError, match="not a socket"):
            sandbox_kernel._kernel_socket_ready(str(link), seconds=2)
        assert not sandbox_kernel._kernel_socket_ready(str(tmp_path / "absent"), seconds=0.2)
    finally:
        server.close()
