"""Shared printing for commands: JSON to stdout, or rich tables."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console


def console() -> Console:
    return Console(highlight=False)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


def fmt_flops(value: float | None) -> str:
    if value is None:
        return "—"
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if value >= scale:
            return f"{value / scale:.3f} {unit}"
    return f"{value:.0f} FLOP"


def fmt_bytes(value: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if value >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"
