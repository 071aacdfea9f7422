"""The Transformer of sections 04 and 05 in one import (kept for code written before the split).

The layers live in :mod:`lectures_lib.layers` (layer norm, residual connection, feed-forward,
encoder and decoder layers) and the models in :mod:`lectures_lib.models` (stacks, embeddings, mask
builders, ``EncoderTagger``, ``Transformer``); this module re-exports both, so
``from lectures_lib.transformer import Transformer`` keeps working.
"""

from .layers import (
    DecoderLayer,
    EncoderLayer,
    FeedForward,
    layer_norm,
    make_attention,
    sublayer_connection,
)
from .models import (
    Decoder,
    Encoder,
    EncoderTagger,
    TokenEmbedding,
    Transformer,
    make_src_mask,
    make_tgt_mask,
)

__all__ = [
    "layer_norm",
    "sublayer_connection",
    "FeedForward",
    "make_attention",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "TokenEmbedding",
    "EncoderTagger",
    "Transformer",
    "make_src_mask",
    "make_tgt_mask",
]
