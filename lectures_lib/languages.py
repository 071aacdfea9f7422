"""The course's languages: English, Simplified and Traditional Chinese, and which one a notebook
is in. The checkers speak it (:mod:`lectures_lib.checks.messages`); the instructor's tools
(student copies, the lab, the hub, the Chinese editions) use the same list and the same names.

The language is chosen without touching the notebook's code, first match wins:

1. a collected submission's ``language.txt`` (:data:`SUBMISSION_FILE`) in the kernel's working
   directory, which Jupyter, nbclient, nbval and nbgrader set to the notebook's folder: ``hub
   collect`` writes it beside each submission from the class list, so a grader's kernel (nbgrader's
   sandboxed one has an empty environment; a plain one has the *instructor's*) speaks the
   student's language in the messages that reach the student's feedback;
2. the environment variable ``LECTURES_LANG`` (``en``, ``zh-Hans``/``zh-CN``, ``zh-Hant``/``zh-TW``);
   ``python -m course_tools lab --lang zh-CN`` sets it for the lab's kernels;
3. the notebook's path: Jupyter Server gives each kernel ``JPY_SESSION_NAME`` (the notebook's
   path), and a notebook in a folder ``zh-Hans``/``zh-Hant`` (``notebooks/zh-Hans/``,
   ``student/zh-Hans/``) is Chinese;
4. the kernel's working directory (the same rule);
5. otherwise English.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["LANGUAGES", "ENV", "SUBMISSION_FILE", "normalise_language", "notebook_language",
           "submission_language"]

LANGUAGES = ("en", "zh-Hans", "zh-Hant")
ENV = "LECTURES_LANG"
SUBMISSION_FILE = "language.txt"  # beside a collected submission: its student's language
_ALIASES = {
    "en": "en", "en-us": "en", "en-gb": "en", "english": "en",
    "zh": "zh-Hans", "zh-cn": "zh-Hans", "zh-sg": "zh-Hans", "zh-hans": "zh-Hans", "cn": "zh-Hans",
    "zh-tw": "zh-Hant", "zh-hk": "zh-Hant", "zh-mo": "zh-Hant", "zh-hant": "zh-Hant", "tw": "zh-Hant",
}


def normalise_language(value: str) -> str:
    """``zh-CN``, ``zh_CN.UTF-8``, ``zh-Hans`` ... -> one of :data:`LANGUAGES` (ValueError if none)."""
    if not isinstance(value, str):
        raise TypeError(f"language must be a str, got {type(value).__name__}")
    key = value.split(".")[0].replace("_", "-").strip().lower()
    if key not in _ALIASES:
        raise ValueError(f"language must be one of en, zh-Hans (zh-CN), zh-Hant (zh-TW), "
                         f"got {value!r}")
    return _ALIASES[key]


def _from_path(path: str) -> str | None:
    for part in reversed(Path(path).parts):
        if part in ("zh-Hans", "zh-Hant"):
            return part
    return None


def submission_language(folder: str | os.PathLike) -> str | None:
    """The language in ``folder``'s :data:`SUBMISSION_FILE` (one of :data:`LANGUAGES`); None when
    there is none, or it holds no language (it never breaks a check)."""
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"folder must be a path (str or os.PathLike), got "
                        f"{type(folder).__name__}")
    path = Path(folder) / SUBMISSION_FILE
    try:
        if not path.is_file():  # none, or a folder or pipe: never waited on
            return None
        with open(path, encoding="utf-8") as file:
            return normalise_language(file.read(40).strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def notebook_language() -> str:
    """The language of the running notebook (see the module docstring for the rules)."""
    submitted = submission_language(".")
    if submitted is not None:
        return submitted
    chosen = os.environ.get(ENV, "").strip()
    if chosen:
        try:
            return normalise_language(chosen)
        except ValueError:
            return "en"  # a bad setting must never break a check: English, as without it
    session = os.environ.get("JPY_SESSION_NAME", "")
    found = _from_path(session) if session else None
    if found is None:
        try:
            found = _from_path(os.getcwd())
        except OSError:
            found = None
    return found or "en"
