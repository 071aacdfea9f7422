"""Chinese characters in plots: a CJK font found and used as a fallback, or one clear hint.

matplotlib's default font (DejaVu Sans) has no Chinese glyphs: a title such as ``注意力权重`` or a
heatmap labelled with the characters of 机器学习 would show empty boxes and a warning per glyph.
:func:`use_cjk_font` (run when :mod:`lectures_lib.plotting` is imported) looks for an installed
CJK font and appends it to matplotlib's font families, so Latin text keeps the default font and
every Chinese glyph falls back to the CJK one (matplotlib >= 3.6 falls back glyph by glyph). When
none is installed, the per-glyph warnings become one hint that says what to install.

Debian/Ubuntu: ``sudo apt-get install fonts-noto-cjk`` (what ``.ci/run`` installs); macOS and
Windows ship one (PingFang, Microsoft YaHei). matplotlib caches the font list: after installing a
font, delete ``~/.cache/matplotlib`` once or restart the kernel.
"""

from __future__ import annotations

import re
import warnings

__all__ = ["CJK_FONTS", "find_cjk_font", "use_cjk_font", "HINT"]

# In order of preference: Noto/Source Han (Simplified, then Traditional), then the systems' own.
CJK_FONTS = (
    "Noto Sans CJK SC", "Noto Sans CJK TC", "Noto Sans CJK JP", "Noto Sans SC", "Noto Sans TC",
    "Source Han Sans SC", "Source Han Sans TC", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
    "PingFang SC", "PingFang TC", "Hiragino Sans GB", "Heiti SC", "Microsoft YaHei",
    "Microsoft JhengHei", "SimHei", "Arial Unicode MS",
)
HINT = ("No Chinese (CJK) font found, so Chinese characters in this plot show as boxes "
        "(未找到中文字体，图中的中文显示为方框). Install one: Debian/Ubuntu `sudo apt-get install "
        "fonts-noto-cjk`, then delete ~/.cache/matplotlib and restart the kernel.")
_CJK_FILE = re.compile(r"(NotoSans(Mono)?CJK|NotoSansSC|NotoSansTC|SourceHanSans|wqy-|msyh|msjh|"
                       r"simhei|PingFang|Hiragino)", re.IGNORECASE)
_GLYPH_MISSING = re.compile(r"Glyph \d+ .*missing from (current )?font")
_state = {"font": None, "configured": False, "hinted": False}


def find_cjk_font() -> str | None:
    """The name of the first installed font of :data:`CJK_FONTS`, or None."""
    from matplotlib import font_manager

    def first() -> str | None:
        installed = {entry.name for entry in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in installed), None)

    found = first()
    if found is None:  # matplotlib's cached font list predates the font: look on disk once
        for path in font_manager.findSystemFonts():
            if _CJK_FILE.search(path):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):
                    continue
        found = first()
    return found


def _show_warning(original):
    def show(message, category, filename, lineno, file=None, line=None):
        if _GLYPH_MISSING.search(str(message)):
            if not _state["hinted"]:
                _state["hinted"] = True
                original(UserWarning(HINT), UserWarning, filename, lineno, file, line)
            return
        original(message, category, filename, lineno, file, line)

    show._lectures_cjk_hint = True
    return show


def use_cjk_font() -> str | None:
    """Use an installed CJK font as matplotlib's fallback; returns its name (None: the hint is set).

    Idempotent: a second call does nothing.
    """
    if _state["configured"]:
        return _state["font"]
    import matplotlib as mpl

    _state["configured"] = True
    font = _state["font"] = find_cjk_font()
    if font is not None:
        # A generic family ("sans-serif") resolves to one font; a list of families falls back
        # glyph by glyph: Latin from the usual font, Chinese from the CJK one.
        families = [name for name in mpl.rcParams["font.family"] if name != font]
        mpl.rcParams["font.family"] = [*families, font]
    elif not getattr(warnings.showwarning, "_lectures_cjk_hint", False):
        warnings.showwarning = _show_warning(warnings.showwarning)
    return font
