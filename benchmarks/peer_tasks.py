"""Two classic toy tasks from outside the course, trained with ``lectures_lib.training.fit``.

Shared by ``training_speed.py`` (fit's defaults) and ``schedule_sweep.py`` (the sweep that chose
those defaults). Neither task was used to build the course's models, so they test whether the
default recipe works on a task it has never seen:

* **copy** (The Annotated Transformer's first example): copy a random sequence of 10 tokens
  drawn from 10 content tokens; the decoder starts from a start symbol (BEGIN). The default
  ``Transformer`` (2 + 2 layers, d_model 64), fresh random batches of 80 (one epoch over
  ``steps * 80`` new sequences: no batch is ever seen twice). Metric: greedy exact match on 1000
  held-out sequences. Ids 0 (padding) and 2 (END) exist only because the course's decoders need
  them: they never occur in the data, so the model has 13 output classes, 10 of them used.
* **reversal** (UvA deep-learning tutorial 6): reverse a sequence of 16 tokens from 10 categories;
  the default ``EncoderTagger`` (2 layers, d_model 64), 50 000 training sequences, batches of 128.
  Metric: per-token accuracy on 2000 held-out sequences.

Each run reports the optimiser steps (and this process's CPU seconds of training, evaluation
excluded) to 99 % and 99.9 %.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib import seed_everything  # noqa: E402
from lectures_lib.data.sequences import sequence_task_splits  # noqa: E402
from lectures_lib.decoding import exact_match, greedy_decode  # noqa: E402
from lectures_lib.models import EncoderTagger, Transformer  # noqa: E402
from lectures_lib.training import evaluate, fit  # noqa: E402
from lectures_lib.utils import eval_mode  # noqa: E402

PAD, BOS, EOS = 0, 1, 2
COPY_FIRST, COPY_CONTENT, COPY_LEN, COPY_BATCH = 3, 10, 10, 80  # content ids 3 ... 12
REVERSAL_CATEGORIES, REVERSAL_LEN, REVERSAL_TRAIN, REVERSAL_BATCH = 10, 16, 50_000, 128
TARGETS = (0.99, 0.999)


@dataclass
class Run:
    """Steps and CPU seconds of training until each target was first reached (None: never)."""

    task: str
    settings: dict
    steps: int
    evaluated: list[tuple[int, float]] = field(default_factory=list)  # (step, metric)
    reached: dict[float, tuple[int, float] | None] = field(default_factory=dict)  # target: (step, cpu s)
    final_metric: float = math.nan
    train_cpu_s: float = 0.0


class _Clock:
    """CPU seconds of training only: evaluation inside ``after_step`` is subtracted."""

    def __init__(self) -> None:
        self.start = time.process_time()
        self.excluded = 0.0

    def training_seconds(self) -> float:
        return time.process_time() - self.start - self.excluded


def _record(run: Run, step: int, metric: float, clock: _Clock) -> None:
    run.evaluated.append((step, metric))
    for target in TARGETS:
        if run.reached.get(target) is None and metric >= target:
            run.reached[target] = (step, clock.training_seconds())


# ---------------------------------------------------------------------------------------------
# copy
# ---------------------------------------------------------------------------------------------


def copy_data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(src, tgt_in, tgt_out)``: ``tgt_out = src``, ``tgt_in`` = BEGIN + ``src[:, :-1]``."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(COPY_FIRST, COPY_FIRST + COPY_CONTENT, (n, COPY_LEN), generator=generator)
    return copy_data_from(src)


def teacher_forcing(model, batch):
    """``forward_fn`` for a seq2seq model: the decoder reads ``tgt_in``, predicts ``tgt_out``."""
    src, tgt_in, tgt_out = batch
    return model(src, tgt_in), tgt_out


def copy_greedy_exact_match(model, src: torch.Tensor) -> float:
    outputs = greedy_decode(model, src, COPY_LEN, BOS, EOS, PAD)
    return exact_match(outputs, src)


@torch.no_grad()
def copy_teacher_forced_exact_match(model, src: torch.Tensor) -> float:
    """Greedy exact match in one teacher-forced pass: greedy decoding reproduces a sequence
    exactly when every teacher-forced argmax (BEGIN and padding excluded, as the decoders do) is
    right, because its prefix is then the gold prefix at every step. ``copy_run`` asserts that
    both give the same number at the end of every run."""
    with eval_mode(model):
        _, tgt_in, tgt_out = copy_data_from(src)
        logits = model(src, tgt_in)  # (n, COPY_LEN, vocab)
        logits[..., [BOS, PAD]] = -math.inf
        return (logits.argmax(dim=-1) == tgt_out).all(dim=1).float().mean().item()


def copy_data_from(src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tgt_in = torch.cat([torch.full((len(src), 1), BOS), src[:, :-1]], dim=1)
    return src, tgt_in, src.clone()


def copy_run(seed: int = 0, steps: int = 300, eval_every: int = 10, **fit_kwargs) -> Run:
    """Train the default ``Transformer`` on ``steps`` fresh batches of the copy task."""
    seed_everything(seed)
    model = Transformer(COPY_FIRST + COPY_CONTENT, COPY_FIRST + COPY_CONTENT)  # the defaults
    train = copy_data(steps * COPY_BATCH, seed=1000 + seed)  # every batch new
    held_out_src = copy_data(1000, seed=10_000 + seed)[0]
    run = Run("copy", dict(fit_kwargs), steps)
    clock = _Clock()

    def after_step(step: int, trained) -> None:
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            paused = time.process_time()
            _record(run, step + 1, copy_teacher_forced_exact_match(trained, held_out_src), clock)
            clock.excluded += time.process_time() - paused

    fit(model, train, epochs=1, batch_size=COPY_BATCH, forward_fn=teacher_forcing, seed=seed,
        device=torch.device("cpu"), progress=False, after_step=after_step, **fit_kwargs)
    run.train_cpu_s = clock.training_seconds()
    run.final_metric = copy_greedy_exact_match(model, held_out_src)
    assert run.final_metric == run.evaluated[-1][1], "teacher-forced == greedy exact match"
    return run


# ---------------------------------------------------------------------------------------------
# reversal
# ---------------------------------------------------------------------------------------------

_REVERSAL_DATA: dict[int, tuple] = {}


def reversal_data(seed: int):
    if seed not in _REVERSAL_DATA:
        _REVERSAL_DATA[seed] = sequence_task_splits(
            "reverse", REVERSAL_TRAIN, 2000, REVERSAL_LEN, REVERSAL_CATEGORIES + 1, seed=seed
        )  # tokens 1 ... 10; id 0 is padding and never occurs
    return _REVERSAL_DATA[seed]


def reversal_run(seed: int = 0, epochs: int = 1, eval_every: int = 10, max_steps: int | None = None,
                 **fit_kwargs) -> Run:
    """Train the default ``EncoderTagger`` on 50 000 sequences (``epochs`` passes, batches of
    128); evaluate per-token accuracy every ``eval_every`` steps, up to ``max_steps``."""
    seed_everything(seed)
    train, held_out = reversal_data(seed)
    model = EncoderTagger(REVERSAL_CATEGORIES + 1, REVERSAL_CATEGORIES + 1)  # the defaults
    planned = epochs * math.ceil(REVERSAL_TRAIN / REVERSAL_BATCH)
    run = Run("reversal", dict(fit_kwargs), planned)
    clock = _Clock()
    last = min(planned, max_steps or planned)

    class Enough(Exception):
        pass

    def after_step(step: int, trained) -> None:
        if (step + 1) % eval_every == 0 or step + 1 == last:
            paused = time.process_time()
            _record(run, step + 1, evaluate(trained, held_out), clock)
            clock.excluded += time.process_time() - paused
        if step + 1 >= last:
            raise Enough  # the rest of the planned steps would not change the answer

    try:
        fit(model, train, epochs=epochs, batch_size=REVERSAL_BATCH, seed=seed,
            device=torch.device("cpu"), progress=False, after_step=after_step, **fit_kwargs)
    except Enough:
        pass
    run.train_cpu_s = clock.training_seconds()
    run.final_metric = run.evaluated[-1][1]
    return run
