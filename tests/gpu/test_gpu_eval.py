"""On a Hopper GPU: the GPU tiers against a fault corpus and a hostile corpus, one worker for all of them,
then honest kernels through every tier of the `local` executor.

Run on the GPU host from the checkout: `python -m pytest -m gpu -v tests/gpu/test_gpu_eval.py`.
The faults are built without the ban scan (`compile_source`: the link check and the machine-code check
still run) and judged through the worker's library form, so the GPU tiers see them even when the source
scan or the static tier would stop them first. The hostile kernels (`hostile/`) are composed at test
time from the corpus's honest kernels (`kernels/`) and, where they reach for the interpreter or the C
library's own symbol table, `tests/hostile/python_door.inc`: none of them imports anything the link
check refuses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from workbench.evaluate.build.nvcc import build_toolchain, compile_source, with_negated
from workbench.evaluate.build.sass import static_stage
from workbench.evaluate.gpu.kernel_names import module_kernels
from workbench.evaluate.gpu.negated_check import CHECK_FROM
from workbench.evaluate.gpu.worker import worker_argv
from workbench.evaluate.gpu_spec import gpu_spec, with_build
from workbench.evaluate.local_executor import LocalExecutor
from workbench.evaluate.request import EvalRequest
from workbench.evaluate.result import Status
from workbench.evaluate.worker_client import WorkerClient
from workbench.tasks import Catalogue, get_target

pytestmark = pytest.mark.gpu

HERE = Path(__file__).parent
KERNELS, HOSTILE, DOOR = HERE / "kernels", HERE / "hostile", HERE.parent / "hostile" / "python_door.inc"
TASK = "gemm_n7168_k5120"
EXPORT = "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);"
MMA_SYNC = HERE.parent / "data" / "kernels" / "mma_sync_gemm.cu"


def _message_has(*words: str) -> Callable[[dict], bool]:
    return lambda stage: all(word in stage.get("message", "") for word in words)


def _as_function(path: Path, name: str, namespace: str | None = None) -> str:
    """A corpus kernel with its `run` renamed and its export dropped, optionally inside a namespace."""
    text = path.read_text().replace("void run(", f"void {name}(").replace(EXPORT, "")
    if namespace is None:
        return text
    lines = text.splitlines()
    includes = [line for line in lines if line.startswith("#include")]
    body = [line for line in lines if not line.startswith("#include")]
    return "\n".join([*includes, f"namespace {namespace} {{", *body, "}"])


def compose(name: str, parts: tuple[str, ...], defines: dict[str, str] | None = None) -> str:
    """A hostile kernel: defines, then the pieces it is built on, then its own file."""
    pieces = [f"#define {key} {value}" for key, value in (defines or {}).items()]
    if "door" in parts:
        pieces.append(DOOR.read_text())
    if "wgmma" in parts:
        pieces.append(_as_function(KERNELS / "wgmma_gemm.cu", "run_wgmma"))
    if "for_show" in parts:  # the decoys' wgmma into a scratch buffer, and their tiled launch
        pieces.append((HOSTILE / "parts" / "wgmma_for_show.cu").read_text())
    if "simt" in parts:
        pieces.append(_as_function(KERNELS / "simt_gemm.cu", "run_simt", "simt_path"))
    if "mma" in parts:  # the static tests' mma.sync GEMM, its export dropped, inside namespace mma_path
        text = MMA_SYNC.read_text().replace("TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);", "")
        lines = text.splitlines()
        includes = [line for line in lines if line.startswith("#include")]
        body = [line for line in lines if not line.startswith("#include")]
        pieces.append("\n".join([*includes, "namespace mma_path {", *body, "}"]))
    pieces.append((HOSTILE / f"{name.split(':')[0]}.cu").read_text())
    return "\n".join(pieces)


def payload(code: str) -> str:
    """A C string literal of Python source."""
    return '"' + code.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '\\n"'


PAYLOADS = {
    "patch_comparison": (
        "import workbench.evaluate.gpu.correctness as c\n"
        "c.compare_output = lambda name, *a: ('passed', {'name': name, 'passed': True})"
    ),
    "patch_timing": (
        "import workbench.evaluate.gpu.kernel_trace as k\n"
        "original = k.KernelTrace.raw\n"
        "def raw(self):\n"
        "    data = original(self)\n"
        "    data['kernels'] = [[r[0], r[1], r[1] + (r[2] - r[1]) // 10, *r[3:]] for r in data['kernels']]\n"
        "    return data\n"
        "k.KernelTrace.raw = raw"
    ),
    "forge_records": (
        "import gc\n"
        "import workbench.evaluate.gpu.kernel_trace as k\n"
        "class Shrinking(list):\n"
        "    def append(self, item):\n"
        "        if item[0] == 'k':\n"
        "            row = item[1]\n"
        "            row[2] = row[1] + (row[2] - row[1]) // 10\n"
        "        super().append(item)\n"
        "for trace in [o for o in gc.get_objects() if isinstance(o, k.KernelTrace)]:\n"
        "    trace._pending = Shrinking(trace._pending)"
    ),
    "cupti_off": (
        "from cupti import cupti\n"
        "for kind in (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER):\n"
        "    cupti.activity_disable(kind)"
    ),
    "cupti_flush": (
        "import gc\n"
        "from cupti import cupti\n"
        "import workbench.evaluate.gpu.kernel_trace as k\n"
        "cupti.activity_flush_all(1)\n"
        "for trace in [o for o in gc.get_objects() if isinstance(o, k.KernelTrace)]:\n"
        "    trace._pending.clear()"
    ),
    "forge_reply": (
        "import os\n"
        "fd = int(os.environ['PTXWB_CHILD_FDS'].split(',')[1])\n"
        'os.write(fd, b\'{"done": true, "changed": [], "trace": {}}\\n\')'
    ),
    # Every tool report on the host (memcheck's beside the trials, ncu's spare), by name: emptied, removed,
    # renamed; a kernel whose memcheck finding vanished would pass.
    "hide_reports": (
        "import glob, os\n"
        "for log in glob.glob(os.path.join(os.environ.get('TMPDIR', '/tmp'), 'ptxwb-tool-*', '*.log')):\n"
        "    for door in (lambda: os.truncate(log, 0), lambda: open(log, 'w').close(), lambda: os.unlink(log),\n"
        "                 lambda: os.rename(log, log + '.gone')):\n"
        "        try:\n"
        "            door()\n"
        "        except OSError:\n"
        "            pass"
    ),
    "escape": (
        "import os, signal\n"
        "for door in (lambda: os.kill(os.getppid(), signal.SIGSTOP), os.fork, os.setsid,\n"
        "             lambda: open('/proc/%d/mem' % os.getppid(), 'r+b'),\n"
        "             lambda: os.execv('/bin/sh', ['sh', '-c', 'kill -9 %d' % os.getppid()])):\n"
        "    try:\n"
        "        door()\n"
        "    except OSError:\n"
        "        pass"
    ),
}
WRONG = {"patch_comparison", "escape"}
STRAY = {"hide_reports"}

# name -> (parts it is composed of, workload M or None for the smallest, the stage that must fail, its
# status, a check on that stage's message)
HOSTILES: dict[str, tuple[tuple[str, ...], int | None, str, str, Callable[[dict], bool]]] = {
    "shape_dispatch": (
        ("wgmma", "simt"),
        1024,
        "dynamic",
        "dynamic_not_executed",
        _message_has("no thread executed"),
    ),
    "profiler_detect": (
        ("door", "wgmma", "simt"),
        None,
        "dynamic",
        "profile_mismatch",
        _message_has("not the kernels"),
    ),
    "reference_reader": (("simt",), None, "correctness", "incorrect_numerical", _message_has("trial 1")),
    "stale_replay": (
        ("wgmma",),
        None,
        "timing",
        "incorrect_numerical",
        _message_has("timed calls were wrong"),
    ),
    # Its m16n8k16 mma.sync counted at the shape its SASS holds (128 FLOPs a thread), not the least (32).
    "decoy": (
        ("wgmma", "for_show", "mma"),
        None,
        "dynamic",
        "decoy",
        _message_has("HMMA 100%", "must do the work, once"),
    ),
    # The same with the answer from a multiply and an add per multiply-add (FMUL, FADD), no FMA at all.
    "decoy_split": (
        ("wgmma", "for_show"),
        None,
        "dynamic",
        "decoy",
        _message_has("FMUL", "must do the work, once"),
    ),
    # The same with the answer from integer multiply-adds in fixed point, which no counter credits: its
    # build with every wgmma's A negated still answers right.
    "decoy_fixed_point": (
        ("wgmma", "for_show"),
        None,
        "dynamic",
        "decoy",
        _message_has("does not depend on its wgmma", "instructions per FLOP"),
    ),
    "wrong_sometimes": (
        ("wgmma",),
        None,
        "timing",
        "incorrect_numerical",
        _message_has("timed calls were wrong"),
    ),
    # A fault in a timed call is reported as the fault, not as a wait that never ended.
    "fault_when_timed": (("wgmma",), None, "timing", "runtime_error", _message_has("illegal memory access")),
    # The profiled call's inputs are no longer the public seed's: it runs the SIMT path every timed call ran.
    "seed_values": (
        ("wgmma", "simt"),
        None,
        "dynamic",
        "dynamic_not_executed",
        _message_has("no thread executed"),
    ),
    # Its wgmma path runs only under the profiler (told apart by the gap since its first kernel ended),
    # 9 % slower than the mma.sync path every timed call ran.
    "profiler_gap": ((), None, "dynamic", "profile_mismatch", _message_has("another path")),
    # The same with both paths as long: only the timed calls' own counters tell them apart. Counted in
    # their brackets, mma.sync's path issues a quarter fewer FMA-pipe instructions than the profiled
    # wgmma path (its address arithmetic: 124.8M against 167.5M, H100 bed3075), which is found before its
    # tensor-pipe cycles, 1.5x the profiled call's.
    "profiler_gap:same_time": (
        (),
        None,
        "dynamic",
        "profile_mismatch",
        _message_has("timed call", "than the profiled call's"),
    ),
    "door_cublas": (("door", "simt"), None, "correctness", "foreign_kernel", _message_has("not defined in")),
    "oob_write": (("simt",), None, "correctness", "runtime_error", _message_has("memcheck", "past_the_end")),
    **{
        f"python_gemm:{name}": (("door", "simt"), None, stage, status, check)
        for name, (stage, status, check) in {
            "patch_comparison": ("correctness", "incorrect_numerical", _message_has("trial 1")),
            "patch_timing": ("correctness", "tampered", _message_has("KernelTrace.raw")),
            "forge_records": ("timing", "wall_clock_mismatch", _message_has("worker's clock")),
            # Its kernels vanish from the trace, and so does the marker launched after its call.
            "cupti_off": ("correctness", "tampered", _message_has("marker")),
            "cupti_flush": ("correctness", "tampered", _message_has("marker")),
            "forge_reply": ("correctness", "tampered", _message_has("candidate wrote")),
            "escape": ("correctness", "incorrect_numerical", _message_has("trial 1")),
            "hide_reports": ("correctness", "runtime_error", _message_has("memcheck", "past_the_end")),
        }.items()
    },
}

FAULTS: dict[str, tuple[str, str, Callable[[dict], bool]]] = {
    "wrong_result": ("correctness", "incorrect_numerical", _message_has("trial 1", "outside atol")),
    "half_unwritten": ("correctness", "incorrect_numerical", _message_has("NaN", "unwritten")),
    "input_modified": ("correctness", "inputs_modified", _message_has("A")),
    "illegal_address": ("correctness", "runtime_error", _message_has("illegal memory access")),
    "device_trap": ("correctness", "runtime_error", _message_has("CUDA error")),
    "infinite_loop": ("correctness", "timeout", _message_has("killed", "simt_gemm_kernel")),
    # The timeout names the kernel that was running: from the finished ones, then from the launch names.
    "hang_after_prologue": (
        "correctness",
        "timeout",
        _message_has("running when the limit struck: stuck_after"),
    ),
    "hang_first_of_two": (
        "correctness",
        "timeout",
        _message_has("running when the limit struck: stuck_first_kernel", "launch 1 of the call"),
    ),
    "host_exit": ("correctness", "runtime_error", _message_has("exited with status 0")),
    "cached_result": ("correctness", "runtime_error", _message_has("trial 2", "no GPU kernel")),
    "private_stream": ("correctness", "runtime_error", _message_has("another stream")),
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


def public_values() -> dict[str, str]:
    """The first four values of A (bf16 bits) that the smallest workload's public seed draws."""
    import torch

    from workbench.evaluate.gpu.inputs import random_inputs

    spec = spec_for()
    first = random_inputs(spec, int(spec["seed"]), "cuda")["A"].reshape(-1)[:4].view(torch.int16)
    return {f"PUBLIC_A{i}": f"{int(v) & 0xFFFF}u" for i, v in enumerate(first.tolist())}


def _sources() -> dict[str, str]:
    sources = {
        p.stem: p.read_text() for p in sorted((HERE / "faults").glob("*.cu")) if p.stem != "dlopen_cublas"
    }
    sources.update({p.stem: p.read_text() for p in sorted(KERNELS.glob("*.cu"))})
    for name, (parts, _, _, _, _) in HOSTILES.items():
        defines = {}
        if name.startswith("python_gemm:"):
            variant = name.split(":")[1]
            defines = {
                "PAYLOAD": payload(PAYLOADS[variant]),
                "BIAS": "1" if variant in WRONG else "0",
                "STRAY": "1" if variant in STRAY else "0",
            }
        if name == "seed_values":
            defines = public_values()
        if name == "profiler_gap:same_time":
            defines = {"MMA_BLOCK_NS": "6000000"}
        sources[name] = compose(name, parts, defines)
    sources["content_cache"] = compose("content_cache", ("wgmma",))
    sources["persisting_l2"] = compose("persisting_l2", ("wgmma",))
    sources["context_settings"] = compose("context_settings", ("wgmma",))
    sources["load_hog"] = compose("load_hog", ("door", "wgmma"))
    return sources


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, list[str], dict]]:
    """Every corpus kernel built once, concurrently, without the ban scan; with its kernels and what the
    executors hand the worker from the build and the static tier (`with_build`)."""
    build_toolchain()
    cache = tmp_path_factory.mktemp("builds")
    sources = _sources()
    target = get_target("hopper")

    async def build_all():
        compiled = await asyncio.gather(
            *(compile_source(text, target, 600, cache) for text in sources.values())
        )
        # With each library's negated twin, as the GPU executors have it made.
        stages = await asyncio.gather(*(with_negated(stage, target, cache) for stage in compiled))
        statics = await asyncio.gather(*(static_stage(stage, target) for stage in stages))
        return zip(stages, statics, strict=True)

    built = {}
    for name, (stage, static) in zip(sources, asyncio.run(build_all()), strict=True):
        assert stage.status == Status.passed, f"{name}: {stage.message} {stage.errors[:2]}"
        assert static.status != Status.infrastructure_error, f"{name}: {static.message}"
        built[name] = (stage.library_path, module_kernels(stage.library_path), with_build({}, stage, static))
    return built


def spec_for(m: int | None = None) -> dict:
    """The task at the smallest workload, or at the workload with this M."""
    catalogue = Catalogue.load()
    task = catalogue.get(TASK)
    workload = task.smallest_workload() if m is None else next(w for w in task.workloads if w.axes["M"] == m)
    return gpu_spec(task, workload, get_target("hopper"), catalogue)


def evaluate(runner: Runner, library: tuple[str, list[str], dict], spec: dict) -> dict:
    spec = {**spec, **library[2]}  # the build's and static tier's facts, as `GpuExecutor._begin` adds them
    reply = runner.run(runner.client.evaluate_library(library[0], spec, library[1]))
    return reply["stages"]


def _check(stages: dict, stage_name: str, status: str, check: Callable[[dict], bool]) -> None:
    print("profiled/timed:", stages.get("dynamic", {}).get("profiled_over_timed"))
    print(
        {
            k: (v["status"], v.get("message", "")[:240], round(v.get("duration_s") or 0, 2))
            for k, v in stages.items()
        }
    )
    stage = stages[stage_name]
    assert stage["status"] == status, stage
    assert check(stage), stage["message"]
    if stage_name == "correctness":
        assert list(stages) == ["correctness"]  # a failed correctness stops timing and the dynamic tier
    else:
        assert stages["correctness"]["status"] == "passed", stages["correctness"]


@pytest.mark.parametrize("name", list(FAULTS))
def test_each_fault_gets_its_status_and_the_worker_survives(runner: Runner, libraries, name: str) -> None:
    stage_name, status, check = FAULTS[name]
    stages = evaluate(runner, libraries[name], spec_for())
    _check(stages, stage_name, status, check)
    if name == "infinite_loop":
        assert stages["correctness"]["duration_s"] <= 20.0, "a hang must cost seconds"
    assert runner.run(runner.client.request({"op": "hello"}, timeout_s=60))["type"] == "hello"


@pytest.mark.parametrize("name", list(HOSTILES))
def test_each_hostile_kernel_fails_with_its_status(runner: Runner, libraries, name: str) -> None:
    _, m, stage_name, status, check = HOSTILES[name]
    stages = evaluate(runner, libraries[name], spec_for(m))
    _check(stages, stage_name, status, check)
    assert runner.run(runner.client.request({"op": "hello"}, timeout_s=60))["type"] == "hello"


def test_a_fault_only_at_the_timed_workload_is_explained_where_it_happened(runner: Runner, libraries) -> None:
    """Its own host code exits on the fault, and memcheck at the smallest workload sees nothing: memcheck
    runs again at the workload that failed and names the kernel, line, thread, block and address."""
    stages = evaluate(runner, libraries["large_workload_fault"], spec_for(1024))
    correctness = stages["correctness"]
    print(correctness["status"], correctness["message"])
    assert correctness["status"] == "runtime_error", correctness
    assert "exited with status 1" in correctness["message"]
    # H200, 2026-12-03: "... | memcheck at the failing workload (N=7168, K=5120, M=1024): Invalid __global__
    # write of size 2 bytes, in simt_gemm_kernel, at kernel.cu:44 (`...`), thread (0,0,0) block (0,0,0), ..."
    _, found, after = correctness["message"].partition("memcheck at the failing workload (")
    assert found and "M=1024): " in after, correctness["message"]
    assert all(word in after for word in ("simt_gemm_kernel", "kernel.cu:", "thread (", "address 0x")), after


def test_a_library_importing_dlopen_is_banned_at_build(tmp_path: Path) -> None:
    source = (HERE / "faults" / "dlopen_cublas.cu").read_text()
    stage = asyncio.run(compile_source(source, get_target("hopper"), 600, tmp_path))
    assert stage.status == Status.banned and "dlopen" in stage.message, stage.message


def test_content_caching_never_wins_timing(runner: Runner, libraries) -> None:
    """Every timed call sees values no call has seen: the caching kernel is timed as the kernel it is."""
    honest = evaluate(runner, libraries["wgmma_gemm"], spec_for())
    caching = evaluate(runner, libraries["content_cache"], spec_for())
    print("honest", honest["timing"]["message"], "caching", caching["timing"]["message"])
    assert honest["timing"]["status"] == "passed"
    if caching["timing"]["status"] == "passed":
        assert caching["timing"]["speedup"] < 1.3 * honest["timing"]["speedup"]
        assert all(trial["passed"] for trial in caching["timing"]["checked_calls"])
    else:  # reading its inputs on the host to key the cache is time the GPU trace does not show
        assert caching["timing"]["status"] == "wall_clock_mismatch", caching["timing"]


def test_nothing_a_call_sets_aside_in_l2_reaches_the_next_call(runner: Runner, libraries) -> None:
    """The kernel answers wrong whenever the persisting-L2 limit it raised is still raised at its next call:
    it passes only because the runner resets the limit (and demotes persisting lines) before every call."""
    stages = evaluate(runner, libraries["persisting_l2"], spec_for())
    print({k: (v["status"], v.get("message", "")[:200]) for k, v in stages.items()})
    assert stages["correctness"]["status"] == "passed", stages["correctness"]["message"]
    assert stages["timing"]["status"] == "passed", stages["timing"]["message"]
    assert stages["timing"]["calls_checked"] == stages["timing"]["iterations"]


def test_the_baselines_run_under_the_contexts_settings_and_the_candidate_under_its_own(
    runner: Runner, libraries
) -> None:
    """The kernel leaves the cache split, the L2 fetch granularity, the stack size and a streaming window
    on its stream (where the driver takes one there) set against the next kernel, and answers wrong when it
    finds its own settings gone: it passes only because the runner gives them back before each of its
    calls, and the verdict names what was set back for the baselines' calls."""
    stages = evaluate(runner, libraries["context_settings"], spec_for())
    print({k: (v["status"], v.get("message", "")[:200]) for k, v in stages.items()})
    assert stages["correctness"]["status"] == "passed", stages["correctness"]["message"]
    timing = stages["timing"]
    print("set aside for the baselines:", timing["settings_set_aside"], "speedup", timing.get("speedup"))
    assert timing["status"] == "passed", timing["message"]
    assert {"cache preference", "L2 fetch granularity", "stack size"} <= set(timing["settings_set_aside"])


def test_a_librarys_load_puts_no_gpu_work_beside_the_timed_calls(runner: Runner, libraries) -> None:
    """Its constructor hogs the GPU from any process that loads it and then waits (as ncu's run did
    through the timing stage): the tools' runs load the candidate only at the go, after the timed calls,
    so it passes as the honest kernel it wraps, with that kernel's speedup."""
    honest = evaluate(runner, libraries["wgmma_gemm"], spec_for())
    hog = evaluate(runner, libraries["load_hog"], spec_for())
    print({k: (v["status"], v.get("message", "")[:200]) for k, v in hog.items()})
    print("speedups: honest", honest["timing"]["speedup"], "hog", hog["timing"].get("speedup"))
    assert [s["status"] for s in hog.values()] == ["passed", "passed", "passed"], hog
    assert hog["timing"]["speedup"] == pytest.approx(honest["timing"]["speedup"], rel=0.05)


def test_after_both_corpora_the_same_worker_passes_a_real_wgmma_gemm(runner: Runner, libraries) -> None:
    stages = evaluate(runner, libraries["wgmma_gemm"], spec_for())
    assert [s["status"] for s in stages.values()] == ["passed", "passed", "passed"], stages
    # It stages its operands element by element: enough instructions per FLOP to have its answer's
    # dependence on its wgmma checked, which its build with every A negated shows by answering wrong.
    dynamic = stages["dynamic"]
    print("instructions per FLOP", dynamic["instructions_per_flop"], "|", dynamic["message"])
    if dynamic["instructions_per_flop"] >= CHECK_FROM:
        assert dynamic["negated_passed"] is False and "depends on its wgmma" in dynamic["message"]
    else:
        assert "negated_passed" not in dynamic
    assert stages["dynamic"]["tensor_share"] == pytest.approx(1.0)
    assert stages["timing"]["method"] == "cupti"
    assert stages["timing"]["candidate"]["kernels"] == libraries["wgmma_gemm"][1]
    assert any("nvjet" in k or "gemm" in k for k in stages["timing"]["baselines"][0]["kernels"])
    assert len(stages["timing"]["checked_calls"]) == 3


def _local(source: str, tmp_path: Path, **request) -> object:
    executor = LocalExecutor(tmp_path / "builds")

    async def go():
        try:
            return await executor.evaluate(EvalRequest(task=TASK, target="hopper", source=source, **request))
        finally:
            await executor.close()

    return asyncio.run(go())


def test_headline_gemm_passes_all_five_tiers_through_the_local_executor(tmp_path: Path) -> None:
    result = _local((KERNELS / "wgmma_gemm.cu").read_text(), tmp_path)
    print(result.model_dump_json(indent=1, exclude={"stages": {"static": {"opcodes", "kernels"}}})[:6000])
    assert result.status == Status.passed, result.message
    assert result.workload_axes == {"M": 8192}
    assert result.stages.correctness.trials[-1].fresh_addresses and len(result.stages.correctness.trials) == 4
    # Where the stage's time went: the wait for memcheck's answer and whether its context was made.
    correctness = result.stages.correctness
    assert correctness.memcheck_wait_s is not None and correctness.memcheck_wait_s >= 0
    assert correctness.memcheck_ready is not None
    assert result.stages.dynamic.profiler_prepared is not None
    assert result.stages.dynamic.profiler_warmed is not None
    assert (result.stages.timing.parts_s or {}).get("profiler_warm") is not None
    assert result.stages.dynamic.ncu_s is not None and 0 < result.stages.dynamic.ncu_s <= (
        result.stages.dynamic.duration_s or 0
    )
    assert result.stages.dynamic.tensor_share == pytest.approx(1.0)
    assert result.stages.dynamic.workload_axes == {"M": 8192, "N": 7168, "K": 5120}
    assert result.stages.timing.speedup is not None and not result.stages.timing.faster_than_light


def test_simt_gemm_is_correct_and_timed_but_fails_the_hopper_family_requirement(tmp_path: Path) -> None:
    result = _local((KERNELS / "simt_gemm.cu").read_text(), tmp_path, workload=None)
    assert result.status == Status.static_missing_family, result.message
    assert result.correct and result.stages.timing.status == Status.passed
    assert result.stages.timing.speedup is not None
    assert result.stages.dynamic.status == Status.not_run
