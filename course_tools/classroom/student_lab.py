"""The students' JupyterLab in a class hub: a *Course* menu in the student's language, nbgrader's
instructor menus hidden. No JavaScript is built for it: JupyterLab reads both from a settings
folder (``--LabApp.app_settings_dir``) that the hub writes, one per language, and gives to each
student's server (:func:`lab_arguments`):

* ``overrides.json``: the default of the main menu's settings, a *Course* menu (*课程*, *課程*)
  with *Save All* (JupyterLab's ``docmanager:save-all``: the submit page submits what is saved on
  disk) and *Submit an assignment…* (``help:open``: the ``course-submit`` page in a new browser
  tab; that page refuses to be framed, so it cannot open inside JupyterLab);
* ``page_config.json``: nbgrader's lab extension disabled (its menus are the instructor's; its
  server extensions are already off in a student's server, :data:`.hub.SERVER_EXTENSIONS`).

The folder is root's and read-only to the students; a student's own settings (their browser, their
origin) may still change their own menus, which harms no one else.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MENU_ID = "jp-mainmenu-course"
MENU = {  # language: (the menu, the submit item)
    "en": ("Course", "Submit an assignment…"),
    "zh-Hans": ("课程", "提交作业…"),
    "zh-Hant": ("課程", "提交作業…"),
}
# JupyterLab extensions that are instructors' tools: hidden from students
HIDDEN_EXTENSIONS = ("@jupyter/nbgrader",)


def settings_folder(jupyter_dir: Path, language: str) -> Path:
    """The settings folder of the students of ``language`` (below the hub's readable
    ``jupyter`` folder, the one that holds the students' kernel)."""
    return Path(jupyter_dir) / "lab-settings" / language


def menu_settings(language: str, submit_url: str) -> dict:
    """overrides.json: the Course menu of ``language`` opening ``submit_url`` in a new tab."""
    menu, item = MENU[language]
    return {"@jupyterlab/mainmenu-extension:plugin": {"menus": [{
        "id": MENU_ID, "label": menu, "rank": 1000,
        "items": [
            {"command": "docmanager:save-all", "rank": 0},
            {"type": "separator", "rank": 5},
            {"command": "help:open", "rank": 10,
             "args": {"url": submit_url, "text": item, "newBrowserTab": True}},
        ],
    }]}}


def write_lab_settings(jupyter_dir: Path, submit_url: str) -> dict[str, Path]:
    """Write every language's settings folder (world-readable, root's); {language: folder}."""
    folders = {}
    for language in MENU:
        folder = settings_folder(jupyter_dir, language)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "overrides.json").write_text(
            json.dumps(menu_settings(language, submit_url), ensure_ascii=False, indent=1),
            encoding="utf-8")
        (folder / "page_config.json").write_text(json.dumps(
            {"disabledExtensions": {name: True for name in HIDDEN_EXTENSIONS}}, indent=1))
        for path in (folder.parent, folder):
            os.chmod(path, 0o755)
        for path in folder.iterdir():
            os.chmod(path, 0o644)
        folders[language] = folder
    return folders


def lab_arguments(folder: Path) -> list[str]:
    """The student's server's option that points JupyterLab at their language's ``folder``."""
    return [f"--LabApp.app_settings_dir={folder}"]


def submit_url(service: str, subdomain_host: str = "") -> str:
    """Where a student's browser finds the submit page: the hub's path, or with JupyterHub's
    ``subdomain_host`` the service's own subdomain (JupyterHub's naming of it)."""
    if not subdomain_host:
        return f"/services/{service}/"
    from urllib.parse import urlparse

    from jupyterhub.utils import subdomain_hook_idna

    parsed = urlparse(subdomain_host)
    host = subdomain_hook_idna(service, parsed.hostname, "service")
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{host}{port}/services/{service}/"
