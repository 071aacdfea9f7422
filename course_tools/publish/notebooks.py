"""Re-execute the course's notebooks in place: ``python -m course_tools notebooks [PATH]``.

This is what ``make notebooks`` runs. Each notebook runs top to bottom in a fresh kernel (its own
folder as working directory), exactly as a student runs it; the stored outputs (plots included)
are what readers of the repository see, and nbval compares the cells marked
``# NBVAL_CHECK_OUTPUT`` against them. A notebook that raises is reported and left unchanged.

Stored outputs must read well in a static view (GitHub, nbviewer, the site of ``make site``) and
must not change from one run to the next, so that ``make notebooks`` twice leaves ``git diff``
empty. Three things see to that:

* the kernel runs with :data:`STORED_OUTPUT_ENV`: tqdm's environment overrides give every
  progress bar a format without elapsed time, remaining time or speed;
* :func:`clean_stream_outputs` merges each run of consecutive stream outputs and applies the
  carriage returns a terminal would, so a progress bar is stored as its final line only, instead
  of one output per refresh;
* a cell tagged :data:`MEASURED_TAG` (cell metadata ``"tags": ["measured"]``) plots wall-clock
  times, which differ on every run (the course prints none: the same run prints the same
  numbers). It is executed like every other cell (its asserts run), but its stored outputs are
  those of the run that first stored them, kept for as long as its code and the code above it
  are what produced them (a fingerprint in the cell's metadata says which, and of which
  outputs); ``--remeasure`` stores the new run's, and a library change that moves what a
  measured cell shows needs it. A reader of the static notebook sees times measured once, a
  student running it sees their own machine's.

A cell that nbval skips (a line ``# NBVAL_SKIP``, or the tag ``nbval-skip``: :func:`is_skipped`)
is not executed here either and stores no output: the only such cells are the grader's own test
cells of 08's homework, which retrain a submitted recipe for minutes (they run when a submission
is graded: ``python -m course_tools grade``, nbgrader's autograde).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

# tqdm (>= 4.66) reads TQDM_<ARGUMENT> environment variables as defaults for its arguments.
# The stored bar shows what is the same on every run: description, percentage, count, postfix.
STORED_OUTPUT_ENV = {
    "TQDM_BAR_FORMAT": "{l_bar}{bar}| {n_fmt}/{total_fmt}{postfix}",
    "TQDM_MININTERVAL": "3600",  # no intermediate frames where the caller leaves the default
}

MEASURED_TAG = "measured"  # cells whose outputs hold timings: see the module's docstring

# Everything on a line up to a carriage return that more text follows (what a terminal overwrites).
_OVERWRITTEN = re.compile(r"[^\n]*\r(?=[^\r\n])")
_BACKSPACE = re.compile("[^\n\x08]\x08")  # a character, then a backspace (\x08) erasing it


def apply_control_characters(text: str) -> str:
    """``text`` as a terminal shows it: ``\\r`` returns to the line's start, ``\\b`` erases.

    Progress bars redraw their line with ``\\r``; only the last drawing survives. Trailing spaces
    that padded a shorter redraw are removed from the lines that were redrawn.
    """
    while True:
        shorter = _BACKSPACE.sub("", text)
        if shorter == text:
            break
        text = shorter
    lines = []
    for line in text.split("\n"):
        redrawn = "\r" in line
        line = _OVERWRITTEN.sub("", line).replace("\r", "")
        lines.append(line.rstrip(" ") if redrawn else line)
    return "\n".join(lines)


def clean_stream_outputs(outputs: list) -> list:
    """Merge consecutive stream outputs of the same stream and apply their control characters.

    Only *consecutive* outputs are merged, so the order of text, plots and tables is kept. A line
    that a stream left open (a bar's last frame) is completed by that stream's next text, even
    when the kernel sent other outputs in between (ipykernel sends a flushed bar frame at once
    but the bar's closing newline only with its next timed flush). Returns a new list; outputs
    left empty (a bar drawn and erased) are dropped.
    """
    cleaned: list = []
    open_lines: dict = {}  # stream name -> its last output, when that ends inside a line
    for output in outputs:
        if output.get("output_type") != "stream":
            cleaned.append(output)
            continue
        name, text = output["name"], output["text"]
        if name in open_lines:
            head, newline, text = text.partition("\n")
            open_lines[name]["text"] += head + newline
            if newline:
                del open_lines[name]
        if not text:
            continue
        previous = cleaned[-1] if cleaned else None
        if previous is not None and previous.get("output_type") == "stream" and previous["name"] == name:
            previous["text"] += text
        else:
            output["text"] = text
            cleaned.append(output)
            previous = output
        if not previous["text"].endswith("\n"):
            open_lines[name] = previous
    for output in cleaned:
        if output.get("output_type") == "stream":
            output["text"] = apply_control_characters(output["text"])
    return [o for o in cleaned if o.get("output_type") != "stream" or o["text"]]


def find_notebooks(path: Path) -> list[Path]:
    """``path`` itself if it is a notebook, else every ``*.ipynb`` below it.

    Checkpoints are skipped, and so are the generated translations in a language folder below
    ``path`` (``notebooks/zh-Hans/``: written by :mod:`course_tools.translation.translate`, not executed);
    pass the language folder itself to get them.
    """
    from lectures_lib.languages import LANGUAGES  # the course's languages: en, zh-Hans, zh-Hant

    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts
                  and not set(p.relative_to(path).parts[:-1]) & set(LANGUAGES))


def is_measured(cell) -> bool:
    """Whether ``cell`` is a code cell tagged :data:`MEASURED_TAG` (its outputs hold timings)."""
    return cell.cell_type == "code" and MEASURED_TAG in cell.get("metadata", {}).get("tags", [])


SKIP_MARKER = "NBVAL_SKIP"  # nbval's own marker: a comment line, or the tag nbval-skip


def is_skipped(cell) -> bool:
    """Whether nbval skips ``cell`` (and so does :func:`execute_in_place`)."""
    if cell.cell_type != "code":
        return False
    tags = cell.get("metadata", {}).get("tags", [])
    lines = (line.strip() for line in "".join(cell.source).splitlines())
    return "nbval-skip" in tags or any(line.startswith("#") and line.lstrip("#").strip()
                                       == SKIP_MARKER for line in lines)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def measurement_fingerprint(notebook, index: int) -> dict[str, str]:
    """What produced the stored outputs of measured cell ``index``, and what they are.

    ``code_sha256`` covers the source of every code cell up to and including this one (an edit
    above it, e.g. to the models it times, counts too); ``outputs_sha256`` covers the outputs as
    ``make notebooks`` stored them (outputs saved from an interactive run do not match).
    """
    code = [cell.source for cell in notebook.cells[: index + 1] if cell.cell_type == "code"]
    outputs = json.dumps(notebook.cells[index].get("outputs", []), sort_keys=True)
    return {"code_sha256": _sha256("\x00".join(code)), "outputs_sha256": _sha256(outputs)}


def stored_measurements(notebook) -> dict[int, list]:
    """Copies of the stored outputs of the measured cells that are still what they record.

    Keyed by the cell's index. A measured cell records :func:`measurement_fingerprint` in
    ``metadata["measured"]``; a cell whose code (or the code above it) was edited since, or whose
    outputs were saved by another run, is left out and measured anew.
    """
    kept = {}
    for index, cell in enumerate(notebook.cells):
        recorded = cell.get("metadata", {}).get(MEASURED_TAG)
        if (is_measured(cell) and cell.outputs and isinstance(recorded, dict)
                and recorded == measurement_fingerprint(notebook, index)):
            kept[index] = copy.deepcopy(cell.outputs)
    return kept


def english_measurements(notebook, english) -> dict[int, tuple[list, dict]]:
    """The measured cells' outputs and records of ``english``, for its edition ``notebook``.

    An edition (zh-Hans, zh-Hant) shows the English run's timings, never its own: its code is the
    English code (zh-Hant's Chinese strings converted), so a fingerprint of its own code would
    differ from the English record and every edition would re-time, and store other numbers each
    run. Keyed by cell index; ValueError when the two notebooks' cells do not line up."""
    if [c.get("id") for c in notebook.cells] != [c.get("id") for c in english.cells]:
        raise ValueError("english must be the English notebook of this edition (the same cells "
                         "in the same order): regenerate the edition first")
    return {index: (copy.deepcopy(cell.outputs), copy.deepcopy(cell.metadata.get(MEASURED_TAG)))
            for index, cell in enumerate(english.cells) if is_measured(cell) and cell.outputs}


def execute_in_place(path: Path, timeout: int = 600, remeasure: bool = False,
                     env: dict[str, str] | None = None, english: Path | None = None) -> float:
    """Execute one notebook in a fresh ``python3`` kernel and save it; returns seconds taken.

    Measured cells (:func:`is_measured`) whose source is unchanged keep their stored outputs
    unless ``remeasure``. ``env`` adds environment variables for the kernel (a language).
    ``english``: for an edition, the English notebook whose measured outputs (and their records)
    it shows (:func:`english_measurements`).
    """
    notebook = nbformat.read(path, as_version=4)
    records = {}
    if english is not None:
        records = english_measurements(notebook, nbformat.read(english, as_version=4))
        kept = {index: outputs for index, (outputs, _) in records.items()}
    else:
        kept = {} if remeasure else stored_measurements(notebook)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,  # no timestamps in the stored notebook: diffs stay readable
    )
    skipped = {index: cell.source for index, cell in enumerate(notebook.cells) if is_skipped(cell)}
    for index in skipped:  # nbclient runs no cell whose source is empty
        notebook.cells[index].source = ""
    start = time.perf_counter()
    try:
        client.execute(env={**os.environ, **STORED_OUTPUT_ENV, **(env or {})})
    finally:
        for index, source in skipped.items():
            notebook.cells[index].source = source
    seconds = time.perf_counter() - start
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = clean_stream_outputs(cell.outputs)
    for index, cell in enumerate(notebook.cells):
        if index in kept:
            cell.outputs = kept[index]
            for output in cell.outputs:  # numbered by this run, like the cells around it
                if output.get("output_type") == "execute_result":
                    output["execution_count"] = cell.execution_count
        if index in records:
            cell.metadata[MEASURED_TAG] = records[index][1]
        elif is_measured(cell):
            cell.metadata[MEASURED_TAG] = measurement_fingerprint(notebook, index)
    nbformat.write(notebook, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    execute = commands.add_parser("execute", help="execute notebooks in place")
    execute.add_argument("path", type=Path, help="a notebook or a folder of notebooks")
    execute.add_argument("--remeasure", action="store_true",
                         help=f"store the new outputs of cells tagged {MEASURED_TAG!r} (time plots) too")
    args = parser.parse_args(argv)
    failed = []
    for path in find_notebooks(args.path):
        print(f"executing {path} ...", flush=True)
        try:
            seconds = execute_in_place(path, remeasure=args.remeasure)
        except Exception as error:  # report every failing notebook, then fail
            print(f"FAILED {path}: {type(error).__name__}: {str(error)[-2000:]}", file=sys.stderr)
            failed.append(path)
        else:
            print(f"executed {path} in {seconds:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
