"""``python -m course_tools.grading``: the grade command (and its internal steps)."""

from course_tools.grading import main

raise SystemExit(main())
