"""The rules of :mod:`lectures_lib.variants.synthesizer`.
"""

from __future__ import annotations

from ...utils import (
    check_bool,
    check_positive_int,
)


def synthesizer_settings(module, seq_len, hidden=None, fixed=False):
    check_positive_int(seq_len, "seq_len")
    if hidden is not None:
        check_positive_int(hidden, "hidden")
    check_bool(fixed, "fixed")
