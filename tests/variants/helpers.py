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


# -- shared checks of the section-06 pattern modules (LocalAttention, Longformer, ...) --------


def reference_keys(module, q, k):
    """The keys of ``module``'s dense reference, per head: its own keys, except for a shared-QK
    module (Reformer, :class:`~lectures_lib.variants.ReformerAttention`), whose keys are its
    normalised queries, k_j = q_j / |q_j| (its key projection is unused)."""
    from lectures_lib.variants import ReformerAttention

    return torch.nn.functional.normalize(q, dim=-1) if isinstance(module, ReformerAttention) else k


def reference_mask(module, q, k, mask=None):
    """The cells of ``module``'s dense reference: ``module.pattern(q, k) & mask``, except that
    Reformer's self rule (:func:`~lectures_lib.variants.chunked.drop_self`: a query sees itself
    only when it has no other key) applies to the cells left *after* the mask, and that the
    balanced Routing Transformer's clusters are chosen among the unpadded positions first
    (:meth:`~lectures_lib.variants.BalancedRoutingAttention.members` with the key-padding mask)."""
    from lectures_lib.variants import BalancedRoutingAttention, ReformerAttention
    from lectures_lib.variants.chunked import drop_self, lsh_chunk_mask, membership_mask

    if isinstance(module, ReformerAttention) and module.exclude_self:
        cells = lsh_chunk_mask(module.buckets(q), module.chunk_size, same_bucket=module.same_bucket)
        return drop_self(cells if mask is None else cells & mask)
    if isinstance(module, BalancedRoutingAttention) and mask is not None:
        key_mask = mask[..., -1, :]  # (batch|1, heads|1, n): key padding, the one mask it takes
        return membership_mask(*module.members(q, k, key_mask), q.shape[-2]) & mask
    pattern = module.pattern(q, k)
    return pattern if mask is None else pattern & mask


def reference_of(module):
    """Dense attention with the module's weights to compare with: a plain MultiHeadAttention whose
    keys are :func:`reference_keys` (tied to the queries for a shared-QK module)."""
    from lectures_lib.attention import MultiHeadAttention

    class DenseReference(MultiHeadAttention):
        def project(self, query, key, value, positions=None):
            q, k, v = super().project(query, key, value, positions)
            return q, reference_keys(module, q, k), v

    reference = DenseReference(module.d_model, module.num_heads).to(
        dtype=module.q_proj.weight.dtype
    )
    reference.load_state_dict(module.state_dict(), strict=False)
    return reference.eval()


def assert_module_equals_dense(module, x, mask=None):
    """forward == dense MultiHeadAttention under ``module.pattern & mask``: outputs (both paths)
    and weights."""
    module = module.eval()
    reference = reference_of(module)
    q, k, _ = module.project(x, x, x)
    pattern = module.pattern(q, k)
    combined = reference_mask(module, q, k, mask)
    out, weights = module(x, x, x, mask)
    expected_out, expected_weights = reference(x, x, x, combined)
    torch.testing.assert_close(out, expected_out, msg="module != dense attention under its mask")
    torch.testing.assert_close(weights, expected_weights, msg="weights differ from dense")
    fast_out, none = module(x, x, x, mask, need_weights=False)
    assert none is None
    torch.testing.assert_close(fast_out, expected_out, msg="need_weights=False path differs")
    return pattern


def assert_module_gradients_equal_dense(module, x, mask=None):
    module = module.eval()
    reference = reference_of(module)
    q, k, _ = module.project(x, x, x)
    combined = reference_mask(module, q, k, mask).detach()
    upstream = torch.randn(*x.shape, dtype=x.dtype)

    def grads(run):
        leaf = x.clone().requires_grad_()
        (run(leaf) * upstream).sum().backward()
        return leaf.grad

    ours = grads(lambda t: module(t, t, t, mask, need_weights=False)[0])
    dense = grads(lambda t: reference(t, t, t, combined)[0])
    torch.testing.assert_close(ours, dense, msg="gradient wrt the input differs from dense")


def train_through_factory(factory, steps=80, seed=0):
    """Train a 1-layer EncoderTagger built with ``attention=factory`` to label every token with
    itself (learnable whatever the pattern); returns (first loss, last loss, whether the
    attention's W^V changed, i.e. gradients flowed through the variant: every variant uses the
    values, not every one the queries)."""
    from lectures_lib.models import EncoderTagger

    torch.manual_seed(seed)
    model = EncoderTagger(12, 12, d_model=32, num_heads=2, num_layers=1, d_ff=64, pad_id=None,
                          attention=factory)
    attention = model.encoder.layers[0].self_attn
    before = attention.v_proj.weight.detach().clone()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    tokens = torch.randint(0, 12, (64, 16))
    labels = tokens
    losses = []
    for _ in range(steps):
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 12), labels.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    changed = not torch.equal(before, attention.v_proj.weight.detach())
    return losses[0], losses[-1], changed
