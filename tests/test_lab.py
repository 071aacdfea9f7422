"""`make lab` works: JupyterLab starts the way the Makefile starts it and serves the notebooks."""

import json
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request

from lectures_lib.lab import NOTEBOOKS, lab_command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def test_makefile_lab_target_uses_the_launcher():
    makefile = (NOTEBOOKS.parent / "Makefile").read_text()
    assert "-m lectures_lib.lab" in makefile


def test_jupyterlab_serves_the_course_notebooks(tmp_path):
    port, token = _free_port(), secrets.token_hex(16)
    command = lab_command(port=port, open_browser=False, token=token)
    log = open(tmp_path / "lab.log", "w+")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/api/contents?token={token}"
        deadline, listing = time.monotonic() + 90, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                listing = _get_json(url)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        log.seek(0)
        assert listing is not None, f"JupyterLab did not answer on port {port}:\n{log.read()[-3000:]}"
        served = {item["name"] for item in listing["content"] if item["type"] == "notebook"}
        expected = {p.name for p in NOTEBOOKS.glob("*.ipynb")}
        assert expected, "notebooks/ holds no notebook"
        assert expected <= served, f"not served: {sorted(expected - served)}"
        # Unauthenticated requests are refused: the token protects the server.
        try:
            _get_json(f"http://127.0.0.1:{port}/api/contents")
            raise AssertionError("the server answered without a token")
        except urllib.error.HTTPError as error:
            assert error.code == 403
        # The lab front end itself is served.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5) as page:
            assert page.status == 200
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
