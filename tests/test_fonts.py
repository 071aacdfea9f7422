"""Chinese characters in plots: the installed CJK font is used, or one hint says what to install."""

import warnings

import matplotlib as mpl
import matplotlib.pyplot as plt
import pytest

from lectures_lib import fonts

from .conftest import require_system_package

CHINESE = "注意力权重 · 機器學習"


def _draw(title: str) -> None:
    fig, ax = plt.subplots()
    ax.set_title(title)
    ax.set_xlabel("key j")
    fig.canvas.draw()
    plt.close(fig)


@pytest.fixture()
def fresh(monkeypatch):
    """use_cjk_font as on a fresh import, and matplotlib's settings restored afterwards."""
    monkeypatch.setitem(fonts._state, "configured", False)
    monkeypatch.setitem(fonts._state, "font", None)
    monkeypatch.setitem(fonts._state, "hinted", False)
    with mpl.rc_context():
        yield


def test_an_installed_cjk_font_draws_chinese_without_missing_glyphs(fresh):
    require_system_package("fonts-noto-cjk")  # skips without it, naming it (fails under CI)
    font = fonts.use_cjk_font()
    assert font in fonts.CJK_FONTS and mpl.rcParams["font.family"][-1] == font
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _draw(CHINESE)
    missing = [str(w.message) for w in caught if "missing from" in str(w.message)]
    assert not missing, missing
    assert fonts.use_cjk_font() == font  # idempotent


def test_without_a_cjk_font_one_hint_replaces_the_glyph_warnings(fresh, monkeypatch):
    shown = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest, **kw: shown.append(message))
    monkeypatch.setattr(fonts, "find_cjk_font", lambda: None)
    monkeypatch.setitem(mpl.rcParams, "font.family", ["DejaVu Sans"])
    assert fonts.use_cjk_font() is None
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        _draw(CHINESE)
        _draw("自注意力")
        warnings.warn("an unrelated warning", stacklevel=1)  # other warnings pass through untouched
    texts = [str(m) for m in shown]
    assert texts.count(fonts.HINT) == 1, texts
    assert not any("missing from" in t for t in texts), texts
    assert "an unrelated warning" in texts
    assert "fonts-noto-cjk" in fonts.HINT
