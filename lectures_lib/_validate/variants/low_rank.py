"""The rules of :mod:`lectures_lib.variants.low_rank`.
"""

from __future__ import annotations

from ...utils import (
    check_bool,
    check_positive_int,
)


def linformer_settings(module, seq_len, k, share_kv):
    check_positive_int(seq_len, "seq_len")
    check_positive_int(k, "k")
    check_bool(share_kv, "share_kv")


def compression_stride(module, stride):
    check_positive_int(stride, "stride")
