"""``python -m lectures_lib COMMAND``: the course's commands (:mod:`lectures_lib.tooling.cli`)."""
from lectures_lib.tooling.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
