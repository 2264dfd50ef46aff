"""The FP8 attention forward tasks' library baseline, cuDNN's sdpa_fp8 graph: offered only where the cuDNN
frontend is installed and its warm-up checked each task by the task's own rule. This machine has no GPU and
no frontend; the graph itself is tested on the device (tests/gpu/test_cudnn_fp8_attention_gpu.py)."""

from __future__ import annotations

import json

import pytest

from workbench.evaluate.gpu import cudnn_fp8_attention
from workbench.evaluate.gpu.baselines import make_baselines
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.paths import tasks_dir
from workbench.tasks import Catalogue


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.load()


def test_the_warm_up_covers_every_fp8_attention_task_and_reads_the_catalogues_rule(
    catalogue: Catalogue,
) -> None:
    sidecar = json.loads((tasks_dir() / "workbench.json").read_text())["tasks"]
    names = cudnn_fp8_attention.fp8_tasks(sidecar)
    assert names == sorted(
        name
        for name, task in catalogue.tasks.items()
        if task.facts and task.facts.family == "fp8_attention_forward"
    )
    assert len(names) == 8
    for name in names:
        task = catalogue.get(name)
        definition = json.loads((tasks_dir() / "definitions" / f"{name}.json").read_text())
        # The warm-up builds its spec from plain JSON (a bare GPU host has no pydantic): the same
        # workload, axes and rule as the evaluation's own spec.
        mine = cudnn_fp8_attention.smallest_spec(definition, sidecar[name])
        theirs = gpu_spec(task, task.smallest_workload(), task.target("hopper"))
        assert mine["axes"] == theirs["axes"] and mine["workload_inputs"] == theirs["workload_inputs"]
        for key in ("atol", "rtol", "matched_ratio", "outlier_bound", "output_tolerances"):
            assert mine[key] == theirs[key], (name, key)
        assert task.facts is not None and task.facts.baseline == "cudnn_sdpa_fp8"


def test_without_the_frontend_the_task_times_its_reference_and_says_how_to_get_the_library(
    catalogue: Catalogue,
) -> None:
    if cudnn_fp8_attention.installed():
        pytest.skip("the cuDNN frontend is installed here: the device test covers this host")
    task = catalogue.get("fp8_mha_with_lse_d64")
    spec = gpu_spec(task, task.smallest_workload(), task.target("hopper"))
    (baseline,), notes = make_baselines(spec, device="cpu")
    assert baseline.name == "torch reference (no library baseline)"
    why = "the cuDNN frontend (nvidia-cudnn-frontend) is not installed on this host"
    assert notes == [f"timed against the task's torch reference: {why}"]
