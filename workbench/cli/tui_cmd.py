"""`ptxwb replay`, `ptxwb demo`, `ptxwb author` and the home screen: the Textual workbench."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from workbench.cli.options import NoWorkerService
from workbench.errors import UserError
from workbench.evaluate.request import Language
from workbench.paths import new_session_path, sessions_dir
from workbench.tui.replay import MAX_SPEED, MIN_SPEED, speed_in_range

if TYPE_CHECKING:
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.drivers.base import Driver

THEME_HELP = "Textual theme, e.g. textual-dark, nord, gruvbox, textual-light."


# The session `ptxwb demo` plays: the GEMM ladder, recorded on an H200 (four turns, every tier).
DEMO_SESSION = "gemm_n7168_k5120_ladder_h200.jsonl"


def _demo_session(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        raise UserError(
            f"no session to replay in {folder} (looked for {name}): record one with `ptxwb run`, "
            "or pass a file to `ptxwb replay`"
        )
    return path


def _run_app(make: Callable[[], WorkbenchApp], theme: str | None, driver: Driver | None = None) -> None:
    """Build the workbench app and run it; an unknown --theme is bad input, said before the screen opens.

    The driver's session file is made once the app is built, before it runs; a session that could
    not be written while the app ran (this one, or a run started from home) ends the command with
    that one line.
    """
    from textual.app import InvalidThemeError

    try:
        app = make()
    except InvalidThemeError:
        from textual.theme import BUILTIN_THEMES

        names = ", ".join(sorted(BUILTIN_THEMES))
        raise UserError(f"unknown theme {theme!r}; choose one of: {names}") from None
    if driver is not None:
        driver.open()
    app.run()
    failed = [d.failure for d in [driver, *app.started] if d is not None and d.failure is not None]
    if failed:
        raise UserError(failed[0])


def _check_speed(speed: float) -> float:
    if not speed_in_range(speed):
        raise UserError(f"--speed must be from {MIN_SPEED:g} to {MAX_SPEED:g} (got {speed:g})")
    return speed


def replay(
    path: Annotated[Path, typer.Argument(help="A session .jsonl file.")],
    speed: Annotated[
        float, typer.Option("--speed", "-s", help="Playback speed: 1 is as recorded, 10 is ten times faster.")
    ] = 1.0,
    paused: Annotated[bool, typer.Option("--paused", help="Start paused (space plays).")] = False,
    theme: Annotated[str | None, typer.Option("--theme", help=THEME_HELP)] = None,
) -> None:
    """Replay a recorded session at its recorded pace (× speed): no model, no GPU. Pause, seek, fork."""
    from workbench.session.log import read_session
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.drivers.replay import ReplayDriver

    read = read_session(path)
    _ = read.start  # a file without a session_start line is a user error, raised here
    driver = ReplayDriver(read, speed=_check_speed(speed), paused=paused)
    _run_app(lambda: WorkbenchApp.for_driver(driver, theme=theme), theme)


def home(theme: str | None = None) -> None:
    """The home screen: tasks, recent sessions (shipped and in ./runs), start a run or a replay."""
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.screens.home import HomeScreen

    _run_app(lambda: WorkbenchApp(HomeScreen.default, theme=theme), theme)


def demo(
    session: Annotated[
        str, typer.Argument(help="A session file name in sessions/ (the GEMM ladder by default).")
    ] = DEMO_SESSION,
    speed: Annotated[float, typer.Option("--speed", "-s", help="Playback speed.")] = 4.0,
    theme: Annotated[str | None, typer.Option("--theme", help=THEME_HELP)] = None,
) -> None:
    """Replay a session shipped in sessions/: the workbench at a glance, no model or GPU needed."""
    replay(_demo_session(sessions_dir(), session), speed=speed, paused=False, theme=theme)


def author(
    kernel: Annotated[
        Path, typer.Argument(help="The .cu file (or Triton kernel.py) you edit in your own editor.")
    ],
    task: Annotated[str, typer.Option("--task", help="Catalogue task name, or a Definition JSON path.")],
    target: Annotated[str, typer.Option("--target", help="hopper or blackwell.")] = "hopper",
    executor: Annotated[
        str, typer.Option("--executor", help="static (no GPU), or a GPU executor.")
    ] = "static",
    workload: Annotated[str | None, typer.Option("--workload", help="Workload uuid or prefix.")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Session file (default runs/author_TASK_TARGET_TIME.jsonl).")
    ] = None,
    theme: Annotated[str | None, typer.Option("--theme", help=THEME_HELP)] = None,
    language: Annotated[
        Language | None,
        typer.Option("--language", help="cuda or triton (default: triton for a .py file, else cuda)."),
    ] = None,
    source_counters: Annotated[
        bool,
        typer.Option(
            "--source-counters",
            help="Executed counts beside each SASS line (Nsight Compute's SourceCounters: more replay passes).",
        ),
    ] = False,
    no_worker_service: NoWorkerService = False,
) -> None:
    """Write a kernel in your own editor; each save is evaluated and the panes update."""
    from workbench.evaluate.executors import make_executor
    from workbench.evaluate.request import RunSettings
    from workbench.jsonfile import read_text
    from workbench.tasks import get_target, resolve_task
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.drivers.author import AuthorDriver
    from workbench.tui.preflight import refuse_without_gpu

    if not kernel.exists():
        raise UserError(f"{kernel}: no such file (create it, then run `ptxwb author` on it)")
    # Everything the workbench would only find out once its screen is open: the file as `ptxwb eval`
    # reads it (a folder, not UTF-8, empty), the task, the target, the executor.
    if not read_text(kernel, ".cu file").strip():
        raise UserError(f"{kernel}: the file is empty (write a kernel in it, then run `ptxwb author` on it)")
    resolve_task(task).workload(workload)
    get_target(target)
    settings = RunSettings(
        language=language or ("triton" if kernel.suffix == ".py" else "cuda"),
        workload=workload,
        source_counters=source_counters,
    )
    settings.require_executor(executor)
    refuse_without_gpu(executor)
    driver = AuthorDriver(
        task=task,
        target=target,
        kernel=kernel,
        executor=make_executor(executor, worker_service=False if no_worker_service else None),
        out=out or new_session_path(task, target, prefix="author_"),
        settings=settings,
    )
    _run_app(lambda: WorkbenchApp.for_driver(driver, theme=theme), theme, driver)
