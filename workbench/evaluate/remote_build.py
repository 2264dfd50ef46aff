"""The build and static tiers on the GPU host, for an executor whose GPU host compiles (ssh): the worker's
`build` op. Its own module because it needs the workbench's build stack (pydantic among it), which a
GPU-only worker never imports (tests/test_import_guards.py).
"""

from __future__ import annotations

import asyncio

from workbench.evaluate.build.nvcc import build
from workbench.evaluate.build.sass import static_stage
from workbench.evaluate.gpu.kernel_names import module_kernels
from workbench.evaluate.result import Status
from workbench.tasks import get_target


def remote_build(request: dict) -> dict:
    """Build + static tier here. The required family comes resolved from the host, as the GPU tiers'
    spec does: the task may be a definition file this host lacks, and the static and dynamic tiers must
    ask for the same family."""
    target = get_target(request["target"])
    if request.get("required_family"):
        target = target.model_copy(update={"required_family": request["required_family"]})
    build_stage = asyncio.run(build(request["source"], target, float(request.get("timeout_s", 180.0)), None))
    reply: dict = {"build": build_stage.model_dump(mode="json"), "static": None, "kernels": None}
    if build_stage.status == Status.passed:
        static = asyncio.run(static_stage(build_stage, target))
        reply["static"] = static.model_dump(mode="json")
        if build_stage.library_path:
            reply["kernels"] = module_kernels(build_stage.library_path, static.sass_path)
    return reply
