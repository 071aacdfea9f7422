"""lectures_lib.training: accuracy, fit and evaluate; fit's learning-rate schedules, its loud
failures (nothing lost) and its reproducibility."""

import math
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from lectures_lib.training import History, accuracy, evaluate, fit, lr_schedule


def test_accuracy_and_ignore_index():
    logits = torch.tensor([[[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]])  # predicts 1, 0, 0
    targets = torch.tensor([[1, 1, 0]])
    assert accuracy(logits, targets) == pytest.approx(2 / 3)
    assert accuracy(logits, targets, ignore_index=0) == pytest.approx(1 / 2)


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


CPU = torch.device("cpu")


def _data(n=96, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=generator)
    return x, (x[:, 0] > 0).long()


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same_state(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def _fit(model, data, **kwargs):
    kwargs.setdefault("epochs", 1)
    kwargs.setdefault("progress", False)
    return fit(model, data, device=CPU, **kwargs)


# --------------------------------------------------------------------------------- schedules


def test_warmup_cosine_rises_linearly_then_decays_by_the_formula():
    history = _fit(nn.Linear(4, 2), _data(200), epochs=5, batch_size=10, lr=0.01, warmup=0.1)
    total, warmup = 100, 10
    assert len(history.lr) == len(history.step_loss) == total
    expected = [0.01 * (s + 1) / warmup for s in range(warmup)] + [
        0.01 * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup)))
        for s in range(warmup, total)
    ]
    assert history.lr == pytest.approx(expected, rel=1e-9)
    assert max(history.lr) == pytest.approx(0.01) and history.lr[-1] < 0.01 * 0.01


def test_one_cycle_is_pytorchs_one_cycle_and_constant_is_constant():
    history = _fit(nn.Linear(4, 2), _data(), epochs=2, batch_size=8, lr=0.02,
                   schedule="one_cycle", warmup=0.25)
    optimizer = torch.optim.AdamW(nn.Linear(4, 2).parameters(), lr=0.02)
    reference = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.02, total_steps=24,
                                                    pct_start=0.25)
    expected = []
    for _ in range(24):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        reference.step()
    assert history.lr == pytest.approx(expected)
    flat = _fit(nn.Linear(4, 2), _data(), epochs=2, lr=0.02, schedule="constant")
    assert flat.lr == [0.02] * len(flat.step_loss)


def test_a_scheduler_factory_gets_the_optimizer_and_the_planned_steps():
    seen = {}

    def halve_every_five(optimizer, total_steps):
        seen["total_steps"] = total_steps
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)

    history = _fit(nn.Linear(4, 2), _data(), epochs=2, batch_size=16, lr=0.1,
                   schedule=halve_every_five)
    assert seen["total_steps"] == 12
    assert history.lr == pytest.approx([0.1 * 0.5 ** (s // 5) for s in range(12)])


# ----------------------------------------------------------------------- loud failures


def test_a_nan_loss_stops_before_the_bad_step_and_keeps_the_last_finite_weights():
    x, y = _data(64)
    x[37, 1] = float("nan")  # one NaN input is enough
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    snapshots = [_state(model)]
    with pytest.raises(FloatingPointError, match=r"epoch 1, batch \d+ of 8, optimiser step \d+") as error:
        _fit(model, (x, y), batch_size=8, after_step=lambda step, m: snapshots.append(_state(m)))
    assert "37" in str(error.value), "the message names the examples of the bad batch"
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert _same_state(_state(model), snapshots[-1]), "the weights of the last finite step"


def test_a_non_finite_gradient_stops_before_the_step():
    class InfGrad(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 2)

        def forward(self, x):
            return self.linear(x) * torch.where(x[:, :1] > 5, torch.tensor(1e30), torch.tensor(1.0))

    x, y = _data(32)
    x[5, 0] = 10.0
    model = InfGrad()
    before = _state(model)
    with pytest.raises(FloatingPointError, match="optimiser step"):
        _fit(model, (x, y), batch_size=32)
    assert _same_state(before, _state(model))


@pytest.mark.parametrize(
    "targets, message",
    [
        (torch.zeros(96, 3, dtype=torch.long), "do not match"),
        (torch.full((96,), 2), "class ids in \\[2, 2\\]"),
        (torch.zeros(96), "dtype integer"),
    ],
)
def test_bad_targets_are_refused_before_anything_changes(targets, message):
    model = nn.Linear(4, 2)
    before = _state(model)
    with pytest.raises((ValueError, TypeError), match=message):
        _fit(model, (_data()[0], targets))
    assert _same_state(before, _state(model))


class PerPosition(nn.Module):
    """(batch, seq, 4) -> (batch, seq, 3) logits: a target per position."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x)


def test_an_all_ignored_batch_is_skipped_and_adds_nothing_to_the_epoch_loss():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(12, 5, 4, generator=generator)
    y = torch.randint(0, 3, (12, 5), generator=generator)
    y[:, 3:] = -1  # every example has 3 counted targets ...
    y[[2, 7, 9]] = -1  # ... but three have none at all
    history = _fit(PerPosition(), (x, y), batch_size=1, ignore_index=-1, lr=1e-2)
    assert len(history.step_loss) == 9, "no optimiser step for the all-ignored examples"
    assert all(math.isfinite(v) for v in history.loss + history.step_loss)
    # each counted example has 3 targets: the epoch loss is the plain mean of the step losses
    assert history.loss[0] == pytest.approx(sum(history.step_loss) / 9)
    with pytest.raises(ValueError, match="every target in train_data is ignore_index"):
        _fit(PerPosition(), (x, torch.full_like(y, -1)), ignore_index=-1)


def test_callbacks_run_after_every_step_and_epoch():
    steps, epochs = [], []
    _fit(nn.Linear(4, 2), _data(), epochs=2, batch_size=32,
         after_step=lambda step, model: steps.append(step),
         after_epoch=lambda epoch, model: epochs.append(epoch))
    assert steps == list(range(6)) and epochs == [0, 1]


# ------------------------------------------------------------------------- reproducibility


def _dropout_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 2))


def test_fit_seed_makes_a_run_with_dropout_repeat_and_leaves_the_callers_rng_alone():
    runs = []
    for _ in range(2):
        model = _dropout_model()
        torch.manual_seed(123)  # the caller's state differs from the fit seed ...
        torch.rand(5)  # ... and is advanced differently before each run
        runs.append((_fit(model, _data(), epochs=2, seed=7).step_loss, _state(model)))
    assert runs[0][0] == runs[1][0] and _same_state(runs[0][1], runs[1][1])
    other = _fit(_dropout_model(), _data(), epochs=2, seed=8).step_loss
    assert other != runs[0][0], "another seed gives another run"

    model = _dropout_model()
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    _fit(model, _data(), seed=7)
    assert torch.equal(torch.rand(3), expected), "fit does not consume the caller's random state"


_SCRIPT = """
import torch
from torch import nn
from lectures_lib.training import fit
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Dropout(0.5), nn.Linear(32, 2))
x = torch.randn(96, 4, generator=torch.Generator().manual_seed(0))
torch.manual_seed(int(__import__('sys').argv[1]))  # a different caller state per process
history = fit(model, (x, (x[:, 0] > 0).long()), epochs=2, seed=7, progress=False,
              device=torch.device('cpu'))
print(repr(history.step_loss))
"""


@pytest.mark.slow
def test_fit_seed_repeats_across_processes():
    outputs = {
        subprocess.run([sys.executable, "-c", _SCRIPT, str(state)], capture_output=True,
                       text=True, check=True).stdout
        for state in (1, 2)
    }
    assert len(outputs) == 1, "two processes with the same fit seed give the same losses"



def test_betas_are_adamws():
    """fit's betas reach AdamW: the same run as a hand-written AdamW loop with those betas."""
    data = _data(64)
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    by_hand = nn.Linear(4, 2)
    by_hand.load_state_dict(model.state_dict())
    _fit(model, data, batch_size=64, epochs=3, lr=0.05, schedule="constant", betas=(0.5, 0.9),
         grad_clip=None)
    optimizer = torch.optim.AdamW(by_hand.parameters(), lr=0.05, betas=(0.5, 0.9), weight_decay=0.0)
    for _ in range(3):  # one batch of all 64 examples per epoch: the order does not matter
        optimizer.zero_grad()
        nn.functional.cross_entropy(by_hand(data[0]), data[1]).backward()
        optimizer.step()
    for name, value in by_hand.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], value, msg=name)
    torch.manual_seed(0)
    with_defaults = nn.Linear(4, 2)  # the same start
    _fit(with_defaults, data, batch_size=64, epochs=3, lr=0.05, schedule="constant", grad_clip=None)
    assert not torch.equal(with_defaults.weight, model.weight), "other betas, another run"


# ---- one_cycle --------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(total_steps=st.integers(1, 60), warmup=st.floats(0.0, 0.99))
def test_one_cycle_never_divides_by_zero(total_steps, warmup):
    optimizer = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    scheduler = lr_schedule(optimizer, total_steps, "one_cycle", warmup)
    rates = []
    for _ in range(total_steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert all(0 < rate <= 1e-3 * (1 + 1e-9) for rate in rates), rates



@pytest.mark.parametrize("total_steps,warmup", [(10, 0.1), (2, 0.5), (20, 0.05), (4, 0.25)])
def test_one_cycle_with_a_one_step_warmup(total_steps, warmup):
    # warmup * total_steps == 1: PyTorch's OneCycleLR alone raises ZeroDivisionError here
    with pytest.raises(ZeroDivisionError):
        torch.optim.lr_scheduler.OneCycleLR(
            torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3), max_lr=1e-3,
            total_steps=total_steps, pct_start=warmup,
        )
    optimizer = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    scheduler = lr_schedule(optimizer, total_steps, "one_cycle", warmup)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 / 25), "step 0: peak / 25"
    optimizer.step()
    scheduler.step()
    if total_steps > 2:
        assert optimizer.param_groups[0]["lr"] > 0.5e-3, "the decay starts near the peak"
