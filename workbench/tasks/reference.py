"""Turn a definition's `reference` source into the callable `run` it defines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.tasks.models import Definition


def reference_function(definition: Definition) -> Callable[..., Any]:
    # A fresh namespace per call: references must not share state through module globals.
    namespace: dict[str, Any] = {"__name__": f"reference_{definition.name}"}
    exec(compile(definition.reference, f"<reference of {definition.name}>", "exec"), namespace)
    return namespace["run"]
