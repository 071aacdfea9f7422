"""`make notebooks` (course_tools.publish.notebooks) stores clean, reproducible outputs.

A progress bar is stored as its final line, without timings; two runs write the same file; a cell
tagged "measured" keeps the timings it stored until its code changes.
"""

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_tools.publish.notebooks import (
    MEASURED_TAG,
    apply_control_characters,
    clean_stream_outputs,
    execute_in_place,
)

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

BAR_FRAMES = [
    "\rtraining:   0%|          | 0/3 [00:00<?, ?it/s]",
    "\rtraining:  33%|###3      | 1/3 [00:00<00:01,  1.52it/s, loss=0.9]",
    "\rtraining: 100%|##########| 3/3 [00:01<00:00,  2.01it/s, loss=0.5]",
    "\n",
]


def test_carriage_return_keeps_the_last_drawing_of_a_line():
    assert apply_control_characters("".join(BAR_FRAMES)) == (
        "training: 100%|##########| 3/3 [00:01<00:00,  2.01it/s, loss=0.5]\n"
    )
    assert apply_control_characters("abc\rxy\n") == "xy\n", "the whole line is redrawn"
    assert apply_control_characters("done\r\n") == "done\n", "\\r before \\n changes nothing"
    assert apply_control_characters("ab\x08c") == "ac", "a backspace erases one character"
    plain = "no control characters\n\nat all: 1\\b 2\n"
    assert apply_control_characters(plain) == plain


def test_consecutive_stream_outputs_merge_and_order_is_kept():
    outputs = [
        new_output("stream", name="stdout", text="before\n"),
        *[new_output("stream", name="stderr", text=frame) for frame in BAR_FRAMES],
        new_output("display_data", data={"text/plain": "<Figure>"}),
        new_output("stream", name="stderr", text="\rsecond: 0%|\rsecond: 100%|\n"),
        new_output("stream", name="stdout", text="after\n"),
    ]
    cleaned = clean_stream_outputs(outputs)
    assert [(o.output_type, o.get("name")) for o in cleaned] == [
        ("stream", "stdout"), ("stream", "stderr"), ("display_data", None),
        ("stream", "stderr"), ("stream", "stdout"),
    ]
    assert cleaned[1].text.count("\n") == 1 and cleaned[1].text.startswith("training: 100%")
    assert cleaned[3].text == "second: 100%|\n"


def test_a_bars_late_newline_completes_its_line():
    """ipykernel sends a flushed frame at once, the bar's closing newline with a later flush."""
    outputs = [
        new_output("stream", name="stderr", text="\rtoy: 0%|"),
        new_output("stream", name="stderr", text="\rtoy: 100%|"),
        new_output("stream", name="stdout", text="end\n"),
        new_output("display_data", data={"text/plain": "<Figure>"}),
        new_output("stream", name="stderr", text="\nwarning: something\n"),
    ]
    cleaned = clean_stream_outputs(outputs)
    assert [(o.get("name"), o.get("text")) for o in cleaned] == [
        ("stderr", "toy: 100%|\n"), ("stdout", "end\n"), (None, None),
        ("stderr", "warning: something\n"),
    ]


def test_executed_bar_is_one_line_without_timings_and_runs_repeat_exactly(tmp_path):
    source = (
        "import time\n"
        "from tqdm import tqdm\n"
        "print('start')\n"
        "for step in tqdm(range(4), desc='toy', mininterval=0):\n"
        "    time.sleep(0.05)\n"
        "print('end')"
    )
    notebook = new_notebook(cells=[new_code_cell(source)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    path = tmp_path / "toy.ipynb"
    nbformat.write(notebook, path)
    execute_in_place(path)
    first = path.read_text()
    outputs = nbformat.read(path, as_version=4).cells[0].outputs
    bars = [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    assert bars == ["toy: 100%|██████████| 4/4\n"], f"one final line, no timing: {bars}"
    execute_in_place(path)
    assert path.read_text() == first, "a second run must store exactly the same notebook"


def _one_cell_notebook(tmp_path, source, tags=()):
    cell = new_code_cell(source)
    cell.metadata["tags"] = list(tags)
    notebook = new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    path = tmp_path / "timed.ipynb"
    nbformat.write(notebook, path)
    return path


def _printed(path):
    return "".join(o.text for o in nbformat.read(path, as_version=4).cells[0].outputs
                   if o.output_type == "stream")


TIMING_CELL = "import time\nprint(f'{time.perf_counter_ns()} ns')"


def test_a_measured_cell_keeps_its_stored_timings_until_its_code_changes(tmp_path):
    path = _one_cell_notebook(tmp_path, TIMING_CELL, tags=[MEASURED_TAG])
    execute_in_place(path)
    first = _printed(path)
    assert first.endswith(" ns\n"), first
    execute_in_place(path)
    assert _printed(path) == first, "an unchanged measured cell keeps the stored timing"
    execute_in_place(path, remeasure=True)
    remeasured = _printed(path)
    assert remeasured != first, "--remeasure stores the new run's timing"

    notebook = nbformat.read(path, as_version=4)
    notebook.cells[0].source = TIMING_CELL + "  # changed"
    nbformat.write(notebook, path)
    execute_in_place(path)
    assert _printed(path) not in ("", remeasured), "a changed cell is measured anew"


def test_a_measured_cell_is_measured_anew_after_an_edit_above_it_or_another_save(tmp_path):
    cells = [new_code_cell("repeats = 3"), new_code_cell(TIMING_CELL)]
    cells[1].metadata["tags"] = [MEASURED_TAG]
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    path = tmp_path / "two.ipynb"
    nbformat.write(notebook, path)

    def printed():
        return nbformat.read(path, as_version=4).cells[1].outputs[0].text

    execute_in_place(path)
    first = printed()
    execute_in_place(path)
    assert printed() == first

    notebook = nbformat.read(path, as_version=4)
    notebook.cells[0].source = "repeats = 5"  # what the measured cell times has changed
    nbformat.write(notebook, path)
    execute_in_place(path)
    second = printed()
    assert second != first, "an edit above a measured cell measures it anew"

    notebook = nbformat.read(path, as_version=4)
    notebook.cells[1].outputs[0].text = "saved from JupyterLab\n"  # another run's outputs
    nbformat.write(notebook, path)
    execute_in_place(path)
    assert printed() not in (second, "saved from JupyterLab\n"), "outputs make notebooks did not store"


def test_kept_outputs_are_renumbered_when_a_cell_is_added_above(tmp_path):
    cell = new_code_cell("import time\ntime.perf_counter_ns()")
    cell.metadata["tags"] = [MEASURED_TAG]
    notebook = new_notebook(cells=[cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    path = tmp_path / "value.ipynb"
    nbformat.write(notebook, path)
    execute_in_place(path)
    shown = nbformat.read(path, as_version=4).cells[0].outputs[0]
    assert shown.output_type == "execute_result" and shown.execution_count == 1

    notebook = nbformat.read(path, as_version=4)
    notebook.cells.insert(0, new_markdown_cell("a heading above changes no code"))
    nbformat.write(notebook, path)
    execute_in_place(path)
    kept = nbformat.read(path, as_version=4).cells[1]
    assert kept.outputs[0].data == shown.data, "markdown is not code: the measurement is kept"
    assert kept.outputs[0].execution_count == kept.execution_count == 1


def test_an_untagged_cell_stores_every_runs_output(tmp_path):
    path = _one_cell_notebook(tmp_path, TIMING_CELL)
    execute_in_place(path)
    first = _printed(path)
    execute_in_place(path)
    assert _printed(path) != first


def test_a_measured_cell_still_runs_its_asserts(tmp_path):
    path = _one_cell_notebook(tmp_path, "print('1 ms')", tags=[MEASURED_TAG])
    execute_in_place(path)
    notebook = nbformat.read(path, as_version=4)
    notebook.cells[0].source = "print('1 ms')\nassert False, 'slower than claimed'"
    nbformat.write(notebook, path)
    with pytest.raises(Exception, match="slower than claimed"):
        execute_in_place(path)


def test_an_edition_shows_the_english_timings_not_its_own():
    """zh-Hant converts the Chinese of code cells above a measured cell, so the fingerprint of its
    own code never matches the English record: the edition takes the English outputs and records
    (issue 40's conversion re-timed 06 in zh-Hant, with other numbers on every run)."""
    import nbformat

    from course_tools.publish.notebooks import MEASURED_TAG, english_measurements

    def notebook(title, seconds):
        cells = [nbformat.v4.new_code_cell(f'plt.title("{title}")', id="above"),
                 nbformat.v4.new_code_cell("time_it()", id="timed", metadata={"tags": [MEASURED_TAG]}),
                 nbformat.v4.new_code_cell("1 + 1", id="plain")]
        cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{seconds} s\n")]
        cells[1].metadata[MEASURED_TAG] = {"code_sha256": title, "outputs_sha256": str(seconds)}
        cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="2\n")]
        return nbformat.v4.new_notebook(cells=cells)

    english, edition = notebook("聚类", 0.25), notebook("聚類", 0.75)
    taken = english_measurements(edition, english)
    assert list(taken) == [1], "only the measured cell"
    outputs, record = taken[1]
    assert outputs[0]["text"] == "0.25 s\n" and record == english.cells[1].metadata[MEASURED_TAG]
    shuffled = nbformat.v4.new_notebook(cells=list(reversed(edition.cells)))
    with pytest.raises(ValueError, match="the same cells"):
        english_measurements(shuffled, english)


def test_a_cell_nbval_skips_is_not_run_and_stores_nothing(tmp_path):
    """08's homework tiers retrain a recipe for minutes: nbval skips them, so does make notebooks
    (a line ``# NBVAL_SKIP``, or the tag ``nbval-skip``); the cells keep their source."""
    from course_tools.publish.notebooks import is_skipped

    grader = "# the grader's test\n# NBVAL_SKIP\nraise SystemExit('ran')"
    tagged = new_code_cell("raise SystemExit('ran too')")
    tagged.metadata["tags"] = ["nbval-skip"]
    mention = new_code_cell("x = 1  # NBVAL_SKIP is only named here\nx")
    notebook = new_notebook(cells=[new_code_cell("1 + 1"), new_code_cell(grader), tagged,
                                   mention])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    path = tmp_path / "skips.ipynb"
    nbformat.write(notebook, path)
    assert [is_skipped(c) for c in notebook.cells] == [False, True, True, False]
    execute_in_place(path)
    cells = nbformat.read(path, as_version=4).cells
    assert cells[1].source == grader and cells[2].source == "raise SystemExit('ran too')"
    assert [c.execution_count for c in cells] == [1, None, None, 2]
    assert cells[1].outputs == cells[2].outputs == [] and cells[3].outputs[0].data["text/plain"] == "1"
