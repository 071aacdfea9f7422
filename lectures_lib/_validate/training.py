"""The rules of :mod:`lectures_lib.training`: datasets, what ``forward_fn`` returns, the
schedule, ``fit``'s and ``evaluate``'s settings, and the messages of the loop's finite-loss
guards (the loop itself decides what to undo).
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from ..utils import check_tensor
from .settings import check_settings, finite_number, settings

#: The named learning-rate schedules (``lectures_lib.training.SCHEDULES`` is this tuple).
SCHEDULES = ("warmup_cosine", "one_cycle", "constant")


def optional_callable(value: object, name: str, signature: str) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be None or a callable {signature}, got {type(value).__name__}")


def ignore_id(value: object, name: str = "ignore_index", *, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"ignore_index must be {'None or ' if allow_none else ''}an int, got "
            f"{type(value).__name__}"
        )


def tensor_dataset(data: object, name: str) -> int:
    """``data`` must be a non-empty tuple of tensors sharing their first dimension; returns it."""
    if not isinstance(data, (tuple, list)) or len(data) < 2:
        raise TypeError(
            f"{name} must be a tuple of tensors (inputs..., targets), got {type(data).__name__}"
            + (f" of length {len(data)}" if isinstance(data, (tuple, list)) else "")
        )
    for index, item in enumerate(data):
        check_tensor(item, f"{name}[{index}]")
        if item.dim() == 0:
            raise ValueError(f"{name}[{index}] must have a first (example) dimension, got a scalar")
    sizes = {t.shape[0] for t in data}
    if len(sizes) != 1:
        shapes = [tuple(t.shape) for t in data]
        raise ValueError(f"all tensors in {name} need the same first dimension, got {shapes}")
    n = sizes.pop()
    if n == 0:
        raise ValueError(f"{name} holds no examples (first dimension 0): nothing to train on")
    return n


def forward_outputs(output: object, where: str, ignore_index: int | None) -> tuple:
    """``forward_fn``'s result must be ``(logits (..., C), targets (...))`` with class ids in
    ``[0, C)`` (or ``ignore_index``): checked on every batch, before anything is updated."""
    if not isinstance(output, (tuple, list)) or len(output) != 2:
        raise TypeError(
            f"forward_fn must return (logits, targets), got {type(output).__name__} ({where})"
        )
    logits, targets = output
    check_tensor(logits, f"logits ({where})", dtype="floating")
    check_tensor(targets, f"targets ({where})", dtype="integer")
    if logits.dim() == 0 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits (..., n_classes) and targets (...) do not match ({where}): logits "
            f"{tuple(logits.shape)}, targets {tuple(targets.shape)}; expected targets of shape "
            f"{tuple(logits.shape[:-1])}"
        )
    counted = targets if ignore_index is None else targets[targets != ignore_index]
    if counted.numel() and (int(counted.min()) < 0 or int(counted.max()) >= logits.shape[-1]):
        raise ValueError(
            f"targets hold class ids in [{int(counted.min())}, {int(counted.max())}] ({where}), "
            f"but the logits have {logits.shape[-1]} classes: ids must lie in "
            f"[0, {logits.shape[-1] - 1}]"
            + ("" if ignore_index is None else f" (or be ignore_index={ignore_index})")
        )
    return logits, targets


def ce_inputs(logits: object, targets: object, ignore_index: object = -100) -> None:
    ignore_id(ignore_index, allow_none=False)
    forward_outputs((logits, targets), "cross_entropy", ignore_index)


def logits_and_targets(logits: object, targets: object, ignore_index: object = None) -> None:
    forward_outputs((logits, targets), "accuracy", ignore_index)


def torch_module(model: object, name: str = "model") -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(model).__name__}")


def batch_tuple(model: object, batch: object) -> None:
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise TypeError(
            "batch must be a tuple (inputs..., targets) of at least two tensors, got "
            + (f"a {type(batch).__name__} of length {len(batch)}" if isinstance(batch, (tuple, list))
               else type(batch).__name__)
        )


forward_fn_or_none = partial(optional_callable,
                       signature="forward_fn(model, batch) -> (logits, targets)")
evaluate_args = settings("model", "data", "batch_size", "forward_fn", "ignore_index", "device",
                         model=torch_module, data=tensor_dataset, forward_fn=forward_fn_or_none, ignore_index=ignore_id)


def nonempty_history(values: list) -> None:
    if not values:
        raise ValueError("the history is empty: train for at least one epoch")


def nothing_counted(total: int, ignore_index: object, name: str, what: str) -> None:
    if total == 0:
        raise ValueError(f"every target in {name} is ignore_index={ignore_index}: {what}")


def schedule_args(optimizer: object, total_steps: object, schedule: object = "warmup_cosine",
                  warmup: object = 0.1) -> None:
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    check_settings(total_steps=total_steps)
    named_schedule(schedule, warmup)


def named_schedule(schedule: object, warmup: object) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES} or a factory, got {schedule!r}")
    warmup = finite_number(warmup, "warmup", low=0.0, inclusive=True)
    if warmup >= 1:
        raise ValueError(f"warmup is a fraction of the steps, in [0, 1), got {warmup!r}")


def stepping_scheduler(scheduler: object) -> None:
    if not callable(getattr(scheduler, "step", None)):
        raise TypeError(
            "the schedule factory must return a scheduler with a step() method (e.g. a "
            f"torch.optim.lr_scheduler.LRScheduler), got {type(scheduler).__name__}"
        )


def beta_pair(betas: object) -> None:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"betas must be a pair (beta1, beta2), got {type(betas).__name__} ({betas!r})")
    for index, beta in enumerate(betas):
        finite_number(beta, f"betas[{index}]", low=0.0, inclusive=True)
        if not beta < 1:
            raise ValueError(f"betas[{index}] must be in [0, 1), got {beta!r}")


def fit_args(model, train_data, *, epochs, batch_size=64, lr=3e-3, schedule="warmup_cosine",
             warmup=0.1, weight_decay=0.0, betas=(0.9, 0.999), eval_data=None, forward_fn=None,
             ignore_index=None, grad_clip=1.0, seed=0, device=None, progress=True, desc="training",
             after_step=None, after_epoch=None) -> None:
    torch_module(model)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters (none with requires_grad=True)")
    check_settings(epochs=epochs, batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                   grad_clip=grad_clip)
    check_settings(seed=seed)
    if not isinstance(warmup, (int, float)) or isinstance(warmup, bool) or not 0 <= warmup < 1:
        raise ValueError(f"warmup is a fraction of the steps, in [0, 1), got {warmup!r}")
    ignore_id(ignore_index)
    check_settings(progress=progress)
    if not isinstance(desc, str):
        raise TypeError(f"desc must be a str (the progress bar's label), got {type(desc).__name__} ({desc!r})")
    forward_fn_or_none(forward_fn, "forward_fn")
    optional_callable(after_step, "after_step", "after_step(step, model)")
    optional_callable(after_epoch, "after_epoch", "after_epoch(epoch, model)")
    if not isinstance(schedule, str) and not callable(schedule):
        raise TypeError(
            f"schedule must be one of {SCHEDULES} or a factory(optimizer, total_steps) -> "
            f"scheduler, got {type(schedule).__name__}"
        )
    if isinstance(schedule, str):
        named_schedule(schedule, warmup)
    beta_pair(betas)
    tensor_dataset(train_data, "train_data")
    if eval_data is not None:
        tensor_dataset(eval_data, "eval_data")
    check_settings(device=device)


def finite_loss(loss: torch.Tensor, where: str, rows: torch.Tensor) -> None:
    """A NaN/inf loss stops training before the update (the model keeps its weights)."""
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"the loss is {loss.item()} at {where} (examples {rows[:8].tolist()}"
            f"{', ...' if len(rows) > 8 else ''}): training stopped before this step, the "
            "model keeps its last finite weights. Look for NaN/inf in these inputs, or try a "
            "smaller lr"
        )


def finite_gradient(norm: torch.Tensor, where: str, loss: torch.Tensor) -> None:
    """A NaN/inf gradient norm stops training before the update (the loop drops the
    gradients first, so the model keeps its weights)."""
    if not torch.isfinite(norm):
        raise FloatingPointError(
            f"the gradient norm is {norm.item()} at {where} (loss {loss.item():.4g}): "
            "training stopped before this step, the model keeps its last finite weights"
        )
