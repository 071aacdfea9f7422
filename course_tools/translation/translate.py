"""The Chinese notebooks, generated from the English ones and kept in step with them.

The English notebooks in ``notebooks/`` are the source. A translation is one UTF-8 file per
English notebook, ``translations/zh-Hans/<stem>.md``: a sequence of blocks, one per English
*markdown* cell, in notebook order, each starting with a header line

    <!-- en: <English cell id> sha256: <first 16 hex digits of sha256 of its source> -->

and followed by the Simplified Chinese markdown of that cell. Code cells are never translated:
the Simplified edition has the English code verbatim; the Traditional one has it with the Chinese
in its strings and comments converted like the prose (:func:`~course_tools.translation.zh_hant.code_to_hant`:
a plot title's 聚类 reads 聚類 in Taiwan), and nothing else changed.

* ``generate`` writes ``notebooks/zh-Hans/<stem>.ipynb``: the English notebook with every markdown
  cell replaced by its block, code cells copied verbatim, each translated cell's metadata
  recording the English cell id and the hash of the English text it translates; the stored
  outputs are the Chinese notebook's own run (:mod:`~course_tools.translation.own_runs`: ``make
  notebooks`` executes it, so the checkers' verdicts are in Chinese) while the English code and
  outputs are those it ran beside, else the English outputs until it runs again. And
  ``notebooks/zh-Hant/<stem>.ipynb``, the same converted to Traditional Chinese (Taiwan usage) by
  OpenCC (``s2twp``) plus the course's term list (:mod:`~course_tools.translation.zh_hant`). Relative links are
  rewritten so that they still resolve from the language's folder (a translated notebook links
  to its translated neighbour, the README to the README in that language).
* ``skeleton NOTEBOOK`` prints the block headers of a notebook (with the English text as a
  comment), to start or extend a translation.
* ``status`` lists, per notebook, the missing, stale (English text changed since), orphaned (cell
  gone) and misordered blocks, and the English notebooks that have no translation yet.

Only notebooks with a translation file are generated; ``tests/tooling/test_translations.py`` fails,
naming the cells, when a translation or a generated notebook is out of step with the English.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from course_tools import ROOT
from course_tools.translation.own_runs import carry_outputs, output_problems
from course_tools.translation.verbatim import verbatim_parts, verbatim_problems  # noqa: F401  (used by the tests)
from course_tools.translation.zh_hant import (  # noqa: F401  (the course's conversion, used from here)
    MESSAGES_ZH_HANT,
    OPENCC_CONFIG,
    ZH_HANT_EXPECTED,
    ZH_HANT_TERMS,
    ZH_HANT_WRONG,
    chinese_runs,
    code_to_hant,
    for_taiwan,
    messages_zh_hant_source,
    simplified_characters,
    to_hant,
    wrong_forms,
)

NOTEBOOKS = ROOT / "notebooks"
TRANSLATIONS = ROOT / "translations"
SOURCE_LANGUAGE = "zh-Hans"  # written by translators; zh-Hant is generated from it
LANGUAGES = ("zh-Hans", "zh-Hant")
README_NAMES = {"zh-Hans": "README.zh-CN.md", "zh-Hant": "README.zh-TW.md"}
LANGUAGE_NAMES = {"en": "English", "zh-Hans": "简体中文", "zh-Hant": "繁體中文"}
METADATA_KEY = "translation"

HEADER = re.compile(r"^<!-- en: (?P<id>\S+) sha256: (?P<sha>[0-9a-f]{16}) -->[ \t]*$", re.MULTILINE)


def source_of(cell) -> str:
    return "".join(cell.source) if isinstance(cell.source, list) else cell.source


def text_hash(text: str) -> str:
    """The first 16 hex digits of the sha256 of ``text`` (UTF-8): the version of an English cell."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def header(cell) -> str:
    return f"<!-- en: {cell.id} sha256: {text_hash(source_of(cell))} -->"


@dataclass(frozen=True)
class Block:
    """One block of a translation file: the English cell it translates, and the Chinese text."""

    cell_id: str
    sha256: str  # the hash of the English text the translator translated
    text: str
    line: int  # 1-based line of the header in the file


TODO = "<!-- TODO translate"
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def untranslated(text: str) -> bool:
    """Whether a block still needs its translation: empty, only comments, or a skeleton's TODO."""
    return TODO in text or not _COMMENT.sub("", text).strip()


def parse_translation(text: str) -> list[Block]:
    """The blocks of a translation file, in order. Text before the first header is an error."""
    matches = list(HEADER.finditer(text))
    lead = text[: matches[0].start()] if matches else text
    if lead.strip():
        raise ValueError("a translation file must start with a block header "
                         f"'<!-- en: ID sha256: HASH -->', got {lead.strip()[:60]!r}")
    blocks = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end():end].strip("\n")
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(match["id"], match["sha"], body.rstrip(), line))
    return blocks


def markdown_cells(nb: NotebookNode) -> list:
    return [cell for cell in nb.cells if cell.cell_type == "markdown"]


def translation_path(notebook: Path, language: str = SOURCE_LANGUAGE) -> Path:
    return TRANSLATIONS / language / f"{notebook.stem}.md"


def output_path(notebook: Path, language: str) -> Path:
    return notebook.parent / language / notebook.name


def english_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def translated_notebooks(folder: Path = NOTEBOOKS, translations: Path = TRANSLATIONS) -> list[Path]:
    """The English notebooks that have a Simplified Chinese translation file."""
    return [p for p in english_notebooks(folder)
            if (translations / SOURCE_LANGUAGE / f"{p.stem}.md").is_file()]


def untranslated_notebooks(folder: Path = NOTEBOOKS, translations: Path = TRANSLATIONS) -> list[Path]:
    done = set(translated_notebooks(folder, translations))
    return [p for p in english_notebooks(folder) if p not in done]


# ----------------------------------------------------------------------------------- checking

def problems(nb: NotebookNode, blocks: list[Block], name: str = "") -> list[str]:
    """Every way ``blocks`` is out of step with the English notebook ``nb``, one line each.

    Missing: an English markdown cell has no block. Stale: the block's hash is not the hash of the
    English cell's current text (the English changed since it was translated). Orphaned: a block
    names a cell that is not a markdown cell of ``nb``. Duplicate and misordered blocks too.
    """
    where = f"{name}: " if name else ""
    english = {cell.id: cell for cell in markdown_cells(nb)}
    order = [cell.id for cell in markdown_cells(nb)]
    found: list[str] = []
    seen: set[str] = set()
    for block in blocks:
        if block.cell_id in seen:
            found.append(f"{where}duplicate block for cell {block.cell_id} (line {block.line})")
            continue
        seen.add(block.cell_id)
        cell = english.get(block.cell_id)
        if cell is None:
            found.append(f"{where}orphaned block for cell {block.cell_id} (line {block.line}): "
                         "no markdown cell of that id in the English notebook")
        elif block.sha256 != text_hash(source_of(cell)):
            first = source_of(cell).strip().splitlines()[0][:70] if source_of(cell).strip() else ""
            found.append(f"{where}stale block for cell {block.cell_id} (line {block.line}): the "
                         f"English text changed since it was translated ({block.sha256} -> "
                         f"{text_hash(source_of(cell))}): {first!r}")
        elif untranslated(block.text):
            found.append(f"{where}untranslated block for cell {block.cell_id} (line {block.line})")
    for cell_id in order:
        if cell_id not in seen:
            first = source_of(english[cell_id]).strip().splitlines()
            found.append(f"{where}missing block for cell {cell_id}: "
                         f"{(first[0][:70] if first else '')!r}")
    present = [b.cell_id for b in blocks if b.cell_id in english]
    expected = [cell_id for cell_id in order if cell_id in set(present)]
    if present == list(dict.fromkeys(present)) and present != expected:
        found.append(f"{where}blocks out of order: the English notebook has {expected}, the "
                     f"translation {present}")
    return found


# --------------------------------------------------------------------------------- generating

_LINK = re.compile(r"(\]\(|<img [^>]*src=\")(?P<target>[^)\"\s]+)")


def rewrite_links(text: str, language: str, folder: Path = NOTEBOOKS,
                  translations: Path = TRANSLATIONS) -> str:
    """Relative links of an English cell, as seen from ``notebooks/<language>/``.

    A link to a translated notebook stays a sibling link; the README becomes the README in
    ``language``; anything else gets one more ``../``. Absolute URLs, anchors and attachments
    are left alone.
    """
    def fix(match: re.Match) -> str:
        target = match["target"]
        if re.match(r"^([a-z][a-z0-9+.-]*:|#|/)", target, re.IGNORECASE):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = Path(path)
        if len(resolved.parts) == 1 and resolved.suffix == ".ipynb" and (
                translations / SOURCE_LANGUAGE / f"{resolved.stem}.md").is_file():
            new = path
        elif resolved.as_posix() == "../README.md":
            new = f"../../{README_NAMES[language]}"
        else:
            new = f"../{path}"
        return match.group(1) + new + (f"#{anchor}" if anchor else "")

    return _LINK.sub(fix, text)


def edition_code(source: str, language: str) -> str:
    """An English code cell's source in ``language``'s edition: verbatim in the Simplified one
    (the course's Chinese terms are Simplified), its Chinese converted in the Traditional one."""
    return source if language == SOURCE_LANGUAGE else code_to_hant(source)


def translate_notebook(nb: NotebookNode, blocks: list[Block], language: str = SOURCE_LANGUAGE,
                       source_name: str = "", folder: Path = NOTEBOOKS,
                       translations: Path = TRANSLATIONS,
                       previous: NotebookNode | None = None) -> NotebookNode:
    """The notebook in ``language``: ``nb`` with its markdown replaced by ``blocks``.

    Code cells are copied verbatim; their outputs are ``previous``'s own run (the translated
    notebook stored so far) while it ran beside ``nb`` as it is, else ``nb``'s
    (:func:`~course_tools.translation.own_runs.carry_outputs`). A cell without a (non-empty) block
    keeps its English text and records ``"missing": true``; a stale block is used but records the
    hash it was written for, so the sync test names it.
    """
    out = copy.deepcopy(nb)
    by_id = {block.cell_id: block for block in blocks}
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.source = edition_code(source_of(cell), language)
        if cell.cell_type != "markdown":
            continue
        english = source_of(cell)
        block = by_id.get(cell.id)
        record = {"en_id": cell.id, "en_sha256": text_hash(english)}
        if block is None or untranslated(block.text):
            text = english
            record["missing"] = True
        else:
            text = block.text
            record["translated_sha256"] = block.sha256
        text = rewrite_links(text, language, folder, translations)
        if language != SOURCE_LANGUAGE:
            text = to_hant(text)
        cell.source = text
        cell.metadata[METADATA_KEY] = record
    out.metadata[METADATA_KEY] = {
        "language": language,
        "source": f"../{source_name}" if source_name else "",
        "generated_by": "python -m course_tools.translation.translate generate",
    }
    carry_outputs(out, nb, previous)
    return out


def generate(notebook: Path, languages=LANGUAGES, translations: Path = TRANSLATIONS) -> list[str]:
    """Write ``notebook``'s translations (one per language); returns its :func:`problems`."""
    nb = nbformat.read(notebook, as_version=4)
    source = translations / SOURCE_LANGUAGE / f"{notebook.stem}.md"
    blocks = parse_translation(source.read_text(encoding="utf-8"))
    for language in languages:
        path = output_path(notebook, language)
        previous = nbformat.read(path, as_version=4) if path.is_file() else None
        out = translate_notebook(nb, blocks, language, notebook.name, notebook.parent, translations,
                                 previous)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(out, path)
    return problems(nb, blocks, source.relative_to(translations.parent).as_posix()
                    if source.is_relative_to(translations.parent) else str(source))


def generate_all(folder: Path = NOTEBOOKS, translations: Path = TRANSLATIONS) -> list[str]:
    """Generate every translated notebook and remove generated ones whose translation is gone."""
    found: list[str] = []
    wanted = translated_notebooks(folder, translations)
    for notebook in wanted:
        found += generate(notebook, translations=translations)
    for language in LANGUAGES:
        for stale in sorted((folder / language).glob("*.ipynb")):
            if stale.name not in {p.name for p in wanted}:
                stale.unlink()
    return found


def compare_generated(english: NotebookNode, translated: NotebookNode, name: str = "",
                      translations: Path = TRANSLATIONS, folder: Path = NOTEBOOKS,
                      own_run: bool = True) -> list[str]:
    """How a stored translated notebook differs from what :func:`generate` would write now.

    Every code cell must be the English cell verbatim (source, metadata), the cells must be the
    English cells in the same order (ids and types), and every markdown cell must be what the
    translation file gives (so a hand edit of the ``.ipynb``, or a translation file changed
    without regenerating, fails too). The outputs must be the notebook's own run beside the
    English one (:func:`~course_tools.translation.own_runs.output_problems`), or, with
    ``own_run=False`` (a notebook just generated, not yet run), the English outputs verbatim.
    """
    where = f"{name}: " if name else ""
    found = []
    ours = [(c.cell_type, c.id) for c in translated.cells]
    theirs = [(c.cell_type, c.id) for c in english.cells]
    if ours != theirs:
        found.append(f"{where}its cells are not the English cells (type, id): "
                     f"{sorted(set(theirs) - set(ours))[:5]} missing, "
                     f"{sorted(set(ours) - set(theirs))[:5]} extra, or the order differs")
        return found
    language = translated.metadata.get(METADATA_KEY, {}).get("language")
    if language not in LANGUAGES:
        return found + [f"{where}notebook metadata {METADATA_KEY!r} names no language of "
                        f"{LANGUAGES}: {translated.metadata.get(METADATA_KEY)!r}"]
    bare = {k: v for k, v in translated.metadata.items() if k != METADATA_KEY}
    if bare != dict(english.metadata):
        found.append(f"{where}notebook metadata differs from the English notebook's (kernel, "
                     "language_info): regenerate")
    if own_run:
        found += output_problems(english, translated, where)
    parts = ("source", "metadata") if own_run else ("source", "outputs", "execution_count",
                                                    "metadata")
    for mine, source in zip(translated.cells, english.cells, strict=True):
        if mine.cell_type == "code":
            for part in parts:
                want = (edition_code(source_of(source), language) if part == "source"
                        else source.get(part))
                if mine.get(part) != want:
                    found.append(f"{where}code cell {mine.id}: its {part} differs from the "
                                 "English notebook's (code is never translated, its Chinese only "
                                 "converted for zh-Hant: regenerate)")
    stem = Path(name).stem if name else ""
    path = translations / SOURCE_LANGUAGE / f"{stem}.md"
    if stem and path.is_file():
        expected = translate_notebook(english, parse_translation(path.read_text(encoding="utf-8")),
                                      language, "", folder, translations, translated)
        for mine, want in zip(translated.cells, expected.cells, strict=True):
            if mine.cell_type == "markdown" and (source_of(mine) != source_of(want)
                                                 or mine.metadata != want.metadata):
                found.append(f"{where}markdown cell {mine.id} is not what translations/"
                             f"{SOURCE_LANGUAGE}/{path.name} gives: regenerate "
                             "(python -m course_tools.translation.translate generate)")
    return found


def skeleton(nb: NotebookNode, blocks: list[Block] | None = None) -> str:
    """Block headers for every markdown cell of ``nb``, each with its English text in a comment.

    With ``blocks`` (an existing translation), up-to-date blocks are kept as they are and only
    new or changed cells get a header with the English text to translate.
    """
    done = {b.cell_id: b for b in blocks or []}
    parts = []
    for cell in markdown_cells(nb):
        block = done.get(cell.id)
        if block is not None and block.sha256 == text_hash(source_of(cell)):
            parts.append(f"{header(cell)}\n{block.text}\n")
            continue
        english = source_of(cell).replace("-->", "-- >")
        old = f"\n{block.text}" if block is not None else ""  # stale: the old translation, to edit
        parts.append(f"{header(cell)}\n{TODO}:\n{english}\n-->{old}\n")
    return "\n".join(parts)


def status(folder: Path = NOTEBOOKS, translations: Path = TRANSLATIONS) -> tuple[list[str], list[str]]:
    """(problems of every translation, untranslated English notebooks), as printable lines."""
    found = []
    for notebook in translated_notebooks(folder, translations):
        nb = nbformat.read(notebook, as_version=4)
        source = translations / SOURCE_LANGUAGE / f"{notebook.stem}.md"
        found += problems(nb, parse_translation(source.read_text(encoding="utf-8")),
                          f"{SOURCE_LANGUAGE}/{source.name}")
    return found, [p.name for p in untranslated_notebooks(folder, translations)]


README_START = "<!-- translated-notebooks:start"
README_END = "<!-- translated-notebooks:end -->"
_SWITCH_HANS = "[English](README.md) · 简体中文 · [繁體中文](README.zh-TW.md)"
_SWITCH_HANT = "[English](README.md) · [简体中文](README.zh-CN.md) · 繁體中文"


def _title(text: str) -> str:
    first = next((line for line in text.splitlines() if line.startswith("# ")), "")
    return first[2:].strip()


def notebook_table(folder: Path = NOTEBOOKS, translations: Path = TRANSLATIONS) -> str:
    """The README's table of the notebooks: the Chinese ones linked, the untranslated ones named."""
    rows = ["| 笔记本 | 简体中文 | 繁體中文 |", "| --- | --- | --- |"]
    for notebook in english_notebooks(folder):
        source = translations / SOURCE_LANGUAGE / f"{notebook.stem}.md"
        if source.is_file():
            blocks = parse_translation(source.read_text(encoding="utf-8"))
            title = _title(blocks[0].text) if blocks else notebook.stem
            rows.append(f"| {title} | [{notebook.name}](notebooks/zh-Hans/{notebook.name}) | "
                        f"[{notebook.name}](notebooks/zh-Hant/{notebook.name}) |")
        else:
            nb = nbformat.read(notebook, as_version=4)
            cells = markdown_cells(nb)
            title = _title(source_of(cells[0])) if cells else notebook.stem
            rows.append(f"| {title}（尚未翻译，[英文版](notebooks/{notebook.name})） | — | — |")
    return "\n".join(rows)


def readme_texts(readme: str, folder: Path = NOTEBOOKS,
                 translations: Path = TRANSLATIONS) -> tuple[str, str]:
    """(README.zh-CN.md with its notebook table brought up to date, its zh-TW version).

    The zh-TW version is the zh-CN one with Taiwan's commands and paths
    (:func:`~course_tools.translation.zh_hant.for_taiwan`), converted by :func:`to_hant`.
    """
    start, end = readme.index(README_START), readme.index(README_END)
    start = readme.index("\n", start) + 1
    hans = readme[:start] + notebook_table(folder, translations) + "\n" + readme[end:]
    hant = to_hant(for_taiwan(hans)).replace(to_hant(_SWITCH_HANS), _SWITCH_HANT)
    return hans, hant


def update_readmes(root: Path = ROOT) -> None:
    path = root / README_NAMES["zh-Hans"]
    hans, hant = readme_texts(path.read_text(encoding="utf-8"))
    path.write_text(hans, encoding="utf-8")
    (root / README_NAMES["zh-Hant"]).write_text(hant, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_tools.translation.translate",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("generate", help="write notebooks/zh-Hans/ and notebooks/zh-Hant/")
    commands.add_parser("status", help="missing, stale and orphaned blocks; untranslated notebooks")
    skel = commands.add_parser("skeleton", help="print the block headers of a notebook")
    skel.add_argument("notebook", type=Path)
    skel.add_argument("--update", action="store_true",
                      help="keep the up-to-date blocks of its translation file, mark the rest")
    args = parser.parse_args(argv)
    if args.command == "skeleton":
        nb = nbformat.read(args.notebook, as_version=4)
        existing = translation_path(args.notebook)
        blocks = (parse_translation(existing.read_text(encoding="utf-8"))
                  if args.update and existing.is_file() else None)
        sys.stdout.write(skeleton(nb, blocks))
        return 0
    if args.command == "generate":
        found = generate_all()
        MESSAGES_ZH_HANT.write_text(messages_zh_hant_source(), encoding="utf-8")
        update_readmes()
        for notebook in translated_notebooks():
            written = [output_path(notebook, lang).relative_to(ROOT).as_posix() for lang in LANGUAGES]
            print("wrote " + ", ".join(written))
        untranslated = [p.name for p in untranslated_notebooks()]
    else:
        found, untranslated = status()
    for line in found:
        print(("warning: " if args.command == "generate" else "") + line, file=sys.stderr)
    if untranslated:
        print("not translated yet (English only): " + ", ".join(untranslated))
    if not found:
        print("all translations are in step with the English notebooks")
    elif args.command == "generate":
        print(f"{len(found)} translation problem(s): update translations/{SOURCE_LANGUAGE}/ "
              "(`python -m course_tools.translation.translate skeleton --update NOTEBOOK`); the sync test "
              "fails until then", file=sys.stderr)
    # generate writes what there is (make notebooks goes on); status is the check that fails
    return 1 if found and args.command == "status" else 0


if __name__ == "__main__":
    raise SystemExit(main())
