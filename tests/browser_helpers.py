"""What the browser tests share: Debian's Chromium driven by Playwright, offline.

``tests/test_browser.py`` (the lab, the site) and ``tests/test_explorer_browser.py`` (the attention
explorer) import these, so the launch flags, the skip-or-fail rule and the offline route are
written once.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# On PATH, or Debian's usual place when PATH lacks it (an executable file either way).
_FOUND = shutil.which("chromium") or shutil.which("chromium", path="/usr/bin")
CHROMIUM = Path(_FOUND) if _FOUND else None
# Without the background-networking flags Chromium keeps trying hosts this offline machine refuses.
LAUNCH_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def require_playwright():
    """Playwright's sync API, or skip the calling test module (fail in CI, which must run it)."""
    from .conftest import require_system_package

    require_system_package("chromium", module_level=True)  # skips, naming it (fails under CI)
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
