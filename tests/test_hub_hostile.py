"""The class hub against a hostile student (issue 38): real Unix users, a real hub, Chromium.

``python -m course_tools hub`` starts JupyterHub on 127.0.0.1 for a class of real Unix users
(created here, removed afterwards), as ``tests/test_hub_browser.py`` does; each test is one
attack a student made, through their own login, and what must refuse it. Skips as
``test_hub_browser.py`` does, naming what is missing.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from .hub_helpers import require_hub, running_hub

pytestmark = [pytest.mark.system, pytest.mark.slow]  # tests/conftest.py: the system tier
require_hub()  # skips naming what is missing; fails under CI

STUDENTS = {f"hubx{os.getpid() % 10000}a": "en", f"hubx{os.getpid() % 10000}b": "zh-CN"}
SERVER_TIMEOUT_MS = 240_000
# each student's bounds in this hub (small, so that the tests reach them quickly)
MEMORY_GIB, PROCESSES, CPUS, KERNELS = 2, 256, 1.0, 2
SUBMISSIONS = 3  # the submit service's quota per student here


@pytest.fixture(scope="module")
def hub():
    with running_hub(STUDENTS, "--memory-per-student", str(MEMORY_GIB),
                     "--processes-per-student", str(PROCESSES), "--cpus-per-student", str(CPUS),
                     "--kernels-per-student", str(KERNELS),
                     "--submissions-per-student", str(SUBMISSIONS)) as running:
        yield running.url, running.hub_dir, running.passwords


def _log_in(browser, url: str, name: str, password: str):
    """A browser context logged in as ``name`` whose server is running (the lab left)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(f"/user/{name}/lab"), timeout=SERVER_TIMEOUT_MS)
    page.goto("about:blank")  # the lab's scripts would only take CPU from here on
    return context, page


def _xsrf(context, url: str, name: str) -> dict:
    (token,) = [c["value"] for c in context.cookies(f"{url}/user/{name}/")
                if c["name"] == "_xsrf"]
    return {"Content-Type": "application/json", "X-XSRFToken": token}


# nbgrader's server extensions' pages (formgrader, course_list, assignment_list,
# validate_assignment): none may exist in a student's server
NBGRADER_PAGES = ("formgrader", "formgraders", "assignments", "assignments/validate",
                  "assignments/fetch", "create_assignment")


def test_a_students_server_runs_no_grading_extension_and_none_of_their_config(browser, hub):
    """Cause 1: the student saves configuration files in ~/course (nbgrader's, Jupyter's) whose
    code would run as the student outside the sandbox, then opens nbgrader's pages: none exists,
    no file ran; the lab, the contents API and the one sandboxed kernel still serve."""
    url, _, passwords = hub
    name = next(iter(STUDENTS))
    context, page = _log_in(browser, url, name, passwords[name])
    marker = Path(f"/tmp/hubx-config-ran-{os.getpid()}")
    marker.unlink(missing_ok=True)
    code = f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\n"
    headers = _xsrf(context, url, name)
    for config in ("nbgrader_config.py", "jupyter_config.py", "jupyter_server_config.py",
                   "jupyter_notebook_config.py", "ipython_config.py"):
        body = json.dumps({"type": "file", "format": "text", "content": code})
        saved = page.request.put(f"{url}/user/{name}/api/contents/{config}", data=body,
                                 headers=headers)
        assert saved.status in (200, 201), (config, saved.status, saved.text())
    try:
        for path in NBGRADER_PAGES:
            response = page.request.get(f"{url}/user/{name}/{path}")
            assert response.status == 404, (path, response.status, response.text()[:300])
        specs = page.request.get(f"{url}/user/{name}/api/kernelspecs")
        assert specs.status == 200 and set(specs.json()["kernelspecs"]) == {"python3"}, \
            specs.text()[:500]
        assert "course sandbox" in specs.json()["kernelspecs"]["python3"]["spec"]["display_name"]
        assert page.request.get(f"{url}/user/{name}/lab").status == 200
        assert not marker.exists(), f"a student's config file ran: {marker.read_text()}"
    finally:
        marker.unlink(missing_ok=True)
        context.close()



def _processes_of(user: str) -> dict[int, str]:
    """{pid: command line} of every process of ``user``."""
    import pwd

    uid, found = pwd.getpwnam(user).pw_uid, {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


def _groups_of(pid: int) -> dict[str, str]:
    groups = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            groups[controller] = path
    return groups


def _kernels(user: str) -> list[int]:
    """The student's running kernels: the IPython processes inside their sandboxes (a refused
    launcher never starts one)."""
    return [pid for pid, command in _processes_of(user).items()
            if "bwrap" not in command.split(" ", 1)[0] and (
                "kernel inner" in command  # which then becomes IPython's kernel
                or "ipykernel_launcher -f /kernel/kernel.json" in command)]


def _memory(user: str) -> dict:
    """The student's memory group's peak use and failures (cgroup v1), for messages."""
    folders = list(Path("/sys/fs/cgroup/memory").rglob(f"lectures-student-{user}"))
    return {f.name: (f / "memory.max_usage_in_bytes").read_text().strip() + " peak, "
            + (f / "memory.failcnt").read_text().strip() + " failures" for f in folders
            if (f / "memory.failcnt").exists()}


def _run_in_kernel(user: str, kernel_id: str, code: str, timeout: float = 120) -> str:
    """Execute ``code`` in the student's kernel (as root, with its connection file); stdout."""
    import pwd

    from jupyter_client import BlockingKernelClient

    record = pwd.getpwnam(user)
    files = [folder / f"kernel-{kernel_id}.json" for folder in (
        Path("/run/lectures-kernels") / str(record.pw_uid),  # the hub's ipc folder (cause 5)
        Path(record.pw_dir) / ".local/share/jupyter/runtime")]
    client = BlockingKernelClient()
    client.load_connection_file(str(next((f for f in files if f.exists()), files[0])))
    client.start_channels()
    try:
        client.wait_for_ready(timeout=timeout)
        out = []
        reply = client.execute_interactive(code, timeout=timeout, output_hook=lambda m: out.append(
            m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
        if reply["content"].get("ename") == "KernelNotStarted":  # refused: at the cap
            raise RuntimeError(reply["content"]["evalue"])
        assert reply["content"]["status"] == "ok", reply["content"]
        return "".join(out)
    finally:
        client.stop_channels()


FORKED_MEMORY = """
import os, time
children = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        block = b"\\x01" * ({mib} * 2**20)  # every page written
        time.sleep(3)
        os._exit(0)
    children.append(pid)
print([os.waitpid(pid, 0)[1] & 0x7F for pid in children])
"""


def test_a_students_server_and_kernels_are_bounded_together_by_a_group_root_made(browser, hub):
    """Cause 3: one student's server and every kernel it starts share one cgroup that root
    made (memory, processes, CPU): a cell that forks holds at most the student's memory (it
    held 7.2 GiB against a 6 GiB per-process limit), and at most KERNELS kernels run at once."""
    url, _, passwords = hub
    name = list(STUDENTS)[1]
    context, page = _log_in(browser, url, name, passwords[name])
    try:
        headers = _xsrf(context, url, name)
        kernels = []
        for _ in range(KERNELS + 2):
            started = page.request.post(f"{url}/user/{name}/api/kernels", headers=headers,
                                        data=json.dumps({"name": "python3"}))
            assert started.status == 201, (started.status, started.text()[:300])
            kernels.append(started.json()["id"])
        most, end = 0, time.monotonic() + 90
        while time.monotonic() < end:  # the refused ones stay, refusing (never a kernel)
            most = max(most, len(_kernels(name)))
            time.sleep(0.5)
        assert most == KERNELS == len(_kernels(name)), (most, _kernels(name), _memory(name))

        # every process of the student: in the student's group, with the hub's bounds
        processes = _processes_of(name)
        assert any("jupyterhub.singleuser" in c for c in processes.values()), processes
        for pid in processes:
            groups = _groups_of(pid)
            for controller in ("pids", "memory", "cpu"):
                assert groups[controller].endswith(f"/lectures-student-{name}"), (pid, groups)
        pid = next(iter(processes))
        pids_dir = Path("/sys/fs/cgroup/pids") / _groups_of(pid)["pids"].lstrip("/")
        memory_dir = Path("/sys/fs/cgroup/memory") / _groups_of(pid)["memory"].lstrip("/")
        if pids_dir.is_dir():  # cgroup v1 (v2: one folder, memory.max)
            assert int((pids_dir / "pids.max").read_text()) == PROCESSES
            assert int((memory_dir / "memory.limit_in_bytes").read_text()) == MEMORY_GIB * 2**30

        # a cell that forks: the children's memory counts against the student's bound
        out = None
        for kernel in kernels:  # one of those that got a slot
            try:
                out = _run_in_kernel(name, kernel, FORKED_MEMORY.format(mib=1200), timeout=60)
                break
            except (RuntimeError, OSError, TimeoutError):
                continue
        assert out is not None, "no kernel of the student's answered"
        killed = json.loads(out.strip().splitlines()[-1])
        assert 9 in killed, f"two children held 2 x 1200 MiB in a {MEMORY_GIB} GiB bound: {out}"
    finally:
        context.close()


def _service_peak_kib() -> int:
    """The submit service's peak resident memory (VmHWM, KiB)."""
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"serve-submit" in (entry / "cmdline").read_bytes():
                status = (entry / "status").read_text()
                return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1))
        except (OSError, AttributeError):
            continue
    raise AssertionError("the submit service is not running")


def _crafted_notebook(mib: float) -> str:
    """A valid notebook of ``mib`` MiB made of empty cells: tens of times its size to parse."""
    cell = {"cell_type": "raw", "metadata": {}, "source": ""}
    count = int(mib * 2**20 / len(json.dumps(cell, separators=(",", ":"))))
    return json.dumps({"cells": [cell] * count, "metadata": {}, "nbformat": 4,
                       "nbformat_minor": 4}, separators=(",", ":"))


def _submit(page, url: str) -> str:
    """Submit the first assignment (notebook 01) through the page: review, then confirm."""
    page.goto(f"{url}/services/course-submit/")
    page.click("#submit")
    page.click("#confirm")
    page.locator("#message").wait_for(timeout=180_000)
    return page.locator("#message").inner_text()


def test_the_submit_service_parses_a_crafted_notebook_apart_and_keeps_a_quota(browser, hub):
    """Cause 4: a crafted notebook (many empty cells) takes tens of times its size and many
    seconds of CPU to parse; the root service parses it in a process of its own, under a memory
    and a time limit, off its event loop: the service's own memory does not grow with it and
    another page answers meanwhile. A notebook over the grader's size is refused by name, and
    a student's submissions stop at the class's quota."""
    url, _, passwords = hub
    name = next(iter(STUDENTS))
    context, page = _log_in(browser, url, name, passwords[name])
    headers = _xsrf(context, url, name)
    # the crafted notebook in place of notebook 01: the assignment the page submits first
    crafted = f"{url}/user/{name}/api/contents/student/01_self_attention.ipynb"
    original = page.request.get(crafted + "?content=1&format=text&type=file").json()["content"]

    def save(text: str) -> None:
        saved = page.request.put(crafted, headers=headers, data=json.dumps(
            {"type": "file", "format": "text", "content": text}))
        assert saved.status in (200, 201), (saved.status, saved.text()[:300])

    try:
        save(_crafted_notebook(10))
        submitter = context.new_page()
        submitter.goto(f"{url}/services/course-submit/")
        submitter.click("#submit")
        before = _service_peak_kib()
        submitter.click("#confirm", no_wait_after=True)
        time.sleep(3)  # the service is reading and parsing now
        started = time.monotonic()
        other = page.request.get(f"{url}/services/course-submit/")
        waited = time.monotonic() - started
        assert other.status == 200 and waited < 5, f"another page waited {waited:.1f} s"
        submitter.locator("#message").wait_for(timeout=180_000)
        message = submitter.locator("#message").inner_text()
        # parsed within the limits and kept, or refused naming the limit it ran into
        assert message.startswith("submitted") or "needs more than" in message \
            or "took longer than" in message, message
        accepted, first = int(message.startswith("submitted")), message
        grown = (_service_peak_kib() - before) / 1024
        assert grown < 100, f"the service grew by {grown:.0f} MiB parsing a 10 MiB notebook"

        save(_crafted_notebook(17))  # over the grader's 16 MiB
        message = _submit(submitter, url)
        assert message.startswith("not submitted") and "larger than" in message, message

        save(original)
        messages = [_submit(submitter, url) for _ in range(SUBMISSIONS + 1 - accepted)]
        assert all(m.startswith("submitted") for m in messages[:-1]), (accepted, messages)
        assert messages[-1].startswith("not submitted") and "the most this class allows" in \
            messages[-1], (accepted, messages)
        print(f"the crafted notebook: {first}")
    finally:
        context.close()
