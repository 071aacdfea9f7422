"""What a student is handed when an assignment is released (:mod:`.assignments` holds the data and
the rule): the note ``ASSIGNMENT-<name>.md`` in the student's language, and :func:`place`, which
puts the notebooks into the student's folder by the re-release rule *running as the student*
(``python -m course_tools.classroom.handout _place``, its order as JSON on stdin: only plain data
crosses). Also the command lines ``hub release``, ``hub assignments``, ``hub gradebook``
(:mod:`.gradebook`) and ``hub feedback`` (:mod:`.feedback`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from course_tools.classroom.assignments import (
    Assignment,
    LatePolicy,
    fingerprint,
    list_assignments,
    load,
    parse_deadline,
    release,
)
from course_tools.classroom.commands import HubCommand

NOTES = {
    "en": ("# Assignment {name}\n\nNotebooks: {notebooks}\n\nDeadline: {deadline}\n\n"
           "Late work: {policy}\n\nSubmit with the Submit button when you are done; you may "
           "submit again, the latest submission counts.\n"),
    "zh-Hans": ("# 作业 {name}\n\n笔记本：{notebooks}\n\n截止时间：{deadline}\n\n迟交：{policy}\n\n"
                "完成后请点“提交”；可以再次提交，以最后一次为准。\n"),
    "zh-Hant": ("# 作業 {name}\n\n筆記本：{notebooks}\n\n截止時間：{deadline}\n\n遲交：{policy}\n\n"
                "完成後請點「提交」；可以再次提交，以最後一次為準。\n"),
}
CORRECTED = {
    "en": ("\n## Corrected notebook (version {version})\n\n{notebook}.ipynb was corrected. You had "
           "already worked in it, so your {notebook}.ipynb is kept exactly as it was, and the "
           "corrected one is beside it: {notebook}.v{version}.ipynb. Work in either (you may "
           "copy your answers into the corrected one). When you submit, the grader takes the "
           "newest of them that you changed.\n"),
    "zh-Hans": ("\n## 更正后的笔记本（第 {version} 版）\n\n{notebook}.ipynb 已更正。你已经在里面作答，所以你的 "
                "{notebook}.ipynb 保持原样，更正版放在旁边：{notebook}.v{version}.ipynb。两个都可以用"
                "（可以把答案抄进更正版）。提交时，评分取你改动过的最新一版。\n"),
    "zh-Hant": ("\n## 更正後的筆記本（第 {version} 版）\n\n{notebook}.ipynb 已更正。你已經在裡面作答，所以你的 "
                "{notebook}.ipynb 保持原樣，更正版放在旁邊：{notebook}.v{version}.ipynb。兩個都可以用"
                "（可以把答案抄進更正版）。提交時，評分取你改動過的最新一版。\n"),
}
POLICY = {
    "zh-Hans": ("不扣分", "每迟一天（不足一天按一天）扣 {per_day:.0%}", "，迟交超过 {days:g} 天得 0 分"),
    "zh-Hant": ("不扣分", "每遲一天（不足一天按一天）扣 {per_day:.0%}", "，遲交超過 {days:g} 天得 0 分"),
}


def note(assignment: Assignment, language: str, corrected: list[str]) -> str:
    """The ``ASSIGNMENT-<name>.md`` a student finds beside the notebooks, in their language;
    ``corrected``: the notebooks whose corrected version was put beside the student's work."""
    policy = assignment.late_policy
    if language == "en":
        words = policy.describe()
    else:
        free, per_day, zero = POLICY[language]
        words = per_day.format(per_day=policy.per_day) if policy.per_day else free
        if policy.zero_after_days is not None:
            words += zero.format(days=policy.zero_after_days)
    text = NOTES[language].format(
        name=assignment.name, notebooks=", ".join(f"{s}.ipynb" for s in assignment.notebooks),
        deadline=assignment.deadline.strftime("%Y-%m-%d %H:%M %z"), policy=words)
    return text + "".join(CORRECTED[language].format(version=assignment.version, notebook=stem)
                          for stem in corrected)


def place(order: dict) -> dict[str, str]:
    """As the student: put each notebook of ``order`` into their folder by the re-release rule
    (module doc) and write the note. Returns notebook -> what happened."""
    import nbformat

    folder = Path(order["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    version, done, beside = order["version"], {}, []
    for stem, nb in order["notebooks"].items():
        target, new = folder / f"{stem}.ipynb", fingerprint(nb)
        node = nbformat.from_dict(nb)
        if not target.exists():
            nbformat.write(node, target)
            done[stem] = "written"
            continue
        try:
            mine = fingerprint(json.loads(target.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            mine = None  # not a notebook any more: the student's, kept
        if mine == new:
            done[stem] = "current"
        elif mine in order["earlier"][stem] and not target.is_symlink():
            nbformat.write(node, target)
            done[stem] = "replaced"
        else:
            corrected = folder / f"{stem}.v{version}.ipynb"
            if not corrected.exists():
                nbformat.write(node, corrected)
            beside.append(stem)
            done[stem] = "beside"
    assignment = Assignment.from_json(order["note"]["assignment"])
    note_path = folder / order["note_name"]
    if note_path.is_symlink():
        note_path.unlink()
    note_path.write_text(note(assignment, order["note"]["language"], beside), encoding="utf-8")
    from course_tools.publish.copy import trust_notebooks

    trust_notebooks([folder / f"{stem}.ipynb" for stem, what in done.items()
                     if what in ("written", "replaced")]
                    + [folder / f"{stem}.v{version}.ipynb" for stem in beside])
    return done



# ---- command line ----------------------------------------------------------------------------------


def _release_main(argv: list[str]) -> int:
    parser = HubCommand(
        "release", "Release an assignment (one or several course notebooks) with a deadline "
        "and a late policy into each student's folder, in their language; again, a corrected "
        "notebook: a student's edited copy is kept and the corrected one put beside it.",
        assignment="the assignment's id, e.g. ps1 (nbgrader's)",
        root="release writes into each student's folder as that student: run it as root")
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                        help="course notebooks, e.g. 01_self_attention (a re-release: the "
                        "assignment's own when none is given)")
    parser.add_argument("--deadline", default=None, metavar="TIME",
                        help="ISO time, e.g. 2026-12-12T23:59 (the hub's local time unless it "
                        "names a zone: 2026-12-12T23:59+08:00)")
    parser.add_argument("--late-per-day", type=float, default=None, metavar="FRACTION",
                        help="share of the score lost per started day late (0.1 = 10 %%; 0)")
    parser.add_argument("--late-zero-after", type=float, default=None, metavar="DAYS",
                        help="a submission more than DAYS late scores 0 (default: never)")
    parser.add_argument("--student", action="append", default=None, metavar="NAME",
                        help="release to this student only (repeatable; default: the class)")
    args = parser.parse_hub(argv)
    try:
        deadline = parse_deadline(args.deadline) if args.deadline is not None else None
        policy = None
        if args.late_per_day is not None or args.late_zero_after is not None:
            policy = LatePolicy(args.late_per_day or 0.0, args.late_zero_after)
        done = release(args.hub_dir, args.assignment, args.notebooks or None, deadline=deadline,
                       late_policy=policy, students=args.student)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        parser.error(str(error))
    assignment = load(args.hub_dir, args.assignment)
    print(f"{assignment.name} version {assignment.version}: "
          f"{', '.join(assignment.notebooks)}; deadline "
          f"{assignment.deadline:%Y-%m-%d %H:%M %z}; {assignment.late_policy.describe()}")
    for student, what in done.items():
        print(f"{student}: " + ", ".join(f"{stem} {how}" for stem, how in what.items()))
    return 0


def _list_main(argv: list[str]) -> int:
    parser = HubCommand("assignments", "The released assignments.", class_list=False)
    args = parser.parse_hub(argv)
    for a in list_assignments(args.hub_dir):
        print(f"{a.name}: {', '.join(a.notebooks)}; deadline {a.deadline:%Y-%m-%d %H:%M %z}; "
              f"{a.late_policy.describe()}; version {a.version}")
    return 0


def _gradebook_main(argv: list[str]) -> int:
    from course_tools.classroom.gradebook import main as gradebook_main

    return gradebook_main(argv)


def _feedback_main(argv: list[str]) -> int:
    from course_tools.classroom.feedback import main as feedback_main

    return feedback_main(argv)


COMMANDS = {"release": _release_main, "assignments": _list_main, "gradebook": _gradebook_main,
            "feedback": _feedback_main}


def main(argv: list[str]) -> int:
    """``hub release|assignments|gradebook|feedback ...`` (and ``_place``, ``_feedback``: run
    as a student)."""
    if argv[:1] == ["_place"]:
        print(json.dumps(place(json.loads(sys.stdin.read()))))
        return 0
    if argv[:1] == ["_feedback"]:  # run as the student (feedback.write_as)
        from course_tools.classroom.feedback import write_private

        print(json.dumps(write_private(json.loads(sys.stdin.read()))))
        return 0
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
