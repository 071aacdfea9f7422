"""The committed notebooks are what a reader sees: executed cleanly, top to bottom, in order.

nbval (``make test``) re-executes every notebook; these checks look at the *stored* version:
it must come from one clean run (``make notebooks``), so its outputs are neither stale nor broken.
"""

import json
import re
from pathlib import Path

import nbformat
import pytest

from course_tools.publish.notebooks import (
    MEASURED_TAG,
    is_measured,
    is_skipped,
    measurement_fingerprint,
)

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))
EXPECTED_SECTIONS = [
    "01_self_attention",
    "02_multi_head_attention",
    "03_positional_encoding",
    "04_transformer_encoder",
    "05_transformer_decoder",
    "06_attention_variants",
    "07_efficient_attention",
    "08_real_sentences",
]


def _code_cells(notebook):
    """The code cells a run executes (not those nbval skips: the grader's homework tiers)."""
    return [cell for cell in notebook.cells if cell.cell_type == "code" and not is_skipped(cell)]


def test_every_section_has_its_notebook_in_reading_order():
    names = [p.stem for p in PATHS]
    present = [name for name in EXPECTED_SECTIONS if name in names]
    assert present == EXPECTED_SECTIONS, f"missing notebooks: {set(EXPECTED_SECTIONS) - set(names)}"
    assert all(re.fullmatch(r"\d\d_[a-z0-9_]+", n) for n in names), names


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
class TestStoredNotebook:
    def test_is_valid_and_uses_the_standard_kernel(self, path):
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert notebook.metadata.get("kernelspec", {}).get("name") == "python3"

    def test_was_executed_top_to_bottom_in_one_run(self, path):
        counts = [cell.execution_count for cell in _code_cells(nbformat.read(path, as_version=4))]
        expected = list(range(1, len(counts) + 1))
        assert counts == expected, (
            f"{path.name}: execution counts {counts} are not 1..{len(counts)}: run "
            "`make notebooks` to re-execute it cleanly"
        )

    def test_has_no_error_output(self, path):
        for index, cell in enumerate(_code_cells(nbformat.read(path, as_version=4))):
            for output in cell.get("outputs", []):
                assert output.output_type != "error", f"{path.name}: code cell {index} stored an error"
                text = output.get("text", "")
                assert "Traceback (most recent call last)" not in text, f"{path.name}: cell {index}"

    def test_stores_each_progress_bar_as_one_line_without_timings(self, path):
        """Bar frames (one output per refresh, or lines redrawn with \r) and timings that change
        every run make a static view unreadable and every `make notebooks` a diff."""
        timing = re.compile(r"\[\d+:\d\d<|\d(it/s|s/it)\b|\[\d+:\d\d, ")
        for index, cell in enumerate(_code_cells(nbformat.read(path, as_version=4))):
            outputs = cell.get("outputs", [])
            for before, after in zip(outputs, outputs[1:]):
                same_stream = (before.output_type == after.output_type == "stream"
                               and before.name == after.name)
                assert not same_stream, (
                    f"{path.name}: code cell {index} stores its {after.name} in pieces (progress-"
                    "bar frames?): run `make notebooks`, which merges them"
                )
            for output in outputs:
                text = output.get("text", "") if output.output_type == "stream" else ""
                assert "\r" not in text, f"{path.name}: code cell {index} stores redrawn lines"
                found = timing.search(text)
                assert not found, f"{path.name}: code cell {index} stores a timing {found[0]!r}"

    def test_measured_cells_store_the_outputs_their_fingerprint_names(self, path):
        """Otherwise the next `make notebooks` measures them anew and leaves a diff."""
        notebook = nbformat.read(path, as_version=4)
        for index, cell in enumerate(notebook.cells):
            if is_measured(cell):
                assert cell.outputs, f"{path.name}: measured cell {index} stores no output"
                assert cell.metadata.get(MEASURED_TAG) == measurement_fingerprint(notebook, index), (
                    f"{path.name}: measured cell {index} (or the code above it) changed since its "
                    "outputs were stored: run `make notebooks`"
                )

    def test_prints_no_wall_clock_time_and_tags_the_cells_that_plot_one(self, path):
        """The same run prints the same numbers: times are plotted, never printed, and a cell that
        reads a clock and shows a plot or a value is tagged "measured", so that `make notebooks`
        keeps its stored plot and a second run leaves `git diff` empty."""
        time_units = re.compile(r"\d\s*(ms|µs|us|seconds?)\b|\bms/step\b|\bs/it\b", re.IGNORECASE)
        clocks = re.compile(r"\b(perf_counter|process_time|monotonic|time\.time|median_time)(_ns)?\(")
        for index, cell in enumerate(_code_cells(nbformat.read(path, as_version=4))):
            for output in cell.get("outputs", []):
                text = output.get("text", "") if output.output_type == "stream" else ""
                text += "".join(output.get("data", {}).get("text/plain", ""))
                found = time_units.search(text)
                assert not found, (
                    f"{path.name}: code cell {index} prints a wall-clock time ({found[0]!r}): "
                    "plot it in a cell tagged 'measured', or print work that is counted"
                )
            found = clocks.search(cell.source)
            plots = any(o.output_type in ("display_data", "execute_result") for o in cell.outputs)
            assert is_measured(cell) or not (found and plots), (
                f"{path.name}: code cell {index} reads a clock ({found and found[0]!r}) and shows "
                f"a plot or a value, which then change every run: tag it {MEASURED_TAG!r}"
            )

    def test_stores_no_path_of_this_machine(self, path):
        text = path.read_text()
        for fragment in (str(Path.home()) + "/", str(NOTEBOOKS.parent) + "/", "/tmp/"):
            assert fragment not in text, f"{path.name} stores the local path {fragment!r}"

    def test_seeds_first_and_proves_with_asserts(self, path):
        cells = _code_cells(nbformat.read(path, as_version=4))
        assert "seed_everything(" in cells[0].source, f"{path.name}: seed in the first code cell"
        source = "\n".join(cell.source for cell in cells)
        assert source.count("assert ") >= 5, f"{path.name}: claims must be executable asserts"

    def test_shows_plots(self, path):
        notebook = nbformat.read(path, as_version=4)
        images = [
            output for cell in _code_cells(notebook) for output in cell.get("outputs", [])
            if "image/png" in output.get("data", {})
        ]
        assert images, f"{path.name}: no stored plot"

    def test_ends_with_summary_exercises_and_reading(self, path):
        notebook = nbformat.read(path, as_version=4)
        headings = [
            line.strip().lstrip("#").strip().lower()
            for cell in notebook.cells if cell.cell_type == "markdown"
            for line in cell.source.splitlines() if line.startswith("## ")
        ]
        tail = [h for h in headings if h in ("summary", "exercises", "further reading")]
        assert tail == ["summary", "exercises", "further reading"], (
            f"{path.name}: expected '## Summary', '## Exercises', '## Further reading' in this "
            f"order, found {tail}"
        )
        assert "### BEGIN SOLUTION" in json.dumps(notebook.dict()), f"{path.name}: no exercise"


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_no_code_reads_a_path_relative_to_the_notebooks_folder(path):
    """The same code runs in notebooks/zh-Hans/ and notebooks/zh-Hant/ (and in a student's copy),
    one folder deeper: a path like "../benchmarks/..." that works from notebooks/ breaks there."""
    notebook = nbformat.read(path, as_version=4)
    relative = [(index, line.strip()) for index, cell in enumerate(notebook.cells)
                if cell.cell_type == "code" for line in cell.source.splitlines()
                if re.search(r"""["']\.\./""", line)]
    assert not relative, f"{path.name}: cells read paths relative to notebooks/: {relative}"
