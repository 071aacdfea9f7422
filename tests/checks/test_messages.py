"""The checkers speak the notebook's language: verdicts and named mistakes from one catalogue."""

import math
import os
import shutil
from pathlib import Path

import pytest
import torch

import lectures_lib.checks as checks
from lectures_lib.checks import CheckResult, check_scaled_dot_product_attention, messages
from lectures_lib.checks._messages_zh_hant import MISTAKES_ZH_HANT

from .mistake_codes import collect

CHECKS = Path(checks.__file__).parent


def _codes_in_checkers(folder: Path = CHECKS) -> set[str]:
    """Every mistake code a checker can report (tests/checks/mistake_codes.py reads the source,
    however a code is passed), plus the decorator's own; fails on a place it cannot follow."""
    codes, unresolved = collect(folder)
    assert not unresolved, ("mistake codes passed in a way tests/checks/mistake_codes.py cannot "
                            f"follow (pass a literal, or teach the reader): {unresolved}")
    return codes | {"not_implemented", "timed_out", "not_callable", "checker_error"}


def test_every_mistake_a_checker_names_is_in_the_catalogue():
    codes = _codes_in_checkers()
    assert len(codes) > 50  # the collector sees the checkers
    missing = sorted(codes - set(messages.MISTAKES))
    assert not missing, f"add these mistake codes to checks/messages.py MISTAKES: {missing}"
    assert set(MISTAKES_ZH_HANT) == set(messages.MISTAKES)
    missing_hant = sorted(code for code in codes if not MISTAKES_ZH_HANT.get(code, "").strip())
    assert not missing_hant, f"regenerate checks/_messages_zh_hant.py: {missing_hant}"


_NEW_CHECKER = """
from dataclasses import dataclass
from ._base import Mistake, checker

@dataclass(frozen=True)
class _Suspect:
    code: str
    message: str

SUSPECTS = {"dict_key_code": "a", "other_dict_code": "b"}

def _suspects():
    found = [("listed_code", 1)]
    found += [("added_code", 2)]
    found.append(("appended_code", 3))
    return found

def _raise(code, message="m"):
    raise Mistake(code, message)

@checker("new")
def check_new(fn):
    for code, _ in _suspects():
        _raise(code)
    for code in SUSPECTS:
        raise Mistake(code, "m")
    for code, value in sorted(SUSPECTS.items()):
        raise Mistake(code if value else "ternary_code", "m")
    for suspect in [_Suspect("field_code", "m")]:
        raise Mistake(suspect.code, suspect.message)
    %s
"""
_NEW_CODES = {"dict_key_code", "other_dict_code", "listed_code", "added_code", "appended_code",
              "ternary_code", "field_code"}


def _checkers_with(tmp_path, extra: str) -> Path:
    folder = tmp_path / "checks"
    shutil.copytree(CHECKS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "zz_new.py").write_text(_NEW_CHECKER % extra, encoding="utf-8")
    return folder


def test_the_code_reader_finds_codes_passed_through_variables_tuples_dicts_and_fields(tmp_path):
    """A new checker passing codes every which way: each code is found, so the catalogue test
    fails on every one of them until it has its messages."""
    folder = _checkers_with(tmp_path, "return 'ok'")
    codes = _codes_in_checkers(folder)
    assert _NEW_CODES <= codes
    assert sorted(codes - set(messages.MISTAKES)) == sorted(_NEW_CODES)  # what the test names


def test_a_code_passed_in_a_way_the_reader_cannot_follow_fails(tmp_path):
    folder = _checkers_with(tmp_path, "raise Mistake(fn.__name__, 'm')")
    with pytest.raises(AssertionError, match=r"zz_new.py:\d+: fn.__name__"):
        _codes_in_checkers(folder)


def test_every_code_a_checker_returns_on_its_mistake_cases_is_read_and_explained(monkeypatch):
    """The reader against real runs: mistakes of 06's graded window checker (codes passed
    through a list of tuples) come back with their code, which the reader found, in Chinese."""
    from lectures_lib.checks.windows import check_causal_window_attention

    def windowed(fn):  # a (q, k, v, past) solution from a dense rule over offsets j - i
        def solution(q, k, v, past):
            n = q.shape[-2]
            offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            return fn(scores, offset, past) @ v
        return solution

    inf = float("-inf")
    cases = {
        "looks_ahead": lambda s, o, p: s.masked_fill(o.abs() > p, inf).softmax(-1),
        "window_off_by_one": lambda s, o, p: s.masked_fill((o > 0) | (o < -p - 1), inf).softmax(-1),
        "score_zero_not_weight_zero": lambda s, o, p: s.masked_fill((o > 0) | (o < -p), 0.0).softmax(-1),
        "not_renormalised": lambda s, o, p: s.softmax(-1) * ((o <= 0) & (o >= -p)),
    }
    monkeypatch.setenv("LECTURES_LANG", "zh-TW")
    read = _codes_in_checkers()
    for code, rule in cases.items():
        result = check_causal_window_attention(windowed(rule))
        assert result.mistake == code, result
        assert code in read
        assert MISTAKES_ZH_HANT[code] in str(result) and messages.UNKNOWN["zh-Hant"] not in str(result)


def test_the_traditional_catalogue_is_generated_from_the_simplified_one():
    from course_tools.translation.translate import MESSAGES_ZH_HANT, messages_zh_hant_source

    assert MESSAGES_ZH_HANT.read_text(encoding="utf-8") == messages_zh_hant_source(), (
        "regenerate: python -m course_tools.translation.translate generate")


@pytest.mark.parametrize(("value", "expected"), [
    ("zh-CN", "zh-Hans"), ("zh_CN.UTF-8", "zh-Hans"), ("zh-Hans", "zh-Hans"), ("zh-TW", "zh-Hant"),
    ("zh_TW", "zh-Hant"), ("zh-Hant", "zh-Hant"), ("en", "en"), ("EN", "en")])
def test_language_names(value, expected):
    assert messages.normalise_language(value) == expected


def test_language_from_the_environment_the_session_or_the_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("LECTURES_LANG", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert messages.notebook_language() == "en"
    folder = tmp_path / "student" / "zh-Hant"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)  # nbval, nbclient and Jupyter run a kernel in the notebook's folder
    assert messages.notebook_language() == "zh-Hant"
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "notebooks" / "zh-Hans" / "01_a.ipynb"))
    assert messages.notebook_language() == "zh-Hans"  # the session's notebook beats the folder
    monkeypatch.setenv("LECTURES_LANG", "en")
    assert messages.notebook_language() == "en"  # and the explicit choice beats both
    monkeypatch.setenv("LECTURES_LANG", "klingon")
    assert messages.notebook_language() == "en"  # a bad setting never breaks a check


def test_a_collected_submissions_language_file_beats_the_graders_own_setting(monkeypatch,
                                                                            tmp_path):
    """nbgrader runs a submission's notebook in its folder, where ``hub collect`` wrote
    ``language.txt``: the student's language, whatever the grader's environment says."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setenv("LECTURES_LANG", "en")  # the instructor's
    monkeypatch.chdir(tmp_path)
    for written, expected in (("zh-TW", "zh-Hant"), ("zh-CN\n", "zh-Hans"), ("klingon", "en"),
                              ("", "en")):
        (tmp_path / "language.txt").write_text(written)
        assert messages.notebook_language() == expected, written
    (tmp_path / "language.txt").write_bytes(b"\xff\xfe")  # not text: never breaks a check
    assert messages.notebook_language() == "en"
    (tmp_path / "language.txt").unlink()
    (tmp_path / "language.txt").mkdir()
    assert messages.notebook_language() == "en"
    (tmp_path / "language.txt").rmdir()
    os.mkfifo(tmp_path / "language.txt")  # a pipe nobody writes: never waited on
    assert messages.notebook_language() == "en"


def _unscaled(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)  # the mistake: no / sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def test_a_real_verdict_in_chinese_and_in_english(monkeypatch):
    monkeypatch.setenv("LECTURES_LANG", "zh-CN")
    result = check_scaled_dot_product_attention(_unscaled)
    assert not result.passed and result.mistake == "missing_scaling"
    text = str(result)
    assert text.startswith("[FAILED] scaled_dot_product_attention: 未通过。")  # graders' prefix
    assert "未通过" in text and messages.MISTAKES["missing_scaling"] in text
    assert result.message in text  # the checker's own details (the probe's numbers) are kept
    assert "未通过" in result._repr_html_()
    monkeypatch.setenv("LECTURES_LANG", "zh-TW")
    assert "未通過" in str(result) and MISTAKES_ZH_HANT["missing_scaling"] in str(result)
    monkeypatch.setenv("LECTURES_LANG", "en")
    assert str(result) == f"[FAILED] scaled_dot_product_attention: {result.message}"
    assert result.message == check_scaled_dot_product_attention(_unscaled).message  # unchanged


def test_a_passed_check_and_an_unknown_code_in_chinese(monkeypatch):
    monkeypatch.setenv("LECTURES_LANG", "zh-Hans")
    assert str(CheckResult("x", True, "matches on 12 probes.")).startswith("[PASSED] x: 通过。")
    unknown = str(CheckResult("x", False, "odd.", "some_new_code"))
    assert messages.UNKNOWN["zh-Hans"] in unknown and "some_new_code" in unknown


@pytest.mark.slow
def test_a_kernel_running_a_chinese_notebook_gets_chinese_verdicts(tmp_path):
    """The real route: a notebook in a zh-Hans folder, executed by a Jupyter kernel (nbclient,
    as nbval and the lab run it), with no language setting at all."""
    import os

    import nbformat
    from nbclient import NotebookClient

    folder = tmp_path / "student" / "zh-Hans"
    folder.mkdir(parents=True)
    code = ("import torch\n"
            "from lectures_lib.checks import check_scaled_dot_product_attention\n"
            "def mine(q, k, v, mask=None):\n"
            "    w = torch.softmax(q @ k.transpose(-2, -1), -1)\n"
            "    return w @ v, w\n"
            "print(check_scaled_dot_product_attention(mine))")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    env = {k: v for k, v in os.environ.items() if k not in ("LECTURES_LANG", "JPY_SESSION_NAME")}
    env["PYTHONPATH"] = str(Path(checks.__file__).parents[2])
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute(env=env)
    printed = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert printed.startswith("[FAILED] scaled_dot_product_attention: 未通过。"), printed
    assert messages.MISTAKES["missing_scaling"] in printed
