"""``python -m course_tools COMMAND``: the course's one entry point (:mod:`course_tools.cli`).

Every command of the READMEs and every ``make`` target runs through here: ``lab``, ``copy``,
``test``, ``notebooks``, ``student``, ``site``, ``release``, ``source``, ``grade``,
``sandbox-kernelspec``, ``hub``. It is the tools' package that dispatches, not ``lectures_lib``
(which until issue 42 answered ``python -m lectures_lib``), for two reasons:

- ``lectures_lib`` imports nothing of ``course_tools``: an alias there would be one arrow running
  back up from the learner's library to the instructor's tools;
- the grader's guard against a handed-in ``torch.py`` (dropping the working directory from
  ``sys.path``) must run before anything is imported, and ``python -m X`` imports the package
  ``X`` first: as ``python -m lectures_lib`` that guard had to sit in the learner's
  ``lectures_lib/__init__.py``; as ``python -m course_tools`` it sits in the grader's package.

The wheel ships both packages, so an installed course answers ``python -m course_tools`` as a
clone does.
"""

from course_tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
