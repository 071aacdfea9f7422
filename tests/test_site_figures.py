"""Figures everyone can read: every picture of the site has a text description (alt text), the
course's colour maps are ones colour-blind readers can tell apart, and the site has a dark theme.

The real course's site is checked in tests/test_explorer_browser.py (every <img> of every page
has alt text; the page turns dark under an emulated dark scheme)."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_tools.publish.site import build_site, figure_descriptions

ROOT = Path(__file__).resolve().parents[1]
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f80f000001010000186dd4900000000049454e44ae426082"
)).decode()


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.alts = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.alts.append(dict(attrs).get("alt"))


def image_alts(page: str) -> list[str | None]:
    """The alt attribute of every <img> of an HTML page (None where it has none), unescaped."""
    parser = _Images()
    parser.feed(page)
    return parser.alts


def _plot_cell(source, images=1, **metadata):
    cell = new_code_cell(source, metadata=metadata)
    cell.outputs = [new_output("display_data", data={"image/png": PIXEL, "text/plain": "<Figure>"})
                    for _ in range(images)]
    return cell


def test_alt_text_comes_from_the_metadata_or_the_titles_and_the_section():
    cells = [
        new_markdown_cell("# 01\n\n## 3. Masks as *pictures*"),
        _plot_cell('fig.suptitle("local mask (window 2)")\nax.set_title(f"head {h}")'),
        _plot_cell("plot()", alt="A causal mask: the lower triangle is dark."),
        _plot_cell("plot()\nplot()", images=2, alt=["first", "second"]),
        _plot_cell("plot()"),
    ]
    notebook = new_notebook(cells=cells)
    assert figure_descriptions(notebook.cells, 1) == [
        "Figure in section “3. Masks as pictures”: local mask (window 2); head …"
    ]
    assert figure_descriptions(notebook.cells, 2) == ["A causal mask: the lower triangle is dark."]
    assert figure_descriptions(notebook.cells, 3) == ["first", "second"]
    assert figure_descriptions(notebook.cells, 4) == ["Figure in section “3. Masks as pictures”"]


def test_the_built_pages_carry_the_alt_text_and_a_dark_theme(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "README.md").write_text(
        "# Course\n\n| notebook | what |\n| --- | --- |\n| [01 one](notebooks/01_one.ipynb) | x |\n"
    )
    cells = [new_markdown_cell("## A heading"), _plot_cell('plt.title("a <b>bold</b> title")'),
             _plot_cell("x", alt='say "hello" & <go>')]
    nbformat.write(new_notebook(cells=cells), tmp_path / "notebooks" / "01_one.ipynb")
    before = (tmp_path / "notebooks" / "01_one.ipynb").read_bytes()
    build_site(tmp_path / "site", root=tmp_path)
    page = (tmp_path / "site" / "01_one.html").read_text()
    assert image_alts(page) == ["Figure in section “A heading”: a <b>bold</b> title",
                                'say "hello" & <go>']
    assert "@media (prefers-color-scheme: dark)" in page
    assert (tmp_path / "notebooks" / "01_one.ipynb").read_bytes() == before, "source untouched"


# Colour maps a reader with a red-green (or any common) colour-vision deficiency can read:
# perceptually uniform, single-hue or blue-red; never the rainbow or red-green maps.
SAFE_COLOUR_MAPS = {"viridis", "cividis", "magma", "inferno", "plasma", "Blues", "Greys", "Purples",
                    "Oranges", "gray", "gray_r", "Greys_r", "RdBu", "RdBu_r", "PuOr", "PuOr_r",
                    "BrBG", "viridis_r", "cividis_r"}
UNSAFE = {"jet", "rainbow", "hsv", "RdYlGn", "RdYlGn_r", "RdGn", "PiYG", "gist_rainbow", "nipy_spectral"}


def _sources():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                yield path.name, "".join(cell["source"])
    for path in sorted((ROOT / "lectures_lib").rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def test_every_colour_map_of_the_course_is_colour_blind_safe():
    """One scan of every notebook code cell and library file (it finds the maps the course
    uses, so it cannot pass by finding none)."""
    used, unsafe = set(), []
    for where, source in _sources():
        for name in re.findall(r"""cmap\s*[=:]\s*["']([\w.]+)["']""", source):
            used.add(name)
            if name in UNSAFE or name not in SAFE_COLOUR_MAPS:
                unsafe.append(f"{where} uses the colour map {name!r}")
    assert used, "no colour map found: the scan reads nothing"
    assert not unsafe, "; ".join(unsafe) + ": use viridis, cividis or a single-hue map"
