"""lectures_lib: the helper library of the executable course on self-attention and the Transformer.

Each module holds what one idea needs, and each public name says in its docstring which notebook
derives it:

- :mod:`lectures_lib.utils`: seeding, device selection, the door-check helpers (the taught
  modules' validators live apart, in the private ``_validate/``, one file per taught module);
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

from .utils import get_device, seed_everything

__version__ = "0.1.0"
__all__ = ["get_device", "seed_everything", "__version__"]
