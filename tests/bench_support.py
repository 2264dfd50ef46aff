"""Shared pieces of the bench tests: a small sweep played by scripted models over the static executor."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_support import answer, broken_kernel, simt_kernel, wgmma_kernel, write_script

from workbench.bench.folder import SweepFolder
from workbench.bench.runner import SweepRunner, SweepSummary
from workbench.bench.spec import parse_spec


def scripted_spec(tmp: Path, trajectories: int = 2, name: str = "scripted") -> str:
    """Two scripted models on one task, two turns: `fails` never passes static, `fixes` does at turn 2."""
    write_script(tmp / "fails.json", [answer(broken_kernel()), answer(simt_kernel())])
    write_script(tmp / "fixes.json", [answer(simt_kernel()), answer(wgmma_kernel())])
    return (
        f'name = "{name}"\nmodels = ["scripted:fails.json", "scripted:fixes.json"]\n'
        f'tasks = ["gemm_n7168_k5120"]\ntrajectories = {trajectories}\nturns = 2\nexecutor = "static"\n'
        '[[variants]]\nname = "no-pack"\npack = false\n'
    )


async def sweep_scripted(tmp: Path, cache: Path, trajectories: int = 2) -> tuple[SweepFolder, SweepSummary]:
    """The scripted sweep, run in the caller's event loop, in `tmp/sweep`."""
    text = scripted_spec(tmp, trajectories)
    folder = SweepFolder(tmp / "sweep")
    runner = SweepRunner(folder, parse_spec(text, "spec.toml", tmp), cache_dir=cache)
    return folder, await runner.run(text, resume=False)


def run_scripted(tmp: Path, cache: Path, trajectories: int = 2) -> tuple[SweepFolder, SweepSummary]:
    return asyncio.run(sweep_scripted(tmp, cache, trajectories))
