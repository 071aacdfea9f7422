"""lectures_lib.utils: seeding, device choice, eval_mode, the input checks, checks at the door."""

import numpy as np
import pytest
import torch
from torch import nn

from lectures_lib.utils import (
    at_boundary,
    check_bool,
    check_non_negative_int,
    check_positive_int,
    check_probability,
    check_tensor,
    eval_mode,
    get_device,
    inside_library,
    seed_everything,
    validated,
)


def test_seed_everything_makes_runs_repeat_and_pins_threads():
    seed_everything(3)
    first = (torch.rand(3), np.random.rand(3))
    seed_everything(3)
    second = (torch.rand(3), np.random.rand(3))
    assert torch.equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    assert torch.get_num_threads() == 1
    seed_everything(4)
    assert not torch.equal(torch.rand(3), first[0])


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


def test_check_tensor_returns_what_it_accepts():
    """(What it refuses, and how the message names the expected and the actual, are rows of
    tests/test_bad_inputs.py.)"""
    x = torch.zeros(2, 3)
    assert check_tensor(x, "x", ndim=2, dtype="floating", shape=(2, None)) is x


def test_int_bool_and_probability_checks_return_the_value():
    assert check_non_negative_int(0, "n") == 0 and check_positive_int(3, "n") == 3
    assert check_bool(False, "flag") is False
    assert check_probability(0, "p") == 0.0


def test_eval_mode_restores_every_submodule_even_after_an_error():
    model = nn.Sequential(nn.Dropout(0.5), nn.Linear(2, 2))
    model[0].eval()  # a mixed state: the outer module training, its dropout not
    with eval_mode(model) as same:
        assert same is model and not model.training and not model[1].training
    assert model.training and not model[0].training and model[1].training
    with pytest.raises(RuntimeError, match="boom"), eval_mode(model):
        raise RuntimeError("boom")
    assert model.training and not model[0].training


def test_inside_library_marks_a_region_and_undoes_it_after_an_error():
    assert at_boundary()
    with inside_library():
        assert not at_boundary()
        with inside_library():
            assert not at_boundary()
        assert not at_boundary(), "nested regions restore the outer state"
    assert at_boundary()
    with pytest.raises(ValueError), inside_library():
        raise ValueError
    assert at_boundary(), "an exception does not leave the library 'inside'"


def test_validated_checks_once_at_the_door_and_trusts_inner_calls():
    from lectures_lib.utils import at_boundary, validated

    seen = []

    def check_x(x):
        seen.append(x)
        if x < 0:
            raise ValueError(f"x must be >= 0, got {x}")

    @validated(check_x)
    def inner(x):
        return at_boundary()

    @validated(check_x)
    def outer(x):
        return inner(x - 100)  # an inner call with an argument its validator would refuse

    assert inner(1) is False  # the body runs as the trusted core
    assert outer(1) is False and seen == [1, 1]  # outer's door checked; inner's call was trusted
    with pytest.raises(ValueError, match="x must be >= 0"):
        inner(-1)
    assert inner.__validator__ is check_x and inner.__name__ == "inner"


def test_a_method_name_makes_the_overridable_hook_the_door():
    class Base:
        def check_inputs(self, x):
            if x < 0:
                raise ValueError("x must be >= 0")

        @validated("check_inputs")
        def forward(self, x):
            return x

    class Strict(Base):  # extends the hook: its forward is checked by the extended hook
        def check_inputs(self, x):
            super().check_inputs(x)
            if x > 9:
                raise ValueError("x must be <= 9")

    assert Base().forward(12) == 12
    with pytest.raises(ValueError, match="<= 9"):
        Strict().forward(12)
    with pytest.raises(ValueError, match=">= 0"):
        Strict().forward(-1)
    with inside_library():  # inside the library the door is open, as for any validator
        assert Strict().forward(12) == 12


def test_every_setting_has_one_rule_that_names_it():
    from lectures_lib._validate.settings import RULES, check_settings, settings

    for name, rule in RULES.items():
        with pytest.raises((TypeError, ValueError)) as caught:
            rule(object(), name)
        assert str(caught.value).startswith(name), (name, str(caught.value))
    with pytest.raises(ValueError, match="dropout must be in \\[0, 1\\), got 1.5"):
        check_settings(d_model=8, dropout=1.5)
    door = settings("n", "window", "device")
    door(4, 2)
    door(4, window=0, device="cpu")
    with pytest.raises(ValueError, match="window must be >= 0, got -1"):
        door(4, window=-1)
