"""utils, training and plotting: the machinery every notebook relies on."""

import matplotlib
import numpy as np
import pytest
import torch
from torch import nn

from lectures_lib import plotting
from lectures_lib.training import History, accuracy, evaluate, fit
from lectures_lib.utils import check_positive_int, check_tensor, get_device, seed_everything


def test_seed_everything_makes_runs_repeat_and_pins_threads():
    seed_everything(3)
    first = (torch.rand(3), np.random.rand(3))
    seed_everything(3)
    second = (torch.rand(3), np.random.rand(3))
    assert torch.equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    assert torch.get_num_threads() == 1
    seed_everything(4)
    assert not torch.equal(torch.rand(3), first[0])


@pytest.mark.parametrize("bad", [1.5, "0", True, None])
def test_seed_everything_rejects_non_integers(bad):
    with pytest.raises(TypeError, match="seed must be an int"):
        seed_everything(bad)


def test_get_device_defaults_to_cuda_only_when_present(monkeypatch):
    monkeypatch.delenv("LECTURES_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert get_device().type == expected
    assert get_device("cpu").type == "cpu"
    monkeypatch.setenv("LECTURES_DEVICE", "cpu")
    assert get_device().type == "cpu"
    if not torch.cuda.is_available():
        monkeypatch.setenv("LECTURES_DEVICE", "cuda")
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            get_device()


def test_check_tensor_names_expected_and_actual():
    x = torch.zeros(2, 3)
    assert check_tensor(x, "x", ndim=2, dtype="floating", shape=(2, None)) is x
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got an object of type list"):
        check_tensor([1.0], "x")
    with pytest.raises(ValueError, match=r"must have 3 dimensions, got 2 \(shape \(2, 3\)\)"):
        check_tensor(x, "x", ndim=3)
    with pytest.raises(TypeError, match="must have dtype integer, got torch.float32"):
        check_tensor(x, "x", dtype="integer")
    with pytest.raises(ValueError, match=r"must have shape \(\*, 4\), got \(2, 3\)"):
        check_tensor(x, "x", shape=(None, 4))
    with pytest.raises(ValueError, match="must be >= 1, got 0"):
        check_positive_int(0, "n")
    with pytest.raises(TypeError, match="must be an int, got float"):
        check_positive_int(2.0, "n")


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


def test_plots_draw_and_validate():
    matplotlib.use("Agg")
    weights = torch.softmax(torch.randn(2, 3, 5, 5), dim=-1)
    ax = plotting.plot_attention(weights[0, 0], query_labels=list("abcde"), key_labels=list("abcde"))
    assert len(ax.images) == 1
    fig = plotting.plot_attention_heads(weights)
    assert len([a for a in fig.axes if a.images]) == 6
    assert plotting.plot_mask(torch.ones(4, 4, dtype=torch.bool).tril()).images
    with pytest.raises(TypeError, match="torch.bool"):
        plotting.plot_mask(torch.ones(4, 4))
    with pytest.raises(ValueError, match="must be 2-D"):
        plotting.plot_attention(weights)
    history = History(loss=[1.0, 0.5], train_accuracy=[0.5, 0.9], eval_accuracy=[0.4, 0.8])
    assert len(plotting.plot_history({"a": history, "b": history}).axes) == 2
    matplotlib.pyplot.close("all")


def test_per_head_grids_have_one_shared_colour_bar():
    matplotlib.use("Agg")
    fig = plotting.plot_attention_heads(torch.softmax(torch.randn(2, 3, 4, 4), dim=-1))
    maps = [a for a in fig.axes if a.images]
    colour_bars = [a for a in fig.axes if not a.images]
    assert len(maps) == 6 and len(colour_bars) == 1
    assert colour_bars[0].get_ylim() == (0.0, 1.0), "the bar spans the weights' range 0..1"
    matplotlib.pyplot.close("all")


def test_plot_history_one_colour_per_run_and_legend_outside_the_curves():
    matplotlib.use("Agg")
    near_one = History(loss=[0.5, 0.1, 0.01], train_accuracy=[0.95, 0.99, 1.0],
                       eval_accuracy=[0.94, 0.99, 1.0])
    fig = plotting.plot_history({"a": near_one, "b": near_one, "c": near_one})
    ax_loss, ax_acc = fig.axes
    for index, line in enumerate(ax_loss.lines):  # one loss curve per run
        accuracy_lines = ax_acc.lines[2 * index : 2 * index + 2]  # train, held-out
        assert {acc.get_color() for acc in accuracy_lines} == {line.get_color()}
    assert len({line.get_color() for line in ax_loss.lines}) == 3, "three runs, three colours"
    fig.canvas.draw()
    legend_box = ax_acc.get_legend().get_window_extent()
    axes_box = ax_acc.get_window_extent()
    assert legend_box.x0 >= axes_box.x1, "the legend sits right of the panel, over no curve"
    matplotlib.pyplot.close("all")
