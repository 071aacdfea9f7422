"""What the browser tests share: Debian's Chromium driven by Playwright, offline.

``tests/test_browser.py`` (the lab, the site) and ``tests/test_explorer_browser.py`` (the attention
explorer) import these, so the launch flags, the skip-or-fail rule and the offline route are
written once.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
# Without the background-networking flags Chromium keeps trying hosts this offline machine refuses.
LAUNCH_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def require_playwright():
    """Playwright's sync API, or skip the calling test module (fail in CI, which must run it)."""
    if not CHROMIUM.exists():
        reason = "Chromium not found: install Debian's package with `apt-get install chromium`"
        if os.environ.get("CI"):
            raise RuntimeError(f"{reason} (.ci/run installs it; CI must run the browser tests)")
        pytest.skip(reason, allow_module_level=True)
    return pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]'")


def launch(sync_api):
    """Yield a headless Chromium for a module's tests (the ``browser`` fixture in conftest.py)."""
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


def only_local(page, refused: list[str]) -> None:
    """Let the page load file:, data:, about: and blob: addresses only; note every other one."""

    def route_local(route):
        if route.request.url.split(":", 1)[0] in ("file", "data", "about", "blob"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", route_local)
