"""Helpers shared by the tests of ``lectures_lib.variants``: random inputs and probes that
*measure* memory and work (every tensor an op produces, forward and backward, and every tensor
autograd saves; the multiply-adds of every matmul), so "never N x N" is checked, not assumed."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def random_qkv(*batch, n=7, d_k=4, d_v=5, n_k=None, dtype=torch.float64, device="cpu"):
    n_k = n if n_k is None else n_k
    q = torch.randn(*batch, n, d_k, dtype=dtype, device=device)
    k = torch.randn(*batch, n_k, d_k, dtype=dtype, device=device)
    v = torch.randn(*batch, n_k, d_v, dtype=dtype, device=device)
    return q, k, v


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an operation returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(result):
            if isinstance(leaf, torch.Tensor):
                self.largest = max(self.largest, leaf.numel())
        return result


def largest_tensors(attention, n, d):
    """(largest tensor produced, largest tensor saved for backward) in a forward + backward."""
    q, k, v = (torch.randn(1, n, d, requires_grad=True) for _ in range(3))
    saved = []

    def pack(tensor):
        saved.append(tensor.numel())
        return tensor

    with LargestTensor() as probe, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attention(q, k, v).sum().backward()
    assert q.grad is not None and k.grad is not None and v.grad is not None
    return probe.largest, max(saved)


def matmul_flops(attention, n, d):
    q, k, v = (torch.randn(1, n, d) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        attention(q, k, v)
    return counter.get_total_flops()
