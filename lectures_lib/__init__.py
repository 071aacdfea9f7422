"""lectures_lib: the helper library of the executable course on self-attention and the Transformer.

Each module holds what one idea needs, and each public name says in its docstring which notebook
derives it:

- :mod:`lectures_lib.utils`: seeding, device selection, the door-check helpers (the taught
  modules' validators live apart, in the private ``_validate/``, one file per taught module;
  the two that need no torch in :mod:`lectures_lib.plain_checks`);
- :mod:`lectures_lib.masks`: the mask convention, causal and key-padding masks;
- :mod:`lectures_lib.attention`: scaled dot-product attention in steps, self- and multi-head
  attention (the seam ``project`` -> ``attend``);
- :mod:`lectures_lib.cache`: the key/value cache of incremental decoding;
- :mod:`lectures_lib.positional`: positional encodings, ``RotaryAttention``;
- :mod:`lectures_lib.layers`: layer norm, residual connection, feed-forward, encoder and decoder
  layers;
- :mod:`lectures_lib.embedding`: ``TokenEmbedding`` (token ids -> vectors + positions);
- :mod:`lectures_lib.models`: the stacks, ``EncoderTagger``, ``Transformer``;
- :mod:`lectures_lib.interop`: PyTorch's attention and layers copied into the course's
  (``from_torch``);
- :mod:`lectures_lib.decoding`: greedy and beam search, sampling, scores;
- :mod:`lectures_lib.variants`: the attention variants of sections 06 and 07;
- :mod:`lectures_lib.data`: the synthetic toy tasks, and the real sentence pairs
  (``data.sentences``);
- :mod:`lectures_lib.real_sentences`, :mod:`lectures_lib.sentence_labels`: section 08's
  translation recipe (training, decoding, BLEU, baselines), tagger and classifier;
- :mod:`lectures_lib.training`: the training loop and its history;
- :mod:`lectures_lib.plotting`, :mod:`lectures_lib.diagrams`, :mod:`lectures_lib.measure`:
  attention maps and curves, pictures of the architecture, memory and time;
- :mod:`lectures_lib.checks`: the exercise checkers;
- :mod:`lectures_lib.course`: the course's files (notebooks, stored benchmark runs) in a clone or
  the installed package.

The instructor's tools (student versions, grading, re-executing notebooks, the site, the lab, the
hub) are the package ``course_tools`` beside this one, in the same wheel; nothing here imports it.
"""

from importlib import import_module as _import_module

__version__ = "0.1.0"
__all__ = ["get_device", "seed_everything", "__version__"]

# Imported when first used (PEP 562), not with the package: a process that needs only a light
# part (the course's files, the class hub, the sandboxed kernel's launcher) never loads torch.
_LAZY = {"get_device": "utils", "seed_everything": "utils"}


def __getattr__(name: str):
    """``lectures_lib.seed_everything`` and any submodule (``lectures_lib.utils``), on first use."""
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = _import_module(f".{_LAZY.get(name, name)}", __name__)
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{_LAZY.get(name, name)}":
            raise  # a submodule that exists but needs something missing
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(module, name) if name in _LAZY else module
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
