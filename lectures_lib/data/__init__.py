"""Synthetic toy tasks, generated deterministically from a seed (no downloads), and real images.

One module per section: ``labelling`` (01), ``relations`` (02), ``ordering`` (03),
``sequences`` (04), ``translation`` (05), ``long_range``, ``binding`` and ``listops`` (07); ``digits`` (04):
scikit-learn's bundled handwritten digits, shipped inside the package; ``sentences`` (08): real
English-Chinese sentence pairs from the pinned package ``hsk-sentences-audio`` (import it as
``from lectures_lib.data import sentences``).
"""

from . import sentences  # noqa: F401
from .binding import *  # noqa: F401,F403
from .digits import *  # noqa: F401,F403
from .labelling import *  # noqa: F401,F403
from .listops import *  # noqa: F401,F403
from .long_range import *  # noqa: F401,F403
from .ordering import *  # noqa: F401,F403
from .relations import *  # noqa: F401,F403
from .sequences import *  # noqa: F401,F403
from .translation import *  # noqa: F401,F403
