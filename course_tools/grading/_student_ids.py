"""Where ``grade --format nbgrader-csv`` takes each submission's student id: from a source the
instructor holds, never from the file's name (which the student chose: ``bob_01.ipynb`` renamed
``alice_01.ipynb`` would add a row under Alice's id, and ``=HYPERLINK(...)_01.ipynb`` a formula).

Two sources, each read before any submission is graded (a missing id stops the command at once):

* ``--student-ids FILE``: a CSV whose header is ``submission,student_id``; each row names one
  submission by its path (relative paths are read from the CSV file's folder) and gives its id;
* ``--student-ids-from-folders``: nbgrader's layout, ``.../submitted/<student_id>/<assignment>/
  NOTEBOOK.ipynb`` (the folders ``nbgrader collect`` makes from the students' user names).

Every id must be a plain identifier (:func:`._report.check_student_id`).
"""

from __future__ import annotations

import csv
from pathlib import Path

from course_tools.grading._report import check_student_id, one_line

__all__ = ["ids_from_csv", "ids_from_folders"]

MAX_ID_FILE_BYTES = 16 * 2**20


def _key(path: Path) -> Path:
    return Path(path).expanduser().resolve()


def ids_from_csv(file: Path, submissions: list[Path]) -> list[str]:
    """The id of each of ``submissions`` (in their order), from the CSV ``file``
    (``submission,student_id``). Raises ValueError naming what is missing or wrong."""
    file = Path(file)
    if not file.is_file() or file.stat().st_size > MAX_ID_FILE_BYTES:
        raise ValueError(f"--student-ids {one_line(file)}: not a readable CSV file (at most "
                         f"{MAX_ID_FILE_BYTES >> 20} MiB)")
    with file.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        rows = list(reader)
    if not {"submission", "student_id"} <= set(fields):
        raise ValueError(f"--student-ids {one_line(file)}: its header must name the columns "
                         f"'submission' and 'student_id' (one row per submission), got "
                         f"{one_line(list(fields))[:120]}")
    ids: dict[Path, str] = {}
    for number, row in enumerate(rows, start=2):
        where = f"--student-ids {one_line(file)}, line {number}"
        if not (row["submission"] or "").strip():
            raise ValueError(f"{where}: no submission named")
        student = check_student_id((row["student_id"] or "").strip(), where)
        path = Path(row["submission"].strip())
        key = _key(path if path.is_absolute() else file.parent / path)
        if ids.get(key, student) != student:
            raise ValueError(f"{where}: {one_line(path)} has two ids, {ids[key]!r} and "
                             f"{student!r}")
        ids[key] = student
    missing = [path for path in submissions if _key(path) not in ids]
    if missing:
        raise ValueError(f"--student-ids {one_line(file)} gives no id for {len(missing)} "
                         f"submission(s): {', '.join(one_line(p) for p in missing[:5])}"
                         + (", ..." if len(missing) > 5 else ""))
    return [ids[_key(path)] for path in submissions]


def ids_from_folders(submissions: list[Path]) -> list[str]:
    """The id of each of ``submissions`` from nbgrader's layout: the ``<student_id>`` of
    ``.../submitted/<student_id>/<assignment>/NOTEBOOK.ipynb``."""
    ids = []
    for path in submissions:
        parts = Path(path).absolute().parts
        if len(parts) < 4 or parts[-4] != "submitted":
            raise ValueError(f"--student-ids-from-folders: {one_line(path)} is not in nbgrader's "
                             "layout submitted/<student_id>/<assignment>/NOTEBOOK.ipynb; grade "
                             "the course's submitted/ folder, or map files to ids with "
                             "--student-ids FILE")
        ids.append(check_student_id(parts[-3], f"the student folder of {one_line(path)}"))
    return ids
