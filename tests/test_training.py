"""lectures_lib.training: accuracy, fit and evaluate."""

import pytest
import torch
from torch import nn

from lectures_lib.training import History, accuracy, evaluate, fit


def test_accuracy_and_ignore_index():
    logits = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]])  # predicts 1, 0, 0
    targets = torch.tensor([[1, 1, 0]])
    assert accuracy(logits, targets) == pytest.approx(2 / 3)
    assert accuracy(logits, targets, ignore_index=0) == pytest.approx(1 / 2)
    with pytest.raises(ValueError, match="do not match"):
        accuracy(logits, targets[:, :2])


def _separable_data(n=256, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=generator)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return x, y


def test_fit_learns_a_separable_problem_and_records_history():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    train, held_out = _separable_data(seed=0), _separable_data(seed=1)
    history = fit(
        model, train, epochs=30, lr=0.05, eval_data=held_out, progress=False, device=torch.device("cpu")
    )
    assert isinstance(history, History)
    assert len(history.loss) == len(history.train_accuracy) == len(history.eval_accuracy) == 30
    assert len(history.step_loss) == 30 * 4  # 256 examples in batches of 64
    assert history.loss[-1] < history.loss[0] / 3
    assert history.final_accuracy >= 0.95 and evaluate(model, held_out) == history.final_accuracy


def test_fit_is_deterministic():
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        runs.append(fit(model, _separable_data(), epochs=3, progress=False).step_loss)
    assert runs[0] == runs[1]


def test_fit_rejects_mismatched_data():
    x, y = _separable_data()
    with pytest.raises(ValueError, match="same first dimension"):
        fit(nn.Linear(4, 2), (x, y[:10]), epochs=1, progress=False)
    with pytest.raises(TypeError, match="tuple of tensors"):
        fit(nn.Linear(4, 2), x, epochs=1, progress=False)
