"""How fast `ptxwb --help` and `ptxwb tasks --json` answer (goal for --help: under 0.5 s).

Run: .venv/bin/python benchmarks/cli_startup.py
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

PTXWB = Path(sys.executable).parent / "ptxwb"
RUNS = 10


def wall(args: list[str]) -> list[float]:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([str(PTXWB), *args], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    for args in (["--help"], ["tasks", "--json"]):
        times = wall(args)
        print(
            f"ptxwb {' '.join(args):<14} median {statistics.median(times):.3f} s  "
            f"min {min(times):.3f}  max {max(times):.3f}  ({RUNS} runs)"
        )
    # What `ptxwb --help` imports (it registers every command, so it is the heaviest start).
    help_run = "import sys; sys.argv = ['ptxwb', '--help']; from workbench.cli.main import main; main()"
    modules = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", help_run], check=False, capture_output=True, text=True
    ).stderr
    heavy = [
        m
        for m in ("litellm", "torch", "textual", "tiktoken")
        if re.search(rf"\|\s+{m}$", modules, re.MULTILINE)
    ]
    print(f"heavy modules imported by `ptxwb --help`: {', '.join(heavy) or 'none'}")


if __name__ == "__main__":
    main()
