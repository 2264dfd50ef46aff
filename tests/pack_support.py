"""Shared by the knowledge-pack tests: include folders of a pack's headers, the code blocks of its
markdown, and the translation unit a pattern compiles as, so the same code is built here and run on
the GPU.

A pack's compiled code is: its helper headers; the ```cuda blocks of its topic files (device
functions such as the Hopper TMA-store epilogue, at file scope), except `common/abi.md`'s, which is a
whole candidate built through the evaluator's build stage; and the one ```cuda block of each
pattern, a complete kernel. Code that does not compile on its own is fenced without a language.
"""

from __future__ import annotations

import re
from pathlib import Path

from workbench.knowledge import load_pack
from workbench.paths import knowledge_packs_dir

GPU_DATA = Path(__file__).parent / "gpu" / "data"
PATTERN_CHECKS = Path(__file__).parent / "data" / "pack_patterns"
WS_PATTERN = "hopper/patterns/warp_specialization.md"
ABI = "common/abi.md"
CUDA_BLOCK = re.compile(r"^```cuda\n(.*?)^```$", re.DOTALL | re.MULTILINE)
# Per-block shared-memory limit of compute capability 9.0 and 10.0 (CUDA C++ Programming Guide,
# technical specifications: 227 KiB).
SMEM_LIMIT = 232_448
MMA_HEADER = {"hopper": "ptxwb_wgmma.cuh", "blackwell": "ptxwb_tcgen05.cuh"}
# Accumulator initialisations the GPU tests overwrite with NaN: a pattern must be correct whatever
# its accumulators hold before the first MMA (scale-d / enable-input-d = 0 on the first step).
POISON = re.compile(r"\b(acc|o|dk|dv)\[i\] = 0\.f;")
NAN = "__int_as_float(0x7fc00000);"


def header_dirs(target: str) -> list[str]:
    root = knowledge_packs_dir()
    return sorted({str((root / f.path).parent) for f in load_pack(target).files if f.kind == "header"})


def cuda_blocks(path: str) -> list[str]:
    return CUDA_BLOCK.findall((knowledge_packs_dir() / path).read_text())


def library_blocks(target: str) -> list[str]:
    """The compiled ```cuda blocks of the pack's topic files, in prompt order."""
    pack = load_pack(target)
    return [b for f in pack.files if f.kind == "topic" and f.path != ABI for b in cuda_blocks(f.path)]


def pattern_paths(target: str) -> dict[str, str]:
    """Variant name -> pattern file (relative to knowledge_packs/)."""
    return {v: load_pack(target, v).files[-1].path for v in load_pack(target).variants}


def pattern_kernel(pattern: str, poison: bool = False) -> str:
    """The pattern's kernel (its one ```cuda block); with `poison`, accumulators start as NaN."""
    blocks = cuda_blocks(pattern)
    assert len(blocks) == 1, f"{pattern}: {len(blocks)} cuda blocks, expected one complete kernel"
    code = blocks[0]
    if poison:
        code, count = POISON.subn(lambda m: f"{m.group(1)}[i] = {NAN}", code)
        assert count >= 1, f"{pattern}: no accumulator initialisation to poison"
    return code


def pattern_body(target: str, pattern: str, poison: bool = False) -> str:
    """What a harness includes as `pattern_kernel.cuh`: the topic blocks, then the pattern."""
    return "\n".join([*library_blocks(target), pattern_kernel(pattern, poison)])


def pattern_unit(target: str, pattern: str, poison: bool = False) -> str:
    """A translation unit of the pattern as a model gets it: headers, topic blocks, kernel."""
    headers = ["ptxwb_barrier.cuh", "ptxwb_tma.cuh", MMA_HEADER[target]]
    includes = "\n".join(["#include <cuda_bf16.h>", *(f'#include "{h}"' for h in headers)])
    return f"{includes}\nusing namespace ptxwb;\n{pattern_body(target, pattern, poison)}"


def extract_pattern_kernel(out_dir: Path, pattern: str = WS_PATTERN) -> Path:
    """Writes the pattern's ```cuda block to `out_dir/pattern_kernel.cuh` (what the harness includes)."""
    path = out_dir / "pattern_kernel.cuh"
    path.write_text(pattern_kernel(pattern))
    return path


# The GPU programs that run each compiled Hopper pattern (the pattern's code is their
# `pattern_kernel.cuh`), and for two of them a mutant that brings back the bug the pattern avoids:
# scale-d = 1 on the first MMA, which with poisoned accumulators must fail.
HOPPER_HARNESSES = {
    "hopper/patterns/warp_specialization.md": GPU_DATA / "pattern_ws_harness.cu",
    "hopper/patterns/cluster_multicast.md": PATTERN_CHECKS / "hopper_cluster_harness.cu",
    "hopper/patterns/fa3_forward.md": PATTERN_CHECKS / "hopper_fa3_harness.cu",
    "hopper/patterns/fa3_backward.md": PATTERN_CHECKS / "hopper_fa3_bwd_harness.cu",
}
FIRST_STEP_MUTANTS = {
    "hopper/patterns/cluster_multicast.md": ("(kt | k) != 0 ? 1u : 0u", "1u"),
    "hopper/patterns/fa3_forward.md": ("(j > 0 || kk > 0) ? 1u : 0u", "1u"),
    "hopper/patterns/fa3_backward.md": ("(it | kk) != 0 ? 1u : 0u", "1u"),
}


def harness_dir(target: str, pattern: str, out_dir: Path, mutant: bool = False) -> Path:
    """Writes the poisoned pattern (optionally its first-step mutant) as `out_dir/pattern_kernel.cuh`."""
    body = pattern_body(target, pattern, poison=True)
    if mutant:
        old, new = FIRST_STEP_MUTANTS[pattern]
        assert body.count(old) == 1, f"{pattern}: mutant site {old!r} not found once"
        body = body.replace(old, new)
    (out_dir / "pattern_kernel.cuh").write_text(body)
    return out_dir


def harness_command(target: str, harness: Path, include: Path, exe: Path, *extra: str) -> list[str]:
    from workbench.evaluate.gpu.toolchain import find_tool
    from workbench.tasks.targets import get_target

    return [
        str(find_tool("nvcc")),
        "-std=c++17",
        "-O2",
        "-gencode",
        get_target(target).gencode,
        *(f"-I{d}" for d in header_dirs(target)),
        f"-I{include}",
        f"-I{PATTERN_CHECKS}",
        *extra,
        "-o",
        str(exe),
        str(harness),
    ]
