"""Where the project's data folders live.

The package is installed editable from a checkout (the README's install), so the catalogue,
the knowledge packs and the shipped sessions are read from the checkout's top-level folders.
`PTXWB_HOME` points elsewhere (a checkout on a GPU host, a test's temporary copy).
"""

import os
import time
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


def runs_dir() -> Path:
    """The user's runs folder (relative to where ptxwb runs): every file a command makes unasked goes here."""
    return Path("runs")


def new_session_path(task: str, target: str, prefix: str = "") -> Path:
    """runs/PREFIXTASK_TARGET_TIME.jsonl: where a session is written when no file is named."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return runs_dir() / f"{prefix}{Path(task).stem}_{target}_{stamp}.jsonl"
