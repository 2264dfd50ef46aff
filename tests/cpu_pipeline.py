"""The judging pipeline on the CPU: real worker, runner and judge processes, real C++ candidates with
the kernel ABI built by the system compiler against TVM-FFI, on a task spec with float32 CPU tensors.

Only what a CPU cannot have is absent: CUDA IPC (the exchange goes through /dev/shm), CUPTI (host clocks),
Nsight Compute and compute-sanitizer.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import shutil
import subprocess
from pathlib import Path

from workbench.evaluate.gpu.worker import Worker

HOSTILE = Path(__file__).parent / "hostile"


def tvm_ffi_paths() -> tuple[Path, Path]:
    spec = importlib.util.find_spec("tvm_ffi")
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    return package / "include", package / "lib"


def build_cpu(defines: dict[str, str], folder: Path) -> Path:
    """The CPU GEMM with `defines` prepended, as a shared library (cached by content in `folder`)."""
    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler, "a C++ compiler is needed"
    prelude = "".join(f"#define {name} {value}\n" for name, value in defines.items())
    source = prelude + (HOSTILE / "cpu_gemm.cc").read_text()
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    library = folder / f"cpu_gemm_{key}.so"
    if library.exists():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"cpu_gemm_{key}.cc"
    path.write_text(source)
    include, lib = tvm_ffi_paths()
    subprocess.run(
        [compiler, "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{include}", f"-I{HOSTILE}", str(path),
         f"-L{lib}", f"-Wl,-rpath,{lib}", "-ltvm_ffi", "-o", str(library)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return library


def cpu_spec(m: int = 48, n: int = 32, k: int = 16) -> dict:
    definition = {
        "name": "cpu_gemm",
        "op_type": "gemm",
        "axes": {
            "M": {"type": "var"},
            "N": {"type": "const", "value": n},
            "K": {"type": "const", "value": k},
        },
        "inputs": {
            "A": {"shape": ["M", "K"], "dtype": "float32"},
            "B": {"shape": ["N", "K"], "dtype": "float32"},
        },
        "outputs": {"C": {"shape": ["M", "N"], "dtype": "float32"}},
        "reference": "def run(A, B):\n    return A @ B.T\n",
    }
    return {
        "task": "cpu_gemm",
        "target": "hopper",
        "device": "cpu",
        "definition": definition,
        "axes": {"M": m, "N": n, "K": k},
        "workload_uuid": "cpu-gemm",
        "workload_inputs": {},
        "seed": 7,
        "family": "gemm",
        "causal": False,
        "derived_inputs": [],
        "atol": 1e-2,
        "rtol": 1e-2,
        "flops": 2.0 * m * n * k,
        "min_bytes": 4.0 * (m * k + n * k + m * n),
        "families": {},
        "required_family": "GMMA",
        "smallest": {"axes": {"M": m, "N": n, "K": k}, "flops": 2.0 * m * n * k},
    }


class CpuWorker:
    """A real `Worker` in this process, its children real processes; replies collected as dicts."""

    def __init__(self) -> None:
        self.out = io.StringIO()
        self.worker = Worker(self.out)

    def evaluate(self, library: Path, stages: tuple[str, ...] = ("correctness", "timing"), **extra) -> dict:
        start = self.out.tell()
        self.worker.handle(
            {
                "op": "evaluate",
                "id": 1,
                "library": str(library),
                "kernels": None,
                "spec": extra.pop("spec", None) or cpu_spec(),
                "stages": list(stages),
                "pace": {"warmup_s": 0.0, "timed_s": 0.0},
                "warmup": 2,
                "iterations": 6,
                **extra,
            }
        )
        self.out.seek(start)
        replies = [json.loads(line) for line in self.out.read().splitlines()]
        return next(r for r in replies if r.get("type") == "result")

    def close(self) -> None:
        self.worker.close()
