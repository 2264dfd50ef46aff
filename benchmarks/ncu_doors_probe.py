"""Which doors a process Nsight Compute profiles can have closed (run on the GPU host).

    python3 benchmarks/ncu_doors_probe.py

Each variant runs one bf16 matmul between cudaProfilerStart/Stop under the dynamic tier's own ncu
command, with that variant's doors closed after CUDA's start (as the profiled child closes them), and
prints ncu's exit status, whether the report has the kernel, and ncu's first error. Then: may a process
without capabilities open a non-dumpable parent's pipe through /proc?
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from workbench.evaluate.gpu import sandbox
from workbench.evaluate.gpu.profile import ncu_command

VARIANTS = ("none", "seccomp_no_writes", "landlock_lock_dev", "landlock_tmp_dev", "product")


def lock_folders() -> list[str]:
    folders = []
    for base in dict.fromkeys(("/tmp", tempfile.gettempdir())):
        folder = os.path.join(base, "nvidia")
        os.makedirs(folder, exist_ok=True)
        folders.append(folder)
    return folders


def child(variant: str) -> None:
    import torch

    x = torch.ones(512, 512, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    if variant == "landlock_lock_dev":
        sandbox.confine_writes([*lock_folders(), "/dev"])
    if variant == "landlock_tmp_dev":
        sandbox.confine_writes(["/tmp", "/dev"])
    if variant == "seccomp_no_writes":
        sandbox.close_doors(no_writes=True)
    if variant == "product":  # the profiled child's own doors, its TMPDIR a folder of its own
        from workbench.evaluate.gpu.candidate_entry import close_tool_doors

        close_tool_doors("ncu")
    torch.cuda.profiler.start()
    (x @ x).sum().item()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    sys.stdout.flush()
    os._exit(0)


def proc_probe() -> None:
    """Child without capabilities tries the non-dumpable parent's stdout through /proc."""
    if len(sys.argv) > 2:
        try:
            sandbox.drop_capabilities()
            open(f"/proc/{os.getppid()}/fd/1", "w").close()
            print("open: the parent's pipe was opened for writing")
        except OSError as exc:
            print(f"closed: {exc}")
        return
    sandbox.not_dumpable()
    done = subprocess.run(
        [sys.executable, __file__, "proc", "child"], check=False, capture_output=True, text=True
    )
    print(
        "non-dumpable parent's fd 1 from a child without capabilities:",
        done.stdout.strip(),
        done.stderr[-300:],
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        child(sys.argv[2])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "proc":
        proc_probe()
        return
    print(f"kernel {platform.release()}, uid {os.getuid()}, Landlock ABI {sandbox.landlock_abi()}")
    for path in ("/proc/sys/kernel/yama/ptrace_scope", "/sys/kernel/security/lsm"):
        print(path, Path(path).read_text().strip() if Path(path).exists() else "absent")
    ncu = shutil.which("ncu")
    for variant in VARIANTS:
        logdir = tempfile.mkdtemp(prefix="ncu-probe-")
        log = os.path.join(logdir, "ncu.log")
        command = ncu_command(ncu, log, "hopper", [sys.executable, __file__, "child", variant])
        scratch = tempfile.mkdtemp(prefix="ncu-scratch-")
        marker = Path(scratch) / "marker"
        marker.touch()
        env = {**os.environ, "TMPDIR": scratch} if variant == "product" else None
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, env=env)
        if variant == "none":  # where an unconfined profiled call wrote
            found = subprocess.run(
                [
                    "find",
                    "/tmp",
                    "/dev/shm",
                    "/root",
                    "/var/tmp",
                    "-newer",
                    str(marker),
                    "-not",
                    "-path",
                    f"{logdir}*",
                ],
                check=False,
                capture_output=True,
                text=True,
            )
            print("written during the unconfined run:", found.stdout.split()[:12])
        report = Path(log).read_text(errors="replace") if Path(log).exists() else ""
        errors = [
            line
            for line in (report + done.stdout + done.stderr).splitlines()
            if "ERROR" in line or "Error" in line
        ]
        kernel = any(
            "gemm" in line or "nvjet" in line or "Kernel" in line for line in report.splitlines()[1:]
        )
        print(f"{variant:>32}: ncu exit {done.returncode}, kernel in report {kernel}, "
              f"{errors[0][:200] if errors else 'no error'}")  # fmt: skip
    print("lock folder now:", sorted(str(p) for p in Path("/tmp/nvidia").rglob("*"))[:6])
    proc_probe()


if __name__ == "__main__":
    main()
