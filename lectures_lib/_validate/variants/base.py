"""The rules of a variant module's ``forward`` (``AttentionVariant.check_inputs``): what
``MultiHeadAttention`` checks, then what the capability flags allow.
"""

from __future__ import annotations

from ...masks import with_key_padding
from ..attention import mha_inputs

_SUPPORTED = {
    "keys": "key padding (the same keys for every query)",
    "keys and causal": "key padding (the same keys for every query) and the causal mask, with "
    "or without key padding",
}


def variant_inputs(module, query, key, value, mask=None, need_weights=True, *,
                   key_padding_mask=None, positions=None) -> None:
    """``AttentionVariant.check_inputs``, the door of a variant's ``forward``: what
    ``MultiHeadAttention`` checks (shapes, the module's dtype, the masks), then what its
    capability flags (``self_attention_only``, ``masks``, ``seq_len``) allow."""
    mha_inputs(module, query, key, value, mask, need_weights, key_padding_mask=key_padding_mask,
               positions=positions)  # MultiHeadAttention's: dtype too
    mask = with_key_padding(mask, key_padding_mask)  # the mask the steps will see
    name = type(module).__name__
    if module.self_attention_only and query.shape[1] != key.shape[1]:
        raise ValueError(
            f"{name} is self-attention: it needs as many queries as keys (query and key of the "
            f"same length), got query {tuple(query.shape)} and key {tuple(key.shape)}"
        )
    seq_len = getattr(module, "seq_len", None)
    for what, x in (("query", query), ("key", key)):
        if seq_len is not None and what in module.seq_len_limits and x.shape[1] > seq_len:
            raise ValueError(
                f"{name} was built for seq_len={seq_len} ({module.seq_len_reason}), got {what} "
                f"of shape {tuple(x.shape)} with {x.shape[1]} positions"
            )
    positions = getattr(module, "global_positions", ())
    if positions and query.shape[1] and max(positions) >= query.shape[1]:
        raise ValueError(
            f"global_positions={list(positions)} of {name} must lie inside the sequence, but "
            f"query has only n={query.shape[1]} positions (shape {tuple(query.shape)})"
        )
    if mask is not None and module.masks != "any":
        module.supported_mask(mask, query.shape[1], key.shape[1])


def mask_support(module, mask, kind: str) -> None:
    """Refuse a mask the variant cannot honour (its ``masks`` flag), naming the variant."""
    if kind == "full" and module.masks != "any" or kind == "causal" and module.masks == "keys":
        shape = (1,) * (4 - max(mask.dim(), 2)) + tuple(mask.shape)  # as the steps see it: 4-D
        raise ValueError(
            f"{type(module).__name__} never builds the N x N matrix, so it can only honour "
            f"{_SUPPORTED[module.masks]}; got a mask of shape {shape} that differs from query to "
            "query in another way"
            + (" (a causal mask is not supported by this variant)" if module.masks == "keys" else "")
        )
