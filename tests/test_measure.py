"""Parameter counts and allocator-measured memory (lectures_lib.measure)."""

import pytest
import torch
from torch import nn

from lectures_lib.measure import count_parameters, peak_memory_bytes


def test_count_parameters_counts_every_scalar_and_can_skip_frozen_ones():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2, bias=False))
    assert count_parameters(model) == 3 * 4 + 4 + 4 * 2
    model[0].weight.requires_grad_(False)
    assert count_parameters(model, trainable_only=True) == 4 + 4 * 2
    with pytest.raises(TypeError, match="nn.Module"):
        count_parameters(torch.zeros(3))


def test_peak_memory_sees_the_tensors_a_call_allocates():
    small = peak_memory_bytes(torch.ones, 256, 256, dtype=torch.float32)  # 256 KiB
    large = peak_memory_bytes(torch.ones, 1024, 256, dtype=torch.float32)
    assert small >= 256 * 1024 and large >= 1024 * 1024
    assert 3.9 < large / small < 4.1


def test_peak_memory_counts_tensors_alive_together_not_one_after_the_other():
    def together():
        first = torch.ones(512, 512)
        second = torch.ones(512, 512)
        return first, second

    def one_after_the_other():
        for _ in range(2):
            torch.ones(512, 512)

    one = 512 * 512 * 4
    assert peak_memory_bytes(together) >= 2 * one
    assert peak_memory_bytes(one_after_the_other) < 1.5 * one


def test_peak_memory_rejects_what_it_cannot_call():
    with pytest.raises(TypeError, match="callable"):
        peak_memory_bytes(42)


def test_peak_memory_does_not_count_the_arguments():
    big = torch.ones(1024, 1024)
    assert peak_memory_bytes(torch.sum, big) < 1024, "summing allocates one number, not the input"
