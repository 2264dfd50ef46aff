"""The person's own file name where the build's name for it stands (`kernel.cu(40): error …`).

The build compiles every candidate as `kernel.cu` (Triton: `kernel.py`), so compiler, sanitizer and
Python messages name that file; where the candidate is a file of the person's (`ptxwb eval`, author
mode) they are shown naming theirs. Light: no Textual, so `ptxwb eval` uses it too.
"""

from __future__ import annotations

import json
import re

from workbench.evaluate.result import EvalResult

BUILD_NAMES = {"cuda": "kernel.cu", "triton": "kernel.py"}


def named_for(result: EvalResult, name: str, language: str = "cuda") -> EvalResult:
    """`result` with every message naming `name` where it named the build's file (a copy; the
    recorded result keeps the build's name)."""
    built = BUILD_NAMES.get(language, BUILD_NAMES["cuda"])
    if name == built:
        return result
    # `kernel.cu(40)`, `kernel.cu:40`, `File "kernel.py", line 3`; never a path's last part.
    pattern = re.compile(rf'(?<![\w./\\-]){re.escape(built)}(?=[(:"])')
    escaped = json.dumps(name)[1:-1]  # the name goes into JSON text
    return EvalResult.model_validate_json(pattern.sub(lambda _: escaped, result.model_dump_json()))
