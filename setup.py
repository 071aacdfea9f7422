"""The wheel holds the course: its notebooks, stored benchmark runs and READMEs (issue 30).

They are copied at build time from the clone (or the sdist, which MANIFEST.in fills with them)
into ``lectures_lib/_course/`` of the build, so the repository keeps one tracked copy of each.
The list of files is ``SHIPPED`` in lectures_lib/course.py, read here as text (the build
must not import the package: its dependencies, torch among them, are not installed yet).
"""

import ast
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def shipped_globs() -> tuple[str, ...]:
    tree = ast.parse((HERE / "lectures_lib" / "course.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SHIPPED"
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise RuntimeError("lectures_lib/course.py defines no SHIPPED")


class BuildWithCourse(build_py):
    """build_py, plus the course's files in lectures_lib/_course/ (not for editable installs:
    there the resolver finds the clone's own folders)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "lectures_lib" / "_course"
        count = 0
        for pattern in shipped_globs():
            matches = sorted(HERE.glob(pattern))
            if not matches:
                raise RuntimeError(f"the course file(s) {pattern} are missing from {HERE}")
            for path in matches:
                out = target / path.relative_to(HERE)
                out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, out)
                count += 1
        print(f"copied {count} course files into {target}")


setup(cmdclass={"build_py": BuildWithCourse})
