"""A small, readable training loop with a progress bar and a loss/accuracy history.

Defined for the whole course; first used in ``01_self_attention.ipynb``.

Data are a tuple of tensors that share their first (example) dimension. By default the last
tensor is the target and the others are the model's inputs: ``model(*inputs) -> logits``.
Pass ``forward_fn(model, batch) -> (logits, targets)`` when a model needs something else
(teacher forcing in section 05, for example).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm  # plain text bar: works in a terminal and in a stored notebook

from .utils import check_positive_int, check_tensor, eval_mode, get_device

__all__ = ["History", "accuracy", "cross_entropy", "evaluate", "fit", "default_forward"]

Batch = Sequence[torch.Tensor]
ForwardFn = Callable[[nn.Module, Batch], tuple[torch.Tensor, torch.Tensor]]


@dataclass
class History:
    """What :func:`fit` records: one entry per epoch (``step_loss``: one per optimiser step)."""

    loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    eval_accuracy: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list)

    @property
    def final_accuracy(self) -> float:
        """Accuracy after the last epoch, on the evaluation data if there were any."""
        values = self.eval_accuracy or self.train_accuracy
        if not values:
            raise ValueError("the history is empty: train for at least one epoch")
        return values[-1]


def accuracy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int | None = None) -> float:
    """Fraction of positions where ``argmax(logits)`` equals ``targets``.

    ``logits``: ``(..., n_classes)``; ``targets``: ``(...)`` integer class ids. Positions whose
    target is ``ignore_index`` (e.g. padding) are not counted.
    """
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits (..., n_classes) and targets (...) do not match: logits {tuple(logits.shape)}, "
            f"targets {tuple(targets.shape)}"
        )
    correct = logits.argmax(dim=-1) == targets
    if ignore_index is not None:
        keep = targets != ignore_index
        return (correct & keep).sum().item() / max(int(keep.sum()), 1)
    return correct.float().mean().item()


def cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100
) -> torch.Tensor:
    """Cross-entropy for logits ``(..., n_classes)`` and targets ``(...)`` of any leading shape."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
    )


def default_forward(model: nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """``model(*batch[:-1])`` against target ``batch[-1]``; a tuple output keeps its first item."""
    *inputs, targets = batch
    logits = model(*inputs)
    if isinstance(logits, tuple):  # modules that also return attention weights
        logits = logits[0]
    return logits, targets


def _check_data(data: Batch, name: str) -> None:
    if not isinstance(data, (tuple, list)) or len(data) < 2:
        raise TypeError(f"{name} must be a tuple of tensors (inputs..., targets), got {type(data).__name__}")
    for index, item in enumerate(data):
        check_tensor(item, f"{name}[{index}]")
    sizes = {t.shape[0] for t in data}
    if len(sizes) != 1:
        shapes = [tuple(t.shape) for t in data]
        raise ValueError(f"all tensors in {name} need the same first dimension, got {shapes}")


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: Batch,
    *,
    batch_size: int = 512,
    forward_fn: ForwardFn = default_forward,
    ignore_index: int | None = None,
    device: torch.device | None = None,
) -> float:
    """Accuracy of ``model`` on ``data`` (model put in eval mode, then restored)."""
    _check_data(data, "data")
    device = device or next(model.parameters()).device
    correct, total = 0.0, 0
    n = data[0].shape[0]
    with eval_mode(model):
        for start in range(0, n, batch_size):
            batch = [t[start : start + batch_size].to(device) for t in data]
            logits, targets = forward_fn(model, batch)
            count = int((targets != ignore_index).sum()) if ignore_index is not None else targets.numel()
            correct += accuracy(logits, targets, ignore_index) * count
            total += count
    return correct / max(total, 1)


def fit(
    model: nn.Module,
    train_data: Batch,
    *,
    epochs: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    eval_data: Batch | None = None,
    forward_fn: ForwardFn = default_forward,
    ignore_index: int | None = None,
    grad_clip: float | None = 1.0,
    seed: int = 0,
    device: torch.device | None = None,
    progress: bool = True,
    desc: str = "training",
) -> History:
    """Train ``model`` with Adam(W) on ``train_data`` and return a :class:`History`.

    The shuffling order comes from its own generator seeded with ``seed``, so two runs give
    the same numbers. The model is moved to ``device`` (default: :func:`get_device`).
    """
    check_positive_int(epochs, "epochs")
    check_positive_int(batch_size, "batch_size")
    _check_data(train_data, "train_data")
    if eval_data is not None:
        _check_data(eval_data, "eval_data")
    device = device or get_device()
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    loss_ignore = ignore_index if ignore_index is not None else -100
    history = History()
    n = train_data[0].shape[0]
    bar = tqdm(range(epochs), desc=desc, disable=not progress, mininterval=0.5)
    for _ in bar:
        model.train()
        order = torch.randperm(n, generator=generator)
        epoch_loss, correct, total = 0.0, 0.0, 0
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            batch = [t[idx].to(device) for t in train_data]
            logits, targets = forward_fn(model, batch)
            loss = cross_entropy(logits, targets, ignore_index=loss_ignore)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            count = (
                int((targets != ignore_index).sum()) if ignore_index is not None else targets.numel()
            )
            epoch_loss += loss.item() * count  # the loss is a mean over the counted targets
            correct += accuracy(logits.detach(), targets, ignore_index) * count
            total += count
            history.step_loss.append(loss.item())
        history.loss.append(epoch_loss / max(total, 1))  # mean over every counted target
        history.train_accuracy.append(correct / max(total, 1))
        postfix = {"loss": f"{history.loss[-1]:.3f}", "acc": f"{history.train_accuracy[-1]:.3f}"}
        if eval_data is not None:
            history.eval_accuracy.append(
                evaluate(model, eval_data, forward_fn=forward_fn, ignore_index=ignore_index)
            )
            postfix["eval_acc"] = f"{history.eval_accuracy[-1]:.3f}"
        bar.set_postfix(postfix)
    return history
