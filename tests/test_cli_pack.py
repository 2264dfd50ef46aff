"""`ptxwb pack`: the variant option has the one name `ptxwb run` takes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PTXWB = Path(sys.executable).parent / "ptxwb"


def ptxwb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PTXWB), *args], check=False, capture_output=True, text=True, timeout=120)


def test_pack_list_names_the_option_run_takes_and_show_takes_it_too() -> None:
    listed = ptxwb("pack", "list")
    assert listed.returncode == 0, listed.stderr
    assert "hopper variants (--pack-variant): " in listed.stdout and "(--variant)" not in listed.stdout
    shown = ptxwb("pack", "show", "hopper", "--pack-variant", "fa3_forward")
    assert shown.returncode == 0, shown.stderr
    assert "fa3_forward" in shown.stdout
