"""lectures_lib.plotting: every plot draws and validates its input."""

import matplotlib
import pytest
import torch
from torch import nn

from lectures_lib import plotting
from lectures_lib.training import History, fit


def test_plots_draw_and_validate():
    matplotlib.use("Agg")
    weights = torch.softmax(torch.randn(2, 3, 5, 5), dim=-1)
    ax = plotting.plot_attention(weights[0, 0], query_labels=list("abcde"), key_labels=list("abcde"))
    assert len(ax.images) == 1
    fig = plotting.plot_attention_heads(weights)
    assert len([a for a in fig.axes if a.images]) == 6
    assert plotting.plot_mask(torch.ones(4, 4, dtype=torch.bool).tril()).images
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


def test_plot_history_adds_a_learning_rate_panel():
    matplotlib.use("Agg")
    x = torch.randn(96, 4, generator=torch.Generator().manual_seed(0))
    history = fit(nn.Linear(4, 2), (x, (x[:, 0] > 0).long()), epochs=2, progress=False,
                  device=torch.device("cpu"))
    fig = plotting.plot_history({"a": history, "b": history})
    assert len(fig.axes) == 3
    lr_axis = fig.axes[2]
    assert list(lr_axis.lines[0].get_ydata()) == pytest.approx(history.lr)
    no_lr = History(loss=[1.0, 0.5], train_accuracy=[0.5, 0.9])
    assert len(plotting.plot_history(no_lr).axes) == 2
    matplotlib.pyplot.close("all")
