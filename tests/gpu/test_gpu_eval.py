"""On a Hopper GPU: the GPU tiers against a fault corpus, one worker for the whole corpus, plus the
headline GEMM through every tier of the `local` executor.

Run on the GPU host from the checkout: `python -m pytest -m gpu -v tests/gpu/test_gpu_eval.py`.
The faults are built without the ban scan (`compile_source`) and judged through the worker's library
form, so the GPU tiers see them even when the source scan or the static tier would stop them first;
the dlopen fault builds every library and symbol name at run time, so only the run-time check can
catch it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from workbench.evaluate.build import build_toolchain, compile_source
from workbench.evaluate.gpu_spec import gpu_spec, profile_workload
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.evaluate.worker import module_kernels, worker_argv
from workbench.evaluate.worker_client import WorkerClient
from workbench.tasks import Catalogue, get_target

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
TASK = "gemm_n7168_k5120"
# Short limits so the hang costs seconds; the GEMMs at the smallest workload take milliseconds.
TIMEOUTS = {"correctness_s": 15.0, "dynamic_s": 120.0, "timing_s": 60.0}


def _message_has(*words: str) -> Callable[[dict], bool]:
    return lambda stage: all(word in stage.get("message", "") for word in words)


# name -> (the stage that must fail, its status, a check on that stage's message)
FAULTS: dict[str, tuple[str, str, Callable[[dict], bool]]] = {
    "wrong_result": ("correctness", "incorrect_numerical", _message_has("trial 1", "outside atol")),
    "half_unwritten": ("correctness", "incorrect_numerical", _message_has("NaN", "unwritten")),
    "input_modified": ("correctness", "inputs_modified", _message_has("A")),
    "illegal_address": ("correctness", "runtime_error", _message_has("illegal memory access")),
    "device_trap": ("correctness", "runtime_error", _message_has("CUDA error")),
    "infinite_loop": ("correctness", "timeout", _message_has("killed")),
    "host_exit": ("correctness", "runtime_error", _message_has("exited with status 0")),
    "cached_result": ("correctness", "incorrect_numerical", _message_has("trial 2")),
    "private_stream": ("correctness", "runtime_error", _message_has("another stream")),
    "dlopen_cublas": ("correctness", "foreign_kernel", _message_has("not defined in the candidate's module")),
    "token_wgmma": ("dynamic", "low_tensor_share", _message_has("the math happens elsewhere")),
    "unexecuted_wgmma": ("dynamic", "dynamic_not_executed", _message_has("no thread executed")),
    "simt_gemm": ("dynamic", "dynamic_not_executed", _message_has("no thread executed")),
}


class Runner:
    """One worker for the module, driven from a private event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = WorkerClient(worker_argv())

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def close(self) -> None:
        self.run(self.client.close())
        self.loop.close()


@pytest.fixture(scope="module")
def runner():
    runner = Runner()
    hello = runner.run(runner.client.start())
    assert hello["gpus"], "no GPU visible to the worker"
    yield runner
    runner.close()


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[str]]]:
    """Every corpus kernel built once, concurrently, without the ban scan."""
    build_toolchain()
    cache = tmp_path_factory.mktemp("builds")
    paths = sorted((HERE / "faults").glob("*.cu")) + sorted((HERE / "kernels").glob("*.cu"))
    target = get_target("hopper")

    async def build_all():
        return await asyncio.gather(*(compile_source(p.read_text(), target, 600, cache) for p in paths))

    built = {}
    for path, stage in zip(paths, asyncio.run(build_all()), strict=True):
        assert stage.status == Status.passed, f"{path.name}: {stage.message}"
        built[path.stem] = (stage.library_path, module_kernels(stage.library_path))
    return built


def spec_for() -> dict:
    """The task at its smallest workload."""
    catalogue = Catalogue.load()
    task = catalogue.get(TASK)
    return gpu_spec(task, profile_workload(task), get_target("hopper"), catalogue)


def evaluate(runner: Runner, library: tuple[str, list[str]], spec: dict) -> dict:
    reply = runner.run(runner.client.evaluate_library(library[0], spec, library[1], timeouts=TIMEOUTS))
    return reply["stages"]


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_fault_gets_its_status_and_the_worker_survives(runner: Runner, libraries, name: str) -> None:
    stage_name, status, check = FAULTS[name]
    stages = evaluate(runner, libraries[name], spec_for())
    print(name, {k: (v["status"], v.get("message", "")[:160]) for k, v in stages.items()})
    for earlier in ("correctness", "dynamic"):
        if earlier == stage_name:
            break
        assert stages[earlier]["status"] == "passed", stages[earlier]
    stage = stages[stage_name]
    assert stage["status"] == status, stage
    assert check(stage), stage["message"]
    assert list(stages)[-1] == stage_name  # the tiers stop at the first failure
    assert runner.run(runner.client.request({"op": "hello"}, timeout_s=60))["type"] == "hello"


def test_after_the_whole_corpus_the_same_worker_passes_a_real_wgmma_gemm(runner: Runner, libraries) -> None:
    stages = evaluate(runner, libraries["wgmma_gemm"], spec_for())
    assert [s["status"] for s in stages.values()] == ["passed", "passed", "passed"], stages
    assert stages["dynamic"]["tensor_share"] == pytest.approx(1.0)
    assert stages["timing"]["method"] == "cupti"
    assert stages["timing"]["candidate"]["kernels"] == libraries["wgmma_gemm"][1]
    assert any("nvjet" in k or "gemm" in k for k in stages["timing"]["baselines"][0]["kernels"])


def test_headline_gemm_passes_all_five_tiers_through_the_local_executor(tmp_path: Path) -> None:
    source = (HERE / "kernels" / "wgmma_gemm.cu").read_text()
    executor = LocalExecutor(tmp_path / "builds")

    async def go():
        try:
            return await executor.evaluate(EvalRequest(task=TASK, target="hopper", source=source))
        finally:
            await executor.close()

    result = asyncio.run(go())
    print(result.model_dump_json(indent=1, exclude={"stages": {"static": {"opcodes", "kernels"}}})[:6000])
    assert result.status == Status.passed, result.message
    assert result.workload_axes == {"M": 8192}
    assert result.stages.correctness.trials[-1].fresh_addresses and len(result.stages.correctness.trials) == 4
    assert result.stages.dynamic.tensor_share == pytest.approx(1.0)
    assert result.stages.timing.speedup is not None and not result.stages.timing.faster_than_light


def test_simt_gemm_is_correct_but_fails_the_hopper_family_requirement(
    runner: Runner, libraries, tmp_path
) -> None:
    stages = evaluate(runner, libraries["simt_gemm"], spec_for())
    assert stages["correctness"]["status"] == "passed"
    executor = LocalExecutor(tmp_path / "builds")

    async def go():
        try:
            source = (HERE / "kernels" / "simt_gemm.cu").read_text()
            return await executor.evaluate(EvalRequest(task=TASK, target="hopper", source=source))
        finally:
            await executor.close()

    result = asyncio.run(go())
    assert result.status == Status.static_missing_family
