"""Checkers for the course's exercises: ``check_<name>(student_fn) -> CheckResult``.

Every checker accepts any correct implementation (loops, einsum, another masking constant),
never raises because of the student's code, never mutates the student's inputs, and, when
something is wrong, names the likely mistake in ``str(result)`` and ``result.mistake``.

Modules: ``attention`` (section 01), ``heads`` and ``multi_head`` (02), ``positional`` (03),
``transformer`` (04), ``masks`` (05); the graded exercises' checkers ``additive`` (01), ``padding`` (02), ``relative``
(03), ``norms`` (04), ``decoder`` (05), ``variants`` (06: the streaming window, and the stride
mask), ``windows`` (06: causal window attention, checked on memory), ``efficient`` (07:
trigonometric random features), ``long_range`` (07: a model trained on the binding task, the query-only rule) and
``trained`` (03-05: trained models
on held-out data), ``translation`` (08: the homework's recipe, a quick check of it, and its
retraining scored by BLEU in four tiers). Every check takes ``timeout=`` (seconds per
call) and, for the hidden tests, ``hidden=True``.
"""

from ._base import CheckResult, Mistake
from .additive import check_additive_attention
from .attention import *  # noqa: F401,F403
from .attention import __all__ as _attention_all
from .decoder import check_beam_step, check_label_smoothing_loss
from .efficient import *  # noqa: F401,F403
from .efficient import __all__ as _efficient_all
from .heads import *  # noqa: F401,F403
from .heads import __all__ as _heads_all
from .long_range import check_binding_model, check_query_rule
from .masks import *  # noqa: F401,F403
from .masks import __all__ as _masks_all
from .multi_head import check_multi_head_attention
from .norms import check_rms_norm
from .padding import check_padded_self_attention
from .positional import *  # noqa: F401,F403
from .positional import __all__ as _positional_all
from .relative import check_relative_position_attention
from .segmentation import check_words_from_tags
from .trained import check_reverse_translator, check_skip_flip_model, check_sort_tagger
from .transformer import *  # noqa: F401,F403
from .transformer import __all__ as _transformer_all
from .translation import (
    check_translation_boss,
    check_translation_medium,
    check_translation_recipe,
    check_translation_simple,
    check_translation_strong,
)
from .variants import *  # noqa: F401,F403
from .variants import __all__ as _variants_all
from .windows import check_causal_window_attention

__all__ = [
    "CheckResult",
    "Mistake",
    *_attention_all,
    *_heads_all,
    "check_multi_head_attention",
    *_positional_all,
    *_transformer_all,
    *_masks_all,
    *_variants_all,
    *_efficient_all,
    "check_additive_attention",
    "check_padded_self_attention",
    "check_relative_position_attention",
    "check_rms_norm",
    "check_label_smoothing_loss",
    "check_beam_step",
    "check_skip_flip_model",
    "check_sort_tagger",
    "check_reverse_translator",
    "check_causal_window_attention",
    "check_binding_model",
    "check_query_rule",
    "check_words_from_tags",
    "check_translation_recipe",
    "check_translation_simple",
    "check_translation_medium",
    "check_translation_strong",
    "check_translation_boss",
]
