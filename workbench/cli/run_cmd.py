"""`ptxwb run`: one agent session on one task and target, written to a session file as it goes.

The loop lives in `workbench.agent`; this module only builds it from options and shows it: in the
workbench TUI on a terminal, or (`--headless`, or no terminal) as printed progress lines.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from workbench.agent.config import ContextPolicy, agent_config
from workbench.agent.items import EvalProgress, LoopItem, ModelRetry, TextDelta
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import ChatMessage, HumanWriter, Model, make_model
from workbench.cli.options import NoWorkerService
from workbench.errors import UserError
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import Language, RunSettings
from workbench.paths import new_session_path
from workbench.session.events import Candidate, Evaluation, Message, SessionEnd, SessionStart
from workbench.tui.preflight import refuse_without_gpu

END_LINE = "."


async def stdin_writer(messages: Sequence[ChatMessage]) -> str | None:
    """The `human` model on a terminal: show the latest message, read the answer up to a line `.`."""
    print(f"\n{messages[-1].content}\n", file=sys.stderr)
    print(
        f"Write your answer; end it with a line holding only '{END_LINE}' (end of input stops).",
        file=sys.stderr,
    )
    lines: list[str] = []
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if line == "":
            return None
        if line.rstrip("\n") == END_LINE:
            return "".join(lines)
        lines.append(line)


def build_model(
    spec: str,
    api_base: str | None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    human: HumanWriter = stdin_writer,
) -> Model:
    """The model for `--model`; `human` writes the `human` model's turns (stdin here, the editor in the TUI)."""
    return make_model(spec, human=human, api_base=api_base, temperature=temperature, max_tokens=max_tokens)


class HeadlessView:
    """Prints each step of a session as it happens; a spinner line shows what runs now."""

    def __init__(self, console: Console, turns: int) -> None:
        self.console = console
        self.turns = turns
        self.streamed = 0
        self.last: LoopItem | None = None
        self.end: SessionEnd | None = None

    def state(self, item: LoopItem) -> str | None:
        """The spinner text after `item`, or None to keep it."""
        if isinstance(item, TextDelta):
            self.streamed += len(item.text)
            return f"turn {item.turn}/{self.turns} · model writing · {self.streamed} chars"
        if isinstance(item, EvalProgress) and item.progress.state == "started":
            return f"turn {item.turn}/{self.turns} · {item.progress.stage}…"
        return None

    def show(self, item: LoopItem) -> None:
        out = self.console.print
        if isinstance(item, SessionStart):
            pack = item.pack_id or "none"
            out(
                f"[bold]{item.task}[/bold] on {item.target} · model {item.model} ({item.author}) · pack {pack}"
            )
            if item.parent_session:
                out(f"forked from {item.parent_session} at turn {item.fork_turn}")
        elif isinstance(item, ModelRetry):
            out(
                f"[yellow]turn {item.turn}: model call failed, retry {item.attempt} in {item.delay_s:g} s: {item.error}[/yellow]"
            )
        elif isinstance(item, EvalProgress) and item.progress.state == "finished":
            status = item.progress.status.value if item.progress.status else "?"
            out(f"  {item.progress.stage}: {status}")
        elif isinstance(item, Message):
            self._message(item)
        elif isinstance(item, Candidate):
            note = "" if item.origin == "model" else f" ({item.origin} by the person)"
            out(f"turn {item.turn}: candidate {item.sha256[:12]}{note}, evaluating")
        elif isinstance(item, Evaluation):
            self._verdict(item)
        elif isinstance(item, SessionEnd):
            self.end = item
            note = f" ({item.note})" if item.note else ""
            out(f"[bold]ended: {item.reason}[/bold]{note}")
        self.last = item

    def _message(self, item: Message) -> None:
        out = self.console.print
        if item.turn is None:
            return
        if item.role == "assistant":
            self.streamed = 0
            parts = [f"{len(item.content)} chars"]
            if item.usage is not None:
                parts.append(f"{item.usage.prompt_tokens}+{item.usage.completion_tokens} tokens")
            if item.cost_usd is not None:
                parts.append(f"${item.cost_usd:.4f}")
            if item.latency_s is not None:
                parts.append(f"{item.latency_s:.1f} s")
            out(f"turn {item.turn}/{self.turns}: answer from {item.source} ({', '.join(parts)})")
        elif item.source == "human":
            out(f"turn {item.turn}: message from the person added")
        elif not isinstance(self.last, Evaluation):
            out(f"[yellow]turn {item.turn}: {item.content.splitlines()[0]}[/yellow]")

    def _verdict(self, item: Evaluation) -> None:
        result = item.result
        style = "green" if result.status.value == "passed" else ("yellow" if result.all_ran_passed else "red")
        speedup = result.stages.timing.speedup
        speed = f" · speedup {speedup:.3f}×" if speedup is not None else ""
        self.console.print(
            f"turn {item.turn} verdict: [{style}]{result.status.value}[/{style}] — {result.message}{speed}"
        )


async def drive_headless(agent: MiniPTXAgent, console: Console, spinner: bool = True) -> SessionEnd | None:
    try:
        return await _show(agent, console, spinner)
    finally:
        # The executor may hold a worker process; release it while the event loop still runs.
        await agent.executor.close()


async def _show(agent: MiniPTXAgent, console: Console, spinner: bool) -> SessionEnd | None:
    view = HeadlessView(console, agent.config.turns)
    if not spinner:
        async for item in agent.run():
            view.show(item)
        return view.end
    with console.status("starting…") as status:
        async for item in agent.run():
            text = view.state(item)
            if text is not None:
                status.update(text)
            view.show(item)
    return view.end


def finish(end: SessionEnd | None, out: Path, console: Console) -> None:
    console.print(f"session: {out}")
    if end is not None and end.reason == "model_error":
        raise typer.Exit(1)


def run(
    task: Annotated[str, typer.Option("--task", help="Catalogue task name, or a Definition JSON path.")],
    model: Annotated[
        str,
        typer.Option("--model", help="A litellm model string, `human`, `replay:SESSION` or `scripted:FILE`."),
    ],
    target: Annotated[str, typer.Option("--target", help="hopper or blackwell.")] = "hopper",
    turns: Annotated[int, typer.Option("--turns", help="Turn limit.")] = 8,
    executor: Annotated[
        str, typer.Option("--executor", help="static (no GPU), local, or ssh://host.")
    ] = "static",
    out: Annotated[
        Path | None, typer.Option("--out", help="Session file (default runs/TASK_TARGET_TIME.jsonl).")
    ] = None,
    headless: Annotated[
        bool,
        typer.Option(
            "--headless",
            help="Print progress lines instead of opening the TUI (the default without a terminal).",
        ),
    ] = False,
    paused: Annotated[
        bool,
        typer.Option("--paused", help="Open the workbench paused before turn 1 (s steps, a runs on)."),
    ] = False,
    no_pack: Annotated[
        bool, typer.Option("--no-pack", help="Leave the knowledge pack out of the prompt.")
    ] = False,
    pack_variant: Annotated[
        str | None, typer.Option("--pack-variant", help="Add one pattern file of the pack.")
    ] = None,
    context: Annotated[ContextPolicy, typer.Option("--context", help="full or latest-pair.")] = "full",
    language: Annotated[
        Language,
        typer.Option(
            "--language", help="cuda (.cu kernels) or triton (kernel.py; static or local executor)."
        ),
    ] = "cuda",
    source_counters: Annotated[
        bool,
        typer.Option(
            "--source-counters",
            help="Executed counts beside each SASS line (Nsight Compute's SourceCounters: more replay passes).",
        ),
    ] = False,
    target_speedup: Annotated[
        float, typer.Option("--target-speedup", help="Stop early at this speedup.")
    ] = 1.0,
    cost_limit: Annotated[
        float | None, typer.Option("--cost-limit", help="Stop once the model cost this (USD).")
    ] = None,
    wall_limit: Annotated[
        float | None, typer.Option("--wall-limit", help="Stop after this many seconds.")
    ] = None,
    workload: Annotated[str | None, typer.Option("--workload", help="Workload uuid or prefix.")] = None,
    api_base: Annotated[str | None, typer.Option("--api-base", help="OpenAI-compatible server URL.")] = None,
    temperature: Annotated[float | None, typer.Option("--temperature")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens")] = None,
    no_worker_service: NoWorkerService = False,
) -> None:
    """Run the agent on one task: each turn the model writes a kernel, the executor judges it."""
    if no_pack and pack_variant is not None:
        raise UserError(
            "--pack-variant adds a file of the knowledge pack that --no-pack leaves out: give one of them"
        )
    settings = RunSettings(language=language, workload=workload, source_counters=source_counters)
    config = agent_config(
        turns=turns,
        target_speedup=target_speedup,
        cost_limit_usd=cost_limit,
        wall_limit_s=wall_limit,
        context=context,
        pack=not no_pack,
        pack_variant=pack_variant,
        # The agent's config keeps these three under the same names, for each turn's request.
        workload=settings.workload,
        language=settings.language,
        source_counters=settings.source_counters,
    )
    settings.require_executor(executor)
    refuse_without_gpu(executor)
    out = out or new_session_path(task, target)
    console = Console(highlight=False)
    if paused and (headless or not console.is_terminal):
        raise UserError("--paused waits for a key in the workbench: it needs a terminal and no --headless")
    if headless or not console.is_terminal:
        agent = MiniPTXAgent(
            task=task,
            target=target,
            model=build_model(model, api_base, temperature, max_tokens),
            executor=make_executor(executor, worker_service=False if no_worker_service else None),
            out=out,
            config=config,
        )
        end = asyncio.run(drive_headless(agent, console, spinner=model != "human" and console.is_terminal))
    else:
        # The workbench TUI: it is the loop's approver, and the editor writes the `human` model's turns.
        from workbench.tui.drivers.live import TuiHuman
        from workbench.tui.launch import run_live

        human = TuiHuman()
        agent = MiniPTXAgent(
            task=task,
            target=target,
            model=build_model(model, api_base, temperature, max_tokens, human=human),
            executor=make_executor(executor, worker_service=False if no_worker_service else None),
            out=out,
            config=config,
        )
        end = run_live(agent, pace="step" if paused else "auto", human=human if model == "human" else None)
    finish(end, out, console)
