r"""Attention variants (各式各样的 Attention): one file per family, each a mask or an override of
one step of :class:`~lectures_lib.attention.MultiHeadAttention` (``project`` or ``attend``).

Full self-attention computes all :math:`N^2` scores :math:`\alpha_{i,j}`, so its time and memory
grow with the square of the sequence length :math:`N`. The lecture's variants skip most of them:

* :mod:`~lectures_lib.variants.patterns`: patterns from human knowledge as masks (local, stride,
  global);
* :mod:`~lectures_lib.variants.local`: local attention computed band by band in
  :math:`O(N \cdot w)` memory, exactly dense attention under :func:`local_mask`;
* :mod:`~lectures_lib.variants.sparse`: stride attention by reshaping, global tokens, and the
  gather engine of Longformer and Big Bird;
* :mod:`~lectures_lib.variants.clustering`: Reformer's LSH and the Routing Transformer's k-means,
  attention within a cluster;
* :mod:`~lectures_lib.variants.sinkhorn`: a learned pattern, the Sinkhorn sorting network;
* :mod:`~lectures_lib.variants.low_rank`: representative keys, Linformer and compressed attention;
* :mod:`~lectures_lib.variants.linear`: linear attention and Performer, :math:`O(N)` memory;
* :mod:`~lectures_lib.variants.synthesizer`: Dense and Random Synthesizer (no q and k).

Every module here is an :class:`~.base.AttentionVariant` and an attention factory,
``EncoderTagger(..., attention=partial(Cls, ...))``, with one constructor convention,
``Cls(d_model, num_heads, dropout=0.0, *, bias=True, <own options>)``; :data:`VARIANTS` lists
them all (the test suite runs every one of them through the same checks).
Derived in ``06_attention_variants.ipynb`` (patterns, local, clustering) and
``07_efficient_attention.ipynb`` (Sinkhorn, low rank, linear, Performer, Synthesizer).
"""

from .base import AttentionVariant, PatternAttention
from .clustering import (
    LSHAttention,
    RoutingAttention,
    cluster_mask,
    clustered_attention,
    kmeans,
    lsh_buckets,
    nearest_centroid,
    random_rotations,
)
from .linear import (
    LinearAttention,
    PerformerAttention,
    elu_feature_map,
    linear_attention,
    performer_features,
    random_projection,
)
from .local import LocalAttention, band_to_dense, local_attention
from .low_rank import CompressedAttention, LinformerAttention
from .patterns import (
    dilated_mask,
    global_mask,
    head_patterns,
    local_mask,
    random_keys,
    random_mask,
    receptive_field,
    stride_mask,
)
from .sinkhorn import SinkhornAttention, sinkhorn
from .sparse import (
    BigBirdAttention,
    LongformerAttention,
    global_attention,
    sparse_attention,
    sparse_pattern,
    strided_attention,
)
from .synthesizer import DenseSynthesizerAttention, RandomSynthesizerAttention

#: Every attention variant of the course, in teaching order: the registry the tests iterate.
VARIANTS: tuple[type[AttentionVariant], ...] = (
    LocalAttention,
    LongformerAttention,
    BigBirdAttention,
    LSHAttention,
    RoutingAttention,
    SinkhornAttention,
    LinformerAttention,
    CompressedAttention,
    LinearAttention,
    PerformerAttention,
    DenseSynthesizerAttention,
    RandomSynthesizerAttention,
)

__all__ = [
    "VARIANTS",
    "AttentionVariant",
    "local_mask",
    "stride_mask",
    "global_mask",
    "local_attention",
    "band_to_dense",
    "elu_feature_map",
    "linear_attention",
    "LinearAttention",
    "random_projection",
    "performer_features",
    "PerformerAttention",
    "sinkhorn",
    "SinkhornAttention",
    "LinformerAttention",
    "CompressedAttention",
    "DenseSynthesizerAttention",
    "RandomSynthesizerAttention",
    "dilated_mask",
    "random_keys",
    "random_mask",
    "head_patterns",
    "receptive_field",
    "PatternAttention",
    "LocalAttention",
    "strided_attention",
    "sparse_attention",
    "sparse_pattern",
    "global_attention",
    "LongformerAttention",
    "BigBirdAttention",
    "lsh_buckets",
    "random_rotations",
    "kmeans",
    "nearest_centroid",
    "cluster_mask",
    "clustered_attention",
    "LSHAttention",
    "RoutingAttention",
]
