"""Chinese characters in plots: the installed CJK font is used, or one hint says what to install."""

import re
import warnings
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import nbformat
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


# --- the notebooks, executed where no CJK font is installed ---------------------------------------

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("0*.ipynb"))
# Run by the kernel before the notebook: every CJK font hidden from matplotlib, as on a machine
# (a hosted notebook) that has none.
HIDE_CJK = '''
import re
import matplotlib.font_manager as fm
_cjk = re.compile(r"CJK|Han Sans|WenQuanYi|PingFang|YaHei|JhengHei|SimHei|Hiragino|Heiti|Unicode MS|Noto Sans [ST]C", re.I)
fm.fontManager.ttflist = [f for f in fm.fontManager.ttflist if not _cjk.search(f.name)]
_find = fm.findSystemFonts
fm.findSystemFonts = lambda *a, **k: [p for p in _find(*a, **k) if not _cjk.search(p) and "wqy" not in p.lower()]
'''


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_names_a_font_family_by_hand(path):
    """A family that is not installed makes matplotlib log `findfont: ... not found` at every
    text it draws (3,040 lines in one run of 07): the notebooks call use_cjk_font (directly or
    through lectures_lib.plotting), which adds a CJK font only when one is installed."""
    nb = nbformat.read(path, as_version=4)
    by_hand = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
               and re.search(r"rcParams\[\s*[\"']font\.(family|sans-serif)", cell.source)]
    assert not by_hand, f"{path.name}: cells {by_hand} set the font family by hand"


@pytest.mark.slow  # executes 07 in a kernel
def test_07_executed_without_a_cjk_font_prints_no_findfont_warning(tmp_path):
    """07 draws Chinese titles in many plots; executed where no CJK font exists it prints no
    `findfont` line (the course's helper turns the missing glyphs into one hint)."""
    import os

    from nbclient import NotebookClient

    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-hide-cjk.py").write_text(HIDE_CJK)
    path = next(p for p in NOTEBOOKS if p.stem.startswith("07"))
    nb = nbformat.read(path, as_version=4)
    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")}
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.km = client.create_kernel_manager()
    client.start_new_kernel(env=env)
    client.start_new_kernel_client()
    try:
        client.execute(cleanup_kc=False, reset_kc=False)
    finally:
        client._cleanup_kernel()
    printed = "".join(output.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                      for output in cell.outputs if output.get("output_type") == "stream")
    assert "No Chinese (CJK) font found" in printed, "the kernel really had no CJK font"
    assert printed.count("findfont") == 0, printed.count("findfont")
    assert printed.count("No Chinese (CJK) font found") == 1, "one hint, not one per glyph"
