"""The class hub's kernels against a hostile student (issue 38, causes 5, 9 and 10).

Real Unix users, a real hub (``running_hub`` of tests/hub_helpers.py): one student's live
work (the messages of their kernel) reaches no classmate; the hub's state is root's alone while
the students' kernels still start; a refused kernel is not restarted in a loop; no kernel outlives
its server or the hub. The last test stops the hub.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from .hub_helpers import run_as, running_hub
from .test_hub_hostile import _kernels, _log_in, _processes_of, _run_in_kernel, _xsrf

pytestmark = [pytest.mark.system, pytest.mark.slow]  # tests/conftest.py: the system tier

STUDENTS = {f"hubk{os.getpid() % 10000}a": "en", f"hubk{os.getpid() % 10000}b": "zh-CN"}
VICTIM, ATTACKER = STUDENTS


@pytest.fixture(scope="module")
def hub():
    with running_hub(STUDENTS, "--kernels-per-student", "1") as running:
        yield running


def _running(user: str) -> dict[int, str]:
    """The user's processes that still run (a zombie waits only for its parent to reap it)."""
    def state(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return "gone"

    return {pid: c for pid, c in _processes_of(user).items() if state(pid) not in ("Z", "gone")}


def _start_kernel(browser, hub, name: str) -> tuple[object, str]:
    """(the student's browser context, a new kernel's id), its launcher started."""
    context, page = _log_in(browser, hub.url, name, hub.passwords[name])
    started = page.request.post(f"{hub.url}/user/{name}/api/kernels",
                                headers=_xsrf(context, hub.url, name),
                                data=json.dumps({"name": "python3"}))
    assert started.status == 201, (started.status, started.text()[:300])
    return context, started.json()["id"]


def _wait_ready(user: str, kernel: str, seconds: float = 240) -> None:
    """Until the kernel answers a cell (a client of its own, without the server's manager, takes
    a heartbeat that is not there yet for a kernel that died)."""
    end = time.monotonic() + seconds
    while True:
        try:
            assert "up" in _run_in_kernel(user, kernel, "print('up')", timeout=60)
            return
        except RuntimeError:
            if time.monotonic() > end:
                raise
            time.sleep(2)


# Run as the attacker: subscribe to every 127.0.0.1 TCP port the victim listens on (iopub
# publishes to any subscriber) and to every socket file of theirs it can find; print what came.
EAVESDROP = r"""
import glob, os, sys, time, zmq
victim_uid, seconds = int(sys.argv[1]), float(sys.argv[2])
context, subscribers = zmq.Context(), []
ports = []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).read().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[7]) == victim_uid:  # listening, the victim's
            ports.append(int(fields[1].rsplit(":", 1)[1], 16))
paths = glob.glob(f"/run/lectures-kernels/{victim_uid}/*") + glob.glob(
    "/home/*/.local/share/jupyter/runtime/*")
for address in [f"tcp://127.0.0.1:{p}" for p in ports] + [f"ipc://{p}" for p in paths]:
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(address)
    subscribers.append(socket)
print(f"ready: {len(ports)} port(s), {len(paths)} path(s)", flush=True)
poller, heard = zmq.Poller(), []
for socket in subscribers:
    poller.register(socket, zmq.POLLIN)
end = time.monotonic() + seconds
while time.monotonic() < end:
    for socket, _ in poller.poll(200):
        heard.append(b" ".join(socket.recv_multipart()).decode(errors="replace"))
print("heard:", len(heard))
print("\n".join(heard))
"""


def test_a_classmate_cannot_read_a_students_kernel_channels(browser, hub):
    """Cause 5: a classmate with a shell subscribed to the victim's kernel's iopub on 127.0.0.1
    and read their cells and outputs. The channels are Unix sockets in a 0700 folder of the
    victim's: nothing the attacker can reach carries the victim's messages; the kernel works."""
    import pwd

    context, kernel = _start_kernel(browser, hub, VICTIM)
    try:
        _wait_ready(VICTIM, kernel)
        uid = pwd.getpwnam(VICTIM).pw_uid
        script = Path(hub.hub_dir).parent / "eavesdrop.py"
        script.write_text(EAVESDROP)
        os.chmod(script, 0o644)
        attacker = subprocess.Popen(
            ["runuser", "-u", ATTACKER, "--", str(hub.python), str(script), str(uid), "25"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first = attacker.stdout.readline()
        assert first.startswith("ready"), first + attacker.stdout.read()
        time.sleep(2)  # the subscriptions reach the publishers
        marker = f"secret-answer-{os.getpid()}"
        for _ in range(3):
            assert marker in _run_in_kernel(VICTIM, kernel, f"print({marker!r})")
            time.sleep(1)
        heard = attacker.communicate(timeout=60)[0]
        assert marker not in heard, f"a classmate read the victim's kernel: {first}{heard[:2000]}"
        connection = next(Path("/run/lectures-kernels", str(uid)).glob(f"kernel-{kernel}.json"))
        assert json.loads(connection.read_text())["transport"] == "ipc"
        assert stat.S_IMODE(connection.parent.stat().st_mode) & 0o777 == 0o700  # (+ sticky)
        assert run_as(ATTACKER, "ls", str(connection.parent)).returncode != 0
    finally:
        context.close()


def test_the_hubs_state_is_roots_alone_and_the_kernel_still_starts(hub):
    """Cause 9: HUBDIR was 0711 with jupyterhub.sqlite and class.json 0644 (every user name and
    server port, readable by name). Now HUBDIR is 0700 and the hub's files are made under umask
    077; what the students' servers read (the kernelspec) is in HUBDIR-public/, and their
    kernels start (the previous test ran one; the umask of the students' servers is theirs)."""
    hub_dir = Path(hub.hub_dir)
    assert stat.S_IMODE(hub_dir.stat().st_mode) == 0o700
    for name in ("jupyterhub.sqlite", "class.json", "passwords.json", "jupyterhub_cookie_secret"):
        mode = stat.S_IMODE((hub_dir / name).stat().st_mode)
        assert mode & 0o077 == 0, (name, oct(mode))
    spec = hub_dir.with_name(f"{hub_dir.name}-public") / "jupyter/kernels/python3/kernel.json"
    for student in STUDENTS:
        for name in ("class.json", "jupyterhub.sqlite", "jupyterhub_config.py"):
            assert run_as(student, "cat", str(hub_dir / name)).returncode != 0, (student, name)
        assert run_as(student, "cat", str(spec)).returncode == 0, student  # the one kernel


def _refusals(log: Path) -> int:
    return log.read_text(errors="replace").count("lectures-sandbox kernel: not started")


def test_a_refused_kernel_says_why_and_is_not_restarted_in_a_loop(browser, hub):
    """Cause 10: a kernel the launcher refuses (here: the student's one kernel already runs)
    exited at once; Jupyter's server restarted it, refused each time. Now it is refused once,
    stays listed, and a cell run in it answers with the reason."""
    context, page = _log_in(browser, hub.url, VICTIM, hub.passwords[VICTIM])
    try:
        if not _kernels(VICTIM):  # one kernel that holds the student's one slot
            page.request.post(f"{hub.url}/user/{VICTIM}/api/kernels", data=json.dumps(
                {"name": "python3"}), headers=_xsrf(context, hub.url, VICTIM))
        end = time.monotonic() + 120
        while not _kernels(VICTIM) and time.monotonic() < end:
            time.sleep(0.5)
        assert _kernels(VICTIM), "the student's first kernel did not start"
        before = _refusals(hub.log)
        started = page.request.post(f"{hub.url}/user/{VICTIM}/api/kernels",
                                    headers=_xsrf(context, hub.url, VICTIM),
                                    data=json.dumps({"name": "python3"}))
        assert started.status == 201, (started.status, started.text()[:300])
        refused = started.json()["id"]
        time.sleep(40)  # Jupyter's restarter polls every 3 s and restarts up to 5 times
        assert _refusals(hub.log) - before == 1, hub.log.read_text()[-3000:]
        listed = page.request.get(f"{hub.url}/user/{VICTIM}/api/kernels").json()
        assert refused in [k["id"] for k in listed], listed
        with pytest.raises(RuntimeError, match="not started: you already run 1 kernel"):
            _run_in_kernel(VICTIM, refused, "print('never runs')", timeout=60)
    finally:
        context.close()


def test_no_kernel_outlives_its_server_or_the_hub(browser, hub):
    """Cause 10: kernels (launcher, bubblewrap, IPython) kept running after their student's
    server or the hub stopped. Killed server: its kernels end with it (the launcher watches its
    parent). The hub's shutdown: every process of every student ends (the hub stops each
    server, and kills whatever is left in the student's cgroup). Stops the hub."""
    import pwd

    context, kernel = _start_kernel(browser, hub, ATTACKER)
    try:
        _wait_ready(ATTACKER, kernel)
    finally:
        context.close()
    (server,) = [pid for pid, command in _processes_of(ATTACKER).items()
                 if "jupyterhub.singleuser" in command]
    os.kill(server, signal.SIGKILL)
    end = time.monotonic() + 15
    while _running(ATTACKER) and time.monotonic() < end:
        time.sleep(0.5)
    assert not _running(ATTACKER), _running(ATTACKER)

    assert _kernels(VICTIM), "the victim's kernel from the earlier tests is gone"
    os.killpg(hub.server.pid, signal.SIGTERM)  # as an instructor stops the hub
    hub.server.wait(timeout=90)
    end = time.monotonic() + 30
    while any(_running(name) for name in STUDENTS) and time.monotonic() < end:
        time.sleep(0.5)
    left = {name: _running(name) for name in STUDENTS}
    assert not any(left.values()), f"left after the hub stopped: {left}"
    for name in STUDENTS:  # nor their sockets
        assert not Path("/run/lectures-kernels", str(pwd.getpwnam(name).pw_uid)).exists()
