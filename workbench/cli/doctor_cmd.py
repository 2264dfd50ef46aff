"""`ptxwb doctor`: what this machine can evaluate (tools, GPU, Python packages, API-key names)."""

from __future__ import annotations

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
from workbench.evaluate.toolchain import find_tool, tool_version


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


def report() -> dict[str, Any]:
    tools = {}
    for name in ("nvcc", "cuobjdump", "nvdisasm", "ncu", "compute-sanitizer"):
        path = find_tool(name)
        tools[name] = {"path": str(path) if path else None, "version": tool_version(name) if path else None}
    # Provider keys (OPENAI_API_KEY, ANTHROPIC_API_KEY, …) by name only: their values never leave here.
    keys = sorted(k for k in os.environ if re.fullmatch(r"[A-Z0-9_]*_API_KEY", k))
    return {
        "python": sys.version.split()[0],
        "tools": tools,
        "gpu": _gpu(),
        "packages": {
            p: _package(p) for p in ("torch", "apache-tvm-ffi", "cupti-python", "litellm", "textual")
        },
        "api_keys_set": keys,
    }


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
            else "[red]not found[/red]"
        )
        table.add_row(name, state)
    gpu = data["gpu"]
    if gpu.get("available"):
        table.add_row("GPU", f"[green]{gpu['name']}[/green] (compute {gpu['capability']}, {gpu['sms']} SMs)")
    else:
        table.add_row("GPU", f"[yellow]none[/yellow] ({gpu.get('error', 'torch sees no CUDA device')})")
    for name, version in data["packages"].items():
        table.add_row(name, f"[green]{version}[/green]" if version else "[yellow]not installed[/yellow]")
    table.add_row("API keys set", ", ".join(data["api_keys_set"]) or "none")
    console().print(table)
