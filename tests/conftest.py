"""Shared test setup: a headless plotting backend and one CPU thread (tests are tiny)."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402

# setuptools before anything imports the standard library's distutils: pip's internals (read by
# tests/test_packaging.py) import it, and nbgrader imports setuptools, whose distutils shim then
# fails its own assertion when both land on one pytest worker.
import setuptools  # noqa: E402,F401
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    torch.manual_seed(0)
    yield


# Property-based tests (hypothesis): few examples, derandomized, so `make test` is deterministic
# and fast on 2 cores. HYPOTHESIS_PROFILE=thorough runs many more random examples locally.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "course", max_examples=25, derandomize=True, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "course"))


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium (tests/browser_helpers.py); skips or fails as the helpers say."""
    from .browser_helpers import launch, require_playwright

    yield from launch(require_playwright())
