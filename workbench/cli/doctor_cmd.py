"""`ptxwb doctor`: what this machine can evaluate (tools, GPU, Python packages, API-key names)."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from workbench.cli.output import console, print_json
from workbench.evaluate.gpu.toolchain import find_tool, tool_version


def _package(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _gpu() -> dict[str, Any]:
    # A child process: importing torch costs seconds and may touch the driver.
    probe = (
        "import json, torch\n"
        "ok = torch.cuda.is_available()\n"
        "d = {'torch': torch.__version__, 'cuda': torch.version.cuda, 'available': ok}\n"
        "if ok:\n"
        "    p = torch.cuda.get_device_properties(0)\n"
        "    d.update(name=p.name, capability=f'{p.major}.{p.minor}', sms=p.multi_processor_count)\n"
        "print(json.dumps(d))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", probe], check=False, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return {"available": False, "error": "torch probe timed out"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["torch is not installed"])[-1]
        return {"available": False, "error": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


# What a person loses without each tool or package: the tier or feature it serves.
COSTS = {
    "nvcc": "every build, and so every tier (install the CUDA toolkit; 12.8 or later for sm_100a)",
    "cuobjdump": "the static tier (reading the SASS); the core install ships it as a wheel",
    "nvdisasm": "SASS line mapping (the code pane, line numbers in refusals)",
    "ncu": "the dynamic tier (proof that the target's instructions executed)",
    "compute-sanitizer": "memcheck of a failing kernel (the verdict says not run)",
    "GPU": "the correctness, dynamic and timing tiers here (use --executor static, or ssh://HOST)",
    "torch": "the GPU tiers and the torch references",
    "apache-tvm-ffi": "every build (kernels compile against its headers)",
    "cupti-python": "CUPTI kernel timing (CUDA events are used instead, and labelled)",
    "litellm": "API-model runs (ptxwb run --model ...)",
    "textual": "the TUI (demo, author, replay)",
}


def report() -> dict[str, Any]:
    tools = {}
    for name in ("nvcc", "cuobjdump", "nvdisasm", "ncu", "compute-sanitizer"):
        path = find_tool(name)
        tools[name] = {"path": str(path) if path else None, "version": tool_version(name) if path else None}
    # Provider keys (OPENAI_API_KEY, ANTHROPIC_API_KEY, …) by name only: their values never leave here.
    keys = sorted(k for k in os.environ if re.fullmatch(r"[A-Z0-9_]*_API_KEY", k))
    gpu = _gpu()
    packages = {p: _package(p) for p in ("torch", "apache-tvm-ffi", "cupti-python", "litellm", "textual")}
    absent = [n for n, t in tools.items() if not t["path"]] + [n for n, v in packages.items() if not v]
    if not gpu.get("available"):
        absent.append("GPU")
    return {
        "python": sys.version.split()[0],
        "tools": tools,
        "gpu": gpu,
        "packages": packages,
        "api_keys_set": keys,
        "worker_services": _worker_services(),
        "missing": {name: COSTS[name] for name in absent},
    }


def _worker_services() -> dict[str, Any]:
    """This user's running worker services, or why their folder cannot be used."""
    from workbench.evaluate.service_client import running_statuses
    from workbench.evaluate.service_paths import ServiceFolderError

    try:
        return {"running": asyncio.run(running_statuses())}
    except ServiceFolderError as exc:
        return {"running": [], "problem": str(exc)}


def doctor(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Check what this machine can do: nvcc, cuobjdump, ncu, a GPU, TVM-FFI, CUPTI, API keys (names only)."""
    data = report()
    if as_json:
        print_json(data)
        return
    table = Table(title="ptxwb doctor", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("state")
    for name, tool in data["tools"].items():
        state = (
            f"[green]{tool['version'] or '?'}[/green]  {tool['path']}"
            if tool["path"]
            else f"[red]not found[/red], without it: {COSTS[name]}"
        )
        table.add_row(name, state)
    gpu = data["gpu"]
    if gpu.get("available"):
        table.add_row("GPU", f"[green]{gpu['name']}[/green] (compute {gpu['capability']}, {gpu['sms']} SMs)")
    else:
        why = gpu.get("error", "torch sees no CUDA device")
        table.add_row("GPU", f"[yellow]none[/yellow] ({why}), without it: {COSTS['GPU']}")
    for name, version in data["packages"].items():
        table.add_row(
            name,
            f"[green]{version}[/green]"
            if version
            else f"[yellow]not installed[/yellow], without it: {COSTS[name]}",
        )
    table.add_row("API keys set", ", ".join(data["api_keys_set"]) or "none")
    services = data["worker_services"]
    if services.get("problem"):
        table.add_row("worker service", f"[red]{services['problem']}[/red]")
    elif services["running"]:
        table.add_row(
            "worker service",
            "; ".join(
                f"[green]{s['label']}[/green] ({', '.join(s['gpus']) or 'no GPU'}, {s['evaluations']} evaluations, "
                f"{'judging' if s['busy'] else 'idle'})"
                for s in services["running"]
            ),
        )
    else:
        table.add_row("worker service", "none running (the next local evaluation starts one)")
    console().print(table)
