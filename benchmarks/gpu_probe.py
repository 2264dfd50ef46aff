"""Probe a GPU host for what the GPU tiers rely on, and record the raw tool output for the parsers' tests.

Run on the GPU machine: `python benchmarks/gpu_probe.py OUTDIR LIBDIR` where LIBDIR holds built corpus
libraries (`NAME.so`). Prints a short report; writes raw ncu/CUPTI output under OUTDIR.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path


def call_once(lib: str, m: int) -> None:
    import torch
    import tvm_ffi

    mod = tvm_ffi.load_module(lib)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, 5120, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16, generator=gen)
    c = torch.full((m, 7168), float("nan"), device="cuda", dtype=torch.bfloat16)
    mod.run(a, b, c)
    torch.cuda.synchronize()
    ref = torch.matmul(a, b.T)
    print("max abs err", (c.float() - ref.float()).abs().max().item(), flush=True)


def sh(cmd: str, timeout: float = 300) -> tuple[int, str, float]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, shell=True, check=False, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start


def main(out: Path, libdir: Path) -> None:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, object] = {}
    props = torch.cuda.get_device_properties(0)
    report["device"] = {
        "name": props.name,
        "sms": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }
    print(json.dumps(report["device"]), flush=True)
    ncu = shutil.which("ncu") or next(iter(sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"))), None)
    report["ncu"] = str(ncu)
    print("ncu:", ncu, sh(f"{ncu} --version")[1].strip().splitlines()[-1:], flush=True)
    rc, text, _ = sh(f"{ncu} --query-metrics --chip gh100")
    (out / "ncu_query_metrics.txt").write_text(text)
    for key in (
        "sass__thread_inst_executed_true_per_opcode",
        "sass__inst_executed_per_opcode",
        "hgmma_src_bf16",
    ):
        print("query", key, [line[:120] for line in text.splitlines() if key in line][:4], flush=True)

    # Each library once, plain, to see what errors look like.
    for stem in (
        "wgmma_gemm",
        "illegal_address",
        "device_trap",
        "infinite_loop",
        "host_exit",
        "dlopen_cublas",
    ):
        lib = libdir / f"{stem}.so"
        rc, text, secs = sh(f"timeout 10 {sys.executable} {__file__} call {lib} 256", timeout=60)
        tail = [line for line in text.strip().splitlines() if line.strip()][-3:]
        print(f"call {lib.stem}: rc={rc} {secs:.1f}s {tail}", flush=True)

    metrics = "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum,sass__thread_inst_executed_true_per_opcode,sass__inst_executed_per_opcode,smsp__inst_executed.sum,gpu__time_duration.sum"
    for name, regex in (("wgmma_gemm", "wgmma_gemm_kernel"), ("token_wgmma", "simt_gemm_kernel")):
        lib = libdir / f"{name}.so"
        base = f"{ncu} --clock-control none --target-processes all --kernel-name-base mangled --kernel-name regex:{regex}"
        rc, text, secs = sh(
            f"{base} --metrics {metrics} -o {out}/{name} -f {sys.executable} {__file__} call {lib} 256"
        )
        print(f"ncu metrics {name}: rc={rc} {secs:.1f}s", text.strip().splitlines()[-3:], flush=True)
        (out / f"{name}_ncu_run.txt").write_text(text)
        for flavour in ("values", "details"):
            rc, text, _ = sh(
                f"{ncu} -i {out}/{name}.ncu-rep --page raw --csv --print-units base --print-metric-instances {flavour}"
            )
            (out / f"{name}_raw_{flavour}.csv").write_text(text)
            print(f"raw {flavour}: rc={rc}", text[:1500], flush=True)
        rc, text, secs = sh(
            f"{base} --section SourceCounters -o {out}/{name}_src -f {sys.executable} {__file__} call {lib} 256"
        )
        print(f"ncu source {name}: rc={rc} {secs:.1f}s", text.strip().splitlines()[-2:], flush=True)
        rc, text, _ = sh(f"{ncu} -i {out}/{name}_src.ncu-rep --page source --csv --print-source sass")
        (out / f"{name}_source_sass.csv").write_text(text)
        print(f"source page: rc={rc}", text[:1500], flush=True)
    # Cost of an ncu run with every kernel filtered out (the floor of the dynamic tier's overhead).
    rc, text, secs = sh(
        f"{ncu} --clock-control none --kernel-name regex:no_such_kernel {sys.executable} -c 'import torch; torch.zeros(1, device=\"cuda\")'"
    )
    print(f"ncu floor: rc={rc} {secs:.1f}s", flush=True)
    rc, text, secs = sh(f"{sys.executable} -c 'import torch; torch.zeros(1, device=\"cuda\")'")
    print(f"python+torch+cuda floor: rc={rc} {secs:.1f}s", flush=True)
    (out / "report.json").write_text(json.dumps(report, indent=1))


def cupti_probe(libdir: Path) -> None:
    """Kernel activity with external correlation, stream ids and the host timestamp, for two libraries."""
    import torch
    import tvm_ffi
    from cupti import cupti

    records: list[dict] = []

    def requested():
        return 8 * 1024 * 1024, 0

    def completed(activities):
        for act in activities:
            if act.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                records.append(
                    {
                        "k": "kernel",
                        "name": act.name,
                        "start": act.start,
                        "end": act.end,
                        "corr": act.correlation_id,
                        "stream": act.stream_id,
                    }
                )
            elif act.kind == cupti.ActivityKind.EXTERNAL_CORRELATION:
                records.append(
                    {
                        "k": "ext",
                        "corr": act.correlation_id,
                        "ext": act.external_id,
                        "ext_kind": act.external_kind,
                    }
                )

    cupti.activity_register_callbacks(requested, completed)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    cupti.activity_enable(cupti.ActivityKind.EXTERNAL_CORRELATION)
    kind = cupti.ExternalCorrelationKind.CUSTOM0
    a = torch.randn(2048, 5120, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(7168, 5120, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(2048, 7168, device="cuda", dtype=torch.bfloat16)
    stamps = {}
    for i, name in enumerate(("wgmma_gemm", "private_stream", "dlopen_cublas")):
        mod = tvm_ffi.load_module(str(libdir / f"{name}.so"))
        c.fill_(float("nan"))
        cupti.activity_push_external_correlation_id(kind, 100 + i)
        mod.run(a, b, c)
        stamps[name] = cupti.get_timestamp()
        popped = cupti.activity_pop_external_correlation_id(kind)
        torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        cupti.activity_push_external_correlation_id(kind, 200)
        mod = tvm_ffi.load_module(str(libdir / "wgmma_gemm.so"))
        mod.run(a, b, c)
        cupti.activity_pop_external_correlation_id(kind)
    torch.cuda.synchronize()
    cupti.activity_push_external_correlation_id(kind, 300)
    torch.matmul(a, b.T)
    cupti.activity_pop_external_correlation_id(kind)
    torch.cuda.synchronize()
    cupti.activity_flush_all(1)
    print(
        "popped",
        popped,
        "stamps",
        stamps,
        "default stream",
        torch.cuda.current_stream().cuda_stream,
        "side",
        side.cuda_stream,
        flush=True,
    )
    for rec in records:
        print("cupti", json.dumps(rec), flush=True)


def sdpa_probe() -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.randn(4, 48, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (False, True):
        try:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize()
            print("sdpa cudnn ok causal", causal, flush=True)
        except Exception as exc:  # noqa: BLE001 - a probe reports whatever fails
            print("sdpa cudnn FAILED", causal, type(exc).__name__, str(exc)[:300], flush=True)
    try:
        outs = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, False, False)
        print("aten cudnn fwd outputs", [getattr(o, "shape", o) for o in outs], flush=True)
        o, lse, cq, ck, mq, mk, seed, off, _dbg = outs
        do = torch.randn_like(o)
        grads = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            do, q, k, v, o, lse, seed, off, torch.empty(0, device="cuda"), cq, ck, mq, mk, 0.0, False
        )
        torch.cuda.synchronize()
        print("aten cudnn bwd ok", [g.shape for g in grads], flush=True)
    except Exception as exc:  # noqa: BLE001
        print("aten cudnn direct FAILED", type(exc).__name__, str(exc)[:400], flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "call":
        call_once(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "cupti":
        cupti_probe(Path(sys.argv[2]))
    elif sys.argv[1] == "sdpa":
        sdpa_probe()
    else:
        main(Path(sys.argv[1]), Path(sys.argv[2]))
