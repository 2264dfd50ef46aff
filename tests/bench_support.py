"""Shared pieces of the bench tests: a small sweep played by scripted models over the static executor,
a PTXBench-shaped per-turn fixture, and headless Chromium to look at a report as a person would."""

from __future__ import annotations

import asyncio
import csv
import html
import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_support import answer, broken_kernel, simt_kernel, wgmma_kernel, write_script

from workbench.bench.folder import SweepFolder
from workbench.bench.records import TrajectoryRecord, TurnRow
from workbench.bench.runner import SweepRunner, SweepSummary
from workbench.bench.spec import TrajectoryKey, parse_spec
from workbench.bench.store import STORE_FILE, Store


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


# PTXBench's published per-turn layout, as its CSV names the columns (more columns than the importer needs).
PER_TURN_HEADER = ["model", "arch", "required_arch_tag", "definition", "exp_dir", "trajectory_id", "turn",
                   "reasoning_tokens", "correctness", "speedup", "arch_tag", "correct_with_arch"]  # fmt: skip
# Names as long as the published ones: a report must fit them, not the other way round.
FIXTURE_MODELS = [
    "Model Alpha 4.8",
    "Model Beta-5.2",
    "Qwen-like 27B + retrieved repair notes and fixed kernel",
]
FIXTURE_TASKS = ["gemm_n7168_k5120", "mha_with_lse_d128", "mha_with_lse_d128_causal", "mha_bwd_d128",
                 "mha_bwd_d128_causal", "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
                 "gqa_ragged_prefill_causal_h32_kv4_d128"]  # fmt: skip
FAILURES = ["Compilation error", "Runtime error", "Numerical error", "Kernel Execution Timeout"]


def write_ptxbench_fixture(path: Path, seed: int = 27, trajectories: int = 6, turns: int = 8) -> Path:
    """A per-turn CSV shaped like PTXBench's published one: every model on both targets and every task,
    the first model twice on Hopper's GEMM (two runs to merge), host paths in exp_dir as published."""
    rng = random.Random(seed)
    lines = []
    for m, model in enumerate(FIXTURE_MODELS):
        for arch in ("hopper", "blackwell"):
            for task in FIXTURE_TASKS:
                runs = 2 if (m, arch, task) == (0, "hopper", FIXTURE_TASKS[0]) else 1
                for run in range(runs):
                    exp_dir = f"/home/someone/eval_runs/m{m}-{arch}-{task}-r{run}"
                    for t in range(trajectories):
                        for turn in range(turns):
                            correct = rng.random() < 0.25 + 0.2 * (2 - m)
                            verified = correct and rng.random() < 0.7
                            lines.append([model, arch, arch[0].upper(), task, exp_dir, f"exp_{t:03d}", str(turn),
                                          "100", "Correct" if correct else rng.choice(FAILURES),
                                          f"{rng.uniform(0.05, 1.3):.4f}" if correct else "0.0",
                                          "H" if verified else "", "1" if verified else "0"])  # fmt: skip
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(PER_TURN_HEADER)
        writer.writerows(lines)
    return path


def chromium() -> str | None:
    """Debian's Chromium (CI installs it), or another build of it on PATH."""
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


needs_chromium = pytest.mark.skipif(chromium() is None, reason="needs Chromium (apt-get install chromium)")
PROBE_START, PROBE_END = '<pre id="probe">', "</pre>"


def _chromium(
    page: Path, profile: Path, *flags: str, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    browser = chromium()
    assert browser is not None
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--window-size=1280,900", *flags, page.as_uri()]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def probe_page(page: Path, script: str, tmp: Path, *flags: str) -> dict[str, Any]:
    """Open a copy of `page` in headless Chromium at 1280×900 with `script` run after the page's own;
    the script sets `probe` (any JSON value), which comes back through the printed DOM."""
    text = page.read_text(encoding="utf-8")
    runner = (
        "<script>(function () { let probe = null;\n" + script + "\n"
        "const out = document.createElement('pre'); out.id = 'probe'; out.textContent = JSON.stringify(probe);"
        " document.body.append(out); })();</script>"
    )
    copy = tmp / f"probe-{page.name}"
    copy.write_text(text.replace("</body>", runner + "</body>"), encoding="utf-8")
    profile = tmp / f"chromium-profile-{len(list(tmp.glob('chromium-profile-*')))}"
    done = _chromium(copy, profile, "--dump-dom", *flags)
    dom = done.stdout
    assert PROBE_START in dom, f"Chromium printed no probe (exit {done.returncode}): {done.stderr[-2000:]}"
    body = dom[dom.index(PROBE_START) + len(PROBE_START) :]
    return json.loads(html.unescape(body[: body.index(PROBE_END)]))


def screenshot(page: Path, out: Path, tmp: Path, height: int = 900) -> Path:
    """A PNG of the page at 1280 pixels wide (the window `height` tall)."""
    profile = tmp / f"chromium-shot-{out.stem}"
    done = _chromium(page, profile, f"--screenshot={out}", f"--window-size=1280,{height}")
    assert out.is_file() and out.stat().st_size > 0, done.stderr[-2000:]
    return out


GPU_TIERS = {
    "build": "passed",
    "static": "passed",
    "correctness": "passed",
    "dynamic": "passed",
    "timing": "passed",
}
STATIC_TIERS = {"build": "passed", "static": "passed", "correctness": "not_run", "dynamic": "not_run",
                "timing": "not_run"}  # fmt: skip
BUILD_FAILED = {"build": "compile_error", "static": "not_run", "correctness": "not_run", "dynamic": "not_run",
                "timing": "not_run"}  # fmt: skip


def turn(number: int, status: str, tiers: dict[str, str], speedup: float | None = None) -> TurnRow:
    """A turn as a sweep records it: `correct` and `sass_verified` read from the tiers, as the verdict does."""
    correct = tiers.get("correctness") == "passed"
    return TurnRow(turn=number, status=status, correct=correct,
                   sass_verified=correct and tiers.get("dynamic") == "passed",
                   static_passed=tiers.get("build") == "passed" and tiers.get("static") == "passed",
                   speedup=speedup if correct else None, tiers=tiers)  # fmt: skip


def gpu_sweep_records(run: str = "my-sweep", model: str = "scripted:/home/someone/sweeps/ladder.json"
                      ) -> list[TrajectoryRecord]:  # fmt: skip
    """A GPU sweep of one scripted model on Hopper's GEMM, four turns, three trajectories: a fails to
    build then passes at 0.9×; b is correct without the family at 0.5×; c never builds."""
    failed = BUILD_FAILED
    unverified = {**GPU_TIERS, "dynamic": "dynamic_not_executed"}
    rows = {
        "t000": [turn(1, "compile_error", failed), turn(2, "passed", GPU_TIERS, 0.9)],
        "t001": [
            turn(1, "dynamic_not_executed", unverified, 0.5),
            turn(2, "dynamic_not_executed", unverified, 0.6),
        ],
        "t002": [turn(n, "compile_error", failed) for n in range(1, 5)],
    }
    return [
        TrajectoryRecord(
            TrajectoryKey(run, model, "hopper", "gemm_n7168_k5120", "default", name),
            True,
            "turn_limit",
            found,
        )
        for name, found in rows.items()
    ]


def store_records(root: Path, records: list[TrajectoryRecord]) -> Path:
    """A folder whose results store holds `records` (as `bench rebuild` would leave one, without sessions)."""
    with Store(root / STORE_FILE) as store:
        store.put(records)
    return root
