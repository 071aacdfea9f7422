"""lectures_lib: the helper library of the executable course on self-attention and the Transformer.

Each module holds what one idea needs, and each public name says in its docstring which notebook
derives it:

- :mod:`lectures_lib.utils`: seeding, device selection, input checks;
- :mod:`lectures_lib.attention`: scaled dot-product attention, masks, self- and multi-head attention;
- :mod:`lectures_lib.positional`: positional encodings;
- :mod:`lectures_lib.transformer`: encoder and decoder layers, the seq2seq Transformer;
- :mod:`lectures_lib.decoding`: greedy and beam search;
- :mod:`lectures_lib.variants`: local, stride and global masks; local and linear attention;
- :mod:`lectures_lib.data`: the synthetic toy tasks;
- :mod:`lectures_lib.training`: the training loop and its history;
- :mod:`lectures_lib.plotting`: attention maps, masks, curves;
- :mod:`lectures_lib.checks`: the exercise checkers;
- :mod:`lectures_lib.tooling`: the course's tooling, not taught (student versions, grading,
  re-executing notebooks, the site, the lab): ``python -m lectures_lib --help``.
"""

from .utils import get_device, seed_everything

__version__ = "0.1.0"
__all__ = ["get_device", "seed_everything", "__version__"]
