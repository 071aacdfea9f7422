"""The course as a static website: ``python -m course_tools site`` (what ``make site`` runs).

Every notebook in ``notebooks/`` becomes one HTML page with its stored outputs (plots included:
run ``make notebooks`` first if they are stale); the README becomes the start page
``index.html``, and the README's syllabus table is the navigation bar of every page. Links
between the sources (``../README.md``, ``02_multi_head_attention.ipynb``) are rewritten to the
pages. Math is typeset in the browser by MathJax 2.7, copied from the ``jupyter-server-mathjax``
package into ``_static/``: building and reading the site need no network, so it also works when
opened straight from the disk (``build/site/index.html``).

Pages are made with nbconvert's ``lab`` template, minus its three network resources (require.js,
MathJax and mermaid from a CDN).

Three languages (issue 22): where ``README.zh-CN.md`` / ``README.zh-TW.md`` exist, the site also
has ``zh-Hans/`` and ``zh-Hant/``: their start page is that README, their pages the Chinese
notebooks (``notebooks/zh-Hans/``), and a notebook not translated yet is linked in English. Every
page has a language switch to the same page in the other languages, its ``<html lang>`` set, and
the Chinese pages a CJK font stack (the reader's installed Chinese fonts: nothing is downloaded).
"""

from __future__ import annotations

import argparse
import html
import posixpath
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from course_tools import ROOT

MATHJAX = "_static/mathjax/MathJax.js"
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full"  # the one combined configuration the package ships

# nbconvert's lab template with the CDN scripts replaced by local MathJax, plus the course's
# navigation bar above and below every page.
_TEMPLATE = r"""
{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  tex2jax: {inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
            processEscapes: true, processEnvironments: true},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null,
               linebreaks: {automatic: true}},
  messageStyle: "none",
  showMathMenu: false
});
</script>
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}
{% block extra_css %}
<style>
.course-nav { font-family: system-ui, sans-serif; font-size: 14px; padding: 8px 16px;
  border-bottom: 1px solid #ddd; background: #f7f7f7; display: flex; flex-wrap: wrap; gap: 4px 16px; }
.course-nav a { text-decoration: none; color: #1a5fb4; }
.course-nav a.current { font-weight: bold; color: #000; }
.course-pager { font-family: system-ui, sans-serif; font-size: 14px; padding: 16px;
  border-top: 1px solid #ddd; display: flex; justify-content: space-between; }
.course-lang { font-family: system-ui, sans-serif; font-size: 14px; padding: 6px 16px;
  display: flex; gap: 12px; justify-content: flex-end; background: #f7f7f7; }
.course-lang a { text-decoration: none; color: #1a5fb4; }
{{ resources.course_css }}
/* A dark theme for readers whose system asks for one: JupyterLab's own colour variables. */
@media (prefers-color-scheme: dark) {
  html:root { color-scheme: dark;
    --jp-layout-color0: #111111; --jp-layout-color1: #1b1b1b; --jp-layout-color2: #262626;
    --jp-layout-color3: #333333; --jp-border-color0: #555; --jp-border-color1: #444;
    --jp-border-color2: #3a3a3a; --jp-cell-editor-background: #1e1e1e;
    --jp-cell-editor-border-color: #3a3a3a; --jp-rendermime-table-row-background: #1e1e1e;
    --jp-rendermime-table-row-hover-background: #2a2a2a;
    --jp-ui-font-color0: #f0f0f0; --jp-ui-font-color1: #e0e0e0; --jp-ui-font-color2: #bbbbbb;
    --jp-content-font-color0: #f5f5f5; --jp-content-font-color1: #e6e6e6;
    --jp-content-font-color2: #c8c8c8; --jp-content-font-color3: #a0a0a0;
    --jp-content-link-color: #8ab4f8; --jp-content-heading-font-color: #f5f5f5;
    --jp-cell-prompt-not-active-font-color: #9a9a9a; --jp-cell-inprompt-font-color: #7ea7ff;
    --jp-cell-outprompt-font-color: #ff8a80;
    --jp-mirror-editor-keyword-color: #7ee787; --jp-mirror-editor-string-color: #ffab70;
    --jp-mirror-editor-comment-color: #9aa5b1; --jp-mirror-editor-number-color: #79c0ff;
    --jp-mirror-editor-def-color: #d2a8ff; --jp-mirror-editor-variable-2-color: #a5d6ff;
    --jp-mirror-editor-builtin-color: #7ee787; --jp-mirror-editor-operator-color: #ff7b72;
    --jp-mirror-editor-variable-color: #e6e6e6; --jp-mirror-editor-meta-color: #ff7b72;
    --jp-mirror-editor-attribute-color: #79c0ff; --jp-mirror-editor-property-color: #79c0ff;
    --jp-mirror-editor-bracket-color: #c8c8c8; --jp-mirror-editor-tag-color: #7ee787;
    --jp-mirror-editor-qualifier-color: #d2a8ff; --jp-mirror-editor-error-color: #ff7b72;
    --jp-rendermime-error-background: #3b1f1f; }
  body, .jp-Notebook { background: var(--jp-layout-color0); color: var(--jp-content-font-color1); }
  .course-nav { background: #1b1b1b; border-bottom-color: #444; }
  .course-nav a { color: #8ab4f8; }
  .course-nav a.current { color: #fff; }
  .course-pager { border-top-color: #444; }
  .course-pager a { color: #8ab4f8; }
  /* plots are drawn on white: keep them on a light card so their axes stay legible */
  .jp-RenderedImage img { background: #fff; border-radius: 3px; }
}
</style>
{% endblock extra_css %}
{% block data_png scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}" alt="{{ output.metadata.get('alt', '') | escape_html }}">
</div>
{% endblock data_png %}
{% block data_jpg scoped %}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/jpeg;base64,{{ output.data['image/jpeg'] | escape_html }}" alt="{{ output.metadata.get('alt', '') | escape_html }}">
</div>
{% endblock data_jpg %}
{%- block body_header -%}
{{ super() }}
{{ resources.course_lang }}
{{ resources.course_nav }}
{%- endblock body_header -%}
{% block body_footer %}
{{ resources.course_pager }}
{{ super() }}
{% endblock body_footer %}
"""


@dataclass(frozen=True)
class Page:
    """One page of the site: its source (relative to the repository), title and file name."""

    source: str
    title: str
    target: str


def syllabus(readme: str, notebooks: list[str]) -> list[tuple[str, str]]:
    """``(title, notebook path)`` for each row of the README's syllabus table, in order.

    A row is a table line whose first cell links a notebook, ``| [01 self-attention](notebooks/
    01_self_attention.ipynb) | ... |``. Notebooks in ``notebooks`` that the table does not list
    are added at the end under their file name, so no page is left out of the navigation.
    """
    rows = re.findall(r"^\|\s*\[([^\]]+)\]\((notebooks/[^)\s]+\.ipynb)\)", readme, re.MULTILINE)
    listed = [(title, path) for title, path in rows if path in notebooks]
    seen = {path for _, path in listed}
    extra = [(Path(p).stem.replace("_", " "), p) for p in notebooks if p not in seen]
    return listed + extra


def _html_name(source: str) -> str:
    if source == "README.md":
        return "index.html"
    return Path(source).stem + ".html" if source.startswith("notebooks/") else (
        source.replace("/", "-").removesuffix(".md") + ".html"
    )


def _rewrite_links(
    body: str, page: Page, targets: dict[str, str], root: Path, out_dir: Path
) -> str:
    """Point relative links of the source at the pages built from their targets.

    A link to another file of the repository (``LICENSE``, ``environment.yml``) is copied into
    ``files/`` of the site and linked there, so no relative link of the site is broken.
    """
    folder = posixpath.dirname(page.source)

    def replace(match: re.Match) -> str:
        url = html.unescape(match.group(2))
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^//", url, re.IGNORECASE):
            return match.group(0)  # absolute URL, anchor, data: URI
        path, _, anchor = url.partition("#")
        source = posixpath.normpath(posixpath.join(folder, path))
        if source not in targets and not source.startswith("..") and (root / source).is_file():
            copy = out_dir / "files" / source
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / source, copy)
            targets[source] = f"files/{source}"
        if source not in targets:
            return match.group(0)
        new = targets[source] + (f"#{anchor}" if anchor else "")
        return f'{match.group(1)}="{html.escape(new)}"'

    return re.sub(r'(href)="([^"]*)"', replace, body)


def _navigation(pages: list[Page], current: Page) -> tuple[str, str]:
    links = []
    for page in pages:
        attributes = ' class="current" aria-current="page"' if page == current else ""
        links.append(f'<a href="{page.target}"{attributes}>{html.escape(page.title)}</a>')
    nav = '<nav class="course-nav" aria-label="syllabus">' + "".join(links) + "</nav>"
    index = pages.index(current)
    previous = pages[index - 1] if index > 0 else None
    following = pages[index + 1] if index + 1 < len(pages) else None
    pager = '<nav class="course-pager" aria-label="previous and next">'
    pager += f'<a href="{previous.target}">← {html.escape(previous.title)}</a>' if previous else "<span></span>"
    pager += f'<a href="{following.target}">{html.escape(following.title)} →</a>' if following else "<span></span>"
    return nav, pager + "</nav>"


def _exporter():
    import jinja2
    from nbconvert import HTMLExporter

    return HTMLExporter(
        template_name="lab",
        extra_loaders=[jinja2.DictLoader({"course.html.j2": _TEMPLATE})],
        template_file="course.html.j2",
        mathjax_url=f"{MATHJAX}?config={MATHJAX_CONFIG},Safe",
    )


_TITLE_CALL = re.compile(
    r"""(?:suptitle|set_title|title)\s*[(=]\s*f?(["'])(.+?)\1""", re.DOTALL
)
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml")


def _heading_before(cells: list, index: int) -> str:
    """The nearest markdown heading above cell ``index`` (its text, without the ``#``)."""
    for cell in reversed(cells[:index]):
        if cell.cell_type == "markdown":
            headings = re.findall(r"^#{1,6}\s+(.+)$", cell.source, re.MULTILINE)
            if headings:
                return re.sub(r"[*`$\\]", "", headings[-1]).strip()
    return ""


def figure_descriptions(cells: list, index: int) -> list[str]:
    """The alt text of each image output of code cell ``index``.

    The convention: a cell's metadata ``"alt"`` (a string, or a list with one string per image)
    says what its figures show; without it the text is derived from the titles the cell's code
    gives its plots (``suptitle``, ``set_title``, ``title=``) and the section the cell is in.
    Never empty: a screen reader always hears what a figure is about.
    """
    cell = cells[index]
    images = [o for o in cell.get("outputs", []) if any(t in o.get("data", {}) for t in _IMAGE_TYPES)]
    given = cell.metadata.get("alt")
    if isinstance(given, str):
        given = [given] * len(images)
    if isinstance(given, list) and len(given) == len(images) and all(
        isinstance(text, str) and text.strip() for text in given
    ):
        return [text.strip() for text in given]
    titles = [" ".join(t.split()) for _, t in _TITLE_CALL.findall(cell.source)]
    titles = [re.sub(r"\{[^}]*\}", "…", t) for t in titles if t.strip()]  # f-string fields
    section = _heading_before(cells, index)
    text = "Figure" + (f" in section “{section}”" if section else "")
    if titles:
        text += ": " + "; ".join(dict.fromkeys(titles))
    return [text + (f" (picture {n + 1} of {len(images)})" if len(images) > 1 else "")
            for n in range(len(images))]


def _describe_figures(notebook) -> None:
    """Write each image output's alt text into its metadata (the copy being exported only)."""
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        images = [o for o in cell.get("outputs", [])
                  if any(t in o.get("data", {}) for t in _IMAGE_TYPES)]
        for output, text in zip(images, figure_descriptions(notebook.cells, index), strict=True):
            output.setdefault("metadata", {})["alt"] = text


def _markdown_notebook(text: str, title: str):
    import nbformat
    from nbformat.v4 import new_markdown_cell, new_notebook

    notebook = new_notebook(cells=[new_markdown_cell(text)])
    notebook.metadata["title"] = title
    return nbformat.from_dict(notebook)


def copy_mathjax(out_dir: Path) -> Path:
    """Copy MathJax 2.7 (HTML-CSS output, STIX web fonts) from ``jupyter_server_mathjax``."""
    import jupyter_server_mathjax

    source = Path(jupyter_server_mathjax.__file__).parent / "static"
    target = out_dir / Path(MATHJAX).parent
    if target.exists():
        shutil.rmtree(target)
    # the HTML-CSS output with its STIX web fonts; not the SVG fonts nor other languages
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("SVG", "localization"))
    return target


@dataclass(frozen=True)
class Language:
    """One language of the site: its code, name, README, folder in the site and font stack."""

    code: str  # the <html lang> value
    name: str  # in that language, for the switch
    readme: str
    folder: str  # "" for English, else "zh-Hans/" ...
    home: str  # the start page's title in the navigation bar
    fonts: str = ""  # CSS font-family list for the page text


_CJK_SANS = ('"Noto Sans CJK {0}", "Noto Sans {0}", "Source Han Sans {0}", {1}, '
             '"Microsoft {2}", "WenQuanYi Micro Hei", sans-serif')
LANGUAGES = (
    Language("en", "English", "README.md", "", "Start here"),
    Language("zh-Hans", "简体中文", "README.zh-CN.md", "zh-Hans/", "从这里开始",
             'system-ui, -apple-system, "Segoe UI", '
             + _CJK_SANS.format("SC", '"PingFang SC", "Hiragino Sans GB"', "YaHei")),
    Language("zh-Hant", "繁體中文", "README.zh-TW.md", "zh-Hant/", "從這裡開始",
             'system-ui, -apple-system, "Segoe UI", '
             + _CJK_SANS.format("TC", '"PingFang TC"', "JhengHei")),
)
_UNTRANSLATED = {"zh-Hans": "（英文）", "zh-Hant": "（英文）"}


def _first_heading(notebook) -> str | None:
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            match = re.search(r"^# (.+)$", cell.source, re.MULTILINE)
            if match:
                return match.group(1).strip()
    return None


def _relative(from_language: Language, to_language: Language, target: str) -> str:
    """A page's URL as seen from a page of ``from_language``."""
    if from_language == to_language:
        return target
    up = "../" if from_language.folder else ""
    return up + to_language.folder + target


def _font_css(fonts: str) -> str:
    """The page's font stack: JupyterLab's theme reads these variables (and loads after us)."""
    if not fonts:
        return ""
    return (f":root {{ --jp-content-font-family: {fonts} !important; "
            f"--jp-ui-font-family: {fonts} !important; }}\n"
            f"body, .jp-RenderedHTMLCommon {{ font-family: {fonts} !important; }}")


def _language_switch(language: Language, key: str, keys: dict[str, dict[str, str]],
                     languages: list[Language]) -> str:
    """Links to this page (``key``) in every other language (its start page where missing)."""
    links = []
    for other in languages:
        if other == language:
            links.append(f'<span lang="{other.code}" aria-current="true"><b>'
                         f"{html.escape(other.name)}</b></span>")
            continue
        target = keys[other.code].get(key, "index.html")
        links.append(f'<a lang="{other.code}" hreflang="{other.code}" '
                     f'href="{html.escape(_relative(language, other, target))}">'
                     f"{html.escape(other.name)}</a>")
    return '<nav class="course-lang" aria-label="language">' + "".join(links) + "</nav>"


def build_site(out_dir: Path, root: Path = ROOT) -> list[Path]:
    """Write the site into ``out_dir``; returns the HTML pages written (start page first).

    English first, then each language whose README exists (``zh-Hans/``, ``zh-Hant/``).
    """

    readme = (root / "README.md").read_text(encoding="utf-8")
    notebooks = sorted(
        p.relative_to(root).as_posix() for p in (root / "notebooks").glob("*.ipynb")
    )
    if not notebooks:
        raise FileNotFoundError(f"no notebooks in {root / 'notebooks'}")
    languages = [LANGUAGES[0]] + [lang for lang in LANGUAGES[1:] if (root / lang.readme).is_file()]
    english = syllabus(readme, notebooks)
    plans: dict[str, tuple[list[Page], list[Page]]] = {}
    for language in languages:
        plans[language.code] = _plan(root, language, readme, notebooks, english, languages)
    # key (the English source) -> page target, per language: for the language switch and links
    keys = {code: {_key(page.source): page.target for page in pages}
            for code, (pages, _) in plans.items()}

    out_dir.mkdir(parents=True, exist_ok=True)
    copy_mathjax(out_dir)
    exporter = _exporter()
    written = []
    for language in languages:
        pages, navigable = plans[language.code]
        folder = out_dir / language.folder
        folder.mkdir(parents=True, exist_ok=True)
        targets = {}
        # every page of every language as seen from this one; its own pages win (the glossary)
        for other in [language] + [lang for lang in languages if lang != language]:
            for page in plans[other.code][0]:
                targets.setdefault(page.source, _relative(language, other, page.target))
        written += _write_pages(exporter, root, folder, language, pages, navigable, targets,
                                keys, languages, "../" * language.folder.count("/"))
    return written


def _key(source: str) -> str:
    """What a page is, whatever its language: README*.md -> index, a notebook -> its file name."""
    if re.fullmatch(r"README(\.zh-(CN|TW))?\.md", source):
        return "index"
    if source.startswith("notebooks/"):
        return Path(source).name
    return source


def _plan(root: Path, language: Language, readme: str, notebooks: list[str],
          english: list[tuple[str, str]], languages: list[Language]):
    """(pages of ``language``, its navigation bar) before any page is written."""
    import nbformat

    home = Page(language.readme, language.home, "index.html")
    if language.code == "en":
        pages = [home] + [Page(path, title, _html_name(path)) for title, path in english]
        text = readme
    else:
        pages = [home]
        for title, path in english:
            translated = f"notebooks/{language.code}/{Path(path).name}"
            if (root / translated).is_file():
                heading = _first_heading(nbformat.read(root / translated, as_version=4))
                pages.append(Page(translated, heading or title, _html_name(translated)))
        text = (root / language.readme).read_text(encoding="utf-8")
    # Other Markdown files the README links to (benchmarks/README.md) become pages too; the
    # other languages' READMEs are those languages' start pages.
    other_readmes = {lang.readme for lang in languages} | {lang.readme for lang in LANGUAGES}
    for link in re.findall(r"\]\(([^)\s#]+\.md)\)", text):
        if (root / link).is_file() and link not in {p.source for p in pages} | other_readmes:
            pages.append(Page(link, link.removesuffix(".md"), _html_name(link)))
    if language.code == "en":
        navigable = [p for p in pages if p.source == "README.md" or p.source in notebooks]
    else:  # every notebook of the syllabus: the translation, or the English page
        navigable = [home]
        own = {Path(p.source).name: p for p in pages if p.source.startswith("notebooks/")}
        for title, path in english:
            name = Path(path).name
            navigable.append(own.get(name) or Page(
                path, title + _UNTRANSLATED[language.code], "../" + _html_name(path)))
    return pages, navigable


def _write_pages(exporter, root, out_dir, language, pages, navigable, targets, keys, languages,
                 up) -> list[Path]:
    import nbformat

    written = []
    home_title = None
    if pages and pages[0].source.endswith(".md"):
        home_title = re.search(r"^# (.+)$", (root / pages[0].source).read_text(encoding="utf-8"),
                               re.MULTILINE)
    for page in pages:
        source = root / page.source
        if page.source.endswith(".ipynb"):
            notebook = nbformat.read(source, as_version=4)
            _describe_figures(notebook)
        else:
            title = home_title.group(1) if page == pages[0] and home_title else page.title
            notebook = _markdown_notebook(source.read_text(encoding="utf-8"), title)
        current = page if page in navigable else navigable[0]
        nav, pager = _navigation(navigable, current)
        resources = {
            "metadata": {"name": page.title, "path": str(source.parent)},
            "course_nav": nav,
            "course_pager": pager if page in navigable else "",
            "course_lang": _language_switch(language, _key(page.source), keys, languages)
            if len(languages) > 1 else "",
            "course_css": _font_css(language.fonts),
        }
        body, _ = exporter.from_notebook_node(notebook, resources=resources)
        body = body.replace(MATHJAX, up + MATHJAX, 1) if up else body
        body = re.sub(r'<html lang="[^"]*">', f'<html lang="{language.code}">', body, count=1)
        path = out_dir / page.target
        path.write_text(_rewrite_links(body, page, targets, root, out_dir), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools site", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site",
                        help="output folder (default: build/site)")
    args = parser.parse_args(argv)
    try:
        written = build_site(args.out)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    print(f"open {written[0]} in a browser (works offline)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
