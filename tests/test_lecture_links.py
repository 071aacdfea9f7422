"""The lecture beside every notebook (issue 40): each opens with its lecture's video(s) and slides
(Hung-yi Lee, ML 2021 Spring), in every edition, and none cites the learner's study notes as a
folder the course does not hold (`seed/`). Notebooks 06 and 07 get theirs with issue 40's 06/07
work; add them to LINKED then."""

import re

import nbformat
import pytest

from lectures_lib.course import course_files

LINKED = ["01_self_attention", "02_multi_head_attention", "03_positional_encoding",
          "04_transformer_encoder", "05_transformer_decoder"]
VIDEO = re.compile(r"\]\(https://www\.youtube\.com/watch\?v=[\w-]{11}\)")
SLIDES = re.compile(r"\]\(https://speech\.ee\.ntu\.edu\.tw/~hylee/ml/ml2021-course-data/\w+\.pdf\)")


@pytest.mark.parametrize("folder", ["", "zh-Hans", "zh-Hant"])
@pytest.mark.parametrize("stem", LINKED)
def test_the_notebook_opens_with_its_lecture_and_slides(stem, folder):
    nb = nbformat.read(course_files() / "notebooks" / folder / f"{stem}.ipynb", as_version=4)
    first = nb.cells[0].source
    assert VIDEO.search(first) and SLIDES.search(first), (
        f"{folder or 'en'} {stem}: the first cell links no lecture video and slides")
    prose = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    assert "`seed/`" not in prose, f"{folder or 'en'} {stem} cites `seed/`, not in the course"
