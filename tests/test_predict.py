"""after_prediction (issue 40): a "predict first" experiment waits for the prediction, so Run All
cannot show the answer before the learner has written one."""

import pytest

from lectures_lib.predict import WAITING, after_prediction


def _not_written():
    raise NotImplementedError()


@pytest.mark.parametrize("prediction", [_not_written, lambda: None, lambda: "  "])
def test_without_a_prediction_the_experiment_does_not_run(prediction, capsys):
    ran = []
    assert after_prediction(prediction, lambda: ran.append(1)) is None
    assert ran == [] and capsys.readouterr().out.strip() == WAITING


def test_with_a_prediction_it_runs_and_shows_the_prediction_first(capsys):
    assert after_prediction(lambda: "the max weight tends to 1", lambda: print("result") or 7) == 7
    assert capsys.readouterr().out.splitlines() == [
        "Your prediction: the max weight tends to 1", "result"]


def test_another_error_in_the_prediction_is_not_hidden():
    def broken():
        raise ValueError("a bug in my cell")

    with pytest.raises(ValueError, match="a bug in my cell"):
        after_prediction(broken, lambda: None)


def test_every_predict_first_exercise_waits_for_its_prediction():
    """Every "predict first" exercise of every notebook is followed by ``my_prediction()`` (its
    body the solution, so a student copy raises until the learner writes one) and by an experiment
    handed to :func:`after_prediction`: Run All cannot print the answer first."""
    import nbformat

    from lectures_lib.course import course_files

    found = 0
    for path in sorted((course_files() / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        for i, cell in enumerate(cells):
            if cell.cell_type != "markdown" or "predict first" not in cell.source.lower():
                continue
            found += 1
            prediction, experiment = cells[i + 1], cells[i + 2]
            assert prediction.source.startswith("def my_prediction():"), (path.name, cell.id)
            assert "### BEGIN SOLUTION" in prediction.source, (path.name, cell.id)
            assert "after_prediction(my_prediction," in experiment.source, (path.name, cell.id)
    assert found >= 6, f"the scan reads: {found} predict-first exercises"
