"""What the grader leaves on its own machine (issue 33, item 6), one cause at a time:

1. a job's files (``/tmp/lectures-job-*/spec.json``: a student's code, the graded task variant)
   are private to the grader while it grades, and the sandboxed worker still reads them;
2. ``--format nbgrader-csv`` takes student ids from an explicit source (a CSV that maps each
   submission to its id, or nbgrader's ``submitted/<student>/<assignment>/`` folders), never
   from a file name; it refuses an id that is not a plain identifier, and no cell of a gradebook
   starts a spreadsheet formula;
3. a submission's name (a file name may hold a newline) is printed on one line in the table
   report, the CSV gradebook and the JSON lines: it cannot forge a line of the report.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lectures_lib.tooling import grading, sandbox

ROOT = Path(__file__).resolve().parents[2]
needs_sandbox = pytest.mark.skipif(sandbox.sandbox_problem() is not None,
                                   reason=f"no sandbox here: {sandbox.sandbox_problem()}")


# ------------------------------------------------------------------------------------------
# 1. A job's files are the grader's alone
# ------------------------------------------------------------------------------------------


@needs_sandbox
def test_a_jobs_spec_is_private_to_the_grader_and_read_by_its_worker():
    secret = "answer = 'only the grader may read this cell'"
    session = sandbox.Session([secret], grading._student_checks(),
                              deadline=time.monotonic() + 60)
    with session:
        session.start()
        job = Path(session._folder.name)
        for path in (job, job / "spec.json"):
            mode = stat.S_IMODE(os.stat(path).st_mode)
            assert mode & 0o077 == 0, f"{path} is open to other local users: {oct(mode)}"
            assert os.stat(path).st_uid == os.geteuid()
        assert secret in (job / "spec.json").read_text()
        assert session.run_until(1) == []  # the sandboxed worker read its cells all the same
        assert session.lookup("answer") == "only the grader may read this cell"
        if os.geteuid() == 0 and subprocess.run(["which", "setpriv"],
                                                capture_output=True).returncode == 0:
            other = subprocess.run(["setpriv", "--reuid", "65533", "--regid", "65533",
                                    "--clear-groups", "cat", str(job / "spec.json")],
                                   capture_output=True, text=True)
            assert other.returncode != 0 and secret not in other.stdout, other
