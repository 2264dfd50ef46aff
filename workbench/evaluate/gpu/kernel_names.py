"""The kernels a candidate's library defines, by their mangled names: what counts as its own in the
trace and the profile. Standard library only: the GPU worker uses it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)", re.MULTILINE)


def module_kernels(library: str, sass_path: str | None = None) -> list[str] | None:
    """Mangled names of the kernels a candidate defines, from its SASS dump, else cuobjdump on the
    library; [] when it defines none (then every kernel it launches is foreign), None when unknown."""
    if sass_path and Path(sass_path).is_file():
        return sorted(set(_FUNCTION.findall(Path(sass_path).read_text(errors="replace"))))
    from workbench.evaluate.gpu.toolchain import find_tool

    tool = find_tool("cuobjdump")
    if tool is None:
        return None
    try:
        out = subprocess.run(
            [str(tool), "--dump-sass", library], check=False, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return sorted(set(_FUNCTION.findall(out.stdout)))
