r"""What every attention variant shares: :class:`AttentionVariant` (the base of every one, with
the capability flags the door checks read), :class:`PatternAttention` (the sparse-pattern
modules of section 06), the one mask classifier :func:`split_mask`, and two small tensor helpers.

**The rule for what a variant cannot do** (one rule for every variant). A variant says in its
class body what it supports:

* ``masks``: ``"any"`` (every mask the contract admits), ``"keys and causal"`` (key padding and
  the causal mask, as a decoder builds them) or ``"keys"`` (key padding only);
* ``self_attention_only``: queries and keys must come from sequences of the same length;
* ``returns_weights``: ``need_weights=True`` returns the ``(batch, heads, n_q, n_k)`` weights
  (built only because they were asked for); ``False`` means the variant has no weight per
  (query, key) cell (it mixes the keys first) and returns ``None``, and says so here;
* ``supports_kv_cache``: no variant declares it (each overrides ``attend``), so
  ``forward_cached`` refuses every one of them clearly, naming the class.

Anything outside what it supports (a mask it cannot honour, a sequence longer than its
``seq_len``, an input whose dtype is not the module's) is **refused at the door** with an error
naming the argument, what was expected and what was given; nothing is silently approximated.
The checks live in ``lectures_lib/_validate/variants/`` (one file per variant file); the
methods here hold the maths.

A :class:`PatternAttention` is a variant with one step changed, ``attend``. A subclass says:

* :meth:`PatternAttention.pattern` ``(q, k) -> bool mask``: the cells it may attend to,
  broadcasting to ``(batch, heads, n, n)`` (True = may attend). It builds ``n x n`` and exists for
  pictures and checks: the tests compare the module with dense attention under this mask;
* :meth:`PatternAttention.efficient_attend` ``(q, k, v, key_mask, need_weights, dropout_p)``: the
  same attention computed without the ``n x n`` matrix, with an optional key-padding mask
  ``key_mask`` ``(batch|1, heads|1, n)`` (True = this key may be attended to); it returns
  ``(out, weights or None)``;
* optionally two hooks: :meth:`PatternAttention.keys` (the keys the queries meet; Reformer ties
  them to the queries) and :meth:`PatternAttention.cells` (the dense path's cells, ``pattern &
  mask``; Reformer drops a query's own key after the mask).

**Masks of a pattern module.** The ``forward`` mask is combined with the pattern by ``&``. A mask
that is the same for every query (key padding) is folded into the efficient path. Any other mask
is itself an ``n x n`` matrix, so nothing can be saved: the module then computes dense attention
under ``pattern & mask`` (the same numbers). Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

import torch

from .._validate.variants import base as rules
from ..attention import MultiHeadAttention, fused_attention, scaled_dot_product_attention

__all__ = ["AttentionVariant", "PatternAttention"]


def _as_4d(mask: torch.Tensor) -> torch.Tensor:
    if mask.dim() == 1:  # (n_k,)
        return mask[None, None, None, :]  # (1, 1, 1, n_k)
    if mask.dim() == 2:  # (n_q, n_k)
        return mask[None, None]  # (1, 1, n_q, n_k)
    return mask  # (batch | 1, heads | 1, n_q | 1, n_k)


def split_mask(mask: torch.Tensor | None, n_q: int, n_k: int) -> tuple[torch.Tensor | None, str]:
    """The one mask classifier of the variants: ``(key_mask, kind)`` for a checked bool mask.

    * ``"keys"``: the same keys for every query (key padding, or no mask); the key row
      ``key_mask`` ``(batch | 1, heads | 1, n_k)`` says which (None: all of them);
    * ``"causal"``: on top of ``key_mask``, query ``i`` sees only keys ``j <= i``;
    * ``"full"``: anything else (a band, a different padding per query); ``key_mask`` is None.
    """
    if mask is None:
        return None, "keys"
    mask = _as_4d(mask)
    if mask.shape[-2] <= 1:  # one row for every query (or no query at all)
        return (mask[..., 0, :] if mask.shape[-2] == 1 else None), "keys"
    key_row = mask[..., -1, :]  # (batch | 1, heads | 1, n_k): the query that may see most
    if torch.equal(mask, key_row[..., None, :].expand_as(mask)):
        return key_row, "keys"
    if n_q == n_k:
        lower = torch.ones(n_q, n_k, dtype=torch.bool, device=mask.device).tril()  # (n, n)
        if torch.equal(mask, (key_row[..., None, :] & lower).expand_as(mask)):
            return key_row, "causal"
    return None, "full"


def zero_masked_keys(key_mask, k, v):
    """Zero the keys and values that ``key_mask`` ``(.., n_k)`` hides, so that they cannot
    leak into a mixture of keys (whatever the padding holds)."""
    if key_mask is None:
        return k, v
    keep = key_mask[..., None]  # (batch | 1, heads | 1, n_k, 1)
    return torch.where(keep, k, torch.zeros_like(k)), torch.where(keep, v, torch.zeros_like(v))


def gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x`` ``(B, n, d)``, ``index`` ``(B, r, S)`` -> ``(B, r, S, d)``: row ``index[b, i, s]`` of
    ``x[b]`` (zeros where the index is -1), without expanding ``x`` to ``n x n``."""
    batch, n, d = x.shape
    offsets = torch.arange(batch, device=x.device)[:, None, None] * n  # (B, 1, 1)
    rows = x.reshape(batch * n, d)[index.clamp(min=0) + offsets]  # (B, r, S, d)
    return rows * (index >= 0)[..., None]


class AttentionVariant(MultiHeadAttention):
    """Base of every attention variant: :class:`~lectures_lib.attention.MultiHeadAttention` with
    the capability flags of the module doc. Constructors follow one convention,
    ``Cls(d_model, num_heads, dropout=0.0, *, bias=True, <own options>)``."""

    masks = "any"  # "any", "keys and causal" or "keys"
    self_attention_only = False
    returns_weights = True
    seq_len_limits = ("key",)  # with a ``seq_len``: which inputs may not be longer
    seq_len_reason = "one parameter per position"

    #: the door of ``forward``: ``MultiHeadAttention.check_inputs``, then the capability flags
    check_inputs = rules.variant_inputs

    def supported_mask(self, mask, n_q: int, n_k: int) -> tuple[torch.Tensor | None, str]:
        """:func:`split_mask`, refused clearly when this variant cannot honour the mask (on every
        call, not only at the door: inside a model the mask comes from the layer)."""
        key_mask, kind = split_mask(mask, n_q, n_k)
        rules.mask_support(self, mask, kind)
        return key_mask, kind

    @property
    def dropout_p(self) -> float:
        """The dropout probability on the weights: ``dropout`` while training, else 0."""
        return self.dropout if self.training else 0.0


class PatternAttention(AttentionVariant):
    """Base of the section-06 modules that attend under a sparse pattern (see the module doc).

    Self-attention only: queries and keys come from sequences of the same length. Subclasses
    implement :meth:`pattern` and :meth:`efficient_attend`; ``attend`` picks the path.
    """

    self_attention_only = True

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The cells this module may attend to, for per-head ``q``, ``k`` ``(batch, heads, n,
        d_head)``: a bool mask broadcasting to ``(batch, heads, n, n)``. Builds ``n x n``."""
        raise NotImplementedError

    def efficient_attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_mask: torch.Tensor | None,
        need_weights: bool,
        dropout_p: float,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``attend`` without the ``n x n`` matrix (weights ``n x n`` only if asked for)."""
        raise NotImplementedError

    def keys(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The keys the queries are compared with, ``(batch, heads, n, d_head)``: ``k`` itself.
        A hook: Reformer ties them to the queries (shared QK)."""
        return k

    def cells(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """The cells of the dense path: :meth:`pattern` ``& mask`` (bool, broadcasting to
        ``(batch, heads, n, n)``). A hook: Reformer applies its self rule after the mask."""
        allowed = self.pattern(q, k)
        return allowed if mask is None else allowed & mask.to(q.device)

    def attend(self, q, k, v, mask, need_weights):
        k = self.keys(q, k)  # (batch, heads, n, d_head)
        key_mask, kind = split_mask(mask, q.shape[-2], k.shape[-2])
        if kind == "keys":  # key_mask: (batch | 1, heads | 1, n) or None
            return self.efficient_attend(q, k, v, key_mask, need_weights, self.dropout_p)
        # A mask with a query dimension is already n x n: dense attention under pattern & mask.
        combined = self.cells(q, k, mask)  # (batch|1, heads|1, n, n)
        if need_weights:
            return scaled_dot_product_attention(q, k, v, combined, self.dropout_p)
        return fused_attention(q, k, v, combined, self.dropout_p), None
