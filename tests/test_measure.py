"""lectures_lib.measure: the memory probe sees what a computation allocates, and only that."""

import torch

from lectures_lib.attention import fused_attention, scaled_dot_product_attention
from lectures_lib.measure import count_parameters, median_time, peak_tensor_memory


def test_counts_a_new_tensor_once_and_not_the_inputs():
    x = torch.zeros(1000)  # 4000 bytes that exist before: not counted
    report = peak_tensor_memory(lambda: x + 1)
    assert report.peak_bytes == 4000 and report.largest_tensor_shape == (1000,)
    view_report = peak_tensor_memory(lambda: x.view(10, 100))
    assert view_report.peak_bytes == 0, "a view of an input allocates nothing"
    assert torch.equal(report.result, x + 1), "the function's result is returned"


def test_freed_intermediates_leave_the_running_total():
    x = torch.zeros(1000)

    def two_temporaries_one_at_a_time():
        for _ in range(2):
            y = x * 2  # 4000 bytes, freed at the next iteration
            del y
        return None

    assert peak_tensor_memory(two_temporaries_one_at_a_time).peak_bytes == 4000

    def two_alive_together():
        a, b = x * 2, x * 3
        return a, b

    assert peak_tensor_memory(two_alive_together).peak_bytes == 8000


def test_dense_attention_memory_is_quadratic_and_fused_is_not():
    peaks = {}
    with torch.no_grad():
        for n in (128, 256):
            q = torch.randn(1, 2, n, 16)
            dense = peak_tensor_memory(lambda q=q: scaled_dot_product_attention(q, q, q))
            fused = peak_tensor_memory(lambda q=q: fused_attention(q, q, q))
            assert dense.largest_tensor_bytes == 2 * n * n * 4, "the N x N weights are seen"
            peaks[n] = (dense.peak_bytes, fused.peak_bytes)
    assert 3.5 < peaks[256][0] / peaks[128][0] <= 4.0, "doubling N quadruples dense memory"
    assert peaks[256][1] / peaks[128][1] <= 2.0, "the fused kernel returns only (N, d) outputs"


def test_median_time_without_warmup():
    assert median_time(lambda: None, repeats=3, warmup=0) >= 0.0


def test_count_parameters_counts_every_scalar_and_can_skip_frozen_ones():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(),
                                torch.nn.Linear(4, 2, bias=False))
    assert count_parameters(model) == 3 * 4 + 4 + 4 * 2
    model[0].weight.requires_grad_(False)
    assert count_parameters(model, trainable_only=True) == 4 + 4 * 2


def test_the_cpu_clock_counts_the_work_not_the_waiting():
    """``clock="cpu"`` is the thread's CPU time: a call that sleeps (as a call preempted by
    another process waits) costs nearly nothing on it and its full length on the wall clock;
    a call that computes costs about the same on both."""
    import time

    def nap():
        time.sleep(0.05)

    def spin():
        end = time.thread_time() + 0.03
        while time.thread_time() < end:
            pass

    assert median_time(nap, repeats=3, clock="wall") >= 0.05
    assert median_time(nap, repeats=3, clock="cpu") < 0.01
    assert median_time(spin, repeats=3, clock="cpu") >= 0.03
    assert median_time(spin, repeats=3, clock="wall") >= 0.03
