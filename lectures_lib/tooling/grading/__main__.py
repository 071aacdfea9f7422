"""``python -m lectures_lib.tooling.grading``: the grade command (and its internal steps)."""

from . import main

raise SystemExit(main())
