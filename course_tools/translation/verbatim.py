"""What a translated cell must keep exactly as the English cell has it (formulas, code, links,
markers, headings, ⚠️ boxes): :func:`verbatim_problems` names what a translation lost."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$]+?\$", re.DOTALL)  # may wrap: compared space-normalised
_CODE = re.compile(r"`[^`]+`")
_URL = re.compile(r"https?://[^\s<>)]+")
_MARKER = re.compile(r"^### (?:BEGIN|END) (?:SOLUTION|HIDDEN TESTS)[ \t]*$", re.MULTILINE)
_HEADING_LEVEL = re.compile(r"^(#{1,6}) ", re.MULTILINE)


_SEQUENCES = ("code block", "marker", "heading levels", "⚠️ box")
_TEXT = re.compile(r"\\text\{[^{}]*\}")  # prose inside math, not \\mathrm{ReLU}


def _spaced(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _formula(text: str) -> str:
    """A formula with its words (\\text{...}) blanked: a translation may translate those."""
    return _TEXT.sub(r"\\text{}", _spaced(text))


def verbatim_parts(text: str) -> dict[str, list[str]]:
    """What a translation must keep exactly as the English has it, by kind.

    Fenced code blocks, math ($...$ and $$...$$), code spans, URLs, the nbgrader region markers,
    the sequence of heading levels, and the ⚠️ boxes. Words inside math (``\\text{...}``) may be
    translated; spacing and line breaks do not count.
    """
    fences = _FENCE.findall(text)
    prose = _FENCE.sub("", text)
    math = _MATH.findall(prose)
    prose = _MATH.sub("", prose)
    return {
        "code block": fences,
        "math": sorted(_formula(m) for m in math),
        "code span": sorted(_spaced(c) for c in _CODE.findall(prose)),
        "URL": sorted(_URL.findall(prose)),
        "marker": _MARKER.findall(text),
        "heading levels": _HEADING_LEVEL.findall(_MARKER.sub("", prose)),
        "⚠️ box": ["⚠️"] * prose.count("⚠️"),
    }


def verbatim_problems(english: str, chinese: str) -> list[str]:
    """How ``chinese`` fails to keep :func:`verbatim_parts` of ``english`` (empty: it keeps them)."""
    want, got = verbatim_parts(english), verbatim_parts(chinese)
    found = []
    for kind in want:
        if kind in _SEQUENCES:  # the cell's structure: exactly the English one
            if want[kind] != got[kind]:
                found.append(f"{kind}: the English has {want[kind]}, the translation {got[kind]}")
            continue
        # every English formula, code span, URL must be there; a translation may repeat one
        missing = sorted(set(want[kind]) - set(got[kind]))
        if missing:
            found.append(f"{kind}: missing {missing[:3]}"
                         + (f" (the translation has {sorted(set(got[kind]) - set(want[kind]))[:3]})"
                            if set(got[kind]) - set(want[kind]) else ""))
    return found
