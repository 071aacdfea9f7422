"""Memory and CPU per active student on the class hub: PSS from /proc/PID/smaps_rollup.

    sudo PY/bin/python benchmarks/class_sizing.py [--students 3] [--json benchmarks/class_sizing.json]

Run as root with the Python of an environment where the wheel is installed with its ``class``
extra, one the students' accounts can execute (README, "A class on JupyterHub"; not a clone's
.venv under /root). It starts ``python -m course_tools hub`` for N new Unix students (en, zh-CN,
zh-TW in turn), logs each in over HTTP (the hub starts their server), opens notebook 01 in a
session of the course's sandboxed kernel (the one kernel a student's server starts) and runs
every code cell of 01 with its solutions, as a student who did the whole notebook; then, with
every student's server and kernel still running, it reads the proportional set size (PSS:
each shared page divided among the processes that map it) and the private memory (USS) of
every process each student's Unix user runs, by role (their Jupyter server; the kernel's
launcher and bubblewrap; the kernel), and the CPU seconds of their processes for the run and
for 10 s of idling after it. Then it stops the hub and removes the students (``hub
remove-class --remove-homes``). Measure on a quiet machine; the hub's own processes (hub,
proxy, services) are counted once, apart.

PSS with N students shares the libraries among N; as N grows a student's PSS falls towards
their USS (what they hold alone), so both are written: the 100-student estimate uses
USS + shared / 100.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime
import json
import os
import platform
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import nbformat
import requests

LANGUAGES = ("en", "zh-CN", "zh-TW")
FOLDERS = {"en": "student", "zh-CN": "student/zh-Hans", "zh-TW": "student/zh-Hant"}
NOTEBOOK = "01_self_attention"
MIB = 2**20


def _ports(count: int = 4) -> int:
    for base in range(30000 + os.getpid() % 3000 * 4, 60000, 4):
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no four free ports")


def _role(command: str) -> str:
    if "ipykernel_launcher" in command or " kernel inner " in command:
        return "kernel"
    if "bwrap" in command.split(" ", 1)[0] or "sandbox.kernel launch" in command:
        return "launcher"
    return "server"


def _processes(uid: int) -> dict[int, str]:
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == uid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
    return found


def _rollup(pid: int) -> dict[str, int]:
    """Rss, Pss, USS (private clean + dirty) in bytes, from smaps_rollup."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0]) * 1024
    return {"rss": fields["Rss"], "pss": fields["Pss"],
            "uss": fields["Private_Clean"] + fields["Private_Dirty"]}


def _cpu_seconds(pids) -> float:
    total = 0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
    return total / os.sysconf("SC_CLK_TCK")


def _memory(uid: int) -> dict:
    by_role = {}
    for pid, command in _processes(uid).items():
        try:
            numbers = _rollup(pid)
        except (OSError, KeyError):
            continue
        role = by_role.setdefault(_role(command), {"rss": 0, "pss": 0, "uss": 0, "processes": 0})
        for key, value in numbers.items():
            role[key] += value
        role["processes"] += 1
    return by_role


def _log_in(url: str, name: str, password: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{url}/hub/login", timeout=30)
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text)
    data = {"username": name, "password": password, **({"_xsrf": xsrf.group(1)} if xsrf else {})}
    response = session.post(f"{url}/hub/login", data=data, timeout=300)
    response.raise_for_status()
    deadline = time.monotonic() + 300
    while True:  # until their server runs and its login (OAuth with the hub) set its cookies
        page = session.get(f"{url}/user/{name}/lab", timeout=300)
        if page.ok and page.url.startswith(f"{url}/user/{name}/lab") and any(
                c.name == "_xsrf" and c.path.startswith(f"/user/{name}") for c in session.cookies):
            return session
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: the server did not start ({page.status_code} {page.url})")
        time.sleep(2)


def _run_notebook(session, url: str, name: str, language: str, cells: list[str]) -> float:
    """Open 01 in a kernel session of the student's server (its REST API, with the student's
    login) and run every code cell; the wall seconds."""
    (xsrf,) = [c.value for c in session.cookies if c.name == "_xsrf"
               and c.path.startswith(f"/user/{name}")] or [None]
    body = {"path": f"{FOLDERS[language]}/{NOTEBOOK}.ipynb", "type": "notebook",
            "name": f"{NOTEBOOK}.ipynb", "kernel": {}}
    made = session.post(f"{url}/user/{name}/api/sessions", json=body, timeout=300,
                        headers={"X-XSRFToken": xsrf})
    if made.status_code != 201:
        raise RuntimeError(f"{name}: no kernel session ({made.status_code}): {made.text[:300]}; "
                           f"cookies {[(c.name, c.path) for c in session.cookies]}")
    kernel = made.json()["kernel"]["id"]
    cookies = "; ".join(f"{c.name}={c.value}" for c in session.cookies
                        if c.path == "/" or c.path.startswith(f"/user/{name}"))
    ws = f"{url.replace('http', 'ws', 1)}/user/{name}/api/kernels/{kernel}/channels"
    start = time.monotonic()
    asyncio.run(_execute(ws, {"Cookie": cookies}, cells, name))
    return time.monotonic() - start


async def _execute(ws_url: str, headers: dict, cells: list[str], name: str) -> None:
    """Every cell through the server's kernel websocket (JupyterLab's own route), in order."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    session = uuid.uuid4().hex
    connection = await websocket_connect(HTTPRequest(f"{ws_url}?session_id={session}",
                                                     headers=headers))
    try:
        for source in cells:
            msg_id = uuid.uuid4().hex
            await connection.write_message(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": name,
                           "session": session, "date": "", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": source, "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False,
                            "stop_on_error": True}}))
            while True:
                raw = await asyncio.wait_for(connection.read_message(), 900)
                if raw is None:
                    raise RuntimeError(f"{name}: the kernel's websocket closed")
                message = json.loads(raw) if isinstance(raw, str) else {}
                if (message.get("msg_type") == "execute_reply"
                        and message["parent_header"].get("msg_id") == msg_id):
                    break
            if message["content"]["status"] != "ok":
                raise RuntimeError(f"{name}: a cell failed: {message['content'].get('ename')}: "
                                   f"{message['content'].get('evalue')}\n{source[:300]}")
    finally:
        connection.close()


def _code_cells(python: str) -> list[str]:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([python, "-m", "course_tools", "source", NOTEBOOK, out], check=True,
                       capture_output=True)
        nb = nbformat.read(Path(out) / f"{NOTEBOOK}.ipynb", as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and c.source.strip()]


def measure(python: str, students: int, idle: float = 10.0) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="course-sizing-", dir="/tmp"))
    os.chmod(folder, 0o711)
    tag = f"size{os.getpid() % 10000}"
    names = {f"{tag}{i}": LANGUAGES[i % 3] for i in range(students)}
    (folder / "class.csv").write_text("username,language\n" + "".join(
        f"{n},{lang}\n" for n, lang in names.items()))
    port = _ports()
    url = f"http://127.0.0.1:{port}"
    log = (folder / "hub.log").open("w")
    hub = subprocess.Popen([python, "-m", "course_tools", "hub", "class.csv", "--dir", "hub",
                            "--port", str(port), "--create-users"], cwd=folder, stdout=log,
                           stderr=subprocess.STDOUT, start_new_session=True)
    rows = {}
    try:
        for _ in range(120):
            try:
                if requests.get(f"{url}/hub/login", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(1)
        with (folder / "hub" / "passwords.csv").open() as file:
            passwords = {row["username"]: row["password"] for row in csv.DictReader(file)}
        cells = _code_cells(python)
        sessions = {}
        for name, language in names.items():
            uid = pwd.getpwnam(name).pw_uid
            sessions[name] = _log_in(url, name, passwords[name])
            before = _cpu_seconds(_processes(uid))
            wall = _run_notebook(sessions[name], url, name, language, cells)
            rows[name] = {"language": language, "run_all_wall_s": round(wall, 1),
                          "run_all_cpu_s": round(_cpu_seconds(_processes(uid)) - before, 1)}
        before = {n: _cpu_seconds(_processes(pwd.getpwnam(n).pw_uid)) for n in names}
        time.sleep(idle)
        for name in names:
            uid = pwd.getpwnam(name).pw_uid
            rows[name]["idle_cpu_percent"] = round(
                100 * (_cpu_seconds(_processes(uid)) - before[name]) / idle, 2)
            rows[name]["memory_mib"] = {role: {k: round(v / MIB, 1) if k != "processes" else v
                                               for k, v in numbers.items()}
                                        for role, numbers in _memory(uid).items()}
        hub_pids = [int(p) for p in subprocess.run(["pgrep", "-g", str(hub.pid)],
                                                   capture_output=True, text=True).stdout.split()]
        hub_pss = sum(_rollup(pid)["pss"] for pid in hub_pids if Path(f"/proc/{pid}").exists())
    finally:
        os.killpg(hub.pid, signal.SIGTERM)
        try:
            hub.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
        log.close()
        for name in names:
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        time.sleep(2)
        subprocess.run([python, "-m", "course_tools", "hub", "remove-class", "hub",
                        "--remove-homes"], cwd=folder, capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
    return _summary(rows, hub_pss, python)


def _summary(rows: dict, hub_pss: int, python: str) -> dict:
    def total(row, key):
        return sum(role[key] for role in row["memory_mib"].values())

    n = len(rows)
    pss = sum(total(r, "pss") for r in rows.values()) / n
    uss = sum(total(r, "uss") for r in rows.values()) / n
    shared = pss - uss  # a student's part of the pages shared among the N students
    at_100 = uss + shared * n / 100  # the same shared pages divided among 100
    cpu = sum(r["run_all_cpu_s"] for r in rows.values()) / n
    versions = subprocess.run([python, "-c", "import torch, jupyterlab, jupyterhub; print("
                               "torch.__version__, jupyterlab.__version__, jupyterhub.__version__)"],
                              capture_output=True, text=True).stdout.split()
    return {
        "what": "PSS/USS per active student (server + kernel launcher + sandboxed kernel after "
                "running all of notebook 01), hub processes apart; benchmarks/class_sizing.py",
        "date": datetime.date.today().isoformat(),
        "machine": {"cores": os.cpu_count(), "memory_gib": round(
            os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
                    "kernel": platform.release(), "python": platform.python_version(),
                    "torch, jupyterlab, jupyterhub": versions},
        "students": n,
        "per_student": rows,
        "hub_processes_pss_mib": round(hub_pss / MIB, 1),
        "mean_pss_mib": round(pss, 1),
        "mean_uss_mib": round(uss, 1),
        "estimated_pss_mib_at_100_students": round(at_100, 1),
        "students_per_gib": round(1024 / at_100, 2),
        "students_on_64_gib": int((64 * 1024 - hub_pss / MIB) // at_100),
        "run_all_cpu_s": round(cpu, 1),
        "idle_cpu_percent": round(sum(r["idle_cpu_percent"] for r in rows.values()) / n, 2),
        # an active student who runs all of a notebook like 01 once every 10 minutes
        "students_per_core_at_one_run_all_per_10_min": round(600 / cpu, 1),
        "aim": {"students": 100, "memory_gib": 64, "pss_gib_per_student": 0.6,
                "met": at_100 <= 0.6 * 1024},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root: the hub creates the students' Unix users")
    if shutil.which("configurable-http-proxy") is None:
        parser.error("the hub's proxy is missing: npm install -g configurable-http-proxy")
    load = os.getloadavg()[0]
    result = measure(sys.executable, args.students)
    result["load_average_before"] = round(load, 2)  # other jobs inflate the wall times only
    text = json.dumps(result, indent=1, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
