"""Shared by the knowledge-pack tests: include folders of a pack's headers, and the warp-specialisation
pattern's kernel taken out of its markdown so the same code is compiled here and run on the GPU."""

from __future__ import annotations

import re
from pathlib import Path

from workbench.knowledge import load_pack
from workbench.paths import knowledge_packs_dir

GPU_DATA = Path(__file__).parent / "gpu" / "data"
PATTERN_CHECKS = Path(__file__).parent / "data" / "pack_patterns"
WS_PATTERN = "hopper/patterns/warp_specialization.md"


def header_dirs(target: str) -> list[str]:
    root = knowledge_packs_dir()
    return sorted({str((root / f.path).parent) for f in load_pack(target).files if f.kind == "header"})


def extract_pattern_kernel(out_dir: Path, pattern: str = WS_PATTERN) -> Path:
    """Writes the pattern's ```cuda block to `out_dir/pattern_kernel.cuh` (what the harness includes)."""
    text = (knowledge_packs_dir() / pattern).read_text()
    block = re.search(r"```cuda\n(.*?)```", text, re.DOTALL)
    assert block is not None, f"no cuda block in {pattern}"
    path = out_dir / "pattern_kernel.cuh"
    path.write_text(block.group(1))
    return path
