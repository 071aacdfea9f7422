"""The key/value cache of incremental decoding (section 05), and the rule for who may use it.

Autoregressive decoding feeds one new token per step. Its keys and values at every layer do not
change afterwards, so each attention keeps them in a :class:`KeyValueCache` and step ``t`` only
projects the new token: O(t) work instead of O(t²) (``MultiHeadAttention.forward_cached``).
A whole decoder keeps one pair of caches per layer in a :class:`DecoderCache`
(``Transformer.init_cache`` / ``decode_step``). Derived in ``05_transformer_decoder.ipynb``.

**Who may use the cache.** It is exact only when ``project`` treats every position on its own
and ``attend`` gives the last query the same output for a cut-off prefix: true for
``MultiHeadAttention``, not in general for a variant (Linformer's projected keys, local windows).
So a subclass that overrides one of the steps below and does not say
``supports_kv_cache = True`` in its own class body gets ``supports_kv_cache = False``
(``MultiHeadAttention.__init_subclass__`` calls :func:`declare`); a declaration vouches for the
steps a class inherits too, not for those a subclass overrides after it.
"""

from __future__ import annotations

import torch

__all__ = ["KeyValueCache", "DecoderCache", "kv_cache_problem"]

#: The steps whose override makes the cache's exactness a new claim.
STEPS = ("project", "attend", "forward", "forward_cached")


def declare(cls: type) -> None:
    """``supports_kv_cache = False`` for a class that overrides a step without saying."""
    step = next((step for step in STEPS if step in vars(cls)), None)
    if step is not None and "supports_kv_cache" not in vars(cls):
        cls.supports_kv_cache = False
        cls._kv_cache_override = step  # named in kv_cache_problem's message


def kv_cache_problem(module: object, static: bool = False) -> str | None:
    """Why ``module`` cannot be run with a key/value cache, or None when it can (see the module
    docstring for the rule); ``static=True`` asks about a cached cross-attention to a memory."""
    # Duck-typed (a MultiHeadAttention or a subclass has both), so this module imports nothing.
    has_cache = callable(getattr(module, "forward_cached", None))
    if not (has_cache and hasattr(module, "supports_kv_cache")):
        return (
            f"{type(module).__name__} is not a MultiHeadAttention: it has no key/value cache. "
            "Decode with use_cache=False (recompute the prefix at every step)"
        )
    if static and getattr(module, "self_attention_only", False):
        return (
            f"{type(module).__name__} is self-attention: it cannot attend to a static memory "
            "(cross-attention) with a cache"
        )
    if module.supports_kv_cache:
        return None
    owner = next(c for c in type(module).__mro__ if "supports_kv_cache" in vars(c))
    if "_kv_cache_override" in vars(owner):
        return (
            f"{owner.__name__} overrides `{owner._kv_cache_override}` and does not declare that "
            "a key/value cache stays exact for it (supports_kv_cache = True in its class body): "
            "decode with use_cache=False (recompute the prefix at every step)"
        )
    return (
        f"{owner.__name__} sets supports_kv_cache = False: decode with use_cache=False "
        "(recompute the prefix at every step)"
    )


class KeyValueCache:
    """The keys and values ``(batch, heads, t, d_head)`` one attention module has computed for the
    positions it has already seen, so that decoding step ``t`` projects only the new token.

    ``len(cache)`` is the number of cached positions; :meth:`reorder` selects rows of the batch
    (beam search keeps the caches of the hypotheses it extends). Derived in
    ``05_transformer_decoder.ipynb``.
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Add the new positions' ``keys``, ``values`` ``(batch, heads, n_new, d_head)``."""
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=-2)  # (batch, heads, t + n_new, d_head)
            self.values = torch.cat([self.values, values], dim=-2)

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep batch rows ``rows`` (a 1-D index tensor; a row may be repeated)."""
        if self.keys is not None:
            self.keys = self.keys.index_select(0, rows)
            self.values = self.values.index_select(0, rows)


class DecoderCache:
    """Everything ``Transformer.decode_step`` keeps between steps: per decoder layer the
    self-attention's and the cross-attention's :class:`KeyValueCache`, and which target tokens
    fed so far are real (not padding) keys.

    ``len(cache)``: the number of target tokens fed; :meth:`reorder` keeps batch rows (beam
    search). Derived in ``05_transformer_decoder.ipynb``.
    """

    def __init__(self, layers: list[tuple[KeyValueCache, KeyValueCache]]) -> None:
        self.layers = layers
        self.keys_kept: torch.Tensor | None = None  # (batch, t) bool: True = not padding

    def __len__(self) -> int:
        return 0 if self.keys_kept is None else self.keys_kept.shape[1]

    @property
    def batch_size(self) -> int | None:
        return None if self.keys_kept is None else self.keys_kept.shape[0]

    def extend_keys(self, kept: torch.Tensor) -> None:
        """Record the new tokens ``(batch, n_new)``: True where a token may be attended to."""
        kept = kept.to(torch.bool)
        self.keys_kept = kept if self.keys_kept is None else torch.cat([self.keys_kept, kept], 1)

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep batch rows ``rows`` (1-D indices, repeats allowed) of every cache."""
        if self.keys_kept is not None:
            self.keys_kept = self.keys_kept.index_select(0, rows)
        for self_cache, cross_cache in self.layers:
            self_cache.reorder(rows)
            cross_cache.reorder(rows)
