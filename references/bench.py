"""Build, check and time the reference kernels against cuBLAS / cuDNN on one GPU.

Standalone on purpose (torch + apache-tvm-ffi + nvcc only) so it runs on a bare GPU host:

    python3 references/bench.py                 # everything
    python3 references/bench.py --only gemm      # cases whose name contains "gemm"

Each kernel is compiled with the evaluator's nvcc line (plus -D options for variants), loaded with
tvm_ffi.load_module, checked on fresh random inputs against an fp32 torch reference (outputs
pre-filled with NaN; an element fails when |x-y| > 1e-2 and |x-y|/(|y|+eps) > 1e-2), then timed
interleaved with its baseline: CUDA events, L2 flushed before every call, warm-up, median.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
import tvm_ffi
import tvm_ffi.libinfo

HERE = Path(__file__).resolve().parent
ATOL = RTOL = 1e-2
EPS = 1e-6


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str  # path relative to references/
    defines: tuple[str, ...] = ()


@dataclass
class Case:
    name: str
    kernel: Kernel
    family: str  # gemm | fwd | bwd
    shape: dict[str, int]
    causal: bool = False
    check_shapes: list[dict[str, int]] = field(default_factory=list)
    headline_trials: int = 2
    time_it: bool = True


def nvcc_path() -> str:
    for cand in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if cand and Path(cand).exists():
            return cand
    raise SystemExit("nvcc not found")


def build(kernel: Kernel, out_dir: Path) -> tuple[Kernel, Path | None, str]:
    inc = tvm_ffi.libinfo.find_include_path()
    dlpack = tvm_ffi.libinfo.find_dlpack_include_path()
    lib = Path(tvm_ffi.libinfo.find_libtvm_ffi()).parent
    out = out_dir / f"{kernel.name}.so"
    cmd = [
        nvcc_path(),
        "-gencode",
        "arch=compute_90a,code=sm_90a",
        "-O3",
        "-lineinfo",
        "--ptxas-options=-v",
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "-std=c++17",
        f"-I{inc}",
        f"-I{dlpack}",
        f"-L{lib}",
        "-Xlinker",
        f"-rpath={lib}",
    ]
    for stub in ("/usr/local/cuda/lib64/stubs", "/usr/local/cuda/targets/x86_64-linux/lib/stubs"):
        if Path(stub).is_dir():
            cmd.append(f"-L{stub}")
    cmd += [
        "-ltvm_ffi",
        "-lcuda",
        *[f"-D{d}" for d in kernel.defines],
        str(HERE / kernel.source),
        "-o",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    report = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return kernel, None, report
    return kernel, out, report


def ptxas_summary(report: str) -> str:
    regs = re.findall(r"Used (\d+) registers", report)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    warn = [line for line in report.splitlines() if "warning" in line.lower()]
    spill_total = sum(int(a) + int(b) for a, b in spills)
    return f"regs={'/'.join(regs)} spill_bytes={spill_total}" + (f" WARN={warn[:2]}" if warn else "")


# ---------------------------------------------------------------- references and baselines


def gemm_inputs(shape: dict[str, int], seed: int) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(shape["M"], shape["K"], device="cuda", generator=g).to(torch.bfloat16)
    b = torch.randn(shape["N"], shape["K"], device="cuda", generator=g).to(torch.bfloat16)
    return [a, b]


def gemm_outputs(shape: dict[str, int]) -> list[torch.Tensor]:
    return [torch.full((shape["M"], shape["N"]), float("nan"), device="cuda", dtype=torch.bfloat16)]


def gemm_reference(a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    return [a.float() @ b.float().T]


def attn_inputs(shape: dict[str, int], seed: int, backward: bool, causal: bool) -> list[torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    dims = (shape["B"], shape["H"], shape["S"], shape["D"])
    q, k, v = (torch.randn(dims, device="cuda", generator=g).to(torch.bfloat16) for _ in range(3))
    if not backward:
        return [q, k, v]
    o, lse = attn_reference(q, k, v, causal)
    do = torch.randn(dims, device="cuda", generator=g).to(torch.bfloat16)
    return [q, k, v, o.to(torch.bfloat16), do, lse]


def attn_outputs(shape: dict[str, int], backward: bool) -> list[torch.Tensor]:
    dims = (shape["B"], shape["H"], shape["S"], shape["D"])
    if backward:
        return [torch.full(dims, float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    return [
        torch.full(dims, float("nan"), device="cuda", dtype=torch.bfloat16),
        torch.full(dims[:3], float("nan"), device="cuda", dtype=torch.float32),
    ]


def _scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        keep = torch.ones(n, n, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return s


def attn_reference(q, k, v, causal):
    """fp32 forward, one batch entry at a time to bound memory."""
    outs, lses = [], []
    for i in range(q.shape[0]):
        s = _scores(q[i], k[i], causal)
        lse = torch.logsumexp(s, dim=-1)
        outs.append(torch.exp(s - lse.unsqueeze(-1)) @ v[i].float())
        lses.append(lse)
        del s
    return torch.stack(outs), torch.stack(lses)


def attn_bwd_reference(q, k, v, o, do, lse, causal):
    scale = 1.0 / math.sqrt(q.shape[-1])
    dq, dk, dv = [], [], []
    for i in range(q.shape[0]):
        p = torch.exp(_scores(q[i], k[i], causal) - lse[i].unsqueeze(-1))
        dof = do[i].float()
        dv.append(p.transpose(-1, -2) @ dof)
        dp = dof @ v[i].float().transpose(-1, -2)
        delta = (dof * o[i].float()).sum(-1, keepdim=True)
        ds = p * (dp - delta)
        del p, dp
        dq.append(ds @ k[i].float() * scale)
        dk.append(ds.transpose(-1, -2) @ q[i].float() * scale)
        del ds
    return [torch.stack(dq), torch.stack(dk), torch.stack(dv)]


def cudnn_fwd(causal: bool) -> Callable[..., object]:
    op = getattr(torch.ops.aten, "_scaled_dot_product_cudnn_attention", None)

    def with_lse(q, k, v):
        return op(q, k, v, None, True, 0.0, causal, False)

    def plain(q, k, v):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return with_lse if op is not None else plain


def cudnn_bwd(causal: bool, q, k, v, do):
    """A closure that runs only cuDNN's backward (the forward graph is built once)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qr, kr, vr = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        out = F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)

    def run():
        torch.autograd.grad(out, (qr, kr, vr), do, retain_graph=True)

    return run


# ---------------------------------------------------------------- checking and timing


def compare(got: torch.Tensor, want: torch.Tensor) -> tuple[bool, str]:
    g, w = got.float(), want.float()
    if not torch.isfinite(g).all():
        return False, f"non-finite values: {int((~torch.isfinite(g)).sum())}"
    diff = (g - w).abs()
    bad = (diff > ATOL) & (diff / (w.abs() + EPS) > RTOL)
    nbad = int(bad.sum())
    return nbad == 0, f"max_abs={diff.max().item():.3e} bad={nbad}/{g.numel()}"


def flops(case: Case, shape: dict[str, int]) -> float:
    if case.family == "gemm":
        return 2.0 * shape["M"] * shape["N"] * shape["K"]
    s = shape["S"]
    pairs = s * (s + 1) / 2 if case.causal else s * s
    per = 4.0 if case.family == "fwd" else 10.0
    return per * shape["B"] * shape["H"] * shape["D"] * pairs


def time_pair(
    fn_a: Callable[[], object], fn_b: Callable[[], object], warmup: int, iters: int
) -> tuple[list, list]:
    flush = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn_a()
        fn_b()
    torch.cuda.synchronize()
    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(iters)]
    for e in ev:
        flush.zero_()
        e[0].record()
        fn_a()
        e[1].record()
        flush.zero_()
        e[2].record()
        fn_b()
        e[3].record()
    torch.cuda.synchronize()
    return [e[0].elapsed_time(e[1]) for e in ev], [e[2].elapsed_time(e[3]) for e in ev]


def run_case(case: Case, module, args) -> dict:
    fn = module["run"]
    bwd = case.family == "bwd"
    result: dict = {"case": case.name, "kernel": case.kernel.name, "shape": case.shape}
    # correctness: every check shape with a fresh seed, plus a second seed on the headline shape
    checks = []
    for i, shape in enumerate([*case.check_shapes, *[case.shape] * case.headline_trials]):
        seed = 1234 + 17 * i
        if case.family == "gemm":
            ins = gemm_inputs(shape, seed)
            outs = gemm_outputs(shape)
        else:
            ins = attn_inputs(shape, seed, bwd, case.causal)
            outs = attn_outputs(shape, bwd)
        keep = [t.clone() for t in ins]
        fn(*ins, *outs)
        torch.cuda.synchronize()
        if case.family == "gemm":
            want = gemm_reference(*ins)
        elif case.family == "fwd":
            want = list(attn_reference(*ins, case.causal))
        else:
            want = attn_bwd_reference(*ins, case.causal)
        oks = []
        for name, got, ref in zip(("out0", "out1", "out2"), outs, want):
            ok, msg = compare(got, ref)
            oks.append(ok)
            checks.append(f"{shape} {name}: {'ok' if ok else 'FAIL'} {msg}")
        unchanged = all(torch.equal(a, b) for a, b in zip(ins, keep))
        if not unchanged:
            checks.append(f"{shape}: inputs modified")
        oks.append(unchanged)
        result.setdefault("passed", True)
        result["passed"] = result["passed"] and all(oks)
        del ins, outs, want, keep
        torch.cuda.empty_cache()
    result["checks"] = checks
    for line in checks:
        print(f"    {case.name}: {line}", flush=True)
    if not case.time_it or not result["passed"]:
        return result

    shape = case.shape
    if case.family == "gemm":
        ins = gemm_inputs(shape, 99)
        outs = gemm_outputs(shape)
        a, b = ins
        c_ref = torch.empty_like(outs[0])
        base = lambda: torch.matmul(a, b.T, out=c_ref)
    elif case.family == "fwd":
        ins = attn_inputs(shape, 99, False, case.causal)
        outs = attn_outputs(shape, False)
        cud = cudnn_fwd(case.causal)
        base = lambda: cud(*ins)
    else:
        ins = attn_inputs(shape, 99, True, case.causal)
        outs = attn_outputs(shape, True)
        base = cudnn_bwd(case.causal, ins[0], ins[1], ins[2], ins[4])
    cand = lambda: fn(*ins, *outs)
    t_c, t_b = time_pair(cand, base, args.warmup, args.iters)
    mc, mb = statistics.median(t_c), statistics.median(t_b)
    work = flops(case, shape)
    result.update(
        ms=mc,
        base_ms=mb,
        tflops=work / mc / 1e9,
        base_tflops=work / mb / 1e9,
        ratio=mb / mc,
        spread_ms=[min(t_c), max(t_c)],
        base_spread_ms=[min(t_b), max(t_b)],
    )
    return result


# ---------------------------------------------------------------- the cases


def cases() -> list[Case]:
    g = {"M": 8192, "N": 7168, "K": 5120}
    tails = [{"M": 1000, "N": 7168, "K": 5120}, {"M": 256, "N": 7168, "K": 5120}]
    att = {"B": 4, "H": 48, "S": 4096, "D": 128}
    small = [{"B": 2, "H": 4, "S": 512, "D": 128}, {"B": 1, "H": 3, "S": 1024, "D": 128}]

    def gemm(name: str, src: str, *defines: str, checks: list | None = None) -> Case:
        kernel = Kernel(re.sub(r"[^A-Za-z0-9]+", "_", name), src, defines)
        return Case(name, kernel, "gemm", g, check_shapes=tails if checks is None else checks)

    out = [
        gemm("gemm/01_simt", "gemm/01_simt.cu", checks=tails[:1]),
        gemm("gemm/02_wgmma", "gemm/02_wgmma.cu", checks=tails[:1]),
        gemm("gemm/03_tma_pipeline", "gemm/03_tma_pipeline.cu"),
        gemm("gemm/04 epi=direct", "gemm/04_ws_persistent.cu", "GEMM_TMA_EPILOGUE=0", "GEMM_STAGES=4"),
        gemm("gemm/04 epi=tma1 st=3", "gemm/04_ws_persistent.cu", "GEMM_TMA_EPILOGUE=1", "GEMM_STAGES=3"),
        gemm("gemm/04 epi=tma2 st=4", "gemm/04_ws_persistent.cu", "GEMM_TMA_EPILOGUE=2", "GEMM_STAGES=4"),
        gemm("gemm/04 epi=tma4 st=4", "gemm/04_ws_persistent.cu", "GEMM_TMA_EPILOGUE=4", "GEMM_STAGES=4"),
    ]
    variants = {
        "base": ("ATTN_OVERLAP=0", "ATTN_PINGPONG=0"),
        "overlap": ("ATTN_OVERLAP=1", "ATTN_PINGPONG=0"),
        "pingpong": ("ATTN_OVERLAP=0", "ATTN_PINGPONG=1"),
        "pp+ov": ("ATTN_OVERLAP=1", "ATTN_PINGPONG=1"),
    }
    for causal in (False, True):
        suffix = "_causal" if causal else ""
        for label, defines in variants.items():
            name = f"attn/fwd{suffix} {label}"
            kernel = Kernel(
                re.sub(r"[^A-Za-z0-9]+", "_", name), f"attention/mha_fwd_d128{suffix}.cu", defines
            )
            out.append(Case(name, kernel, "fwd", att, causal, check_shapes=small))
    for causal in (False, True):
        suffix = "_causal" if causal else ""
        kernel = Kernel(f"bwd{suffix}", f"attention/mha_bwd_d128{suffix}.cu")
        out.append(
            Case(f"attn/bwd{suffix}", kernel, "bwd", att, causal, check_shapes=small, headline_trials=4)
        )
    return out


def child(case_name: str, args) -> int:
    """Run one case in this process (the parent gives each case its own process and time limit)."""
    case = next(c for c in cases() if c.name == case_name)
    path = Path(args.build_dir) / f"{case.kernel.name}.so"
    try:
        res = run_case(case, tvm_ffi.load_module(str(path)), args)
    except Exception as exc:  # noqa: BLE001 - a kernel fault ends this case only
        res = {"case": case.name, "passed": False, "checks": [f"error: {exc!r}"[:500]]}
        print(f"    {case.name}: ERROR {exc!r}"[:800], flush=True)
    Path(args.result).write_text(json.dumps(res))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run cases whose name contains this")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--case-timeout", type=int, default=150)
    parser.add_argument("--build-dir", default="/tmp/refbuild")
    parser.add_argument("--json", default=os.environ.get("OUT", "/tmp") + "/bench.json")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        return child(args.case, args)

    todo = [c for c in cases() if args.only in c.name]
    kernels = {c.kernel.name: c.kernel for c in todo}
    out_dir = Path(args.build_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    sha = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE, check=False
    ).stdout.strip()
    header = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_sha": sha or os.environ.get("GIT_SHA", "unknown"),
        "device": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
    }
    print(json.dumps(header), flush=True)

    built: dict[str, Path | None] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 4)) as pool:
        for kernel, path, report in pool.map(lambda k: build(k, out_dir), kernels.values()):
            built[kernel.name] = path
            print(f"build {kernel.name:14s} {'ok  ' if path else 'FAIL'} {ptxas_summary(report)}", flush=True)
            if path is None:
                print(report[-3000:], flush=True)

    results = []
    for i, case in enumerate(todo):
        if built.get(case.kernel.name) is None:
            results.append({"case": case.name, "passed": False, "checks": ["build failed"]})
            continue
        print(f"== {case.name}", flush=True)
        result_file = out_dir / f"result_{i}.json"
        result_file.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            __file__,
            "--case",
            case.name,
            "--result",
            str(result_file),
            "--build-dir",
            str(out_dir),
            "--warmup",
            str(args.warmup),
            "--iters",
            str(args.iters),
        ]
        try:
            subprocess.run(cmd, timeout=args.case_timeout, check=False)
        except subprocess.TimeoutExpired:
            print(f"    {case.name}: TIMEOUT after {args.case_timeout} s", flush=True)
        if result_file.exists():
            results.append(json.loads(result_file.read_text()))
        else:
            results.append({"case": case.name, "passed": False, "checks": ["no result (crash or timeout)"]})

    print("\n" + json.dumps(header))
    print(
        f"{'case':28s} {'pass':5s} {'ms':>9s} {'TFLOP/s':>8s} {'base ms':>9s} {'base TF':>8s} {'ratio':>6s}"
    )
    for r in results:
        if "ms" in r:
            print(
                f"{r['case']:28s} {'yes' if r['passed'] else 'NO':5s} {r['ms']:9.4f} {r['tflops']:8.1f} "
                f"{r['base_ms']:9.4f} {r['base_tflops']:8.1f} {r['ratio']:6.3f}"
            )
        else:
            print(f"{r['case']:28s} {'yes' if r.get('passed') else 'NO':5s}")
    Path(args.json).write_text(json.dumps({"header": header, "results": results}, indent=1))
    return 0 if all(r.get("passed") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
