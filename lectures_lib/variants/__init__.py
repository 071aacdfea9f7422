r"""Attention variants (各式各样的 Attention): one file per family, each a mask or an override of
one step of :class:`~lectures_lib.attention.MultiHeadAttention` (``project`` or ``attend``).

Full self-attention computes all :math:`N^2` scores :math:`\alpha_{i,j}`, so its time and memory
grow with the square of the sequence length :math:`N`. The lecture's variants skip most of them:

* :mod:`~lectures_lib.variants.patterns`: patterns from human knowledge as masks (local, stride,
  global);
* :mod:`~lectures_lib.variants.local`: local attention computed band by band in
  :math:`O(N \cdot w)` memory, exactly dense attention under :func:`local_mask`;
* :mod:`~lectures_lib.variants.linear`: linear attention, :math:`O(N)` memory.

Every module here is an attention factory: ``EncoderTagger(..., attention=partial(Cls, ...))``.
Derived in ``06_attention_variants.ipynb``.
"""

from .linear import elu_feature_map, linear_attention
from .local import band_to_dense, local_attention
from .patterns import global_mask, local_mask, stride_mask

__all__ = [
    "local_mask",
    "stride_mask",
    "global_mask",
    "local_attention",
    "band_to_dense",
    "elu_feature_map",
    "linear_attention",
]
