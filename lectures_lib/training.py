"""A small, readable training loop with a progress bar, a learning-rate schedule and a history.

Defined for the whole course; first used in ``01_self_attention.ipynb``.

Data are a tuple of tensors that share their first (example) dimension. By default the last
tensor is the target and the others are the model's inputs: ``model(*inputs) -> logits``.
Pass ``forward_fn(model, batch) -> (logits, targets)`` when a model needs something else
(teacher forcing in section 05, for example).

**The default recipe** (AdamW, peak learning rate :data:`DEFAULT_LR`, linear warm-up over the
first :data:`DEFAULT_WARMUP` of the steps, then cosine decay; gradient norm clipped at 1) was
chosen by a small sweep on tasks the course's models had never been tuned for
(``benchmarks/schedule_sweep.py``, table in ``benchmarks/README.md``).

**Loud failures, nothing lost.** :func:`fit` checks its arguments and the shapes of the first
logits and targets before any weight changes; a non-finite loss or gradient stops training with
an error that names the epoch, the step and the batch, *before* the bad update, so the model keeps
its last finite weights; a batch whose targets are all ``ignore_index`` is skipped (nothing to
learn, nothing added to the epoch's loss). ``fit(seed=s)`` seeds the shuffling *and* every random
draw of the run (dropout included) without touching the caller's random state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm  # plain text bar: works in a terminal and in a stored notebook

from ._validate import training as rules
from .utils import eval_mode, get_device, validated

__all__ = [
    "History",
    "accuracy",
    "cross_entropy",
    "evaluate",
    "fit",
    "default_forward",
    "lr_schedule",
    "SCHEDULES",
    "DEFAULT_LR",
    "DEFAULT_WARMUP",
    "DEFAULT_SCHEDULE",
    "DEFAULT_BETAS",
]

Batch = Sequence[torch.Tensor]
ForwardFn = Callable[[nn.Module, Batch], tuple[torch.Tensor, torch.Tensor]]
#: ``factory(optimizer, total_steps) -> scheduler`` with a ``step()`` method, stepped once per
#: optimiser step (e.g. ``lambda opt, n: torch.optim.lr_scheduler.StepLR(opt, n // 3)``).
ScheduleFactory = Callable[[torch.optim.Optimizer, int], torch.optim.lr_scheduler.LRScheduler]

SCHEDULES = rules.SCHEDULES  # ("warmup_cosine", "one_cycle", "constant"): the door checks these
DEFAULT_SCHEDULE = "warmup_cosine"
DEFAULT_LR = 3e-3  # peak learning rate; see benchmarks/README.md for the sweep behind it
DEFAULT_WARMUP = 0.1  # fraction of the planned optimiser steps spent warming up
DEFAULT_BETAS = (0.9, 0.999)  # AdamW's (PyTorch's defaults)


@dataclass
class History:
    """What :func:`fit` records: one entry per epoch (``loss``, ``train_accuracy``,
    ``eval_accuracy``) and one per optimiser step (``step_loss`` and ``lr``, the learning rate that
    step used)."""

    loss: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    eval_accuracy: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)

    @property
    def final_accuracy(self) -> float:
        """Accuracy after the last epoch, on the evaluation data if there were any."""
        values = self.eval_accuracy or self.train_accuracy
        rules.nonempty_history(values)
        return values[-1]


@validated(rules.logits_and_targets)
def accuracy(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int | None = None) -> float:
    """Fraction of positions where ``argmax(logits)`` equals ``targets``.

    ``logits``: ``(..., n_classes)``; ``targets``: ``(...)`` integer class ids. Positions whose
    target is ``ignore_index`` (e.g. padding) are not counted.
    """
    correct = logits.argmax(dim=-1) == targets
    if ignore_index is not None:
        keep = targets != ignore_index
        return (correct & keep).sum().item() / max(int(keep.sum()), 1)
    return correct.float().mean().item()


@validated(rules.ce_inputs)
def cross_entropy(
    logits: torch.Tensor, targets: torch.Tensor, ignore_index: int = -100
) -> torch.Tensor:
    """Cross-entropy for logits ``(..., n_classes)`` and integer targets ``(...)`` of the same
    leading shape (checked: targets of another shape with as many elements are refused)."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index
    )


@validated(rules.batch_tuple, trusted=False)
def default_forward(model: nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """``model(*batch[:-1])`` against target ``batch[-1]``; a tuple output keeps its first item."""
    *inputs, targets = batch
    logits = model(*inputs)
    if isinstance(logits, tuple):  # modules that also return attention weights
        logits = logits[0]
    return logits, targets


def _counted(targets: torch.Tensor, ignore_index: int | None) -> int:
    """How many targets count (are not ``ignore_index``)."""
    return int((targets != ignore_index).sum()) if ignore_index is not None else targets.numel()


@torch.no_grad()
@validated(rules.evaluate_args, trusted=False)
def evaluate(
    model: nn.Module,
    data: Batch,
    *,
    batch_size: int = 512,
    forward_fn: ForwardFn = default_forward,
    ignore_index: int | None = None,
    device: torch.device | None = None,
) -> float:
    """Accuracy of ``model`` on ``data`` (model put in eval mode, then restored).

    Counts every target that is not ``ignore_index``; raises if no target counts at all.
    """
    n = len(data[0])  # examples
    device = device or next(model.parameters()).device
    correct, total = 0.0, 0
    with eval_mode(model):
        for start in range(0, n, batch_size):
            batch = [t[start : start + batch_size].to(device) for t in data]
            where = f"evaluation batch starting at example {start}"
            logits, targets = rules.forward_outputs(forward_fn(model, batch), where, ignore_index)
            count = _counted(targets, ignore_index)
            if count:
                correct += accuracy(logits, targets, ignore_index) * count
                total += count
    rules.nothing_counted(total, ignore_index, "data", "there is nothing to evaluate")
    return correct / total


# ---------------------------------------------------------------------------------------------
# Learning-rate schedules
# ---------------------------------------------------------------------------------------------


@validated(rules.schedule_args)
def lr_schedule(
    optimizer: torch.optim.Optimizer,
    total_steps: int,
    schedule: str = DEFAULT_SCHEDULE,
    warmup: float = DEFAULT_WARMUP,
) -> torch.optim.lr_scheduler.LRScheduler:
    r"""A scheduler, stepped once per optimiser step, that sets the learning rate of step
    :math:`s = 0, \dots, T-1` (``T = total_steps``) from the optimiser's peak rate
    :math:`\eta`:

    * ``"warmup_cosine"``: linear warm-up over :math:`W = \lceil w T \rceil` steps, then cosine
      decay towards 0 (Loshchilov & Hutter 2017; the warm-up of Vaswani et al. 2017 keeps the
      first, noisiest steps of Adam small)

      .. math:: \eta_s = \eta \frac{s + 1}{W} \;(s < W), \qquad
                \eta_s = \frac{\eta}{2}\Big(1 + \cos\frac{\pi (s - W)}{T - W}\Big) \;(s \ge W)

    * ``"one_cycle"``: PyTorch's ``OneCycleLR`` (Smith 2018) with ``pct_start = warmup``: from
      :math:`\eta / 25` up to :math:`\eta`, then cosine annealing down to :math:`\eta / 25 / 10^4`
      (it also cycles Adam's :math:`\beta_1` between 0.85 and 0.95);
    * ``"constant"``: :math:`\eta_s = \eta`.

    ``warmup`` is a fraction of ``total_steps`` in ``[0, 1)``. A warm-up of exactly one step
    (``warmup * total_steps == 1``, e.g. the default 0.1 with 10 steps) makes PyTorch's
    ``OneCycleLR`` divide by zero (its warm-up would rise from step 0 to step 0): it then ends a
    hair after step 0, so step 0 runs at :math:`\eta / 25` and the decay starts at step 1. The
    default trains the models of ``04`` and ``05`` (``05`` plots it); ``benchmarks/README.md``
    compares the three.
    """
    if schedule == "one_cycle":
        peak = optimizer.param_groups[0]["lr"]
        one_step = warmup * total_steps == 1  # OneCycleLR's warm-up would span 0 steps
        pct_start = (1 + 1e-6) / total_steps if one_step else max(warmup, 1e-6)
        return torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=peak, total_steps=total_steps, pct_start=pct_start
        )
    if schedule == "constant":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    warmup_steps = math.ceil(warmup * total_steps)

    def factor(step: int) -> float:  # the fraction of the peak learning rate at step `step`
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _make_schedule(schedule, optimizer, total_steps, warmup):
    if isinstance(schedule, str):
        return lr_schedule(optimizer, total_steps, schedule, warmup)
    scheduler = schedule(optimizer, total_steps)
    rules.stepping_scheduler(scheduler)  # the factory came from the user
    return scheduler


# ---------------------------------------------------------------------------------------------
# The training loop
# ---------------------------------------------------------------------------------------------


@validated(rules.fit_args, trusted=False)
def fit(
    model: nn.Module,
    train_data: Batch,
    *,
    epochs: int,
    batch_size: int = 64,
    lr: float = DEFAULT_LR,
    schedule: str | ScheduleFactory = DEFAULT_SCHEDULE,
    warmup: float = DEFAULT_WARMUP,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = DEFAULT_BETAS,
    eval_data: Batch | None = None,
    forward_fn: ForwardFn = default_forward,
    ignore_index: int | None = None,
    grad_clip: float | None = 1.0,
    seed: int = 0,
    device: torch.device | None = None,
    progress: bool = True,
    desc: str = "training",
    after_step: Callable[[int, nn.Module], None] | None = None,
    after_epoch: Callable[[int, nn.Module], None] | None = None,
) -> History:
    r"""Train ``model`` with AdamW on ``train_data`` and return a :class:`History`.

    Args:
        model: returns logits ``(..., n_classes)`` (through ``forward_fn``).
        train_data: tuple of tensors ``(inputs..., targets)`` sharing their first dimension.
        epochs: passes over ``train_data``, each in a new random order.
        batch_size: examples per optimiser step (the last batch of an epoch may be smaller).
        lr: the *peak* learning rate of the schedule.
        schedule: ``"warmup_cosine"`` (default), ``"one_cycle"``, ``"constant"`` (see
            :func:`lr_schedule`) or a factory ``schedule(optimizer, total_steps) -> scheduler``;
            planned over ``epochs * ceil(n / batch_size)`` steps and stepped after every
            optimiser step.
        warmup: fraction of the planned steps spent warming up (``warmup_cosine``, ``one_cycle``).
        weight_decay: AdamW's decoupled weight decay.
        betas: AdamW's decay rates of its running averages of the gradient and of its square
            (PyTorch's defaults; the sweep found no better pair that is also stable).
        eval_data: held-out data evaluated (accuracy) after every epoch.
        forward_fn: ``forward_fn(model, batch) -> (logits, targets)``; default
            :func:`default_forward`.
        ignore_index: targets with this value count neither in the loss nor in the accuracy.
        grad_clip: clip the gradients' global norm to this value (> 0), or None for no clipping.
        seed: seeds the shuffling and every random draw during training (dropout included);
            the caller's random state is restored afterwards.
        device: where to train (default :func:`get_device`); the model is moved there.
        progress: show a progress bar.
        after_step, after_epoch: called as ``after_step(step, model)`` after every optimiser step
            and ``after_epoch(epoch, model)`` after every epoch (counted from 0), e.g. to evaluate
            or keep a snapshot.

    Raises a ``FloatingPointError`` naming the epoch, step and batch when a loss or gradient is
    not finite, before the update: the model keeps its last finite weights.
    """
    n = len(train_data[0])  # examples
    device = device or get_device()
    model.to(device)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay, betas=betas)
    batches_per_epoch = math.ceil(n / batch_size)
    scheduler = _make_schedule(schedule, optimizer, epochs * batches_per_epoch, warmup)
    rng_devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=rng_devices):  # the caller's random state is kept
        torch.manual_seed(seed)  # dropout and any other draw during training
        generator = torch.Generator().manual_seed(seed)  # the shuffling
        history = History()
        bar = tqdm(range(epochs), desc=desc, disable=not progress, mininterval=0.5)
        for epoch in bar:
            _train_one_epoch(model, train_data, n, batch_size, epoch, generator, optimizer,
                             scheduler, parameters, forward_fn, ignore_index, grad_clip, device,
                             history, after_step)
            postfix = {"loss": f"{history.loss[-1]:.3f}", "acc": f"{history.train_accuracy[-1]:.3f}"}
            if eval_data is not None:
                history.eval_accuracy.append(
                    evaluate(model, eval_data, forward_fn=forward_fn, ignore_index=ignore_index)
                )
                postfix["eval_acc"] = f"{history.eval_accuracy[-1]:.3f}"
            bar.set_postfix(postfix)
            if after_epoch is not None:
                after_epoch(epoch, model)
    return history


def _train_one_epoch(model, train_data, n, batch_size, epoch, generator, optimizer, scheduler,
                     parameters, forward_fn, ignore_index, grad_clip, device, history,
                     after_step) -> None:
    """One pass over ``train_data`` in a new random order; appends to ``history``."""
    model.train()
    order = torch.randperm(n, generator=generator)
    loss_ignore = ignore_index if ignore_index is not None else -100
    epoch_loss, correct, total = 0.0, 0.0, 0
    for batch_index, rows in enumerate(order.split(batch_size)):
        step = len(history.step_loss)
        where = (f"epoch {epoch + 1}, batch {batch_index + 1} of {math.ceil(n / batch_size)}, "
                 f"optimiser step {step + 1}")
        batch = [t[rows].to(device) for t in train_data]
        logits, targets = rules.forward_outputs(forward_fn(model, batch), where, ignore_index)
        count = _counted(targets, ignore_index)
        if count == 0:  # every target is ignore_index: nothing to learn, nothing to add
            continue
        loss = cross_entropy(logits, targets, ignore_index=loss_ignore)
        rules.finite_loss(loss, where, rows)  # a NaN/inf loss stops before the update
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # the global gradient norm (clipped to grad_clip, if set): a non-finite one stops here
        norm = nn.utils.clip_grad_norm_(parameters, grad_clip if grad_clip is not None else math.inf)
        if not torch.isfinite(norm):  # so does a NaN/inf gradient: drop it, keep the weights
            optimizer.zero_grad(set_to_none=True)
        rules.finite_gradient(norm, where, loss)
        history.lr.append(optimizer.param_groups[0]["lr"])  # the rate this step uses
        optimizer.step()
        scheduler.step()
        epoch_loss += loss.item() * count  # the loss is a mean over the counted targets
        correct += accuracy(logits.detach(), targets, ignore_index) * count
        total += count
        history.step_loss.append(loss.item())
        if after_step is not None:
            after_step(step, model)
    rules.nothing_counted(total, ignore_index, "train_data", "there is nothing to learn from")
    history.loss.append(epoch_loss / total)  # mean over every counted target of the epoch
    history.train_accuracy.append(correct / total)
