"""Run a command as on a fresh machine: bubblewrap, Chromium, the CJK fonts and the hub proxy hidden.

The system packages the course's tests use but pip cannot install (tests/conftest.py,
``SYSTEM_PACKAGES``) are hidden for one command inside a bubblewrap mount namespace: the ``bwrap``,
``chromium`` and ``configurable-http-proxy`` executables are covered by ``/dev/null`` (no longer
executable, so not on PATH)
and every folder holding a CJK font is covered by an empty tmpfs, for fontconfig and matplotlib
alike (matplotlib gets a fresh cache). Nothing outside the command changes.

    python tests/fresh_machine.py make test      # the README's command, as a new user runs it
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The font files lectures_lib.fonts looks for (its _CJK_FILE) and fontconfig's own CJK families.
CJK_FILE = re.compile(r"(CJK|NotoSansSC|NotoSansTC|SourceHan|wqy-|msyh|msjh|simhei|PingFang|"
                      r"Hiragino)", re.IGNORECASE)
FONT_ROOTS = ("/usr/share/fonts", "/usr/local/share/fonts", str(Path.home() / ".fonts"),
              str(Path.home() / ".local/share/fonts"))


def cjk_font_folders() -> list[str]:
    """Every folder that holds a CJK font file."""
    folders = set()
    for root in FONT_ROOTS:
        for path in Path(root).rglob("*") if Path(root).is_dir() else ():
            if path.is_file() and CJK_FILE.search(path.name):
                folders.add(str(path.parent))
    return sorted(folders)


def hidden_command(command: list[str], mplconfigdir: str) -> list[str]:
    """``command`` wrapped in bubblewrap with the three packages hidden."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise RuntimeError("hiding the system packages needs bubblewrap itself: apt-get install bubblewrap")
    wrapped = [bwrap, "--dev-bind", "/", "/", "--die-with-parent"]
    for executable in ("bwrap", "chromium", "configurable-http-proxy"):
        for folder in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin", "/bin"]:
            path = Path(folder) / executable
            if path.is_file():
                wrapped += ["--ro-bind", "/dev/null", str(path.resolve())]
    for folder in cjk_font_folders():
        wrapped += ["--tmpfs", folder]
    return [*wrapped, "env", "-u", "CI", f"MPLCONFIGDIR={mplconfigdir}",
            "XDG_CACHE_HOME=" + mplconfigdir, *command]


def run_hidden(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="fresh-machine-") as cache:
        return subprocess.run(hidden_command(command, cache), **kwargs)


if __name__ == "__main__":
    sys.exit(run_hidden(sys.argv[1:]).returncode)
