"""`make site` (course_tools.publish.site): static pages that need no network, README first, syllabus nav.

Built here from a small repository made in a temporary folder; tests/test_browser.py opens a
page of the real course's site in Chromium (typeset math, a stored plot).
"""

import base64
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_tools.publish.site import MATHJAX, build_site, syllabus

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f80f000001010000186dd4900000000049454e44ae426082"
)).decode()
README = """# A tiny course

Start with [the first notebook](notebooks/01_first.ipynb); license in [LICENSE](LICENSE).

## Syllabus

| notebook | what |
| --- | --- |
| [01 first steps](notebooks/01_first.ipynb) | $\\sqrt{d_k}$ |
| [02 second steps](notebooks/02_second.ipynb) | more |
| 03 not written yet | later |
"""


def _notebook(path: Path, text: str) -> None:
    plot = new_code_cell("plot()")
    plot.outputs = [new_output("display_data", data={"image/png": PIXEL, "text/plain": "<Figure>"})]
    nbformat.write(new_notebook(cells=[new_markdown_cell(text), plot]), path)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    (root / "notebooks").mkdir()
    (root / "README.md").write_text(README)
    (root / "LICENSE").write_text("MIT License\n")
    _notebook(root / "notebooks" / "01_first.ipynb",
              "# 01\n\n$\\alpha$ [README](../README.md), [next](02_second.ipynb#part-2)")
    _notebook(root / "notebooks" / "02_second.ipynb", "# 02\n\n[back](01_first.ipynb)")
    _notebook(root / "notebooks" / "03_extra.ipynb", "# 03\n")
    out = tmp_path_factory.mktemp("site")
    written = build_site(out, root=root)
    return out, written


def test_readme_is_the_start_page_and_every_notebook_a_page(site):
    out, written = site
    assert [p.name for p in written] == [
        "index.html", "01_first.html", "02_second.html", "03_extra.html",
    ]
    assert "A tiny course" in (out / "index.html").read_text()


def test_syllabus_is_the_navigation_of_every_page(site):
    out, written = site
    for page in written:
        nav = re.search(r'<nav[^>]*class="course-nav".*?</nav>', page.read_text(), re.S)
        assert nav, f"{page.name} has no navigation bar"
        titles = re.findall(r">([^<]+)</a>", nav.group(0))
        assert titles == ["Start here", "01 first steps", "02 second steps", "03 extra"], titles
        current = re.findall(r'<a [^>]*class="current"[^>]*>', nav.group(0))
        assert len(current) == 1 and f'href="{page.name}"' in current[0], f"{page.name}: {current}"


def test_relative_links_point_at_pages_and_copied_files(site):
    out, _ = site
    first, home = (out / "01_first.html").read_text(), (out / "index.html").read_text()
    assert 'href="index.html"' in first and 'href="02_second.html#part-2"' in first
    assert 'href="01_first.html"' in home and 'href="files/LICENSE"' in home
    assert (out / "files" / "LICENSE").read_text() == "MIT License\n"
    for page in out.glob("*.html"):
        for target in re.findall(r'href="([^"#:]+)(?:#[^"]*)?"', page.read_text()):
            assert (out / target).exists(), f"{page.name} links to missing {target}"


def test_pages_load_nothing_from_the_network(site):
    out, _ = site
    for page in out.glob("*.html"):
        text = page.read_text()
        loaded = re.findall(r'<(?:script|img|link|iframe)\b[^>]*\b(?:src|href)="(https?:)?//', text)
        assert not loaded, f"{page.name} loads a resource from the network"
        assert "cdnjs" not in text and "cdn.jsdelivr" not in text, page.name
        assert f'src="{MATHJAX}?config=' in text, f"{page.name} does not use the local MathJax"
        assert "data:image/png;base64," in text, f"{page.name} lost its stored plot"
    assert (out / MATHJAX).is_file()
    config = next((out / MATHJAX).parent.glob("config/TeX-AMS-MML_HTMLorMML-full.js"))
    assert config.stat().st_size > 100_000
    fonts = list((out / MATHJAX).parent.glob("fonts/HTML-CSS/STIX-Web/woff/*.woff"))
    assert fonts, "MathJax's web fonts were not copied"


def test_the_real_readmes_syllabus_lists_the_notebooks_in_order():
    notebooks = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
    rows = syllabus((ROOT / "README.md").read_text(), notebooks)
    assert [path for _, path in rows] == notebooks, "the syllabus must list every notebook in order"
    assert rows[0][0].startswith("01"), rows[0]


@pytest.fixture(scope="module")
def three_languages(tmp_path_factory):
    """The tiny course with a Chinese README and 01 translated (02 and 03 are not)."""
    root = tmp_path_factory.mktemp("repo3")
    (root / "notebooks" / "zh-Hans").mkdir(parents=True)
    (root / "notebooks" / "zh-Hant").mkdir(parents=True)
    (root / "README.md").write_text(README + "\n[简体中文](README.zh-CN.md)\n")
    (root / "README.zh-CN.md").write_text(
        "# 小课程\n\n[English](README.md) · [第一课](notebooks/zh-Hans/01_first.ipynb) · "
        "[第二课（英文）](notebooks/02_second.ipynb) · [繁體](README.zh-TW.md)\n", encoding="utf-8")
    (root / "README.zh-TW.md").write_text("# 小課程\n\n[第一課](notebooks/zh-Hant/01_first.ipynb)\n",
                                          encoding="utf-8")
    (root / "LICENSE").write_text("MIT License\n")
    _notebook(root / "notebooks" / "01_first.ipynb", "# 01\n\n$\\alpha$ [README](../README.md)")
    _notebook(root / "notebooks" / "02_second.ipynb", "# 02\n\n[back](01_first.ipynb)")
    _notebook(root / "notebooks" / "03_extra.ipynb", "# 03\n")
    _notebook(root / "notebooks" / "zh-Hans" / "01_first.ipynb",
              "# 01 · 第一步\n\n$\\alpha$ [说明](../../README.zh-CN.md) [下一节](../02_second.ipynb)")
    _notebook(root / "notebooks" / "zh-Hant" / "01_first.ipynb", "# 01 · 第一步\n\n$\\alpha$")
    out = tmp_path_factory.mktemp("site3")
    return out, build_site(out, root=root)


def test_three_languages_each_with_lang_switch_and_fonts(three_languages):
    out, written = three_languages
    names = [p.relative_to(out).as_posix() for p in written]
    assert names[:4] == ["index.html", "01_first.html", "02_second.html", "03_extra.html"]
    assert {"zh-Hans/index.html", "zh-Hans/01_first.html", "zh-Hant/index.html",
            "zh-Hant/01_first.html"} <= set(names)
    assert "README.zh-CN.html" not in names  # the Chinese README is the zh-Hans start page
    for path, lang in (("index.html", "en"), ("zh-Hans/01_first.html", "zh-Hans"),
                       ("zh-Hant/index.html", "zh-Hant")):
        text = (out / path).read_text(encoding="utf-8")
        assert f'<html lang="{lang}">' in text, path
        switch = re.search(r'<nav[^>]*class="course-lang".*?</nav>', text, re.S)
        assert switch and switch.group(0).count("<a ") == 2, path
        assert ("Noto Sans CJK" in text) == (lang != "en"), path
    zh = (out / "zh-Hans" / "01_first.html").read_text(encoding="utf-8")
    assert 'href="../01_first.html"' in zh and 'href="../zh-Hant/01_first.html"' in zh  # switch
    assert 'href="index.html"' in zh and 'href="../02_second.html"' in zh  # links resolved
    assert f'src="../{MATHJAX}?config=' in zh
    nav = re.search(r'<nav[^>]*class="course-nav".*?</nav>', zh, re.S).group(0)
    titles = re.findall(r">([^<]+)</a>", nav)
    assert titles == ["从这里开始", "01 · 第一步", "02 second steps（英文）", "03 extra（英文）"], titles
    english = (out / "02_second.html").read_text(encoding="utf-8")
    assert 'href="zh-Hans/index.html"' in english  # 02 has no translation: its start page


def test_no_relative_link_of_any_language_is_broken(three_languages):
    out, written = three_languages
    for page in written:
        for target in re.findall(r'href="([^"#:]+)(?:#[^"]*)?"', page.read_text(encoding="utf-8")):
            assert (page.parent / target).exists(), f"{page.relative_to(out)} links to missing {target}"
