"""The kernel a person's first turn starts from: the task's own signature, and it builds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from build_support import needs_nvcc, session_cache

from workbench.evaluate.build.abi import check_abi, exported_parameters
from workbench.evaluate.build.ban import scan
from workbench.evaluate.build.nvcc import build
from workbench.evaluate.result import Status
from workbench.tasks import Catalogue, get_target
from workbench.tui.starter import starter_kernel

TASKS = sorted(Catalogue.load().tasks)


@pytest.mark.parametrize("name", TASKS)
def test_the_starter_takes_what_the_task_passes(name: str) -> None:
    definition = Catalogue.load().get(name).definition
    source = starter_kernel(definition)
    parameters = exported_parameters(source)
    assert parameters is not None and len(parameters) == len(definition.inputs) + len(definition.outputs)
    assert [p.text.split()[-1] for p in parameters] == [*definition.inputs, *definition.outputs]
    assert check_abi(source, definition) is None and scan(source) == []


@needs_nvcc
def test_the_gemm_starter_builds(tmp_path_factory: pytest.TempPathFactory) -> None:
    source = starter_kernel(Catalogue.load().get("gemm_n7168_k5120").definition)
    stage = asyncio.run(build(source, get_target("hopper"), 300.0, session_cache(tmp_path_factory)))
    assert stage.status == Status.passed, stage.message
    assert Path(stage.library_path or "").is_file()
