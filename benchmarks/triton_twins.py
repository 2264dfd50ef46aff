"""The negated twin of the Triton kernels the workbench's tests judge on Hopper, made on this machine (no
GPU): the honest Triton corpus (each kernel on the task its `# task:` line names, else the headline GEMM)
and the GPU tests' TMA GEMM and attention forward. For
each: whether the twin was made, in how many seconds (after a cached build), why not where it
was not, and per traced kernel its SASS products and how many of them still run un-negated (0 for every
one: the flip reached each HGMMA and changed nothing else, or the twin would not be made).

`python benchmarks/triton_twins.py CACHE_DIR` (it reads the kernels under tests/data)
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import re
import subprocess
import time
from pathlib import Path

from workbench.evaluate.build.negated import products_not_negated, sass_listings
from workbench.evaluate.build.triton_build import build_triton, with_negated_triton
from workbench.provenance import revision
from workbench.tasks import get_target, resolve_task

TESTS = Path(__file__).resolve().parent.parent / "tests" / "data"
GEMM = "gemm_n7168_k5120"
TASK_LINE = re.compile(r"^# task: (\S+)$", re.MULTILINE)


def task_named(source: str) -> str:
    """The task a corpus kernel's header names among its first lines (as the tests read it), else GEMM."""
    found = TASK_LINE.search("\n".join(source.splitlines()[:8]))
    return found.group(1) if found else GEMM


async def twin_of(name: str, source: str, task_name: str, cache: Path) -> str:
    task, hopper = resolve_task(task_name), get_target("hopper")
    built = await build_triton(source, task, task.workload(None), hopper, 300.0, cache)
    if built.status != "passed" or built.cubin_path is None:
        return f"{name} ({task_name}): build {built.status}: {built.message[:200]}"
    started = time.perf_counter()
    twin = await with_negated_triton(built, hopper, cache)
    took = time.perf_counter() - started
    counts = []
    if twin.negated_library_path:
        original = Path(built.cubin_path).parent / "kernels"
        for cubin in sorted(Path(twin.negated_library_path, "kernels").glob("*.cubin")):
            listings = await sass_listings(original / cubin.name, cubin)
            if isinstance(listings, str):
                return f"{name}: {listings}"
            products, left, _ = products_not_negated(*listings)
            counts.append(f"{cubin.stem} {products} products, {left} un-negated")
    made = f"made in {took:.2f} s" if twin.negated_library_path else f"none ({twin.negated_note})"
    return f"{name} ({task_name}): {made}; " + "; ".join(counts)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="The negated twin of each Triton kernel the tests judge on Hopper."
    )
    parser.add_argument("cache_dir", type=Path, help="the build cache to use (made if missing)")
    cache = parser.parse_args().cache_dir
    cache.mkdir(parents=True, exist_ok=True)
    honest = sorted((TESTS / "honest" / "triton").glob("*.py"))
    cases = [(p.name, p.read_text(), task_named(p.read_text())) for p in honest]
    cases += [
        ("gemm_tma.py", (TESTS / "triton" / "gemm_tma.py").read_text(), GEMM),
        ("attention_fwd.py", (TESTS / "triton" / "attention_fwd.py").read_text(), "mha_with_lse_d128"),
    ]
    cpu = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    print(
        f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%dT%H:%M:%SZ} sha: {revision()} machine: {cpu} CPUs, no GPU"
    )
    for case in cases:
        print(asyncio.run(twin_of(*case, cache)), flush=True)


if __name__ == "__main__":
    main()
