"""A kernel that was not started, telling why: what the sandboxed kernel's launcher serves in
the class hub instead of exiting when it refuses to start a kernel (the student's kernels are at
their cap, no sandbox can be made).

A launcher that exits at once is a kernel that died: Jupyter's server restarts it (five times),
each restart refused again, and then the student's lab asks for a new kernel, refused again, in
a loop that only the server's log explains. This process stays instead, holding no slot and
running no code: it binds the connection file's channels, answers ``kernel_info`` (the reason
is its banner), answers every other request with an error that names the reason (an executed
cell shows it as its output), echoes heartbeats, and ends on ``shutdown_request`` or when its
parent ends (:func:`~course_tools.grading.sandbox.kernel.watch_parent`).
"""

from __future__ import annotations

ERROR_NAME = "KernelNotStarted"


def channel_address(info: dict, channel: str) -> str:
    """The ZeroMQ address of ``channel`` in the connection file ``info`` (``tcp``: a port on
    ``ip``; ``ipc``: the Unix socket ``<ip>-<port>``, as jupyter_client names it)."""
    if info.get("transport", "tcp") == "ipc":
        return f"ipc://{info['ip']}-{info[f'{channel}_port']}"
    return f"tcp://{info['ip']}:{info[f'{channel}_port']}"


def _reply_content(kind: str, reason: str) -> dict:
    if kind == "kernel_info":
        return {"status": "ok", "protocol_version": "5.3", "implementation": "lectures-refused",
                "implementation_version": "1", "banner": reason,
                "language_info": {"name": "python", "version": "", "mimetype": "text/x-python",
                                  "file_extension": ".py"}}
    if kind == "comm_info":
        return {"status": "ok", "comms": {}}
    if kind in ("shutdown", "interrupt"):
        return {"status": "ok", "restart": False}
    return {"status": "error", "ename": ERROR_NAME, "evalue": reason, "traceback": [reason],
            "execution_count": 0}


def serve_refusal(info: dict, reason: str) -> int:
    """Serve the channels of the connection file ``info`` as a kernel that says ``reason``
    until it is shut down; returns 1 (the kernel did not start)."""
    import zmq
    from jupyter_client.session import Session

    session = Session(key=str(info.get("key", "")).encode(),
                      signature_scheme=str(info.get("signature_scheme", "hmac-sha256")),
                      username="kernel")
    context = zmq.Context()
    kinds = {"shell": zmq.ROUTER, "control": zmq.ROUTER, "stdin": zmq.ROUTER,
             "iopub": zmq.PUB, "hb": zmq.REP}
    sockets = {}
    for channel, kind in kinds.items():
        sockets[channel] = context.socket(kind)
        sockets[channel].setsockopt(zmq.LINGER, 0)
        sockets[channel].setsockopt(zmq.MAXMSGSIZE, 2**20)  # requests only: nothing runs here
        sockets[channel].bind(channel_address(info, channel))
    poller = zmq.Poller()
    for channel in ("shell", "control", "hb"):
        poller.register(sockets[channel], zmq.POLLIN)
    iopub = sockets["iopub"]
    while True:
        for socket, _ in poller.poll():
            if socket is sockets["hb"]:
                socket.send(socket.recv())
                continue
            try:
                idents, message = session.recv(socket, mode=0)
            except (ValueError, KeyError, zmq.ZMQError):
                continue  # unsigned or malformed: dropped, as a kernel drops it
            kind = message["header"]["msg_type"].removesuffix("_request")
            session.send(iopub, "status", {"execution_state": "busy"}, parent=message)
            content = _reply_content(kind, reason)
            if kind == "execute":
                session.send(iopub, "error", {key: content[key] for key in (
                    "ename", "evalue", "traceback")}, parent=message)
            session.send(socket, f"{kind}_reply", content, parent=message, ident=idents)
            session.send(iopub, "status", {"execution_state": "idle"}, parent=message)
            if kind == "shutdown":
                context.destroy(linger=0)
                return 1
