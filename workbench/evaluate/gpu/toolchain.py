"""Find the CUDA tools: nvcc, cuobjdump, nvdisasm, ncu, compute-sanitizer.

Looks on PATH, then under CUDA_HOME / the usual install folders, then (for cuobjdump and nvdisasm)
in the `nvidia-cuda-cuobjdump` / `nvidia-cuda-nvdisasm` wheels, which machines without a full
toolkit use.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sysconfig
from functools import cache
from pathlib import Path

_CUDA_HOMES = ("/usr/local/cuda", "/opt/cuda", "/opt/nvidia/nsight-compute")


def _candidates(name: str) -> list[Path]:
    found: list[Path] = []
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for root in ([home] if home else []) + list(_CUDA_HOMES):
        found.append(Path(root) / "bin" / name)
        found.extend(Path(p) for p in sorted(glob.glob(f"{root}*/{name}"), reverse=True))
    purelib = Path(sysconfig.get_paths()["purelib"])
    found.extend(Path(p) for p in sorted(glob.glob(str(purelib / "nvidia" / "*" / "bin" / name))))
    return found


@cache
def find_tool(name: str) -> Path | None:
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    for path in _candidates(name):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


@cache
def tool_version(name: str) -> str | None:
    """The tool's release as it prints it (`13.0` for nvcc 13.0.88), or None when absent or silent."""
    path = find_tool(name)
    if path is None:
        return None
    try:
        out = subprocess.run(
            [str(path), "--version"], check=False, capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"(?:release|Version)\s+([0-9][0-9.]*)", out)
    if match:
        return match.group(1).rstrip(".")
    lines = out.strip().splitlines()
    return lines[-1] if lines else None
