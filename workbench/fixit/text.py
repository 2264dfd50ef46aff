"""The fixed texts of Fixit rows and teacher prompts, rendered from the templates beside this module."""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def _template(name: str) -> str:
    return resources.files("workbench.fixit").joinpath("templates", name).read_text(encoding="utf-8")


def render(name: str, **values: object) -> str:
    return Template(_template(name)).substitute({k: str(v) for k, v in values.items()}).strip()


def code_block(source: str) -> str:
    """The source in a ```cuda block whose fence is longer than any backtick run inside it."""
    longest, run = 0, 0
    for char in source:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}cuda\n{source}{'' if source.endswith(chr(10)) else chr(10)}{fence}"
