"""The command lines of ``python -m course_tools hub COMMAND HUBDIR ...`` (``status``,
``collect``, ``remove-class``: :mod:`.operations`; ``release``, ``assignments``: :mod:`.handout`;
``gradebook``: :mod:`.gradebook`; ``feedback``: :mod:`.feedback`): one parser, so every command
takes the hub's folder (and a released assignment's name) the same way, and refuses a folder
that is not a hub's, or a run without root where the command writes as the students, the same
way, before it does anything.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

ASSIGNMENT_HELP = "a released assignment's name, e.g. ps1"


class HubCommand(argparse.ArgumentParser):
    """``python -m course_tools hub COMMAND HUBDIR [ASSIGNMENT]``: ``assignment`` (its help) adds
    the positional ``assignment``; ``root`` (why) refuses to run without root; ``class_list``:
    ``HUBDIR`` must hold the hub's ``class.json`` (else only be a folder). :meth:`parse_hub`
    parses and checks them."""

    def __init__(self, command: str, description: str, *, assignment: str | None = None,
                 root: str | None = None, class_list: bool = True):
        super().__init__(prog=f"python -m course_tools hub {command}", description=description)
        self.root, self.class_list = root, class_list
        self.add_argument("hub_dir", type=Path, help="the hub's folder (hub --dir)")
        if assignment is not None:
            self.add_argument("assignment", help=assignment)

    def parse_hub(self, argv: list[str]) -> argparse.Namespace:
        """``parse_args``, then the checks (an error exits as argparse's do)."""
        parsed = self.parse_args(argv)
        if self.class_list and not (parsed.hub_dir / "class.json").is_file():
            self.error(f"hub_dir must be a hub's folder (with class.json), got {parsed.hub_dir}")
        if not parsed.hub_dir.is_dir():
            self.error(f"hub_dir must be a hub's folder, got {parsed.hub_dir}")
        if self.root is not None and os.geteuid() != 0:
            self.error(self.root)
        return parsed
