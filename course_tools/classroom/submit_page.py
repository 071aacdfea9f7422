"""The ``course-submit`` page a student sees, in the student's language (the class roster's), and
the headers every response of the service carries.

Two steps, no JavaScript: the student picks ONE assignment (its notebooks, its deadline) and
reviews what will be sent; a second form, holding a one-time confirmation token that the service
keeps (:mod:`.submit`), submits it. Earlier submissions are listed with their times, and the page
says that what is submitted is what is saved on disk (JupyterLab's *Course › Save All* first).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from html import escape
from pathlib import Path

# Every response: never framed (a framing page could make a click land on Submit, issue 38 cause
# 6), no script or style from anywhere, forms post only back to the service, nothing cached.
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'unsafe-inline'; "
                                "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

HTML_LANG = {"en": "en", "zh-Hans": "zh-CN", "zh-Hant": "zh-TW"}  # the page's languages
# Each text of the page once, in every language: (English, 简体中文, 繁體中文).
TEXTS = {
    "title": ("Submit an assignment", "提交作业", "提交作業"),
    "student": ("Student", "学生", "學生"),
    "save": ("Save your notebooks first (in JupyterLab: Course › Save All, or File › Save All): "
             "what is submitted is what is saved on disk, not unsaved changes in an open "
             "notebook.",
             "请先保存笔记本（在 JupyterLab 中：课程 › Save All，或 File › Save All）："
             "提交的是磁盘上已保存的内容，打开的笔记本中未保存的修改不会被提交。",
             "請先儲存筆記本（在 JupyterLab 中：課程 › Save All，或 File › Save All）："
             "提交的是磁碟上已儲存的內容，開啟的筆記本中未儲存的修改不會被提交。"),
    "assignment": ("Assignment", "作业", "作業"),
    "due": ("due", "截止", "截止"),
    "review": ("Review…", "检查…", "檢查…"),
    "confirm_question": (
        "Submit “{assignment}” as {student}? These notebooks, as saved now, will be sent:",
        "以 {student} 的身份提交“{assignment}”？将发送下列笔记本（按现在保存的内容）：",
        "以 {student} 的身分提交「{assignment}」？將送出下列筆記本（按現在儲存的內容）："),
    "confirm": ("Submit now", "立即提交", "立即提交"),
    "cancel": ("Cancel", "取消", "取消"),
    "late": ("The deadline ({deadline}) has passed: this submission will be late.",
             "截止时间（{deadline}）已过：这次提交将算作迟交。",
             "截止時間（{deadline}）已過：這次提交將算作遲交。"),
    "submitted": ("submitted “{assignment}”: {names}", "已提交“{assignment}”：{names}",
                  "已提交「{assignment}」：{names}"),
    "not_submitted": ("not submitted: {error}", "未提交：{error}", "未提交：{error}"),
    "expired": ("this confirmation has expired or was already used: review again",
                "此确认已过期或已使用：请重新检查", "此確認已過期或已使用：請重新檢查"),
    "unknown": ("no such assignment is open to you", "没有对你开放的这项作业",
                "沒有對你開放的這項作業"),
    "earlier": ("Your earlier submissions", "你以前的提交", "你以前的提交"),
    "none": ("None yet.", "还没有提交。", "還沒有提交。"),
    "time": ("Time", "时间", "時間"),
    "notebooks": ("Notebooks", "笔记本", "筆記本"),
    "count": ("{count} submission(s)", "{count} 次提交", "{count} 次提交"),
    "none_open": ("No assignment is open now.", "现在没有开放的作业。", "現在沒有開放的作業。"),
}
TEXT = {language: {key: texts[i] for key, texts in TEXTS.items()}
        for i, language in enumerate(HTML_LANG)}  # language -> key -> text
STYLE = ("body{font-family:system-ui,sans-serif;max-width:46em;margin:2em auto;padding:0 1em}"
         ".save{background:#fff4ce;border-left:4px solid #e0a800;padding:.6em}"
         "table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.3em .8em;"
         "text-align:left}button{font-size:1em;padding:.3em 1em}#message{font-weight:bold}")


@dataclass(frozen=True)
class Assignment:
    """What a student may submit as one piece: its notebooks (stems: ``01_self_attention``),
    and its deadline (aware; None: none)."""

    name: str
    notebooks: tuple[str, ...]
    deadline: datetime | None = None


def open_assignments(hub_dir: Path) -> list[Assignment]:
    """What the page offers: the assignments the instructor released (``hub release``,
    :mod:`.assignments`), by deadline; before any release, each course notebook is one."""
    from course_tools.classroom import assignments

    released = assignments.list_assignments(hub_dir)
    if released:
        return [Assignment(a.name, tuple(a.notebooks), a.deadline) for a in released]
    from lectures_lib.course import course_files

    return [Assignment(path.stem, (path.stem,))
            for path in sorted((course_files() / "notebooks").glob("*.ipynb"))]


def earlier_submissions(hub_dir: Path, username: str) -> list[tuple[str, list[str]]]:
    """The student's submissions in the exchange, newest first: (time as text, notebook names)."""
    from course_tools.classroom.collect import notebook_names, submissions

    return [(f"{when:%Y-%m-%d %H:%M:%S}", notebook_names(run))
            for when, run in reversed(submissions(hub_dir, username))]


def _when(deadline: datetime) -> str:
    """A deadline in the hub's time zone, the offset shown."""
    return f"{deadline.astimezone():%Y-%m-%d %H:%M %z}"


def _page(language: str, body: str) -> str:
    text = TEXT[language]
    return (f"<!DOCTYPE html><html lang='{HTML_LANG[language]}'><head><meta charset='utf-8'>"
            f"<title>{escape(text['title'])}</title><style>{STYLE}</style></head><body>"
            f"{body}</body></html>")


def _history(language: str, runs: list[tuple[str, list[str]]]) -> str:
    text = TEXT[language]
    rows = "".join(f"<tr><td>{escape(when)}</td><td>{escape(', '.join(names))}</td></tr>"
                   for when, names in runs)
    table = (f"<table id='earlier'><tr><th>{escape(text['time'])}</th>"
             f"<th>{escape(text['notebooks'])}</th></tr>{rows}</table>" if runs
             else f"<p id='earlier'>{escape(text['none'])}</p>")
    return (f"<h2>{escape(text['earlier'])}</h2><p id='count'>"
            f"{escape(text['count'].format(count=len(runs)))}</p>{table}")


def choose_page(language: str, student: str, assignments: list[Assignment],
                runs: list[tuple[str, list[str]]], xsrf_form: str, message: str = "") -> str:
    """The first step: the message of the last action, the assignments, earlier submissions."""
    text = TEXT[language]
    options = "".join(
        f"<label><input type='radio' name='assignment' value='{escape(a.name)}'"
        f"{' checked' if i == 0 else ''}> {escape(a.name)}"
        + (f" ({escape(text['due'])} {escape(_when(a.deadline))})" if a.deadline else "")
        + f" <small>{escape(', '.join(a.notebooks))}</small></label><br>"
        for i, a in enumerate(assignments))
    form = (f"<form method='post' action='review'>{xsrf_form}<fieldset><legend>"
            f"{escape(text['assignment'])}</legend>{options}</fieldset><p><button id='submit' "
            f"type='submit'>{escape(text['review'])}</button></p></form>" if assignments
            else f"<p>{escape(text['none_open'])}</p>")
    return _page(language, (
        f"<h1>{escape(text['title'])}</h1><p>{escape(text['student'])}: <b id='student'>"
        f"{escape(student)}</b></p><p id='message'>{escape(message)}</p>"
        f"<p class='save' id='save'>{escape(text['save'])}</p>{form}{_history(language, runs)}"))


def confirm_page(language: str, student: str, assignment: Assignment, token: str,
                 xsrf_form: str, now: datetime | None = None) -> str:
    """The second step: what will be sent, as whom (and whether it is late); the form carries
    the one-time token."""
    text = TEXT[language]
    names = "".join(f"<li>{escape(stem)}.ipynb</li>" for stem in assignment.notebooks)
    deadline = assignment.deadline
    now = (now or datetime.now()).astimezone()
    late = (f"<p class='save' id='late'>{escape(text['late'].format(deadline=_when(deadline)))}"
            "</p>" if deadline is not None and now > deadline.astimezone() else "")
    return _page(language, (
        f"<h1>{escape(text['title'])}</h1><p class='save' id='save'>{escape(text['save'])}</p>"
        f"<p id='question'>{escape(text['confirm_question'].format(assignment=assignment.name, student=student))}"
        f"</p><ul id='notebooks'>{names}</ul>{late}<form method='post' action='confirm'>{xsrf_form}"
        f"<input type='hidden' name='token' value='{escape(token)}'><button id='confirm' "
        f"type='submit'>{escape(text['confirm'])}</button> <a id='cancel' href='./'>"
        f"{escape(text['cancel'])}</a></form>"))
