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
from .utils import check_bool, check_positive_int

__all__ = ["plot_attention", "plot_attention_heads", "plot_mask", "plot_heatmap", "plot_history"]


def _to_numpy(matrix: object, name: str) -> np.ndarray:
    """A tensor, array or nested list of real numbers (or bools), as a NumPy array."""
    if isinstance(matrix, torch.Tensor):
        if matrix.is_complex():
            raise TypeError(f"{name} must hold real numbers, got dtype {matrix.dtype}")
        matrix = matrix.detach().cpu()
        matrix = matrix.numpy() if matrix.dtype == torch.bool else matrix.float().numpy()
    array = np.asarray(matrix)
    if array.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must be a tensor or array of numbers, got {type(matrix).__name__} "
            f"(NumPy dtype {array.dtype})"
        )
    if array.size == 0:
        raise ValueError(f"{name} is empty (shape {array.shape}): there is nothing to draw")
    return array


def _to_numpy_2d(matrix: object, name: str) -> np.ndarray:
    matrix = _to_numpy(matrix, name)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_queries, n_keys), got shape {matrix.shape}")
    return matrix


def _check_labels(labels: object, name: str, expected: int, axis: str) -> None:
    if labels is None:
        return
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise TypeError(f"{name} must be a list of strings, got {type(labels).__name__}")
    if len(labels) != expected:
        raise ValueError(
            f"{name} must have one label per {axis} ({expected}), got {len(labels)} labels"
        )


def _check_text(value: object, name: str) -> None:
    """A title or an axis label: a string, or None for none."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None, got {type(value).__name__} ({value!r})")


def _check_ax(ax: object) -> None:
    if ax is not None and not isinstance(ax, plt.Axes):
        raise TypeError(f"ax must be None or a matplotlib Axes, got {type(ax).__name__}")


def _check_weights_range(weights: np.ndarray, name: str) -> None:
    finite = weights[np.isfinite(weights)]
    if finite.size and (finite.min() < -1e-6 or finite.max() > 1 + 1e-6):
        raise ValueError(
            f"{name} must be attention weights in [0, 1], got values from {finite.min():.3g} to "
            f"{finite.max():.3g}; draw scores or other numbers with plot_heatmap"
        )


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
    _check_ax(ax)
    for name, text in (("title", title), ("xlabel", xlabel), ("ylabel", ylabel)):
        _check_text(text, name)
    check_bool(colorbar, "colorbar")
    if isinstance(cmap, str) and cmap not in plt.colormaps():
        raise ValueError(f"cmap must name a matplotlib colormap (e.g. 'viridis'), got {cmap!r}")
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
    _check_weights_range(weights, "weights")
    _check_labels(query_labels, "query_labels", weights.shape[0], "query (row of weights)")
    _check_labels(key_labels, "key_labels", weights.shape[1], "key (column of weights)")
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
    weights = _to_numpy(weights, "weights")
    if weights.ndim == 3:
        weights = weights[None]
    if weights.ndim != 4:
        raise ValueError(
            f"weights must be (heads, n_q, n_k) or (layers, heads, n_q, n_k), got {weights.shape}"
        )
    _check_weights_range(weights, "weights")
    layers, heads = weights.shape[:2]
    if cols is not None:
        cols = check_positive_int(cols, "cols")
    if titles is not None:
        _check_labels(titles, "titles", layers * heads, "map (layer and head)")
    _check_labels(query_labels, "query_labels", weights.shape[2], "query (row of weights)")
    _check_labels(key_labels, "key_labels", weights.shape[3], "key (column of weights)")
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
    mask = _to_numpy_2d(mask, "mask")
    if mask.dtype != np.bool_:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    mask = mask.astype(float)
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
    _check_text(title, "title")
    runs = history if isinstance(history, dict) else {"": history}
    if not runs:
        raise ValueError("history is an empty dict: give at least one History to plot")
    for name, run in runs.items():
        label = f"history[{name!r}]" if name else "history"
        if not isinstance(run, History):
            raise TypeError(
                f"{label} must be a History (what fit returns) or a dict of them, got "
                f"{type(run).__name__}"
            )
        if not run.loss:
            raise ValueError(f"{label} is empty: train for at least one epoch before plotting")
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
