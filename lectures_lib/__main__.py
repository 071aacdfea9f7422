"""``python -m lectures_lib COMMAND``: the course's commands (:mod:`course_tools.cli`)."""

if __name__ == "__main__":
    from course_tools.cli import main

    raise SystemExit(main())
