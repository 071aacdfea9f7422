"""The course-file resolver and the hub's class list (issue 30), without building or serving."""

from pathlib import Path

import pytest

from course_tools.classroom.hub import read_class_list
from course_tools.publish.copy import copy_course
from lectures_lib import course

ROOT = Path(__file__).resolve().parents[2]


def test_in_a_clone_the_course_files_are_the_clones_own():
    assert course.course_files() == ROOT
    assert course.stored_benchmark("long_range.png") == ROOT / "benchmarks" / "long_range.png"


@pytest.mark.parametrize("name", ["../README.md", "benchmarks/long_range.json", "", 3])
def test_stored_benchmark_rejects_paths(name):
    with pytest.raises(ValueError, match="name must be a file name in benchmarks/"):
        course.stored_benchmark(name)


def test_stored_benchmark_names_what_is_stored():
    with pytest.raises(FileNotFoundError, match="long_range.json"):
        course.stored_benchmark("missing.json")


def test_copy_refuses_a_file_as_destination(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(NotADirectoryError, match="dest must be a folder"):
        copy_course(target)


def _class(tmp_path, text):
    path = tmp_path / "class.csv"
    path.write_text(text)
    return path


def test_class_list_reads_names_and_languages(tmp_path):
    students = read_class_list(_class(tmp_path, "username,language\nalice,en\nbob,zh-TW\ncy,\n"))
    assert [(s.username, s.language) for s in students] == [
        ("alice", "en"), ("bob", "zh-Hant"), ("cy", "en")]


@pytest.mark.parametrize(("text", "message"), [
    ("name,lang\nalice,en\n", "header must be 'username,language'"),
    ("username,language\nAlice,en\n", "row 2: username must be a Unix user name"),
    ("username,language\nroot;rm,en\n", "row 2: username must be a Unix user name"),
    ("username,language\nalice,en\nalice,zh-CN\n", "row 3: username 'alice' appears twice"),
    ("username,language\nalice,fr\n", "row 2: language must be one of"),
    ("username,language\n", "names no student"),
])
def test_class_list_errors_name_the_row(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        read_class_list(_class(tmp_path, text))
