"""The course's settings, checked by one declarative rule: ``check_settings(d_model=d_model,
dropout=dropout, ...)`` looks every keyword up in :data:`RULES` (one rule per setting name, the
same wherever the name appears), and ``settings("n", "window", "device")`` is the door rule of a
function whose arguments are settings (or tensors: ``settings("x", x=tensor(ndim=4))``, checked
against other arguments: ``settings("n", "global_positions", global_positions=rule)`` with
``rule(value, name, *, n)``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from functools import partial, wraps

import torch
import torch.nn.functional as F
from torch import nn

from ..utils import (
    check_bool,
    check_device,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_seed,
    check_tensor,
)


def optional(rule: Callable[..., object]) -> Callable[..., None]:
    """``rule``, or None (a default computed later: ``d_k=None`` means ``d_model``)."""
    @wraps(rule)  # its signature too: the arguments it is checked against (see settings)
    def check(value: object, name: str, **against: object) -> None:
        if value is not None:
            rule(value, name, **against)
    return check


def finite_number(value: object, name: str, *, low: float = 0.0, inclusive: bool = False,
                  terse: bool = False) -> float:
    """A finite real number ``> low`` (or ``>= low`` when ``inclusive``); ``terse``: the decoders'
    wording, which names the type alone and shows the value by ``str``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = "" if terse else f" ({value!r})"
        raise TypeError(f"{name} must be a number, got {type(value).__name__}{shown}")
    ok = value >= low if inclusive else value > low
    if not (math.isfinite(value) and ok):
        relation = ">=" if inclusive else ">"
        shown = str(value) if terse else repr(value)
        raise ValueError(f"{name} must be a finite number {relation} {low:g}, got {shown}")
    return float(value)


def positive_eps(eps: object, name: str) -> float:
    """A LayerNorm epsilon: a finite real number > 0."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"{name} must be a float > 0, got {type(eps).__name__} ({eps!r})")
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {eps!r}")
    return float(eps)


def frequency_base(base: object, name: str = "base") -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(base).__name__} ({base!r})")
    if not (math.isfinite(base) and base > 1):
        raise ValueError(f"{name} must be a finite number > 1, got {base!r}")
    return float(base)


def floating_dtype(dtype: object, name: str = "dtype") -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating torch.dtype, got {dtype!r}")


def even_d_head(d_head: object, name: str = "d_head") -> None:
    d_head = check_positive_int(d_head, name)
    if d_head % 2:
        raise ValueError(f"rotary embedding rotates feature pairs: d_head must be even, got {d_head}")


def even_buckets(n_buckets: object, name: str = "n_buckets") -> None:
    n_buckets = check_positive_int(n_buckets, name)
    if n_buckets % 2:
        raise ValueError(
            f"n_buckets must be even (a bucket per direction and per opposite), got {n_buckets}"
        )


def generator_or_none(generator: object, name: str = "generator") -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"{name} must be a torch.Generator or None, got {type(generator).__name__}"
        )


_ACTIVATION_NAMES = ("relu", "gelu")


def activation_name(activation: object, name: str = "activation") -> str:
    """Map ``"relu"``/``"gelu"``, ``F.relu``/``F.gelu`` or ``nn.ReLU()``/``nn.GELU()`` to a name."""
    if isinstance(activation, str) and activation in _ACTIVATION_NAMES:
        return activation
    if activation is F.relu or activation is torch.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    raise ValueError(
        "activation must be 'relu' or 'gelu' (or F.relu / torch.relu / F.gelu / nn.ReLU() / "
        f"nn.GELU()), got {activation!r}"
    )


def factory_or_none(factory: object, name: str) -> None:
    if factory is None:
        return
    if isinstance(factory, nn.Module) or not callable(factory):
        raise TypeError(
            f"{name} must be None or a factory: a callable factory(d_model, num_heads, dropout) "
            "-> module, e.g. a class or functools.partial(LocalAttention, window=4); got "
            f"{type(factory).__name__} (pass the class, not an instance: every layer builds its own)"
        )


_POSITIVE_INTS = (
    "d_model num_heads d_ff vocab_size src_vocab_size tgt_vocab_size max_len num_labels "
    "n_positions n stride dilation d n_hashes n_clusters chunk_size block n_features seq_len k "
    "block_size n_iters beam_width max_n epochs batch_size total_steps num_layers"
)
_NON_NEGATIVE_INTS = "window num_random num_iters offset"
_BOOLS = (
    "bias norm_first positional_encoding need_weights static use_cache return_scores "
    "suppress_bos smooth reduce progress orthogonal causal share_kv fixed same_bucket "
    "exclude_self"
)
_FACTORIES = "attention self_attention cross_attention encoder_attention decoder_attention"

#: One rule per setting name: ``rule(value, name)`` raises a learner-readable error.
RULES: dict[str, Callable[[object, str], object]] = {
    **dict.fromkeys(_POSITIVE_INTS.split(), check_positive_int),
    **dict.fromkeys(_NON_NEGATIVE_INTS.split(), check_non_negative_int),
    **dict.fromkeys(_BOOLS.split(), check_bool),
    **dict.fromkeys(_FACTORIES.split(), factory_or_none),
    **dict.fromkeys(("d_k", "d_v", "kdim", "vdim", "hidden", "heads", "top_k", "cluster_size"),
                    optional(check_positive_int)),
    "pad_id": optional(check_non_negative_int),
    "final_norm": optional(check_bool),
    "dropout": check_probability,
    "dropout_p": check_probability,
    "decay": check_probability,
    "layer_norm_eps": positive_eps,
    "init_std": check_positive_float,
    "temperature": check_positive_float,
    "base": frequency_base,
    "dtype": floating_dtype,
    "device": check_device,
    "seed": check_seed,
    "generator": generator_or_none,
    "activation": activation_name,
    "d_head": even_d_head,
    "n_buckets": even_buckets,
    "lr": finite_number,
    "grad_clip": optional(finite_number),
    "weight_decay": lambda value, name: finite_number(value, name, inclusive=True),
}


def check_settings(**settings: object) -> None:
    """Check every ``name=value`` by the course's rule for that name (:data:`RULES`), in order."""
    for name, value in settings.items():
        RULES[name](value, name)


def tensor(**spec: object) -> Callable[[object, str], object]:
    """The rule of a tensor argument: ``tensor(ndim=4)``, ``tensor(dtype="floating")`` (see
    :func:`lectures_lib.utils.check_tensor`)."""
    return partial(check_tensor, **spec)


def settings(*names: str, **rules: Callable[..., object]) -> Callable[..., None]:
    """The door rule of a function whose arguments are ``names`` (in its order), each checked by
    its rule in ``rules`` or, for a setting, in :data:`RULES`. A rule's required keyword-only
    parameters name the arguments it is checked against (``rule(members, name, *, n)``: the
    members against ``n``); those are checked first."""
    against = {name: [p.name for p in inspect.signature(check).parameters.values()
                      if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
               for name, check in rules.items()}
    first = {other for others in against.values() for other in others}

    def rule(*args: object, **kwargs: object) -> None:
        given = dict(zip(names, args))
        given.update((name, value) for name, value in kwargs.items() if name in names)
        for name in sorted(given, key=lambda name: name not in first):  # stable: else in order
            others = against.get(name, ())
            if all(other in given for other in others):  # a missing one: Python refuses the call
                (rules.get(name) or RULES[name])(given[name], name,
                                                 **{other: given[other] for other in others})
    rule.__qualname__ = rule.__name__ = f"settings({', '.join(names)})"
    return rule
