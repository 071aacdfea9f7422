"""The door checks of the taught modules (private), named for what they check.

The rules of ``lectures_lib/X.py`` are in ``lectures_lib/_validate/X.py`` (and those of
``variants/X.py`` in ``_validate/variants/X.py``); those of ``masks.py``, with the mask
contract's ``check_mask``, sit beside it in ``lectures_lib/_mask_check.py``. A taught function or
``forward`` holds the maths; its arguments are checked once, where it is called from outside the
library, as PyTorch keeps ``_mha_shape_check`` and ``_canonical_mask`` apart from
``multi_head_attention_forward``. The link is one decorator line, ``@validated(rules.qkv_and_mask)``
(see :func:`lectures_lib.utils.validated`); a rule takes the arguments of the function it guards
(``self`` included) and raises a learner-readable error naming the argument, what was expected and
what it got. A module's overridable ``check_inputs`` hook is itself the door of its ``forward``
(``@validated("check_inputs")``); a stack's door is its layers' rule. Settings are checked by one
declarative rule, ``settings.check_settings(d_model=d_model, dropout=dropout, ...)``: one rule per
setting name, the same everywhere; a door whose arguments each have a rule is a declaration,
``settings("n", "global_positions", "device", global_positions=global_token_positions)`` (that
rule checks the positions against ``n``). Constructors check their settings on their first line (a module built inside
another one is still checked: the factories that build it may come from the learner). Rules are
named for the concern (``qkv_and_mask``, ``mha_shape_check``, ``token_ids``), never like the
public function they guard, and one rule serves every entry point that takes the same arguments.

This package imports nothing; each file imports only :mod:`lectures_lib.utils`, ``masks``,
``_mask_check``, ``cache`` and rules files below it. Nothing here is taught.
"""
