"""lectures_lib.plotting: every plot draws and validates its input."""

import matplotlib
import pytest
import torch

from lectures_lib import plotting
from lectures_lib.training import History


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
