"""Build a Triton candidate for a target without a GPU: the ban, a traced `run`, ptxas, a content cache.

1. `triton_ban.scan`: the AST rules; a finding stops the build (`banned`).
2. `triton_trace` in a child process (own session, scrubbed `TRITON_*` environment, a private Triton
   cache, doors closed): `run` is called on meta tensors of the workload's shapes and dtypes, each
   launch is compiled for the target to PTX exactly as a real launch would specialise it, and any
   torch operation but allocation and views is recorded (`banned`: torch computed).
3. Each PTX is assembled here with the ptxas Triton bundles, with the flags Triton itself passes
   (`-lineinfo -v --gpu-name=sm_90a`, `--fmad=false` when the kernel turns fp fusion off); ptxas -v's
   report gives registers, spills and shared memory per kernel, and its advisories (wgmma serialised)
   become warnings, as for a CUDA build.
4. Every cubin is disassembled; `kernel.sass` holds all of them (a kernel compiled for several
   autotune configs appears once per config, as `name#1`, `name#2`), so the static tier
   (`sass.static_stage`) judges every kernel the module compiled. `kernel.cubin` is the first
   kernel's cubin and `kernel.ptx` all PTX, for the listings a session carries.

The cache key is the sha256 of the source, the traced shapes and dtypes, the target, Triton's
version (its ptxas is part of the wheel) and the trace's rules. Failed builds are cached too; timeouts
are not.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from workbench.evaluate.build.ban import BanFinding, refused_build
from workbench.evaluate.build.negated import (
    NEGATED_DIR,
    PTXAS_TIMEOUT_S,
    Twin,
    in_cache_entry,
    negate_products,
    products_not_negated,
    sass_listings,
)
from workbench.evaluate.build.nvcc import RECORD_NAME, cache_root, first_errors, load_cached
from workbench.evaluate.build.ptxas_report import parse_ptxas, warning_summary
from workbench.evaluate.build.rules_digest import rules_digest
from workbench.evaluate.build.sass import SASS_NAME, disassemble
from workbench.evaluate.build.triton_ban import scan
from workbench.evaluate.gpu.isolation import signal_group
from workbench.evaluate.result import BuildStage, KernelResources, Status
from workbench.tasks import Target, Task, Workload
from workbench.tasks.devices import DEVICES

CACHE_FORMAT = 2  # 2: the trace keeps what the GPU runtime cache is made of, at both workloads
SOURCE_NAME = "kernel.py"
PTX_NAME = "kernel.ptx"
CUBIN_NAME = "kernel.cubin"
KERNELS_DIR = "kernels"
TRACE_NAME = "trace.json"  # in KERNELS_DIR: what the trace compiled (`TraceReport`)
MAX_ERRORS = 5
MAX_OUTPUT_CHARS = 20_000
# The device the trace's torch.cuda queries describe (an SM count for a persistent grid).
TARGET_DEVICE = {"hopper": "H200", "blackwell": "B200"}
_MLIR_ERROR = re.compile(rf"{re.escape(SOURCE_NAME)}:(\d+):(\d+): error: (.*)")
_FUNCTION_LINE = re.compile(r"^(\s*Function\s*:\s*)(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class TritonToolchain:
    version: str
    ptxas: Path  # the one Triton runs for this target (ptxas-blackwell from sm_100 on)


def triton_toolchain(target: Target) -> TritonToolchain | None:
    """Triton's version and bundled ptxas, found without importing it (its import loads LLVM)."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    name = "ptxas-blackwell" if arch_of(target) >= 100 else "ptxas"
    ptxas = package / "backends" / "nvidia" / "bin" / name
    if not ptxas.is_file():
        return None
    return TritonToolchain(importlib.metadata.version("triton"), ptxas)


def arch_of(target: Target) -> int:
    """`sm_90a` -> 90, `sm_100a` -> 100: the capability Triton's GPUTarget takes."""
    return int(target.sm.removeprefix("sm_").rstrip("a"))


def _call_tensors(task: Task, workload: Workload) -> list[dict]:
    definition = task.definition
    tensors: list[dict] = []
    groups: tuple[Literal["inputs", "outputs"], ...] = ("inputs", "outputs")
    for group in groups:
        shapes = definition.shapes(dict(workload.axes), group)
        for name, spec in getattr(definition, group).items():
            given = workload.inputs.get(name) if group == "inputs" else None
            value = getattr(given, "value", None)
            if value is not None:
                tensors.append({"name": name, "value": value})
            else:
                tensors.append({"name": name, "shape": shapes[name], "dtype": spec.dtype})
    return tensors


def trace_spec(task: Task, workload: Workload) -> dict:
    """What `run` is called with: the inputs then the outputs, shapes and dtypes (scalars by value), at
    the workload the GPU tiers time and at the smallest one, where memcheck's call runs: on a GPU only
    kernels the build compiled may run (`triton_runtime`), so both are traced, compiled and judged."""
    tensors = _call_tensors(task, workload)
    calls = [tensors]
    smallest = task.smallest_workload()
    if smallest.uuid != workload.uuid:
        calls.append(_call_tensors(task, smallest))
    return {"names": [t["name"] for t in tensors], "tensors": tensors, "calls": calls}


def trace_rules() -> str:
    """The digest of the trace's rules (what torch may do), whose bans are cached with the build. Found,
    not imported: the trace imports torch, which this process need not."""
    spec = importlib.util.find_spec("workbench.evaluate.build.triton_trace")
    assert spec is not None and spec.origin is not None
    return rules_digest(Path(spec.origin))


def build_key(source: str, spec: dict, target: Target, toolchain: TritonToolchain, rules: str) -> str:
    digest = hashlib.sha256()
    for part in (
        f"triton-format={CACHE_FORMAT}",
        f"rules={rules}",
        source,
        json.dumps(spec, sort_keys=True),
        target.name,
        target.sm,
        f"triton={toolchain.version}",
    ):
        digest.update(part.encode())
        digest.update(b"\0\1")
    return digest.hexdigest()


def abi_mismatch(source: str, spec: dict) -> BuildStage | None:
    """`run` cannot take the task's inputs and outputs in order (read from the source; the ban found it)."""
    tree = ast.parse(source)
    run = next(n for n in reversed(tree.body) if isinstance(n, ast.FunctionDef) and n.name == "run")
    arguments = run.args
    if arguments.vararg is not None:
        return None
    positional = len(arguments.posonlyargs) + len(arguments.args)
    required = positional - len(arguments.defaults)
    keyword_only = [a for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d is None]
    count = len(spec["names"])
    if required <= count <= positional and not keyword_only:
        return None
    message = (
        f"line {run.lineno}: run takes {positional} parameters; the task passes {count} "
        f"({', '.join(spec['names'])}: its inputs, then its outputs)"
    )
    return BuildStage(status=Status.abi_mismatch, message=message, errors=[message])


def _trim(output: str) -> str:
    if len(output) <= MAX_OUTPUT_CHARS:
        return output
    half = MAX_OUTPUT_CHARS // 2
    return f"{output[:half]}\n… [{len(output) - MAX_OUTPUT_CHARS} characters cut] …\n{output[-half:]}"


@dataclass(frozen=True)
class Finished:
    returncode: int | None  # None: killed at the timeout
    output: str


def _labelled(label: str) -> Callable[[re.Match[str]], str]:
    """A substitution that appends the kernel's label to a `Function :` line."""
    return lambda match: match.group(1) + label


async def run_tool(
    command: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None
) -> Finished:
    """One tool run in its own session (a timeout ends it and its children), output merged."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), timeout=timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        signal_group(process.pid)
        await process.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        return Finished(None, "")
    return Finished(process.returncode, stdout.decode(errors="replace"))


def _child_env(work: Path) -> dict[str, str]:
    """The caller's environment without Triton's knobs (they change what it compiles), its cache private."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env["TRITON_CACHE_DIR"] = str(work / "triton-cache")
    env["TRITON_HOME"] = str(work)
    env["TMPDIR"] = str(work)  # the only folder the traced child may write (Landlock, where there is one)
    return env


def _line_text(source: str, line: int | None) -> str:
    lines = source.splitlines()
    return lines[line - 1].strip() if line and 0 < line <= len(lines) else ""


def _trace_failure(report: dict, source: str, output: str) -> BuildStage | None:
    """The build stage for a trace that found torch work, a bad launch, no launch, or an error."""
    findings = [
        BanFinding(
            op["line"] or 0,
            "torch_compute",
            _line_text(source, op["line"]),
            f"run ran torch's {op['op']} (traced on meta tensors): only allocation and views may run "
            "outside your kernels",
        )
        for op in report["torch_ops"]
    ]
    findings += [
        BanFinding(f["line"] or 0, f["rule"], _line_text(source, f["line"]), f"{f['why']} is not allowed")
        for f in report["findings"]
    ]
    if findings:
        return refused_build(findings, time.perf_counter(), MAX_ERRORS)
    error = report["error"]
    if error is None:
        if report["kernels"]:
            return None
        finding = BanFinding(1, "no_launch", "", "run launched no @triton.jit kernel when called")
        return refused_build([finding], time.perf_counter(), MAX_ERRORS)
    message, line = error["message"], error["line"]
    if error["kind"] == "compile":
        mlir = _MLIR_ERROR.search(output)
        if mlir is not None:
            message, line = mlir.group(3).strip(), int(mlir.group(1))
        message = f"Triton could not compile {error['kernel']}: {message}"
    elif error["kind"] == "run":
        message = f"run raised {message} (traced with meta tensors of the workload's shapes)"
    elif error["kind"] == "import":
        message = f"importing the file raised {message}"
    where = f"line {line}: " if line else ""
    text = f"{where}{message}"
    return BuildStage(status=Status.compile_error, message=text, errors=[text], compiler_output=_trim(output))


def _labels(kernels: list[dict]) -> list[str]:
    """Kernel names as the listings show them: `name#k` when one kernel was compiled more than once."""
    counts: dict[str, int] = {}
    for kernel in kernels:
        counts[kernel["entry"]] = counts.get(kernel["entry"], 0) + 1
    seen: dict[str, int] = {}
    labels = []
    for kernel in kernels:
        entry = kernel["entry"]
        seen[entry] = seen.get(entry, 0) + 1
        labels.append(f"{entry}#{seen[entry]}" if counts[entry] > 1 else entry)
    return labels


def _describe_kernel(label: str, kernel: dict) -> str:
    grid = "x".join(str(g) for g in kernel["grid"]) if kernel.get("grid") else "?"
    constants = ", ".join(f"{k}={v}" for k, v in kernel["constexprs"].items())
    shape = f"{kernel['num_warps']} warps, {kernel['num_stages']} stages, {kernel['shared']} B dynamic smem"
    return f"{label} grid {grid} ({constants + '; ' if constants else ''}{shape})"


def _ptxas_command(
    toolchain: TritonToolchain, target: Target, kernel: dict, ptx: str, cubin: str
) -> list[str]:
    """The command Triton itself runs to assemble `kernel`'s PTX (`--fmad=false` where it turns fp fusion
    off)."""
    fusion = [] if kernel["fp_fusion"] else ["--fmad=false"]
    return [str(toolchain.ptxas), "-lineinfo", *fusion, "-v", f"--gpu-name={target.sm}", ptx, "-o", cubin]


async def _assemble(
    work: Path, report: dict, target: Target, toolchain: TritonToolchain, timeout_s: float
) -> BuildStage:
    """ptxas and cuobjdump for every traced kernel; the stage with its resources and listings."""
    kernels = report["kernels"]
    labels = _labels(kernels)
    resources: list[KernelResources] = []
    warnings = []
    outputs: list[str] = []
    sass_parts: list[str] = []
    commands: list[list[str]] = []
    folder = work / KERNELS_DIR
    for label, kernel in zip(labels, kernels, strict=True):
        ptx = folder / kernel["ptx"]
        cubin = ptx.with_suffix(".cubin")
        command = _ptxas_command(toolchain, target, kernel, ptx.name, cubin.name)
        commands.append([Path(command[0]).name, *command[1:]])
        finished = await run_tool(command, folder, timeout_s)
        outputs.append(finished.output)
        if finished.returncode != 0:
            status = Status.timeout if finished.returncode is None else Status.compile_error
            errors = first_errors(finished.output) or [finished.output.strip()[-500:]]
            return BuildStage(
                status=status,
                message=f"ptxas failed on {label}: {errors[0] if errors else 'timed out'}",
                errors=errors,
                command=commands[-1],
                compiler_output=_trim("\n".join(outputs)),
            )
        found, advisories = parse_ptxas(finished.output)
        for item in found:
            item.kernel = label
        resources += found
        warnings += advisories
        disassembly = await disassemble(cubin)
        if disassembly.text is None:
            return BuildStage(status=Status.infrastructure_error, message=disassembly.error)
        sass_parts.append(_FUNCTION_LINE.sub(_labelled(label), disassembly.text))
    (work / SASS_NAME).write_text("\n".join(sass_parts))
    (work / PTX_NAME).write_text(
        "\n".join(
            f"// ---- {label}\n{(folder / k['ptx']).read_text()}"
            for label, k in zip(labels, kernels, strict=True)
        )
    )
    shutil.copyfile((folder / kernels[0]["ptx"]).with_suffix(".cubin"), work / CUBIN_NAME)
    described = "; ".join(_describe_kernel(label, k) for label, k in zip(labels, kernels, strict=True))
    return BuildStage(
        status=Status.passed,
        message=f"built for {target.sm} with Triton {toolchain.version}: {described}{warning_summary(warnings)}",
        command=commands[0],
        compiler_output=_trim("\n".join(outputs)),
        resources=resources,
        warnings=warnings,
        ptx_path=PTX_NAME,
        cubin_path=CUBIN_NAME,
        toolchain=f"triton {toolchain.version}",
    )


def _load_cached(entry: Path) -> BuildStage | None:
    return load_cached(
        entry, (PTX_NAME, CUBIN_NAME, SASS_NAME), {"ptx_path": PTX_NAME, "cubin_path": CUBIN_NAME}
    )


async def build_triton(
    source: str,
    task: Task,
    workload: Workload,
    target: Target,
    timeout_s: float = 180.0,
    cache_dir: Path | None = None,
) -> BuildStage:
    """The build stage of a Triton candidate: the ban, the traced compile, ptxas, through the cache."""
    started = time.perf_counter()
    findings = scan(source)
    if findings:
        return refused_build(findings, started, MAX_ERRORS)
    toolchain = triton_toolchain(target)
    if toolchain is None:
        return BuildStage(
            status=Status.infrastructure_error,
            message="Triton is not installed (pip install 'ptx-workbench[triton]'): a Triton candidate cannot be built",
        )
    spec = trace_spec(task, workload)
    mismatch = abi_mismatch(source, spec)
    if mismatch is not None:
        mismatch.duration_s = time.perf_counter() - started
        return mismatch
    key = build_key(source, spec, target, toolchain, trace_rules())
    root = cache_dir or cache_root()
    entry = root / key[:2] / key
    cached = _load_cached(entry)
    if cached is not None:
        cached.duration_s = time.perf_counter() - started
        return cached
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="triton-", dir=root))
    try:
        stage = await _build_in(work, source, spec, target, toolchain, timeout_s)
        stage.build_key = key
        if stage.status == Status.timeout:
            return stage
        shutil.rmtree(work / "triton-cache", ignore_errors=True)
        (work / RECORD_NAME).write_text(stage.model_dump_json(indent=1))
        entry.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # another evaluation of the same source finished first
            work.rename(entry)
        final = _load_cached(entry) or stage
        final.cache_hit = False
        final.duration_s = time.perf_counter() - started
        return final
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


async def with_negated_triton(stage: BuildStage, target: Target, cache_dir: Path | None = None) -> BuildStage:
    """A passed Triton build with its negated twin named (an entry of its own: the source, the trace, each
    traced kernel's PTX with every wgmma's A negated and the cubin Triton's ptxas makes of it, `negated.py`),
    made into its cache entry on first use (the GPU tiers' executors ask for it); or why there is none."""
    if stage.status != Status.passed or stage.cubin_path is None:
        return stage
    entry = Path(stage.cubin_path).parent

    async def make(work: Path) -> Twin:
        toolchain = triton_toolchain(target)
        if toolchain is None:
            return Twin("Triton is not installed here")
        return await _negated_in(entry, work / NEGATED_DIR, target, toolchain)

    # The folder appears whole or not at all (moved into place once made).
    return await in_cache_entry(stage, entry, entry / NEGATED_DIR, cache_dir or cache_root(), make)


async def _negated_in(entry: Path, twin: Path, target: Target, toolchain: TritonToolchain) -> Twin:
    """The negated twin of the Triton build in `entry`, written as an entry into `twin`; every kernel with
    wgmma assembled as the build assembled it and its SASS checked against the original's."""
    original, folder = entry / KERNELS_DIR, twin / KERNELS_DIR
    folder.mkdir(parents=True)
    shutil.copyfile(entry / SOURCE_NAME, twin / SOURCE_NAME)
    shutil.copyfile(original / TRACE_NAME, folder / TRACE_NAME)
    kernels = json.loads((original / TRACE_NAME).read_text())["kernels"]
    # Each kernel is assembled and compared on its own: an autotuned kernel's configs take cores side by side.
    found = await asyncio.gather(
        *(_negated_kernel(kernel, original, folder, target, toolchain) for kernel in kernels)
    )
    failed = [outcome for outcome in found if isinstance(outcome, Twin)]
    if failed:  # products left un-negated anywhere outrank another kernel's failure: the candidate's doing
        return next((twin for twin in failed if twin.hidden), failed[0])
    counts = [outcome for outcome in found if isinstance(outcome, int)]
    if not counts:
        return Twin("its PTX holds no wgmma")
    negated = sum(counts)
    return Twin("" if negated else "its SASS runs no HGMMA or QGMMA to negate")


async def _negated_kernel(
    kernel: dict, original: Path, folder: Path, target: Target, toolchain: TritonToolchain
) -> int | Twin | None:
    """One traced kernel in the twin's `folder`: how many HGMMA/QGMMA its negated cubin runs negated, why
    it could not be made, or None where its PTX holds no wgmma (copied as the build assembled it)."""
    ptx = Path(kernel["ptx"]).name
    cubin = Path(ptx).with_suffix(".cubin").name
    text = (original / ptx).read_text()
    if "wgmma" not in text:
        shutil.copyfile(original / ptx, folder / ptx)
        shutil.copyfile(original / cubin, folder / cubin)
        return None
    (folder / ptx).write_text(negate_products(text))
    finished = await run_tool(_ptxas_command(toolchain, target, kernel, ptx, cubin), folder, PTXAS_TIMEOUT_S)
    if finished.returncode != 0:
        last = finished.output.strip().splitlines()[-1:] or ["timed out"]
        return Twin(f"ptxas failed on {kernel['entry']}'s negated PTX: {last[0]}")
    listings = await sass_listings(original / cubin, folder / cubin)
    if isinstance(listings, str):
        return Twin(f"its SASS could not be compared: {listings}")
    products, left, other = products_not_negated(*listings)
    if left:
        return Twin(
            f"{left} of {kernel['entry']}'s {products} HGMMA/QGMMA still run un-negated in the build with "
            "every wgmma's A flipped: their wgmma are written in a form the workbench cannot negate",
            hidden=True,
        )
    if other:
        return Twin(f"{kernel['entry']}: {other}")
    return products


async def _build_in(
    work: Path, source: str, spec: dict, target: Target, toolchain: TritonToolchain, timeout_s: float
) -> BuildStage:
    folder = work / KERNELS_DIR
    folder.mkdir()
    (work / SOURCE_NAME).write_text(source)
    device = DEVICES[TARGET_DEVICE[target.name]]
    request = {
        "source": str(work / SOURCE_NAME),
        "out": str(folder),
        "arch": arch_of(target),
        "spec": spec,
        "device_name": device.name,
        "sms": device.sms,
        "sandbox": True,
        "writable": str(work),
    }
    (work / "request.json").write_text(json.dumps(request))
    command = [sys.executable, "-m", "workbench.evaluate.build.triton_trace", str(work / "request.json")]
    started = time.perf_counter()
    finished = await run_tool(command, work, timeout_s, _child_env(work))
    output = finished.output.replace(f"{work}/", "")
    if finished.returncode is None:
        return BuildStage(
            status=Status.timeout, message=f"the Triton trace did not finish within {timeout_s:g} s"
        )
    try:
        report = json.loads((folder / TRACE_NAME).read_text())
    except (OSError, ValueError):
        last = output.strip().splitlines()[-1] if output.strip() else f"exit {finished.returncode}"
        return BuildStage(
            status=Status.compile_error,
            message=f"the Triton trace ended without a report: {last}",
            errors=[last],
            compiler_output=_trim(output),
        )
    failed = _trace_failure(report, source, output)
    if failed is not None:
        return failed
    remaining = max(timeout_s - (time.perf_counter() - started), 1.0)
    return await _assemble(work, report, target, toolchain, remaining)
