"""Shared pieces of the bench tests: a small sweep played by scripted models over the static executor."""

from __future__ import annotations

from pathlib import Path

from agent_support import answer, broken_kernel, simt_kernel, wgmma_kernel, write_script

from workbench.bench.folder import SweepFolder
from workbench.bench.runner import SweepSummary, run_sweep
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


def run_scripted(tmp: Path, cache: Path, trajectories: int = 2) -> tuple[SweepFolder, SweepSummary]:
    text = scripted_spec(tmp, trajectories)
    folder = SweepFolder(tmp / "sweep")
    summary = run_sweep(folder, parse_spec(text, "spec.toml", tmp), text, cache_dir=cache)
    return folder, summary
