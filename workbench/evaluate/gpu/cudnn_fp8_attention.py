"""cuDNN's FP8 flash attention as the FP8 attention forward baseline: the cuDNN frontend's `sdpa_fp8`
graph (the library PTXBench times these tasks against), where `nvidia-cudnn-frontend` is installed on
the GPU host.

A graph is built per shape (heuristics and a plan: seconds on first use), and a frontend that cannot run
here must never reach a candidate's timing. So the baseline is offered only after
`python -m workbench.evaluate.gpu.cudnn_fp8_attention --warm` built the graph for each FP8 attention
task's smallest workload on this host and its output and LSE passed the task's own rule against the
task's reference: a marker per frontend version, cuDNN version and task. In a candidate's process the
graph is built in the baseline's set-up, outside any timed window.

The task's semantics map onto the graph's inputs: Q, K, V e4m3 with per-tensor descales; P (the
softmax, in [0, 1]) quantized to e4m3 at scale 448 for the PV product and descaled after; no output
scale; LSE is the graph's Stats (natural log).

Child side: torch, plus cudnn when present.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

NAME = "cuDNN sdpa_fp8 (cuDNN frontend graph)"
FAMILY = "fp8_attention_forward"
P_SCALE = 448.0  # e4m3's largest finite value: P = 1 lands on it


def installed() -> bool:
    return importlib.util.find_spec("cudnn") is not None


def _marker(task: str) -> Path:
    """Left by a warm-up whose check passed, for this frontend, this cuDNN and this task."""
    import cudnn

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "ptxwb" / "cudnn-fp8-ready" / f"{cudnn.__version__}-{cudnn.backend_version()}-{task}"


def readiness(task: str) -> str:
    """ "" when the graph for `task` was built and checked here; else why the baseline is out."""
    if not installed():
        return "the cuDNN frontend (nvidia-cudnn-frontend) is not installed on this host"
    try:
        ready = _marker(task).is_file()
    except Exception as exc:  # noqa: BLE001 - a frontend that does not import: say so, never fail the stage
        return f"the cuDNN frontend could not be imported ({type(exc).__name__}: {str(exc)[:120]})"
    if not ready:
        return (
            f"cuDNN's sdpa_fp8 graph is not built and checked for {task} on this host "
            "(python -m workbench.evaluate.gpu.cudnn_fp8_attention --warm)"
        )
    return ""


class Fp8Attention:
    """One built graph on the task's input tensors (Q, K, V [B, H, L, D] e4m3 and their descales), which
    are refilled in place between calls: `run` writes O (e4m3) and LSE."""

    SCALES = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")

    def __init__(self, inputs: dict[str, torch.Tensor], causal: bool) -> None:
        import cudnn

        like = inputs["Q"]
        batch, heads, seq, dim = like.shape
        shape, stride = [batch, heads, seq, dim], list(like.stride())
        fp8, fp32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
        self.cudnn, self.handle = cudnn, cudnn.create_handle()
        graph = cudnn.pygraph(
            io_data_type=fp8, intermediate_data_type=fp32, compute_data_type=fp32, handle=self.handle
        )
        q, k, v = (
            graph.tensor(name=name, dim=shape, stride=stride, data_type=fp8) for name in ("Q", "K", "V")
        )
        one = {"dim": [1, 1, 1, 1], "stride": [1, 1, 1, 1], "data_type": fp32}
        scales = {name: graph.tensor(name=name, **one) for name in self.SCALES}
        o, stats, amax_s, amax_o = graph.sdpa_fp8(
            q=q,
            k=k,
            v=v,
            **scales,
            generate_stats=True,
            attn_scale=1.0 / math.sqrt(dim),
            use_causal_mask=causal,
            name="sdpa_fp8",
        )
        o.set_output(True).set_dim(shape).set_stride(stride).set_data_type(fp8)
        stats.set_output(True).set_dim([batch, heads, seq, 1]).set_stride([heads * seq, seq, 1, 1])
        stats.set_data_type(fp32)
        for amax in (amax_s, amax_o):
            amax.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(fp32)
        graph.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        device = like.device
        self.graph = graph
        self.workspace = torch.empty(max(1, graph.get_workspace_size()), dtype=torch.uint8, device=device)
        self.o = torch.empty_like(like)
        self.stats = torch.empty(batch, heads, seq, 1, dtype=torch.float32, device=device)
        constant = {"descale_s": 1.0 / P_SCALE, "scale_s": P_SCALE, "scale_o": 1.0}

        def scalar(value: float) -> torch.Tensor:
            return torch.full((1, 1, 1, 1), value, dtype=torch.float32, device=device)

        # Built once: a timed call of the baseline only sets the stream and executes.
        self.pack: dict[Any, torch.Tensor] = {
            q: inputs["Q"],
            k: inputs["K"],
            v: inputs["V"],
            **{scales[name]: inputs[name] for name in ("descale_q", "descale_k", "descale_v")},
            **{scales[name]: scalar(value) for name, value in constant.items()},
            o: self.o,
            stats: self.stats,
            amax_s: scalar(0.0),
            amax_o: scalar(0.0),
        }

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        """O and LSE for the inputs' current values, on torch's stream."""
        self.cudnn.set_stream(handle=self.handle, stream=torch.cuda.current_stream().cuda_stream)
        self.graph.execute(self.pack, self.workspace, handle=self.handle)
        return self.o, self.stats.squeeze(-1)


def _sidecar() -> dict[str, dict]:
    """The catalogue's facts per task, as plain JSON (a bare GPU host has no pydantic)."""
    from workbench.paths import tasks_dir

    return json.loads((tasks_dir() / "workbench.json").read_text())["tasks"]


def fp8_tasks(sidecar: dict[str, dict]) -> list[str]:
    """The catalogue's FP8 attention forward tasks, by name."""
    return sorted(name for name, fact in sidecar.items() if fact.get("family") == FAMILY)


def warm() -> int:
    """Build the graph for each FP8 attention task's smallest workload and judge its answer by the task's
    own rule against the task's reference; a marker per task that passed."""
    from workbench.evaluate.gpu.correctness import compare_output, output_tolerance
    from workbench.evaluate.gpu.inputs import compile_reference, make_inputs, run_reference
    from workbench.paths import tasks_dir

    failures = 0
    sidecar = _sidecar()
    for task in fp8_tasks(sidecar):
        definition = json.loads((tasks_dir() / "definitions" / f"{task}.json").read_text())
        started = time.perf_counter()
        try:
            spec = smallest_spec(definition, sidecar[task])
            values = make_inputs(spec, seed=1, device="cuda")
            inputs = dict(zip(definition["inputs"], values, strict=True))
            got = Fp8Attention(inputs, "causal:true" in definition["tags"]).run()
            want = run_reference(compile_reference(definition["reference"]), definition, spec["axes"], values)
            for name, actual, expected in zip(definition["outputs"], got, want, strict=True):
                atol, rtol = output_tolerance(spec, name)
                status, check = compare_output(
                    name, actual, expected, atol, rtol, spec["matched_ratio"], spec["outlier_bound"]
                )
                if status != "passed":
                    raise RuntimeError(f"{name}: {check.get('reason') or status}")
        except Exception as exc:  # noqa: BLE001 - report per task, go on
            failures += 1
            print(f"{task}: failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            continue
        marker = _marker(task)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"passed {task}'s rule against its reference\n")
        print(f"{task}: ready in {time.perf_counter() - started:.1f} s (passed the task's rule)")
    return 1 if failures else 0


def smallest_spec(definition: dict, facts: dict) -> dict:
    """The task's first (smallest) workload as the spec `make_inputs` and the rule read, with the task's
    tolerances from its `facts` in the sidecar."""
    from workbench.paths import tasks_dir

    row = json.loads((tasks_dir() / "workloads" / f"{definition['name']}.jsonl").read_text().splitlines()[0])
    consts = {axis: a["value"] for axis, a in definition["axes"].items() if a["type"] == "const"}
    return {
        "definition": definition,
        "axes": {**consts, **row["workload"]["axes"]},
        "workload_inputs": row["workload"]["inputs"],
        "atol": facts.get("atol", 1e-2),
        "rtol": facts.get("rtol", 1e-2),
        "matched_ratio": facts.get("matched_ratio", 1.0),
        "outlier_bound": facts.get("outlier_bound"),
        "output_tolerances": facts.get("output_tolerances") or {},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", action="store_true", help="build and check the graph for every FP8 task")
    args = parser.parse_args()
    if not installed():
        print("the cuDNN frontend (nvidia-cudnn-frontend) is not installed here", file=sys.stderr)
        sys.exit(2)
    if args.warm:
        sys.exit(warm())
    for task in fp8_tasks(_sidecar()):
        print(f"{task}: {readiness(task) or 'ready'}")


if __name__ == "__main__":
    main()
