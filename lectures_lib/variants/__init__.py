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
* :mod:`~lectures_lib.variants.chunked`: Reformer's sorted chunks and the Routing Transformer's
  balanced clusters, clustered attention in memory linear in :math:`N`;
* :mod:`~lectures_lib.variants.efficient`: Efficient Attention (softmax over the features of Q and
  over the positions of K, then :math:`Q(K^\top V)`);
* :mod:`~lectures_lib.variants.synthesizer`: Dense and Random Synthesizer (no q and k);
* :mod:`~lectures_lib.variants.attention_free`: the uniform average (the content-blind baseline)
  and FNet's Fourier mixing (no attention at all: :data:`ATTENTION_FREE`).

Every attention module here is an :class:`~.base.AttentionVariant` and an attention factory,
``EncoderTagger(..., attention=partial(Cls, ...))``, with one constructor convention,
``Cls(d_model, num_heads, dropout=0.0, *, bias=True, <own options>)``; :data:`VARIANTS` lists
them all (the test suite runs every one of them through the same checks, and
``benchmarks/long_range.py`` trains every one of them). FNet's :class:`FourierMixing` is a factory
too but has no attention (no weights, no value projection): :data:`ATTENTION_FREE` lists it.
Derived in ``06_attention_variants.ipynb`` (patterns, local, clustering) and
``07_efficient_attention.ipynb`` (Sinkhorn, low rank, linear, Performer, Synthesizer).
"""

from .attention_free import FourierMixing, UniformAttention, fourier_mixing, uniform_attention
from .base import AttentionVariant, PatternAttention
from .chunked import (
    BalancedRoutingAttention,
    ReformerAttention,
    balanced_routing_attention,
    lsh_chunked_attention,
)
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
from .efficient import EfficientAttention, efficient_attention
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
    ReformerAttention,
    RoutingAttention,
    BalancedRoutingAttention,
    SinkhornAttention,
    LinformerAttention,
    CompressedAttention,
    LinearAttention,
    PerformerAttention,
    EfficientAttention,
    DenseSynthesizerAttention,
    RandomSynthesizerAttention,
    UniformAttention,
)

#: Token mixers with no attention at all (no weights, no value projection): attention factories
#: that are not :class:`AttentionVariant`\ s, so they have their own registry and their own checks
#: (``tests/variants/test_attention_free.py``). FNet's Fourier mixing.
ATTENTION_FREE: tuple[type, ...] = (FourierMixing,)

__all__ = [
    "VARIANTS",
    "ATTENTION_FREE",
    "UniformAttention",
    "uniform_attention",
    "FourierMixing",
    "fourier_mixing",
    "EfficientAttention",
    "efficient_attention",
    "ReformerAttention",
    "lsh_chunked_attention",
    "BalancedRoutingAttention",
    "balanced_routing_attention",
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
