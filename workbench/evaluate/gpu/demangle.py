"""Readable kernel names: C++ symbols demangled with c++filt, one call for a whole list."""

from __future__ import annotations

import shutil
import subprocess


def demangle(symbols: list[str]) -> dict[str, str]:
    """symbol -> demangled name; symbols c++filt cannot read (or no c++filt) map to themselves."""
    unique = sorted({s for s in symbols if s})
    names = {s: s for s in unique}
    tool = shutil.which("c++filt")
    mangled = [s for s in unique if s.startswith("_Z")]
    if tool is None or not mangled:
        return names
    try:
        done = subprocess.run(
            [tool],
            check=False,
            input="\n".join(mangled) + "\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return names
    lines = done.stdout.splitlines()
    if done.returncode == 0 and len(lines) == len(mangled):
        names.update(zip(mangled, lines, strict=True))
    return names
