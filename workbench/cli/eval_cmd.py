"""`ptxwb eval KERNEL.cu|KERNEL.py|SOLUTION.json --task NAME --target hopper|blackwell --executor static`.

Exit 0 when every stage that ran passed, 1 for a failed verdict, 2 for bad input.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer

from workbench.cli.options import NoWorkerService
from workbench.errors import UserError
from workbench.evaluate.executors import KNOWN, make_executor
from workbench.evaluate.request import LANGUAGES, EvalRequest, Language, RunSettings
from workbench.evaluate.result import EvalResult
from workbench.evaluate.solution import read_candidate
from workbench.tasks import TARGETS, get_target


def eval_candidate(
    candidate: Annotated[
        Path,
        typer.Argument(
            help="A .cu kernel file, a Triton kernel.py ('-' reads standard input), or a FlashInfer-Bench "
            "Solution JSON."
        ),
    ],
    task: Annotated[
        str | None,
        typer.Option("--task", help="Task name or Definition JSON path (a Solution's own by default)."),
    ] = None,
    target: Annotated[str, typer.Option("--target", help=f"One of: {', '.join(TARGETS)}.")] = "hopper",
    executor: Annotated[
        str, typer.Option("--executor", help=f"Where to evaluate: {', '.join(KNOWN)}.")
    ] = "static",
    language: Annotated[
        Language | None,
        typer.Option(
            "--language", help=f"{' or '.join(LANGUAGES)} (default: triton for a .py file, else cuda)."
        ),
    ] = None,
    workload: Annotated[str | None, typer.Option("--workload", help="Workload uuid or prefix.")] = None,
    compile_timeout: Annotated[
        float, typer.Option("--compile-timeout", help="nvcc time limit, seconds.")
    ] = 180.0,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Limit for one call of the kernel, seconds (default: 200x the baseline, at least 10).",
        ),
    ] = None,
    no_sanitize: Annotated[
        bool,
        typer.Option("--no-sanitize", help="Skip the compute-sanitizer memcheck gate beside correctness."),
    ] = False,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Replay the inputs of an earlier verdict exactly (its seed); by default each evaluation draws "
            "a secret one.",
        ),
    ] = None,
    source_counters: Annotated[
        bool,
        typer.Option(
            "--source-counters",
            help="Count each SASS instruction's executions in the dynamic tier (Nsight Compute's SourceCounters: "
            "more replay passes).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the EvalResult as JSON.")] = False,
    feedback: Annotated[
        bool, typer.Option("--feedback", help="Print the feedback text the agent reads.")
    ] = False,
    no_worker_service: NoWorkerService = False,
) -> None:
    """Build and judge one candidate kernel for a task and a target."""
    if as_json and feedback:
        raise UserError("--json and --feedback are two renderings of the one verdict: give one of them")
    settings = RunSettings(  # checked here, before any file is read: bad input is one line
        language=language or ("triton" if candidate.suffix == ".py" else "cuda"),
        workload=workload,
        compile_timeout_s=compile_timeout,
        call_timeout_s=timeout,
        sanitize=not no_sanitize,
        seed=seed,
        source_counters=source_counters,
    )
    source, solution = read_candidate(candidate)
    task_name = task or (solution.definition if solution else None)
    if task_name is None:
        raise UserError("--task is required for a .cu or .py file")
    target_name = get_target(target).name
    settings.require_executor(executor)
    runner = make_executor(executor, worker_service=False if no_worker_service else None)
    request = EvalRequest.of(settings, task_name, target_name, source)

    async def judge() -> EvalResult:
        try:
            return await runner.evaluate(request)
        finally:
            await runner.close()

    result = asyncio.run(judge())
    if solution is None and str(candidate) != "-":
        from workbench.tui.naming import named_for

        # The messages name the user's own file.
        result = named_for(result, str(candidate), request.language)
    if as_json:
        from workbench.session.hostpaths import portable_result

        # Like every file the workbench writes: builds as `cache:<key>/<file>`, no folder of this machine.
        print(portable_result(result).model_dump_json(indent=2))
    elif feedback:
        from workbench.evaluate.render import feedback_text

        print(feedback_text(result))
    else:
        from workbench.cli.output import console
        from workbench.evaluate.render import rich_verdict

        console().print(rich_verdict(result))
    sys.exit(0 if result.all_ran_passed else 1)
