"""Build a candidate: nvcc for the target, one device compile, a content-addressed cache.

One nvcc call builds the shared library and, through `-keep`, leaves the PTX and the cubin of that
same compile behind, so ptxas runs once. The cache key is the sha256 of the source, the flags, the
full nvcc version, the target and the link policy's rules; a cache entry holds the artifacts and the
parsed `BuildStage`, the library's verdict included.
Failed compiles are cached too (the same source fails the same way); timeouts are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from workbench.evaluate.build import link_policy, tvm_ffi_symbols
from workbench.evaluate.build.ban import refused_build, scan
from workbench.evaluate.build.confined import launcher
from workbench.evaluate.build.link_policy import BinutilsMissing, LinkReport, check_library
from workbench.evaluate.build.negated import NEGATED_DIR, Twin, build_negated, in_cache_entry
from workbench.evaluate.build.ptxas_report import parse_ptxas, warning_summary
from workbench.evaluate.build.rules_digest import rules_digest
from workbench.evaluate.build.sass import SASS_NAME, disassemble
from workbench.evaluate.build.symbol_origin import origin
from workbench.evaluate.build.tvm_ffi_symbols import Refusal
from workbench.evaluate.gpu.demangle import demangle
from workbench.evaluate.gpu.isolation import signal_group
from workbench.evaluate.gpu.toolchain import find_tool
from workbench.evaluate.result import BuildStage, CompilerWarning, KernelResources, Status
from workbench.tasks.targets import Target

CACHE_FORMAT = 5  # bump when the cache entry layout, the parsed report or the build's reach changes
SOURCE_NAME = "kernel.cu"
LIBRARY_NAME = "kernel.so"
PTX_NAME = "kernel.ptx"
CUBIN_NAME = "kernel.cubin"
FATBIN_NAME = "kernel.fatbin"
RECORD_NAME = "build.json"
MAX_ERRORS = 5
MAX_OUTPUT_CHARS = 20_000


class ToolchainMissing(RuntimeError):
    """nvcc or the TVM-FFI package is not installed: the build cannot start on this machine."""


def cache_root() -> Path:
    configured = os.environ.get("PTXWB_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "ptxwb" / "builds"


@dataclass(frozen=True)
class BuildToolchain:
    nvcc: Path
    nvcc_version: str  # the whole `nvcc --version` text, so any toolkit update changes the key
    tvm_ffi_include: Path
    tvm_ffi_lib_dir: Path
    tvm_ffi_version: str
    link_driver: bool  # libcuda is linkable here (a GPU host, or a toolkit with its stubs)

    @property
    def reach(self) -> list[Path]:
        """The folders a build reads beyond the system's (`confined.py`): the toolkit's root, TVM-FFI's, and
        the host compiler's root where it is not the system's (one in /opt, say)."""
        home = Path.home().resolve()
        found = [Path(path).resolve().parent.parent for path in map(shutil.which, ("gcc", "g++")) if path]
        # Never a root that holds the home folder (gcc in ~/bin): that would open all of it.
        compilers = [root for root in found if root != home and root not in home.parents]
        toolkit = _real_nvcc(self.nvcc).resolve().parent.parent
        return [toolkit, self.tvm_ffi_include, self.tvm_ffi_lib_dir, *dict.fromkeys(compilers)]

    @property
    def release(self) -> str | None:
        """`Cuda compilation tools, release 13.0, V13.0.88`: the line of the version that names the release."""
        match = re.search(r"^.*release.*$", self.nvcc_version, re.MULTILINE)
        return match.group(0).strip() if match else None


def _tvm_ffi_paths() -> tuple[Path, Path, str]:
    # Located through the package spec without importing it: `import tvm_ffi` loads torch (seconds).
    spec = importlib.util.find_spec("tvm_ffi")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainMissing("the apache-tvm-ffi package is not installed (pip install apache-tvm-ffi)")
    package = Path(next(iter(spec.submodule_search_locations)))
    include, lib_dir = package / "include", package / "lib"
    if not (include / "tvm" / "ffi" / "function.h").is_file() or not (lib_dir / "libtvm_ffi.so").is_file():
        raise ToolchainMissing(f"apache-tvm-ffi at {package} has no include/ or lib/libtvm_ffi.so")
    return include, lib_dir, importlib.metadata.version("apache-tvm-ffi")


def _driver_linkable(nvcc: Path) -> bool:
    home = nvcc.resolve().parent.parent
    stubs = [home / "lib64" / "stubs", *sorted((home / "targets").glob("*/lib/stubs"))]
    if any((d / "libcuda.so").exists() for d in stubs):
        return True
    try:
        listed = subprocess.run(
            ["ldconfig", "-p"], check=False, capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    # `-lcuda` needs the unversioned libcuda.so; a driver with only libcuda.so.1 cannot be linked to.
    return re.search(r"^\s*libcuda\.so\s", listed, re.MULTILINE) is not None


def _real_nvcc(nvcc: Path) -> Path:
    """The toolkit's own nvcc when `nvcc` on PATH is a one-line exec wrapper (its stubs lie beside it)."""
    try:
        head = nvcc.read_bytes()[:300].decode(errors="replace") if nvcc.stat().st_size < 300 else ""
    except OSError:
        return nvcc
    match = re.search(r"exec\s+(\S+/nvcc)\b", head)
    return Path(match.group(1)) if match else nvcc


@cache
def build_toolchain() -> BuildToolchain:
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise ToolchainMissing("nvcc not found (install the CUDA toolkit, or set CUDA_HOME)")
    try:
        version = subprocess.run(
            [str(nvcc), "--version"], check=False, capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainMissing(f"{nvcc} --version failed: {exc}") from None
    include, lib_dir, tvm_version = _tvm_ffi_paths()
    return BuildToolchain(
        nvcc, version.strip(), include, lib_dir, tvm_version, _driver_linkable(_real_nvcc(nvcc))
    )


def nvcc_command(target: Target, toolchain: BuildToolchain) -> list[str]:
    """The full nvcc line, run inside the build folder on `kernel.cu`."""
    libs = ["-lcudart", "-lcuda", "-ltvm_ffi"] if toolchain.link_driver else ["-lcudart", "-ltvm_ffi"]
    return [
        str(toolchain.nvcc),
        "-gencode", target.gencode,
        "-O3", "-lineinfo", "--ptxas-options=-v",
        "-shared", "-Xcompiler", "-fPIC", "-std=c++17",
        "-Xcompiler", "-g1",  # host line tables: a refused symbol is traced to the user's line
        # CUB's headers otherwise bring NVTX ranges of their own.
        "-DCCCL_DISABLE_NVTX",
        # NVTX ranges in the candidate's own host code are a profiler's annotations, common in code written
        # elsewhere; its loader would read the environment and dlopen the tool named there, which the link
        # policy refuses. With no way to find a tool, each range is a call that returns at once.
        "-DNVTX_SUPPORT_ENV_VARS=0", "-DNVTX_SUPPORT_DYNAMIC_INJECTION_LIBRARY=0",
        "-DNVTX_SUPPORT_STATIC_INJECTION_LIBRARY=0",
        f"-I{toolchain.tvm_ffi_include}",
        f"-L{toolchain.tvm_ffi_lib_dir}", f"-Xlinker=-rpath={toolchain.tvm_ffi_lib_dir}",
        "-keep", "-keep-dir", "keep",
        "-o", LIBRARY_NAME, SOURCE_NAME,
        *libs,
    ]  # fmt: skip


def library_rules() -> str:
    """The digest of the rules that judge the built library (cached with it)."""
    return rules_digest(Path(link_policy.__file__), Path(tvm_ffi_symbols.__file__))


def build_key(source: str, command: list[str], toolchain: BuildToolchain, target: Target, rules: str) -> str:
    digest = hashlib.sha256()
    for part in (
        f"format={CACHE_FORMAT}",
        f"rules={rules}",
        source,
        "\0".join(command),
        toolchain.nvcc_version,
        f"tvm-ffi={toolchain.tvm_ffi_version}",
        target.name,
        target.gencode,
    ):
        digest.update(part.encode())
        digest.update(b"\0\1")
    return digest.hexdigest()


# ---------------------------------------------------------------- ptxas report and compiler errors

EXPORT_HINT = "end the file with TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, your_function)"
EXPORT_SYMBOL = "__tvm_ffi_run"


_ERROR_LINE = re.compile(r"\berror\b", re.IGNORECASE)
_NOT_AN_ERROR = re.compile(r"^\s*(ptxas info|#)|errors? detected in the compilation")


def first_errors(output: str, limit: int = MAX_ERRORS) -> list[str]:
    """The first `error` lines (file:line: error ...), verbatim but for the build folder's path."""
    found: list[str] = []
    for line in output.splitlines():
        if _ERROR_LINE.search(line) and not _NOT_AN_ERROR.search(line):
            found.append(line.strip())
            if len(found) >= limit:
                break
    return found


def _trim(output: str) -> str:
    if len(output) <= MAX_OUTPUT_CHARS:
        return output
    half = MAX_OUTPUT_CHARS // 2
    return f"{output[:half]}\n… [{len(output) - MAX_OUTPUT_CHARS} characters cut] …\n{output[-half:]}"


def _named_for_candidate(output: str, build_dir: Path) -> str:
    """Compiler messages as the candidate sees them: `kernel.cu(12): error …`, no temporary folder."""
    return output.replace(f"{build_dir}/", "").replace(f"keep/{PTX_NAME}", PTX_NAME)


# ---------------------------------------------------------------- running nvcc


@dataclass(frozen=True)
class _Run:
    returncode: int | None  # None: killed at the timeout
    output: str


async def _run(command: list[str], cwd: Path, timeout_s: float, env: dict[str, str] | None = None) -> _Run:
    # Its own session, so a timeout kills nvcc's children (cicc, ptxas, gcc) along with it.
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(), timeout=timeout_s)
    except TimeoutError:
        signal_group(process.pid)
        await process.wait()
        return _Run(None, "")
    except asyncio.CancelledError:
        signal_group(process.pid)
        # Reaped here, so its pipes close while the event loop still runs (Ctrl-C: no warnings on exit).
        await process.wait()
        raise
    return _Run(process.returncode, stdout.decode(errors="replace"))


async def _disassemble_when_ready(work: Path, started: asyncio.Event) -> None:
    """Dump the SASS while nvcc still compiles and links host code (the static stage then reads it).

    fatbinary reads the cubin once ptxas has written it, so its output appearing means the cubin is
    complete; the host compile that follows leaves time for cuobjdump.
    """
    keep = work / "keep"
    while not (keep / FATBIN_NAME).exists():
        await asyncio.sleep(0.05)
    started.set()
    disassembly = await disassemble(keep / CUBIN_NAME)
    if disassembly.text is not None:
        with contextlib.suppress(OSError):  # the static stage disassembles again if this is missing
            (work / SASS_NAME).write_text(disassembly.text)


def load_cached(entry: Path, required: tuple[str, ...], paths: dict[str, str]) -> BuildStage | None:
    """A cache entry's recorded stage, or None when it is unreadable or a passed build lost one of the
    `required` files; `paths` (field -> file name) point the stage's paths into the entry."""
    try:
        stage = BuildStage.model_validate_json((entry / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return None
    if stage.status == Status.passed and not all((entry / name).is_file() for name in required):
        return None
    located = {field: str(entry / name) if getattr(stage, field) else None for field, name in paths.items()}
    return stage.model_copy(update={"cache_hit": True, **located})


def _load_cached(entry: Path) -> BuildStage | None:
    return load_cached(
        entry,
        (LIBRARY_NAME, PTX_NAME, CUBIN_NAME),
        {"library_path": LIBRARY_NAME, "ptx_path": PTX_NAME, "cubin_path": CUBIN_NAME},
    )


def _demangle_report(resources: list[KernelResources], warnings: list[CompilerWarning]) -> None:
    names = demangle([r.kernel for r in resources] + [w.kernel for w in warnings if w.kernel])
    for item in resources:
        item.kernel = names.get(item.kernel, item.kernel)
    for warning in warnings:
        if warning.kernel:
            readable = names.get(warning.kernel, warning.kernel)
            warning.text = warning.text.replace(warning.kernel, readable)
            warning.kernel = readable


async def compile_source(
    source: str, target: Target, timeout_s: float = 180.0, cache_dir: Path | None = None
) -> BuildStage:
    """nvcc `source` for `target` (no ban scan), through the cache."""
    started = time.perf_counter()
    try:
        toolchain = build_toolchain()
    except ToolchainMissing as exc:
        return BuildStage(status=Status.infrastructure_error, message=str(exc))
    command = nvcc_command(target, toolchain)
    key = build_key(source, command, toolchain, target, library_rules())
    root = cache_dir or cache_root()
    entry = root / key[:2] / key
    cached = _load_cached(entry)
    if cached is not None:
        cached.duration_s = time.perf_counter() - started
        return cached

    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=root))
    try:
        run = await _compile_in(work, source, command, timeout_s, toolchain.reach)
        shown_command = [Path(command[0]).name, *command[1:]]
        if run.returncode is None:
            return BuildStage(
                status=Status.timeout,
                message=f"nvcc did not finish within {timeout_s:g} s",
                build_key=key,
                command=shown_command,
                toolchain=toolchain.release,
                duration_s=time.perf_counter() - started,
            )
        output = _named_for_candidate(run.output, work)
        resources, warnings = parse_ptxas(output)
        foreign = link_policy.library_kernels([r.kernel for r in resources])
        _demangle_report(resources, warnings)
        stage = BuildStage(
            build_key=key,
            command=shown_command,
            compiler_output=_trim(output),
            resources=resources,
            warnings=warnings,
            toolchain=toolchain.release,
        )
        if run.returncode != 0:
            _compile_failed(stage, run.returncode, output, work)
        elif not _judge_library(stage, work, source, toolchain, target, foreign):
            return stage  # an infrastructure error: not cached
        return _store(stage, work, entry, started)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


async def _compile_in(
    work: Path, source: str, command: list[str], timeout_s: float, toolchain: list[Path]
) -> _Run:
    """Run nvcc on `source` in `work`, confined to it and the `toolchain` folders (`confined.py`; its
    temporary files in `work` too), dumping the SASS alongside once the cubin is complete."""
    (work / SOURCE_NAME).write_text(source)
    (work / "keep").mkdir()
    (work / "tmp").mkdir()
    started_sass = asyncio.Event()
    early_sass = asyncio.create_task(_disassemble_when_ready(work, started_sass))
    run: _Run | None = None
    try:
        env = {**os.environ, "TMPDIR": str(work / "tmp")}
        run = await _run([*launcher(work, toolchain), *command], work, timeout_s, env)
    finally:
        # Keep a disassembly under way after a good compile; drop it otherwise.
        if run is None or run.returncode != 0 or not started_sass.is_set():
            early_sass.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await early_sass
    return run


def _compile_failed(stage: BuildStage, returncode: int, output: str, work: Path) -> None:
    """nvcc exited non-zero: a compile error with its first error lines."""
    stage.status = Status.compile_error
    stage.errors = first_errors(output) or [output.strip().splitlines()[-1] if output.strip() else ""]
    stage.message = f"nvcc failed (exit {returncode}): {stage.errors[0]}"
    if (work / "keep" / PTX_NAME).is_file():  # ptxas rejected it: its errors cite PTX lines
        (work / "keep" / PTX_NAME).replace(work / PTX_NAME)
        stage.ptx_path = PTX_NAME


def _judge_library(
    stage: BuildStage, work: Path, source: str, toolchain: BuildToolchain, target: Target, foreign: list[str]
) -> bool:
    """nvcc succeeded: keep its PTX and cubin and judge the library it linked (and `foreign`, the library
    kernels its module holds). False when the verdict is an infrastructure error (an artifact missing, no
    binutils), which is not cached."""
    for name, found in (
        (PTX_NAME, work / "keep" / PTX_NAME),
        (CUBIN_NAME, work / "keep" / CUBIN_NAME),
    ):
        if not found.is_file():
            stage.status = Status.infrastructure_error
            stage.message = f"nvcc succeeded but left no {name}"
            return False
        found.replace(work / name)
    try:
        link = check_library(work / LIBRARY_NAME, EXPORT_SYMBOL)
    except BinutilsMissing as exc:
        stage.status = Status.infrastructure_error
        stage.message = str(exc)
        return False
    if link.denials:
        _refuse(stage, link, work, source, toolchain)
    elif foreign:
        names = demangle(foreign)
        stage.status = Status.banned
        stage.message = (
            f"the module holds {len(foreign)} kernel(s) of a library's own templates "
            f"({names.get(foreign[0], foreign[0])[:200]}): CUB's device-wide algorithms, Thrust and CUTLASS "
            "run the library's kernels (instead: write the kernel yourself; CUB's block- and warp-level "
            "primitives inside your own kernels are fine)"
        )
        stage.errors = [stage.message]
    elif link.system_calls:
        stage.status = Status.banned
        stage.message = (
            f"the library's machine code holds {link.system_calls} system call instruction(s) (syscall, "
            "sysenter or int 0x80 in inline assembly): host code reaches the kernel only through the C runtime"
        )
        stage.errors = [stage.message]
    elif not link.exports_run:
        stage.status = Status.compile_error
        stage.message = f"the library exports no `run`: {EXPORT_HINT}"
        stage.errors = [stage.message]
    else:
        stage.status = Status.passed
        stage.message = f"built for {target.sm}{warning_summary(stage.warnings)}"
    stage.library_path, stage.ptx_path, stage.cubin_path = LIBRARY_NAME, PTX_NAME, CUBIN_NAME
    return True


def _store(stage: BuildStage, work: Path, entry: Path, started: float) -> BuildStage:
    """Record the finished build as the cache entry `entry` and return it as read back from there."""
    shutil.rmtree(work / "keep", ignore_errors=True)
    (work / RECORD_NAME).write_text(stage.model_dump_json(indent=1))
    entry.parent.mkdir(parents=True, exist_ok=True)
    try:
        work.rename(entry)
    except OSError:
        pass  # another evaluation of the same source finished first: its entry is as good
    final = _load_cached(entry) or stage
    final.cache_hit = False
    final.duration_s = time.perf_counter() - started
    return final


def _refuse(stage: BuildStage, link: LinkReport, work: Path, source: str, toolchain: BuildToolchain) -> None:
    """A refused import: `banned` or `unsupported`, each denial with where it came from and what instead."""
    names = demangle([d.symbol.split("@", 1)[0] for d in link.denials])
    lines: list[str] = []
    for found in link.denials[:MAX_ERRORS]:
        bare = found.symbol.split("@", 1)[0]
        where = origin(
            found.symbol,
            link.disassembly,
            work / LIBRARY_NAME,
            source,
            SOURCE_NAME,
            [toolchain.tvm_ffi_include],
        )
        lines.append(
            f"{where.describe() + ': ' if where else ''}the library imports {names.get(bare, bare)}, which "
            f"{found.why} (instead: {found.instead})"
        )
    first = link.denials[0]
    stage.status = Status.banned if first.refusal == Refusal.banned else Status.unsupported
    more = len(link.denials) - 1
    stage.message = f"{'banned' if first.refusal == Refusal.banned else 'not supported here'}: {lines[0]}" + (
        f" (and {more} more)" if more else ""
    )
    stage.errors = lines


async def with_negated(stage: BuildStage, target: Target, cache_dir: Path | None = None) -> BuildStage:
    """A passed build with its library's negated twin (`negated.py`) named, made into its cache entry on
    first use (the GPU tiers' executors ask for it; the static tier never needs it), or with why there is
    none."""
    if stage.status != Status.passed or stage.library_path is None or stage.ptx_path is None:
        return stage
    entry = Path(stage.library_path).parent

    async def make(work: Path) -> Twin:
        try:
            toolchain = build_toolchain()
        except ToolchainMissing as exc:
            return Twin(str(exc))
        return await build_negated(
            entry,
            work,
            nvcc_command(target, toolchain),
            (LIBRARY_NAME, PTX_NAME, CUBIN_NAME),
            (f"keep/{PTX_NAME}", f"keep/{CUBIN_NAME}"),
        )

    made = entry / NEGATED_DIR / LIBRARY_NAME
    return await in_cache_entry(stage, entry, made, cache_dir or cache_root(), make)


async def build(
    source: str, target: Target, timeout_s: float = 180.0, cache_dir: Path | None = None
) -> BuildStage:
    """The build stage: the ban scan, then nvcc through the cache."""
    started = time.perf_counter()
    findings = scan(source)
    if findings:
        return refused_build(findings, started, MAX_ERRORS)
    stage = await compile_source(source, target, timeout_s, cache_dir)
    stage.duration_s = time.perf_counter() - started
    return stage
