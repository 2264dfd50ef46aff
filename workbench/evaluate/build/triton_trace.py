"""The trace of a Triton candidate, in a child process: its `run` called on meta tensors, each kernel it
launches compiled for the target and kept as PTX, every torch operation it performs recorded.

`python -m workbench.evaluate.build.triton_trace REQUEST.json`, started by `triton_build` with a scrubbed
environment in a folder of its own. No GPU is needed: the inputs and outputs are meta tensors (shape,
strides and dtype, no memory), Triton's driver is replaced by a static one that names the target
(`GPUTarget("cuda", 90, 32)` for sm_90a), and every launch becomes Triton's own warm-up (compile, do not
launch), so each kernel is specialised exactly as a real launch at this workload would specialise it
(pointer alignment, integer divisibility, constexprs, autotune configs: every config is compiled).

Before the candidate is imported the process closes its doors (`sandbox.close_doors`: no exec, no new
process, no ptrace); ptxas cannot run here, so the cubin stage is replaced by one that keeps nothing
and the parent assembles each PTX with Triton's own ptxas. What `run` asks of torch goes through a
dispatch mode: allocation, constant fills and views pass, anything else (a matmul, an add, a copy) is
recorded with the candidate's line. The `torch.cuda` queries the ban allows answer as the target device would.

Writes `trace.json` (see `TraceReport` in `triton_build`) and one `.ptx` per compiled kernel into the
request's `out` folder. Standard library, torch and triton only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import sys
import traceback
import types
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas, get_ptxas_version
from triton.compiler import CompiledKernel
from triton.compiler.errors import CompilationError
from triton.runtime import driver
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction

from workbench.evaluate.build.triton_ban import LAUNCH_OPTIONS
from workbench.evaluate.gpu import sandbox
from workbench.evaluate.gpu.inputs import DTYPES
from workbench.evaluate.gpu.occupancy import LIMITS, SmLimits

MODULE_NAME = "ptxwb_candidate"
# Uninitialised allocation: no kernel runs. Views (`func.is_view`) pass too.
ALLOCATIONS = frozenset(
    {"aten::empty.memory_format", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
     "aten::new_empty_strided"}
)  # fmt: skip
# Constant fills (`triton_ban.TORCH_CALLS`): torch's fill kernel, reading nothing. A fill by a tensor's
# value (`fill_.Tensor`) is recorded: that value was computed.
FILLS = frozenset(
    {"aten::zeros", "aten::zeros_like", "aten::ones", "aten::ones_like", "aten::full", "aten::full_like",
     "aten::new_zeros", "aten::new_ones", "aten::new_full", "aten::zero_", "aten::fill_.Scalar"}
)  # fmt: skip
MAX_RECORDED = 20


class StaticUtils:
    """The driver's device properties, as the target device answers them: the SM count from the task's
    device, a block's shared memory and registers from the occupancy calculator's limits for its target."""

    def __init__(self, sms: int, limits: SmLimits) -> None:
        self.sms, self.limits = sms, limits

    def get_device_properties(self, device: object = None) -> dict[str, int]:
        return {
            "multiprocessor_count": self.sms,
            "max_shared_mem": self.limits.shared_per_block,
            "max_num_regs": self.limits.registers,  # a block may hold all of an SM's
            "warpSize": 32,
        }


class StaticDriver:
    """Triton's driver for a compile without a device: device 0, stream 0, the target's architecture."""

    def __init__(self, target: GPUTarget, sms: int) -> None:
        self.target = target
        self.utils = StaticUtils(sms, LIMITS["hopper" if int(target.arch) < 100 else "blackwell"])

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_active_torch_device(self) -> torch.device:
        return torch.device("meta")


class Candidate:
    """Where in the candidate's file the running code is."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def line(self, frames: traceback.StackSummary | None = None) -> int | None:
        for frame in reversed(frames if frames is not None else traceback.extract_stack()):
            if frame.filename == self.path:
                return frame.lineno
        return None


class TorchWork(TorchDispatchMode):
    """Records every torch operation but allocation, constant fills and views, with the candidate's line."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # torch would wrap the mode to keep torch.compile out, importing dynamo (3 s) to do it

    def __init__(self, candidate: Candidate) -> None:
        super().__init__()
        self.candidate = candidate
        self.ops: list[dict] = []

    def __torch_dispatch__(
        self, func: torch._ops.OpOverload, types: object, args: tuple = (), kwargs: dict | None = None
    ) -> object:
        if not func.is_view and func.name() not in ALLOCATIONS | FILLS and len(self.ops) < MAX_RECORDED:
            self.ops.append({"op": str(func), "line": self.candidate.line()})
        return func(*args, **(kwargs or {}))


class OnTheGpu(torch.Tensor):
    """A meta tensor that says it lives where the tensor it stands for will: on `cuda:0`. Code written
    elsewhere checks its inputs (`assert a.is_cuda`, `a.device.type == "cuda"`) before it launches; a
    bare meta tensor failed those checks here and only here. Views and results of its operations are of
    this class too (torch's default subclass handling); storage, data pointer and dispatch stay meta's."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]  # torch types it as an attribute
        return torch.device("cuda", 0)

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True

    def get_device(self) -> int:
        return 0


class MetaDevice(TorchFunctionMode):
    """Allocations asked for on `cuda` land on the meta device (no memory, no GPU), as `OnTheGpu`."""

    def __torch_function__(
        self, func: Callable, types: object, args: tuple = (), kwargs: dict | None = None
    ) -> object:
        kwargs = dict(kwargs or {})
        device = kwargs.get("device")
        if device is None or torch.device(device).type != "cuda":
            return func(*args, **kwargs)
        kwargs["device"] = torch.device("meta")
        made = func(*args, **kwargs)
        return made.as_subclass(OnTheGpu) if isinstance(made, torch.Tensor) else made


def simulate_cuda(capability: tuple[int, int], name: str, sms: int) -> None:
    """The `torch.cuda` calls the ban allows, answered as the target device would (torch here has no CUDA)."""
    properties = types.SimpleNamespace(
        name=name, major=capability[0], minor=capability[1], multi_processor_count=sms,
        total_memory=141 * 2**30, warp_size=32,
    )  # fmt: skip
    answers = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "device": lambda device=None: contextlib.nullcontext(),
        "current_stream": lambda device=None: types.SimpleNamespace(
            cuda_stream=0, device=torch.device("meta"), synchronize=lambda: None
        ),
        "get_device_properties": lambda device=None: properties,
        "get_device_capability": lambda device=None: capability,
        "get_device_name": lambda device=None: name,
        "synchronize": lambda device=None: None,  # nothing runs here to wait for
    }
    for attribute, answer in answers.items():
        setattr(torch.cuda, attribute, answer)


class Launches:
    """Each launch of the candidate's kernels becomes a compile; the compiled kernels, once each."""

    def __init__(self, candidate: Candidate) -> None:
        self.candidate = candidate
        self.kernels: dict[str, dict] = {}
        self.compiled: list[CompiledKernel] = []
        self.findings: list[dict] = []
        self.failed: JITFunction | None = None

    def watch(self, module: types.ModuleType) -> None:
        for name, value in vars(module).items():
            inner = value
            while not isinstance(inner, JITFunction) and hasattr(inner, "fn"):
                if isinstance(inner, Autotuner):
                    inner.run = self._autotuned(inner)
                inner = inner.fn
            if isinstance(inner, JITFunction):
                inner.run = self._compiled(name, inner)

    def _autotuned(self, tuner: Autotuner) -> Callable:
        def run(*args: object, grid: object, warmup: bool, **kwargs: object) -> object:
            # Every (pruned) config, compiled as a launch would: after its own pre_hook, which may set
            # what the compile specialises on (a host TMA descriptor's block shape). Triton's own
            # `warmup` skips the hook.
            tuner.nargs = dict(zip(tuner.arg_names, args))
            try:
                compiled = []
                for config in tuner.prune_configs(kwargs):
                    if config.pre_hook is not None:
                        config.pre_hook({**tuner.nargs, **kwargs, **config.all_kwargs()})
                    compiled.append(tuner.fn.warmup(*args, grid=grid, **kwargs, **config.all_kwargs()))
                return compiled
            finally:
                tuner.nargs = None

        return run

    def _compiled(self, name: str, function: JITFunction) -> Callable:
        original = function.run
        params = set(function.arg_names)

        def run(*args: object, grid: object, warmup: bool, **kwargs: object) -> CompiledKernel:
            for key in kwargs:
                if key not in params and key not in LAUNCH_OPTIONS:
                    self.findings.append(
                        {
                            "rule": "launch_option",
                            "line": self.candidate.line(),
                            "why": f"launch option {key}=",
                        }
                    )
            try:
                kernel = original(*args, grid=grid, warmup=True, **kwargs)
            except Exception:
                self.failed = function
                raise
            if kernel.hash not in self.kernels:
                self.kernels[kernel.hash] = self._describe(name, function, kernel, grid, args, kwargs)
                self.compiled.append(kernel)
            return kernel

        return run

    def _describe(
        self,
        name: str,
        function: JITFunction,
        kernel: CompiledKernel,
        grid: object,
        args: tuple,
        kwargs: dict,
    ) -> dict:
        bound = inspect.signature(function.fn).bind_partial(
            *args, **{k: v for k, v in kwargs.items() if k in function.arg_names}
        )
        bound.apply_defaults()
        constexprs = {
            function.arg_names[i]: repr(bound.arguments.get(function.arg_names[i]))
            for i in function.constexprs
        }
        with contextlib.suppress(Exception):  # a grid the candidate computes oddly is only not shown
            grid = grid(dict(bound.arguments)) if callable(grid) else grid
        grid = [int(g) for g in grid] if isinstance(grid, (tuple, list)) else None
        meta = kernel.metadata
        metadata_json = next(
            Path(path).read_text() for file, path in kernel.metadata_group.items() if file.endswith(".json")
        )
        return {
            "name": name,
            "entry": kernel.name,
            # What the GPU host's runtime cache is made of (`triton_runtime`): the compile's key and
            # metadata, and what the launcher's C glue is generated from.
            "hash": kernel.hash,
            "metadata_json": metadata_json,
            "launcher": {
                "signature": list(kernel.src.signature.values()),
                "tensordesc_meta": getattr(meta, "tensordesc_meta", None),
            },
            "constexprs": constexprs,
            "num_warps": meta.num_warps,
            "num_stages": meta.num_stages,
            "num_ctas": meta.num_ctas,
            "shared": meta.shared,
            "fp_fusion": bool(meta.enable_fp_fusion),
            "grid": grid,
            "line": self.candidate.line(),
        }


def _compile_error(exc: Exception, kernel: JITFunction, candidate: Candidate) -> dict:
    """Triton could not compile `kernel`: the message, and the line in the candidate's file."""
    frames = traceback.extract_tb(exc.__traceback__)
    line = candidate.line(frames)
    if isinstance(exc, CompilationError):
        node = getattr(exc, "node", None)
        text = (exc.error_message or "").strip() or _one_line(exc)
        if node is not None and hasattr(node, "lineno"):
            offset = next((i for i, ln in enumerate(kernel.raw_src) if ln.lstrip().startswith("def ")), 0)
            line = kernel.starting_line_number + offset + node.lineno - 1
    else:
        text = _one_line(exc)  # MLIR passes print their diagnostics on stderr; the parent reads them
    return {"kind": "compile", "message": text.splitlines()[-1], "line": line, "kernel": kernel.__name__}


def trace(request: dict) -> dict:
    out = Path(request["out"])
    source_path = Path(request["source"])
    candidate = Candidate(source_path)
    _set_up(request)
    launches = Launches(candidate)
    report: dict = {"kernels": [], "torch_ops": [], "findings": [], "error": None}
    work = TorchWork(candidate)
    try:
        with MetaDevice(), work:
            report["error"] = _run_candidate(request, source_path, launches, candidate)
    finally:
        report["torch_ops"] = work.ops
        report["findings"] = launches.findings
        for index, (description, kernel) in enumerate(
            zip(launches.kernels.values(), launches.compiled, strict=True)
        ):
            ptx = out / f"{description['entry']}.{index}.ptx"
            ptx.write_text(kernel.asm["ptx"])
            report["kernels"].append({**description, "ptx": ptx.name})
    return report


def _set_up(request: dict) -> None:
    """Triton compiling for the target without a device, ptxas's version read, then the doors closed."""
    arch = int(request["arch"])
    driver.set_active(StaticDriver(GPUTarget("cuda", arch, 32), int(request["sms"])))
    simulate_cuda((arch // 10, arch % 10), request["device_name"], int(request["sms"]))
    get_ptxas_version(arch)  # ptxas's version is part of every kernel's key: read it while exec is allowed
    _ = get_ptxas(arch).version
    knobs.runtime.add_stages_inspection_hook = _without_cubin
    warnings.simplefilter("ignore")
    if request.get("sandbox") and sandbox.available():
        if request.get("writable") and sandbox.landlock_abi() >= 1:
            # Triton writes its cache, in this build's own folder: nothing outside it (the build cache's
            # other entries, the workbench's code) can be written from here.
            sandbox.confine_writes([request["writable"]])
        sandbox.close_doors(no_writes=False)  # nothing may exec or fork


def _run_candidate(request: dict, source_path: Path, launches: Launches, candidate: Candidate) -> dict | None:
    """Import the candidate and call its `run` on each of the workload's calls: the error, or None."""
    spec = importlib.util.spec_from_file_location(MODULE_NAME, source_path)
    assert spec is not None and spec.loader is not None  # a .py file path always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the candidate's own failure is the report
        frames = traceback.extract_tb(exc.__traceback__)
        return {"kind": "import", "message": _one_line(exc), "line": candidate.line(frames)}
    launches.watch(module)
    workload = request["spec"]
    try:
        for tensors in workload.get("calls") or [workload["tensors"]]:
            module.run(*_arguments(tensors))
    except Exception as exc:  # noqa: BLE001 - the candidate's own failure is the report
        if launches.failed is not None:
            return _compile_error(exc, launches.failed, candidate)
        frames = traceback.extract_tb(exc.__traceback__)
        return {"kind": "run", "message": _one_line(exc), "line": candidate.line(frames)}
    return None


def _without_cubin(backend: object, stages: dict, options: object, language: object, capability: int) -> None:
    """ptxas cannot run behind the closed doors: keep the PTX, assemble it in the parent."""
    stages["cubin"] = lambda src, metadata: b""


def _arguments(tensors: list[dict]) -> list[object]:
    """The inputs then the outputs in definition order: meta tensors (`OnTheGpu`), scalars as the workload
    gives them."""
    values: list[object] = []
    for item in tensors:
        if "value" in item:
            values.append(item["value"])
        else:
            made = torch.empty(item["shape"], dtype=DTYPES[item["dtype"]], device="meta")
            values.append(made.as_subclass(OnTheGpu))
    return values


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1]}" if text else type(exc).__name__


def main() -> None:
    request = json.loads(Path(sys.argv[1]).read_text())
    report = trace(request)
    (Path(request["out"]) / "trace.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
