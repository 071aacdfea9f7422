"""One word per idea (issue 29): translations/glossary.md holds the course's Chinese words, and every
Chinese text of the course keeps to it, in both scripts.

* the 繁體中文 column of every glossary table is what the conversion makes of the 简体中文 one;
* no form the glossary's "avoid" column lists appears in the Simplified texts (the translation
  files, the generated zh-Hans notebooks, README.zh-CN.md, the checkers' catalogue), nor in the
  Traditional ones where its conversion is not itself a course term (查找 becomes 查詢, the
  course's *query*: that collision is why it is avoided, so 查詢 itself is not searched);
* the Chinese in code cells (plot titles, comments) keeps to it too (issue 40);
* a quote of the notes or the lecture after 笔记说： / 课程说： is in quotation marks.
Shown failing on a notebook that says 可以注意, 往前看 or 合成器 again.
"""

import re

import nbformat
import pytest

from course_tools.translation import translate as tr
from lectures_lib.checks._messages_zh_hant import MISTAKES_ZH_HANT
from lectures_lib.checks.messages import MISTAKES

GLOSSARY = tr.TRANSLATIONS / "glossary.md"
_PARENTHESES = re.compile(r"（[^）]*）")


def _rows(text: str) -> list[list[str]]:
    """The body rows of every markdown table of the glossary, as lists of cells."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if set("".join(cells)) <= set("- ") or cells[0] == "English":
            continue
        rows.append(cells)
    return rows


def _avoided(text: str) -> list[tuple[str, str]]:
    """(avoided form, the word to write) for every row of the one-word-per-idea table."""
    found = []
    for cells in _rows(text):
        if len(cells) == 4 and cells[3] != "—":
            found += [(form.strip(), cells[1]) for form in cells[3].split(" / ")]
    return found


def _texts(language: str) -> dict[str, str]:
    """Every Chinese text of the course in ``language``, by name."""
    texts = {}
    for path in tr.translated_notebooks():
        nb = nbformat.read(tr.output_path(path, language), as_version=4)
        texts[f"{language}/{path.name}"] = "\n".join(
            tr.source_of(c) for c in tr.markdown_cells(nb))
        texts[f"{language}/{path.name} (code cells)"] = "\n".join(  # titles, comments
            run for c in nb.cells if c.cell_type == "code" for run in tr.chinese_runs(tr.source_of(c)))
        if language == tr.SOURCE_LANGUAGE:
            texts[tr.translation_path(path).name] = tr.translation_path(path).read_text("utf-8")
    readme = tr.README_NAMES[language]
    texts[readme] = (tr.ROOT / readme).read_text(encoding="utf-8")
    catalogue = MISTAKES if language == tr.SOURCE_LANGUAGE else MISTAKES_ZH_HANT
    texts["checks catalogue"] = "\n".join(catalogue.values())
    return texts


def _violations(texts: dict[str, str], avoided: list[tuple[str, str]], convert=None) -> list[str]:
    terms = " ".join(convert(cells[1]) for cells in _rows(GLOSSARY.read_text("utf-8"))) if convert else ""
    found = []
    for form, right in avoided:
        if convert is not None:
            form = convert(form)
            if form in terms:  # its conversion is a course term itself: not searchable here
                continue
        for name, text in texts.items():
            for match in re.finditer(re.escape(form), text):
                context = text[max(0, match.start() - 15):match.end() + 15].replace("\n", " ")
                found.append(f"{name}: {form!r} in …{context}… (the glossary says {right})")
    return found


def test_the_traditional_column_is_what_the_conversion_writes():
    wrong = []
    for cells in _rows(GLOSSARY.read_text("utf-8")):
        if len(cells) >= 3 and cells[2] != "—":
            made = _PARENTHESES.sub("", tr.to_hant(cells[1])).strip()
            if made != _PARENTHESES.sub("", cells[2]).strip():
                wrong.append(f"{cells[0]}: the glossary says {cells[2]!r}, the notebooks show {made!r}")
    assert not wrong, "\n".join(wrong)


def test_the_glossary_lists_one_word_for_each_idea_of_the_review():
    avoided = {form for form, _ in _avoided(GLOSSARY.read_text("utf-8"))}
    assert {"可以注意", "往前看", "向后看", "合成器", "融合算子", "行约定", "瞎猜", "查找",
            "串行"} <= avoided


@pytest.mark.parametrize("language", tr.LANGUAGES)
def test_every_chinese_text_keeps_one_word_per_idea(language):
    avoided = _avoided(GLOSSARY.read_text("utf-8"))
    convert = None if language == tr.SOURCE_LANGUAGE else tr.to_hant
    found = _violations(_texts(language), avoided, convert)
    assert not found, "\n".join(found)


_QUOTE = re.compile(r"(?:笔记|课程)(?:里|中)?(?:说|写道)：(?![“「*])")


def test_quotes_of_the_notes_and_the_lecture_are_marked():
    found = [f"{name}: …{text[m.start():m.end() + 20]}…" for name, text in
             _texts(tr.SOURCE_LANGUAGE).items() for m in _QUOTE.finditer(text)]
    assert not found, "quote the notes in “”:\n" + "\n".join(found)


def test_the_check_fails_on_a_notebook_that_drifts_from_the_glossary():
    avoided = _avoided(GLOSSARY.read_text("utf-8"))
    drifted = {"02 (edited)": "True 表示“可以注意”。窗口往前看几帧。两种合成器。"}
    found = _violations(drifted, avoided)
    assert len(found) == 3 and "关注" in found[0], found
    hant = {"02 (edited)": tr.to_hant(drifted["02 (edited)"])}
    assert len(_violations(hant, avoided, tr.to_hant)) == 3
    assert _QUOTE.search("笔记说：两层线性映射") and not _QUOTE.search("笔记说：“两层线性映射”")
