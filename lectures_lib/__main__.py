"""``python -m lectures_lib``: the course's entry point until issue 42, now a signpost.

The commands moved with the instructor's tools to ``python -m course_tools`` (its docstring says
why). Typing the old form prints the new one and exits with status 2, so a script or a habit
that still uses it stops at once with the command to run, instead of Python's bare "is a package
and cannot be directly executed". This module imports nothing, of the tools or of the library.
"""

import shlex
import sys

if __name__ == "__main__":
    words = shlex.join(sys.argv[1:])
    sys.stderr.write(
        "python -m lectures_lib: the course's commands moved to python -m course_tools "
        f"(the same wheel). Run:\n  python -m course_tools {words}\n".replace(" \n", "\n"))
    raise SystemExit(2)
