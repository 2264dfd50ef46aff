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


# torch's fill kernel (`FillFunctor`, vectorised or not), mangled as CUPTI and ncu name it.
_TORCH_FILL = re.compile(r"^_ZN2at6native\w*?11FillFunctorI")


def torch_fill(name: str) -> bool:
    """Whether `name` is torch's constant-fill kernel (`torch.zeros`, `full`, `.zero_()`)."""
    return _TORCH_FILL.match(name) is not None


class TritonOwn(set[str]):
    """A Triton candidate's own kernels: its module's, and torch's constant fills, which its host code may
    run (a workspace zeroed for a split-K sum; `triton_ban.TORCH_CALLS`). A fill reads nothing and does
    no math: it counts as the candidate's in its time, its launches and its sampled counters (as in
    ncu's profile of it, so the two agree), never as foreign."""

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or (isinstance(name, str) and torch_fill(name))


def own_kernels(kernels: list[str] | None, triton: bool) -> set[str] | None:
    """The set the tiers tell a candidate's kernels from foreign ones by (None: unknown, none foreign)."""
    if kernels is None:
        return None
    return TritonOwn(kernels) if triton else set(kernels)
