"""The Chinese notebooks store their own run: a checker's verdict shows in the notebook's language.

A translated notebook has the English notebook's code, so its outputs are the English run's but
for what the code says in the notebook's language: the checkers' verdicts and explanations
(:mod:`lectures_lib.checks.messages`, chosen by the kernel's folder). ``make notebooks`` executes
each Chinese notebook after the English ones (:func:`course_tools.cli`), cleaned like
them (:mod:`~course_tools.publish.notebooks`), with the measured cells (timings) keeping the
English notebook's stored outputs, so that two runs store the same thing.

Regenerating a translation (``python -m course_tools.translation.translate generate``) keeps the stored
run of a Chinese notebook for as long as the English code and outputs are those it ran beside:
:func:`run_fingerprint` of the English notebook is recorded in the Chinese notebook's metadata
(``translation.own_run``). When they change, the English outputs are copied in their place and
the record is dropped, so ``tests/tooling/test_translations.py`` fails until ``make notebooks``
runs the Chinese notebook again.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from course_tools.publish.notebooks import is_measured

METADATA_KEY = "translation"
OWN_RUN = "own_run"


def run_fingerprint(english: NotebookNode) -> str:
    """sha256 of the English notebook's code cells: their sources and stored outputs."""
    cells = [[cell.source, cell.get("outputs", [])] for cell in english.cells
             if cell.cell_type == "code"]
    return hashlib.sha256(json.dumps(cells, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def own_run_of(translated: NotebookNode) -> str | None:
    """The fingerprint recorded by the translated notebook's own run (None: it stores none)."""
    return translated.metadata.get(METADATA_KEY, {}).get(OWN_RUN)


def carry_outputs(out: NotebookNode, english: NotebookNode, previous: NotebookNode | None) -> bool:
    """Give ``out`` (a translated notebook with the English code cells) its outputs.

    ``previous`` is the translated notebook stored so far. When it records the run beside the
    English notebook as it is now (same cells, same :func:`run_fingerprint`), its outputs are
    kept (the measured cells excepted: they keep the English timings) and so is its record;
    otherwise ``out`` keeps the English outputs and records no run of its own. Returns whether
    the notebook's own run was kept.
    """
    fingerprint = run_fingerprint(english)
    same_cells = previous is not None and [(c.cell_type, c.id) for c in previous.cells] == [
        (c.cell_type, c.id) for c in english.cells]
    keep = same_cells and own_run_of(previous) == fingerprint
    if keep:
        for mine, stored in zip(out.cells, previous.cells, strict=True):
            if mine.cell_type == "code" and not is_measured(mine):
                mine.outputs = copy.deepcopy(stored.get("outputs", []))
                mine.execution_count = stored.get("execution_count")
        out.metadata[METADATA_KEY][OWN_RUN] = fingerprint
    else:
        out.metadata[METADATA_KEY].pop(OWN_RUN, None)
    return keep


def mark_own_run(path: Path, english_path: Path) -> None:
    """Record in the translated notebook ``path``, just executed, which English run it ran beside."""
    translated = nbformat.read(path, as_version=4)
    english = nbformat.read(english_path, as_version=4)
    translated.metadata.setdefault(METADATA_KEY, {})[OWN_RUN] = run_fingerprint(english)
    nbformat.write(translated, path)


def output_problems(english: NotebookNode, translated: NotebookNode, where: str = "") -> list[str]:
    """How the stored outputs of ``translated`` fail to be its own clean run beside ``english``.

    Its run must be recorded for the English notebook as it is now, every code cell must show
    the same kinds of output as the English one (a cell that failed, or printed nothing, shows),
    and a measured cell must keep the English timings.
    """
    if own_run_of(translated) != run_fingerprint(english):
        return [f"{where}its outputs are not its own run beside the English notebook as it is "
                "now (the English code or outputs changed, or it was never run): make notebooks"]
    found = []
    for mine, theirs in zip(translated.cells, english.cells, strict=True):
        if mine.cell_type != "code":
            continue
        kinds = [(o.get("output_type"), o.get("name")) for o in mine.get("outputs", [])]
        expected = [(o.get("output_type"), o.get("name")) for o in theirs.get("outputs", [])]
        if kinds != expected:
            found.append(f"{where}code cell {mine.id}: its outputs are {kinds}, the English "
                         f"notebook's {expected}")
        elif is_measured(mine) and mine.get("outputs") != theirs.get("outputs"):
            found.append(f"{where}measured cell {mine.id}: its outputs are not the English timings")
    return found
