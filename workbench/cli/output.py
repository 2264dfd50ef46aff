"""Shared printing for commands: JSON to stdout, or rich tables."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console


def console() -> Console:
    return Console(highlight=False)


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))
