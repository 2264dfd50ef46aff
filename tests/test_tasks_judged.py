"""A task is judged, described and prompted by its own facts, not only its target's: the required family
(QGMMA for FP8 matrix work, ASYNC_COPY for the memory-bound steps), the matched ratio and the FP8 rate
reach the GPU spec, `ptxwb tasks` / `ptxwb task`, the home screen's task pane, the agent's prompt and
Fixit's system prompt."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
import torch

from workbench.agent import prompts
from workbench.agent.config import AgentConfig
from workbench.errors import UserError
from workbench.evaluate.gpu.correctness import compare_output
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.fixit.rows import judged_target
from workbench.tasks import Catalogue
from workbench.tasks.baselines import BASELINE_TITLES
from workbench.tasks.models import BaselineName
from workbench.tui.widgets.task_pane import render_task

PTXWB = Path(sys.executable).parent / "ptxwb"
FP8_GEMM = "fp8_gemm_nt_1d2d_n4096_k7168"


def ptxwb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PTXWB), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def hopper_spec(name: str) -> dict:
    """The spec the worker gets for a catalogue task on Hopper, at its smallest workload."""
    catalogue = Catalogue.load()
    task = catalogue.get(name)
    return gpu_spec(task, task.smallest_workload(), task.target("hopper"), catalogue)


def test_the_spec_of_an_fp8_attention_task_carries_its_matched_ratio_rate_and_family() -> None:
    spec = hopper_spec("fp8_mha_with_lse_d128")
    assert spec["matched_ratio"] == 0.995
    assert spec["compute_dtype"] == "float8_e4m3" and spec["required_family"] == "QGMMA"
    # e4m3 O at its own tolerance (the honest schemes' spread), fp32 LSE at the task's.
    assert spec["output_tolerances"] == {"O": {"atol": 0.1, "rtol": 0.125}}
    assert (spec["atol"], spec["rtol"]) == (0.01, 0.01)
    # A bf16 task keeps every element to its tolerances and the bf16 rate.
    spec = hopper_spec("mha_with_lse_d128")
    assert spec["matched_ratio"] == 1.0 and spec["compute_dtype"] == "bfloat16"
    assert spec["required_family"] == "GMMA" and spec["output_tolerances"] == {}


def test_an_output_tolerance_for_no_output_of_its_task_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    shutil.copytree(Catalogue.load().root, root)
    sidecar = json.loads((root / "workbench.json").read_text())
    sidecar["tasks"]["fp8_mha_with_lse_d128"]["output_tolerances"]["Out"] = {"atol": 0.1, "rtol": 0.1}
    (root / "workbench.json").write_text(json.dumps(sidecar))
    with pytest.raises(UserError, match="fp8_mha_with_lse_d128: field output_tolerances: Out is no output"):
        Catalogue.load(root)


def test_ptxwb_tasks_names_each_tasks_family_per_target() -> None:
    listed = ptxwb("tasks", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows[FP8_GEMM]["required"] == {"hopper": "QGMMA", "blackwell": "UTCQMMA"}
    assert rows["gemm_n7168_k5120"]["required"] == {"hopper": "GMMA", "blackwell": "TCGEN05_MMA"}
    table = ptxwb("tasks")
    assert table.returncode == 0, table.stderr
    (line,) = [line for line in table.stdout.splitlines() if FP8_GEMM in line]
    cells = [cell.strip() for cell in line.split("│")]
    assert {"QGMMA", "UTCQMMA"} <= set(cells) and "GMMA" not in cells


def test_ptxwb_task_prints_brackets_as_written_and_names_the_family() -> None:
    done = ptxwb("task", "gqa_paged_decode_h24_kv8_d128_ps1")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # the description wraps at the terminal's width
    assert "kv_indices[kv_indptr[b] : kv_indptr[b + 1]]" in text
    assert "q[batch_size, num_qo_heads, head_dim] bfloat16" in text
    assert "required: ASYNC_COPY on hopper, ASYNC_COPY on blackwell" in text
    assert "tolerance: atol 0.01, rtol 0.01" in text
    causal = ptxwb("task", "mha_bwd_d64_causal")
    assert causal.returncode == 0, causal.stderr
    assert (
        "tolerance: atol 0.01, rtol 0.01, met by at least 99.999 % of each output's elements (the rest "
        "within 3 times them)"
    ) in " ".join(causal.stdout.split())


def test_the_task_pane_names_the_tasks_family_on_each_target() -> None:
    task = Catalogue.load().get(FP8_GEMM)
    assert "required QGMMA on hopper · UTCQMMA on blackwell" in render_task(task).plain


def test_every_baseline_is_named_in_words_on_the_pane_and_in_the_prompt() -> None:
    assert set(BASELINE_TITLES) == set(get_args(BaselineName))
    catalogue = Catalogue.load()
    for name in ("gqa_paged_decode_h24_kv8_d128_ps1", FP8_GEMM, "gdn_decode_qk4_v8_d128_k_last"):
        task = catalogue.get(name)
        assert task.facts is not None
        title = BASELINE_TITLES[task.facts.baseline]
        assert f"baseline {title.short}" in render_task(task).plain
        assert title.long in prompts.task_prompt(task, task.target("hopper"), AgentConfig())


def test_the_agents_prompts_name_the_tasks_family_and_matched_ratio() -> None:
    task = Catalogue.load().get("fp8_mha_with_lse_d128_causal")
    target = task.target("hopper")
    text = prompts.task_prompt(task, target, AgentConfig())
    assert "Required on hopper: the QGMMA family (`wgmma.mma_async` with e4m3/e5m2 operands" in text
    assert "at least 99.5 % of each output's elements" in text
    system, _, _ = prompts.system_prompt(task, target, AgentConfig(pack=False))
    assert "must contain the QGMMA family" in system
    blackwell = prompts.task_prompt(task, task.target("blackwell"), AgentConfig())
    assert "the UTCQMMA family (`tcgen05.mma` kind::f8f6f4" in blackwell


def test_fixit_names_the_family_the_task_was_judged_by(tmp_path: Path) -> None:
    assert judged_target(FP8_GEMM, "hopper").required_family == "QGMMA"
    assert judged_target("gdn_mtp_qk4_v8_d128_k_last", "blackwell").required_family == "ASYNC_COPY"
    # A definition file this machine lacks: the target's own family, no error.
    assert judged_target(str(tmp_path / "gone.json"), "hopper").required_family == "GMMA"


def test_the_fp8_gemm_task_allows_what_fp8_tensor_cores_move() -> None:
    # DeepGEMM's promotion every 128 misses 0.48-0.51 % of elements in the QGMMA model (H200: about
    # 0.5 %): the ratio lets that through with room to spare.
    spec = hopper_spec(FP8_GEMM)
    assert spec["matched_ratio"] == 0.99
    assert spec["compute_dtype"] == "float8_e4m3" and spec["required_family"] == "QGMMA"
    assert "DeepGEMM" in Catalogue.load().get(FP8_GEMM).facts.rationale["tolerance"]


@pytest.mark.parametrize("dim", [64, 96, 128])
def test_causal_attention_backward_lets_a_few_elements_graze_the_tolerance(dim: int) -> None:
    """bf16 tensor cores put 0-3 elements per draw of the causal backward outside 1e-2, up to 1.5x
    (benchmarks/results/2026-12-04_attention_backward_tolerance*): the task lets those through, but
    neither more nor farther; the non-causal task still needs every element."""
    spec = hopper_spec(f"mha_bwd_d{dim}_causal")
    assert spec["matched_ratio"] == 0.99999 and spec["outlier_bound"] == 3.0
    assert (
        "attention_backward_tolerance_probe"
        in Catalogue.load().get(f"mha_bwd_d{dim}_causal").facts.rationale["tolerance"]
    )
    plain = hopper_spec(f"mha_bwd_d{dim}")
    assert plain["matched_ratio"] == 1.0 and plain["outlier_bound"] is None
    expected = torch.full((2, 8, 512, dim), 0.5)  # 0.5-1 million elements: 5-10 may be outside
    grazing = expected.clone()
    grazing[0, 0, 1, :3] += 1.5 * 1e-2  # three near ones, as measured
    args = (spec["atol"], spec["rtol"], spec["matched_ratio"], spec["outlier_bound"])
    assert compare_output("dV", grazing, expected, *args)[0] == "passed"
    wrong = grazing.clone()
    wrong[0, 0, 1, 3] += 0.5  # one element plainly wrong
    assert compare_output("dV", wrong, expected, *args)[0] == "incorrect_numerical"
    assert (
        compare_output("dV", grazing, expected, plain["atol"], plain["rtol"], plain["matched_ratio"])[0]
        != "passed"
    )


def test_a_memory_bound_tasks_prompt_says_its_bytes_and_that_the_copies_must_carry_them() -> None:
    task = Catalogue.load().get("gqa_paged_decode_h24_kv8_d128_ps1")
    text = prompts.task_prompt(task, task.target("hopper"), AgentConfig())
    assert "Work: 805.306 MFLOP, at least 269.49 MB moved." in text
    assert "ordinary loads (LDG, cp.async) fetching more than 60% of the task's minimum bytes fail" in text
