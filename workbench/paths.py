"""Where the project's data folders live.

The package is installed editable from a checkout (the README's install), so the catalogue,
the knowledge packs and the shipped sessions are read from the checkout's top-level folders.
`PTXWB_HOME` points elsewhere (a checkout on a GPU host, a test's temporary copy).
"""

import os
from pathlib import Path


def project_root() -> Path:
    home = os.environ.get("PTXWB_HOME")
    if home:
        return Path(home)
    return Path(__file__).resolve().parent.parent


def tasks_dir() -> Path:
    return project_root() / "tasks"


def knowledge_packs_dir() -> Path:
    return project_root() / "knowledge_packs"


def sessions_dir() -> Path:
    return project_root() / "sessions"
