"""Checkers for the course's exercises: ``check_<name>(student_fn) -> CheckResult``.

Every checker accepts any correct implementation (loops, einsum, another masking constant),
never raises because of the student's code, never mutates the student's inputs, and, when
something is wrong, names the likely mistake in ``str(result)`` and ``result.mistake``.

Modules: ``attention`` (section 01), ``heads`` (02), ``positional`` (03), ``transformer`` (04),
``masks`` (05), ``variants`` (06), ``efficient`` (07).
"""

from ._base import CheckResult, Mistake
from .attention import *  # noqa: F401,F403
from .attention import __all__ as _attention_all
from .efficient import *  # noqa: F401,F403
from .efficient import __all__ as _efficient_all
from .heads import *  # noqa: F401,F403
from .heads import __all__ as _heads_all
from .masks import *  # noqa: F401,F403
from .masks import __all__ as _masks_all
from .positional import *  # noqa: F401,F403
from .positional import __all__ as _positional_all
from .transformer import *  # noqa: F401,F403
from .transformer import __all__ as _transformer_all
from .variants import *  # noqa: F401,F403
from .variants import __all__ as _variants_all

__all__ = [
    "CheckResult",
    "Mistake",
    *_attention_all,
    *_heads_all,
    *_positional_all,
    *_transformer_all,
    *_masks_all,
    *_variants_all,
    *_efficient_all,
]
