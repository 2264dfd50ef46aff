"""The revision a benchmark stamps on its output: the environment's where a copy has no history, else
git's HEAD, else "unknown"."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from workbench.provenance import REVISION_ENV, revision


def test_the_checkouts_head_is_the_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REVISION_ENV, raising=False)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "f").write_text("x")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert revision(tmp_path) == head and len(head) == 40


def test_the_environment_names_the_revision_of_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REVISION_ENV, "4d54247")
    assert revision(tmp_path) == "4d54247"


def test_a_folder_outside_git_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REVISION_ENV, raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert revision(tmp_path) == "unknown"
