"""The grade command's line (``python -m course_tools grade``, and the grader's internal
``_one`` and ``_zygote`` steps): options, the class's submissions and ids, the report's format.

Apart from the package's ``__init__``, which only names the grader's parts and imports them when
first used: importing :mod:`course_tools.grading.sandbox.kernel` (the sandboxed kernel's
launcher, one for each kernel of every student of a class hub) runs that ``__init__``, and the
launcher needs neither torch nor the checkers that these parts import.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_tools.grading._batch import (
    _find,
    _grade_one,
    _one_parser,
    _zygote_main,
    grade_paths,
    identify,
    safe_sys_path,
)
from course_tools.grading._collect import (
    COURSE_NOTEBOOKS,
    DEFAULT_TIMEOUT,
    SECRET_ENV,
    _check_options,
    use_secret,
)
from course_tools.grading._report import (
    _failed_report,
    format_csv,
    format_nbgrader_csv,
    format_table,
    one_row_each,
    to_json,
    write_atomic,
)
from course_tools.grading._run import SandboxRefused
from course_tools.grading._student_ids import ids_from_csv, ids_from_folders


def _grade_main(args) -> int:
    try:
        note = use_secret(args.secret_file)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(note, file=sys.stderr)
    try:  # the ids first: a missing one stops the command before anything is graded
        student_ids = _student_ids(args)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.output is not None and not args.output.parent.is_dir():
        print(f"error: --output {args.output}: its folder does not exist", file=sys.stderr)
        return 2
    try:
        reports, any_folder = _grade_class(args, student_ids)
    except (SandboxRefused, _Refused, TypeError, ValueError) as error:  # e.g. --timeout 0
        print(f"error: {error}", file=sys.stderr)  # the message says what is wrong
        return 2
    if not reports:
        print("error: no submissions found", file=sys.stderr)
        return 1
    text = _formatted(reports, args.format, any_folder, student_ids)
    if args.output is None:
        print(text, end="", flush=True)
    else:  # never half a gradebook: written beside it, then put in its place
        write_atomic(args.output, text)
        print(f"wrote {len(reports)} reports to {args.output}", file=sys.stderr)
    return 0


class _Refused(Exception):
    """The cluster cannot grade this batch as asked (no scheduler, a worker refused)."""


def _grade_class(args, student_ids: list[str] | None) -> tuple[list[dict], bool]:
    """Every submission's report, in the order found. For nbgrader's gradebook each file's
    assignment is told first (:func:`~._batch.identify`): a file that names no course notebook,
    and a student's second notebook for one assignment (:func:`~._report.one_row_each`), get a
    report of their own saying so and are not graded; every other file is."""
    found, any_folder = _find(args.submissions)
    skipped: dict[int, dict] = {}
    if student_ids is not None and found:
        _check_options(args.timeout, args.course)
        told = identify(found, args.course, args.notebook)
        stems = [stem for stem, _ in (one or (None, "") for one in told)]
        for index, reason in one_row_each(found, student_ids, stems).items():
            skipped[index] = dict(_failed_report(found[index], reason),
                                  notebook=f"{stems[index]}.ipynb")
        for index, one in enumerate(told):
            if one is not None and one[0] is None:
                skipped[index] = _failed_report(found[index], one[1])
    paths = [path for index, path in enumerate(found) if index not in skipped] \
        if skipped else args.submissions
    graded: list[dict] = []
    if paths:
        graded, _ = _grade(paths, args)
    if not skipped:
        return graded, any_folder
    graded.reverse()
    return [skipped[index] if index in skipped else graded.pop()
            for index in range(len(found))], any_folder


def _grade(paths: list[Path], args) -> tuple[list[dict], bool]:
    if args.scheduler is None:
        return grade_paths(paths, timeout=args.timeout, course=args.course,
                           notebook=args.notebook, sandbox=not args.no_sandbox, jobs=args.jobs,
                           progress=not args.quiet,
                           allow_root_without_cgroup=args.root_without_cgroup)
    from course_tools.grading._cluster import WorkerRefused, grade_on_cluster

    try:
        return grade_on_cluster(
            paths, args.scheduler, timeout=args.timeout, course=args.course,
            notebook=args.notebook, sandbox=not args.no_sandbox, progress=not args.quiet,
            allow_root_without_cgroup=args.root_without_cgroup, tls=args.tls,
            insecure_plain_tcp=args.insecure_plain_tcp)
    except (WorkerRefused, ImportError, OSError) as error:  # OSError: no scheduler
        raise _Refused(f"{type(error).__name__}: {error}") from None


def _student_ids(args) -> list[str] | None:
    """The student ids ``--format nbgrader-csv`` needs, one per submission found, in order."""
    given = args.student_ids is not None or args.student_ids_from_folders
    if args.format != "nbgrader-csv":
        if given:
            raise ValueError("--student-ids and --student-ids-from-folders go with "
                             "--format nbgrader-csv")
        return None
    found, _ = _find(args.submissions)
    if args.student_ids is not None:
        return ids_from_csv(args.student_ids, found)
    if args.student_ids_from_folders:
        return ids_from_folders(found)
    raise ValueError("--format nbgrader-csv needs each student's id from a source you hold: "
                     "--student-ids FILE (a CSV: submission,student_id) or "
                     "--student-ids-from-folders (nbgrader's submitted/<student_id>/"
                     "<assignment>/ layout); a file's name is the student's choice")


def _formatted(reports: list[dict], format: str | None, any_folder: bool,
               student_ids: list[str] | None = None) -> str:
    if format == "json":
        return "".join(to_json(report) + "\n" for report in reports)
    if format == "nbgrader-csv":
        return format_nbgrader_csv(reports, student_ids)
    if format == "csv" or (format is None and any_folder):
        return format_csv(reports)
    return "\n\n".join(format_table(report) for report in reports) + "\n"


def _one_main(argv: list[str]) -> int:
    """Internal: grade one submission in this (trusted) process, print its report as JSON."""
    args = _one_parser("_one").parse_args(argv)
    sys.stdout.write("\n" + to_json(_grade_one(args.submission, args)) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m course_tools grade SUBMISSION ...`` (and the grader's internal ``_one``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    safe_sys_path()  # never import from the folder the grader was started in
    if argv[:1] == ["_one"]:
        return _one_main(argv[1:])
    if argv[:1] == ["_zygote"]:
        return _zygote_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m course_tools grade",
        description="Grade submitted notebooks against the course's hidden tests. Each "
        "submission's exercise cells run in a sandbox (bubblewrap); the course's test cells run "
        "in the grader and call the submission's functions across the process boundary. Prints "
        "a per-exercise table, JSON lines (--format json), or a CSV gradebook (a folder, or "
        "--format csv; --format nbgrader-csv: nbgrader's export shape, with each student's id "
        "from --student-ids or --student-ids-from-folders).",
    )
    parser.add_argument("submissions", type=Path, nargs="+",
                        help="submitted notebooks, or folders of them")
    parser.add_argument("--notebook", default=None,
                        help="the assignment, e.g. 05_transformer_decoder (default: recognised "
                        "from each submission's exercise ids, else its file name)")
    parser.add_argument("--course", type=Path, default=COURSE_NOTEBOOKS,
                        help="the folder of the course's notebooks (default: the installed "
                        "course's own, from the wheel or the clone)")
    parser.add_argument("--format", choices=["table", "json", "csv", "nbgrader-csv"],
                        default=None, help="output (default: table; csv for a folder)")
    parser.add_argument("--json", action="store_const", const="json", dest="format",
                        help="the same as --format json")
    ids = parser.add_mutually_exclusive_group()
    ids.add_argument("--student-ids", type=Path, default=None, metavar="FILE",
                     help="for --format nbgrader-csv: a CSV with the header "
                     "'submission,student_id', one row per submission (its path; relative "
                     "paths from the CSV's folder). A file's name never gives an id: students "
                     "choose their files' names")
    ids.add_argument("--student-ids-from-folders", action="store_true",
                     help="for --format nbgrader-csv: each id is the <student_id> folder of "
                     "nbgrader's layout submitted/<student_id>/<assignment>/NOTEBOOK.ipynb (made "
                     "by `nbgrader collect` from the students' user names). Ids must be plain "
                     "(letters, digits, . _ @ + -, starting with a letter or digit)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds for each submission (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--jobs", type=int, default=None,
                        help="submissions graded at once (default: the cores there are)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade even where no sandbox can be made (UNSAFE: the students' "
                        "code runs with your rights; only in a throwaway container or VM)")
    parser.add_argument("--unbounded-without-cgroup", "--root-without-cgroup",
                        action="store_true", dest="root_without_cgroup",
                        help="grade even where no cgroup can be made for each sandbox (UNSAFE: "
                        "nothing then bounds a submission's processes or its total memory: a "
                        "fork bomb or a cell that forks meets no limit; only in a throwaway "
                        "container or VM)")
    parser.add_argument("--secret-file", type=Path, default=None,
                        help="a file only you hold (e.g. 32 random bytes: `head -c 32 "
                        "/dev/urandom > secret`): every checker's probes and held-out data are "
                        f"drawn from it (default: ${SECRET_ENV} if set, else the public probes, "
                        "which students can compute from the package)")
    parser.add_argument("--output", "-o", type=Path, default=None,
                        help="write the table, JSON lines or gradebook to this file (written "
                        "whole or not at all: a temporary file beside it, then a replace) "
                        "instead of standard output")
    parser.add_argument("--scheduler", default=None, metavar="tls://HOST:PORT",
                        help="grade on a Dask cluster over mutual TLS (with --tls): each "
                        "submission is a task for the scheduler's workers (`dask worker "
                        "tls://HOST:PORT --tls-...` where the course is installed; each grades in "
                        "its own sandboxes; a worker that dies loses nothing). The workers read "
                        "the grading secret from their own $LECTURES_GRADING_SECRET_FILE; only "
                        "its fingerprint is sent. Needs `pip install 'lectures-lib[cluster]'`")
    parser.add_argument("--tls", type=Path, default=None, metavar="DIR/client",
                        help="the client's certificate folder (ca.pem, cert.pem, key.pem) that "
                        "`python -m course_tools grading-tls DIR` writes")
    parser.add_argument("--insecure-plain-tcp-anyone-can-run-code", action="store_true",
                        dest="insecure_plain_tcp",
                        help="allow a tcp:// scheduler (UNSAFE: it authenticates no one; anyone "
                        "who reaches its port runs code on the workers, reads the grading "
                        "secret and changes grades; only on a network no one else reaches)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return _grade_main(parser.parse_args(argv))
