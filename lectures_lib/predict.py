"""Predict first, then run: an experiment that waits for the learner's prediction.

Several exercises ask the learner to predict what a cell will print *before* running it. Run All
(the way most learners start a notebook) used to run that cell too and print the answer first.
Now the learner writes the prediction as the body of a function, ``my_prediction()``; in a
student copy its body raises ``NotImplementedError`` until then, and the experiment cell hands
both to :func:`after_prediction`, which runs the experiment only once a prediction is written.
Until then the cell prints one line saying so, and Run All goes on without the answer.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["after_prediction", "WAITING"]

WAITING = ("Not run yet: write your prediction in my_prediction() above (return a sentence), "
           "run that cell, then run this one.")


def _check_callable(value: object, name: str) -> Callable:
    if not callable(value):
        raise TypeError(f"{name} must be a function (called with no argument), got "
                        f"{type(value).__name__}")
    return value


def after_prediction(prediction: Callable[[], str], experiment: Callable[[], object]) -> object:
    """Run ``experiment()`` once ``prediction()`` returns the learner's prediction.

    ``prediction``: the exercise's ``my_prediction``, returning the prediction as text (raising
    ``NotImplementedError``, or returning an empty text or None, while it is not written);
    ``experiment``: the cell's experiment, run with no argument. Prints the prediction before
    running the experiment, so the two are side by side; returns the experiment's result, or
    None (after printing :data:`WAITING`) while there is no prediction.
    """
    _check_callable(prediction, "prediction")
    _check_callable(experiment, "experiment")
    try:
        written = prediction()
    except NotImplementedError:
        written = None
    if written is not None and not isinstance(written, str):
        raise TypeError(f"prediction must return the prediction as a str, got "
                        f"{type(written).__name__}")
    if not written or not written.strip():
        print(WAITING)
        return None
    print(f"Your prediction: {written.strip()}")
    return experiment()
