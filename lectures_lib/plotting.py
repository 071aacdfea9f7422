"""Plots a learner would rather look at than read: attention maps, masks, heatmaps, curves.

Defined for the whole course; first used in ``01_self_attention.ipynb``. Every function takes
an optional ``ax`` so plots can be combined, and returns the axes (or the figure for grids).
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from .training import History

__all__ = ["plot_attention", "plot_attention_heads", "plot_mask", "plot_heatmap", "plot_history"]


def _to_numpy_2d(matrix: torch.Tensor | np.ndarray, name: str) -> np.ndarray:
    if isinstance(matrix, torch.Tensor):
        matrix = matrix.detach().float().cpu().numpy()
    matrix = np.asarray(matrix)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_queries, n_keys), got shape {matrix.shape}")
    return matrix


def plot_heatmap(
    matrix,
    *,
    ax=None,
    title: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    cmap: str = "viridis",
    colorbar: bool = True,
    **imshow_kwargs,
):
    """Show a 2-D array as an image with a colour bar."""
    matrix = _to_numpy_2d(matrix, "matrix")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 3.5))
    image = ax.imshow(matrix, cmap=cmap, aspect="auto", interpolation="nearest", **imshow_kwargs)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if title:
        ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    return ax


def plot_attention(
    weights,
    *,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax=None,
    title: str | None = "attention weights",
    colorbar: bool = True,
):
    """Attention map: row i = query i, column j = key j, colour = weight alpha'_{i,j} in [0, 1]."""
    weights = _to_numpy_2d(weights, "weights")
    ax = plot_heatmap(
        weights, ax=ax, title=title, xlabel="key position j", ylabel="query position i",
        cmap="Blues", colorbar=colorbar, vmin=0.0, vmax=1.0,
    )
    if key_labels is not None:
        ax.set_xticks(range(len(key_labels)), key_labels, rotation=90)
    if query_labels is not None:
        ax.set_yticks(range(len(query_labels)), query_labels)
    return ax


def plot_attention_heads(
    weights,
    *,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    suptitle: str | None = None,
    cols: int | None = None,
):
    """One attention map per head (or per layer and head): ``weights`` ``(heads, n_q, n_k)``
    or ``(layers, heads, n_q, n_k)``. One colour bar (weights 0 to 1) serves every map.
    Returns the figure; its first ``layers * heads`` axes are the maps, in order."""
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().float().cpu().numpy()
    weights = np.asarray(weights)
    if weights.ndim == 3:
        weights = weights[None]
    if weights.ndim != 4:
        raise ValueError(
            f"weights must be (heads, n_q, n_k) or (layers, heads, n_q, n_k), got {weights.shape}"
        )
    layers, heads = weights.shape[:2]
    rows, cols = (layers, heads) if cols is None else (int(np.ceil(layers * heads / cols)), cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.8 * cols, 2.6 * rows), squeeze=False)
    flat = weights.reshape(layers * heads, *weights.shape[2:])
    for index, ax in enumerate(axes.flat):
        if index >= len(flat):
            ax.axis("off")
            continue
        layer, head = divmod(index, heads)
        default = f"layer {layer} head {head}" if layers > 1 else f"head {head}"
        plot_attention(
            flat[index], ax=ax, query_labels=query_labels, key_labels=key_labels,
            title=titles[index] if titles else default, colorbar=False,
        )
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    # one shared colour bar, added after the layout so that it takes space from every map alike
    fig.colorbar(axes.flat[0].images[0], ax=list(axes.flat), fraction=0.025, pad=0.02,
                 label="attention weight")
    return fig


def plot_mask(mask, *, ax=None, title: str | None = "mask (dark = may attend)"):
    """Draw a boolean mask: dark cells may attend (True), light cells are blocked (False)."""
    if isinstance(mask, torch.Tensor):
        if mask.dtype != torch.bool:
            raise TypeError(f"mask must have dtype torch.bool, got {mask.dtype}")
        mask = mask.cpu().numpy()
    mask = _to_numpy_2d(mask, "mask").astype(float)
    return plot_heatmap(
        mask, ax=ax, title=title, xlabel="key position j", ylabel="query position i",
        cmap="Greys", colorbar=False, vmin=0.0, vmax=1.0,
    )


def plot_history(history: History | dict[str, History], *, title: str | None = None):
    """Loss and accuracy per epoch; a dict plots several runs side by side for comparison.

    Each run keeps one colour in both panels (training solid, held-out dashed); the legend sits
    outside the panels, so it never hides the curves (which crowd near accuracy 1). When the runs
    recorded a learning rate per optimiser step (``History.lr``, as :func:`fit` does), a third
    panel shows the schedule."""
    runs = history if isinstance(history, dict) else {"": history}
    with_lr = any(run.lr for run in runs.values())
    fig, axes = plt.subplots(1, 3 if with_lr else 2, figsize=(14 if with_lr else 10, 3.2))
    ax_loss, ax_acc = axes[:2]
    for index, (name, run) in enumerate(runs.items()):
        colour = f"C{index % 10}"
        epochs = np.arange(1, len(run.loss) + 1)
        prefix = f"{name} " if name else ""
        ax_loss.plot(epochs, run.loss, color=colour, label=f"{prefix}train")
        ax_acc.plot(epochs, run.train_accuracy, color=colour, label=f"{prefix}train")
        if run.eval_accuracy:
            ax_acc.plot(epochs, run.eval_accuracy, "--", color=colour, label=f"{prefix}held-out")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy", ylim=(0, 1.02))
    ax_acc.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    if with_lr:
        for index, (name, run) in enumerate(runs.items()):
            axes[2].plot(np.arange(1, len(run.lr) + 1), run.lr, color=f"C{index % 10}",
                         label=name or None)
        axes[2].set(xlabel="optimiser step", ylabel="learning rate", title="schedule")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
