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


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="prediction must be a function"):
        after_prediction("my guess", lambda: None)
    with pytest.raises(TypeError, match="experiment must be a function"):
        after_prediction(lambda: "x", None)
    with pytest.raises(TypeError, match="prediction must return the prediction as a str, got int"):
        after_prediction(lambda: 3, lambda: None)


def test_another_error_in_the_prediction_is_not_hidden():
    def broken():
        raise ValueError("a bug in my cell")

    with pytest.raises(ValueError, match="a bug in my cell"):
        after_prediction(broken, lambda: None)
