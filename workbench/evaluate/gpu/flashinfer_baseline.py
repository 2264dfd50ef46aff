"""FlashInfer as a baseline where it is installed on the GPU host: the second baseline of attention
forward, and the first of the paged and ragged GQA tasks (its batch wrappers).

FlashInfer compiles its kernels on first use (93 s for the Hopper prefill on the H200's 16 cores), which
must never happen inside a candidate's timing stage, and a baseline that crashes takes the candidate's
process with it (the baselines run interleaved in that process). So the baseline is offered only after
`python -m workbench.evaluate.gpu.flashinfer_baseline --warm` has compiled the prefill for the head dim on
this host and checked it against torch SDPA; that check leaves a marker per FlashInfer version. The
batch wrappers likewise, after `--warm-batch` ran each on its task's small workload and matched the
task's own reference (a marker per wrapper and version).

Child side: torch only, plus flashinfer when present.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

NAME = "FlashInfer prefill"
HEAD_DIMS = (64, 128, 256)


def installed() -> bool:
    return importlib.util.find_spec("flashinfer") is not None


def prefill_spec(head_dim: int):
    """FlashInfer's JIT spec of the single-sequence prefill it picks on Hopper (FA3), bf16 in and out."""
    from flashinfer.jit.attention import gen_single_prefill_module

    dtype = torch.bfloat16
    return gen_single_prefill_module("fa3", dtype, dtype, dtype, head_dim, head_dim, 0, False, False, False)


def _marker(head_dim: int) -> Path:
    """Left by a warm-up whose check passed, for this FlashInfer version and head dim."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = importlib.metadata.version("flashinfer-python")
    return cache / "ptxwb" / "flashinfer-ready" / f"{version}-d{head_dim}"


def readiness(head_dim: int) -> str:
    """ "" when the prefill for `head_dim` was compiled and checked here; else why the baseline is out."""
    if not installed():
        return "FlashInfer is not installed on this host"
    try:
        ready = _marker(head_dim).is_file() and prefill_spec(head_dim).is_compiled
    except Exception as exc:  # noqa: BLE001 - another FlashInfer version: say so, never fail the stage
        return f"FlashInfer's prefill could not be looked up ({type(exc).__name__}: {str(exc)[:120]})"
    if not ready:
        return (
            f"FlashInfer's D={head_dim} prefill is not compiled and checked on this host "
            "(python -m workbench.evaluate.gpu.flashinfer_baseline --warm)"
        )
    return ""


def forward_call(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> Callable[[], list[tuple[torch.Tensor, torch.Tensor]]]:
    """One FlashInfer prefill per sequence on our [B, H, S, D] tensors, LSE returned like the task's.

    FlashInfer takes [S, H, D] (NHD) per sequence: Q, K and V are copied into it once here, outside any
    timed window (its HND path for K and V crashed with SIGFPE in FlashInfer 0.7.4's FA3 prefill)."""
    import flashinfer

    scale = 1.0 / math.sqrt(q.shape[-1])
    queries, keys, values = (
        [x[b].transpose(0, 1).contiguous() for b in range(x.shape[0])] for x in (q, k, v)
    )

    def call() -> list[tuple[torch.Tensor, torch.Tensor]]:  # (output, LSE) per sequence
        return [
            flashinfer.single_prefill_with_kv_cache(
                query,
                key,
                value,
                causal=causal,
                kv_layout="NHD",
                sm_scale=scale,
                backend="fa3",
                return_lse=True,
            )
            for query, key, value in zip(queries, keys, values, strict=True)
        ]

    return call


# The GQA tasks FlashInfer's batch wrappers run, and what a verdict calls each.
BATCH_TASKS = {
    "paged_decode": "gqa_paged_decode_h24_kv8_d128_ps1",
    "paged_prefill": "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
    "ragged_prefill": "gqa_ragged_prefill_causal_h32_kv4_d128",
}
BATCH_NAMES = {
    "paged_decode": "FlashInfer BatchDecodeWithPagedKVCacheWrapper",
    "paged_prefill": "FlashInfer BatchPrefillWithPagedKVCacheWrapper (causal)",
    "ragged_prefill": "FlashInfer BatchPrefillWithRaggedKVCacheWrapper (causal)",
}
WORKSPACE_BYTES = 128 << 20


def batch_readiness(kind: str) -> str:
    """ "" when the wrapper for `kind` ran and matched its task's reference on this host; else why not."""
    if not installed():
        return "FlashInfer is not installed on this host"
    if not _marker_named(kind).is_file():
        return (
            f"FlashInfer's {BATCH_NAMES[kind]} is not compiled and checked on this host "
            "(python -m workbench.evaluate.gpu.flashinfer_baseline --warm-batch)"
        )
    return ""


def _marker_named(kind: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    version = importlib.metadata.version("flashinfer-python")
    return cache / "ptxwb" / "flashinfer-ready" / f"{version}-{kind}"


def batch_call(kind: str, spec: dict, inputs: dict[str, torch.Tensor], device: str) -> Callable[[], Callable]:
    """A function that plans the wrapper on the inputs' current values (untimed: FlashInfer reads the
    index tensors back to the host) and returns the call to time."""
    import flashinfer

    axes = spec["axes"]
    scale = float(spec["workload_inputs"]["sm_scale"]["value"])
    heads, kv_heads, dim = axes["num_qo_heads"], axes["num_kv_heads"], axes["head_dim"]
    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    bf16 = torch.bfloat16
    if kind == "ragged_prefill":
        wrapper = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace, "NHD")

        def plan_ragged() -> Callable:
            wrapper.plan(inputs["qo_indptr"], inputs["kv_indptr"], heads, kv_heads, dim, causal=True,
                         sm_scale=scale, q_data_type=bf16)  # fmt: skip
            return lambda: wrapper.run(inputs["q"], inputs["k"], inputs["v"], return_lse=True)

        return plan_ragged
    pages = axes["page_size"]
    count = len(inputs["kv_indptr"]) - 1
    last_page = torch.full((count,), pages, dtype=torch.int32, device=device)
    cache = (inputs["k_cache"], inputs["v_cache"])
    if kind == "paged_decode":
        decode = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")

        def plan_decode() -> Callable:
            decode.plan(inputs["kv_indptr"], inputs["kv_indices"], last_page, heads, kv_heads, dim, pages,
                        pos_encoding_mode="NONE", q_data_type=bf16, kv_data_type=bf16, sm_scale=scale)  # fmt: skip
            return lambda: decode.run(inputs["q"], cache, return_lse=True)

        return plan_decode
    prefill = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD")

    def plan_prefill() -> Callable:
        prefill.plan(inputs["qo_indptr"], inputs["kv_indptr"], inputs["kv_indices"], last_page, heads, kv_heads,
                     dim, pages, causal=True, sm_scale=scale, q_data_type=bf16, kv_data_type=bf16)  # fmt: skip
        return lambda: prefill.run(inputs["q"], cache, return_lse=True)

    return plan_prefill


def warm_batch() -> int:
    """Run each batch wrapper once on its task's smallest workload (compiling it) and compare output and
    LSE with the task's reference (atol = rtol = 1e-2, the task's rule); a marker per wrapper that matched."""
    import json

    from workbench.evaluate.gpu.inputs import compile_reference, make_inputs, run_reference, scalar_inputs
    from workbench.paths import tasks_dir

    failures = 0
    for kind, task in BATCH_TASKS.items():
        started = time.perf_counter()
        try:
            definition = json.loads((tasks_dir() / "definitions" / f"{task}.json").read_text())
            row = json.loads((tasks_dir() / "workloads" / f"{task}.jsonl").read_text().splitlines()[0])
            workload = row["workload"]
            consts = {n: a["value"] for n, a in definition["axes"].items() if a["type"] == "const"}
            spec = {"definition": definition, "axes": {**consts, **workload["axes"]},
                    "workload_inputs": workload["inputs"]}  # fmt: skip
            values = make_inputs(spec, seed=1, device="cuda")
            names = [n for n in definition["inputs"] if n not in scalar_inputs(spec)]
            inputs = dict(zip(names, [v for v in values if isinstance(v, torch.Tensor)], strict=True))
            out, lse = batch_call(kind, spec, inputs, "cuda")()()
            want_out, want_lse = run_reference(
                compile_reference(definition["reference"]), definition, spec["axes"], values
            )
            for got, want in ((out, want_out), (lse, want_lse)):
                bad = ((got.float() - want.float()).abs() > 1e-2) & (
                    (got.float() - want.float()).abs() > 1e-2 * want.float().abs()
                )
                if bool(bad.any()):
                    raise RuntimeError(f"{int(bad.sum())} elements differ from the task's reference")
        except Exception as exc:  # noqa: BLE001 - report per wrapper, go on
            failures += 1
            print(f"{kind}: failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            continue
        _marker_named(kind).parent.mkdir(parents=True, exist_ok=True)
        _marker_named(kind).write_text(f"matched {task}'s reference\n")
        print(f"{kind}: ready in {time.perf_counter() - started:.1f} s (matched {task}'s reference)")
    return 1 if failures else 0


def warm(head_dims: tuple[int, ...] = (128,)) -> int:
    """Compile (or find compiled) the prefill for each head dim and check it on a small problem."""
    failures = 0
    for head_dim in head_dims:
        started = time.perf_counter()
        try:
            prefill_spec(head_dim).build_and_load()
            q, k, v = (
                torch.randn(1, 4, 256, head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(3)
            )
            for causal in (False, True):
                (out, _lse), *_ = forward_call(q, k, v, causal)()
                want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                error = (out.transpose(0, 1).float() - want[0].float()).abs().max().item()
                if error > 2e-2:
                    raise RuntimeError(f"causal={causal}: max abs error {error:.3g} against torch SDPA")
        except Exception as exc:  # noqa: BLE001 - report per head dim, go on
            failures += 1
            print(f"D={head_dim}: failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            continue
        _marker(head_dim).parent.mkdir(parents=True, exist_ok=True)
        _marker(head_dim).write_text(f"checked against torch SDPA, max abs error {error:.3g}\n")
        print(f"D={head_dim}: ready in {time.perf_counter() - started:.1f} s (checked against torch SDPA)")
    return 1 if failures else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", action="store_true", help="compile FlashInfer's prefill here")
    parser.add_argument("--head-dim", type=int, action="append", choices=HEAD_DIMS)
    parser.add_argument("--warm-batch", action="store_true", help="compile and check the GQA batch wrappers")
    args = parser.parse_args()
    if not installed():
        print("FlashInfer is not installed here", file=sys.stderr)
        sys.exit(2)
    if args.warm_batch:
        sys.exit(warm_batch())
    if not args.warm:
        for head_dim in args.head_dim or [128]:
            print(f"D={head_dim}: {readiness(head_dim) or 'ready'}")
        sys.exit(0)
    sys.exit(warm(tuple(args.head_dim or [128])))


if __name__ == "__main__":
    main()
