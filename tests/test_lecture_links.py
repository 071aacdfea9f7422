"""The lecture beside every notebook (issue 40): each opens with its lecture's video(s) and slides
(Hung-yi Lee, ML 2021 Spring), in every edition, and none cites the learner's study notes as a
folder the course does not hold (`seed/`). 06 and 07 follow the ML 2022 Spring lecture on
self-attention's variants, whose slides the course page lists (no slide file is linked)."""

import re

import nbformat
import pytest

from lectures_lib.course import course_files

LINKED = ["01_self_attention", "02_multi_head_attention", "03_positional_encoding",
          "04_transformer_encoder", "05_transformer_decoder", "06_attention_variants",
          "07_efficient_attention", "08_real_sentences"]
VIDEO = re.compile(r"\]\(https://www\.youtube\.com/watch\?v=[\w-]{11}\)"
                   r"|<https://www\.youtube\.com/watch\?v=[\w-]{11}>")
SLIDES = re.compile(r"\]\(https://speech\.ee\.ntu\.edu\.tw/~hylee/ml/ml2021-course-data/\w+\.pdf\)"
                    r"|<https://speech\.ee\.ntu\.edu\.tw/~hylee/ml/2022-spring\.php>")


@pytest.mark.parametrize("folder", ["", "zh-Hans", "zh-Hant"])
@pytest.mark.parametrize("stem", LINKED)
def test_the_notebook_opens_with_its_lecture_and_slides(stem, folder):
    nb = nbformat.read(course_files() / "notebooks" / folder / f"{stem}.ipynb", as_version=4)
    first = nb.cells[0].source
    assert VIDEO.search(first) and SLIDES.search(first), (
        f"{folder or 'en'} {stem}: the first cell links no lecture video and slides")
    prose = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    assert "`seed/`" not in prose, f"{folder or 'en'} {stem} cites `seed/`, not in the course"
