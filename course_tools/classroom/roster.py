"""The class and its students, shared by the hub (:mod:`.hub`), its submit service
(:mod:`.submit`) and the term's operations (:mod:`.operations`), none of which imports another's
internals for them: the class list CSV read and checked, the class the hub recorded
(``class.json``), the password hash, and files only root reads.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from lectures_lib.languages import normalise_language

USERNAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
SUBMIT_LIMIT = 64 * 2**20  # bytes one submission may carry
STUDENT_FOLDERS = {"en": "student", "zh-Hans": "student/zh-Hans", "zh-Hant": "student/zh-Hant"}


@dataclass(frozen=True)
class Student:
    username: str
    language: str  # en, zh-Hans or zh-Hant


def read_class_list(path: Path) -> list[Student]:
    """The class list: a CSV with the header ``username,language`` (ValueError naming the row)."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        if reader.fieldnames is None or {"username", "language"} - set(reader.fieldnames):
            raise ValueError(f"{path}: the header must be 'username,language', got "
                             f"{reader.fieldnames}")
        students, seen = [], set()
        for row_number, row in enumerate(reader, start=2):
            name = (row["username"] or "").strip()
            if not USERNAME.fullmatch(name):
                raise ValueError(f"{path}, row {row_number}: username must be a Unix user name "
                                 f"(lower-case letters, digits, _ or -; at most 32), got {name!r}")
            if name in seen:
                raise ValueError(f"{path}, row {row_number}: username {name!r} appears twice")
            try:
                language = normalise_language((row["language"] or "en").strip() or "en")
            except ValueError as error:
                raise ValueError(f"{path}, row {row_number}: {error}") from None
            seen.add(name)
            students.append(Student(name, language))
    if not students:
        raise ValueError(f"{path}: the class list names no student")
    return students


def _hash(password: str, salt: bytes) -> str:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 200_000).hex()


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    os.chmod(path, 0o600)


def _class(hub_dir: Path) -> dict[str, str]:
    return {row["username"]: row["language"]
            for row in json.loads((Path(hub_dir) / "class.json").read_text())}
