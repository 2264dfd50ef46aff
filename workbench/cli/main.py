"""Entry point of `ptxwb`. Command modules import their heavy dependencies inside the commands."""

from __future__ import annotations

import sys

import typer

from workbench.cli import doctor_cmd, eval_cmd, pack_cmd, run_cmd, session_cmd, tasks_cmd, tui_cmd
from workbench.errors import UserError

app = typer.Typer(
    name="ptxwb",
    help="PTX Workbench: write, judge and time hand-written PTX kernels for Hopper and Blackwell.",
    no_args_is_help=False,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback(invoke_without_command=True)
def _home(ctx: typer.Context) -> None:
    """With no command: the home screen (tasks, recent sessions, start a run)."""
    if ctx.invoked_subcommand is None:
        tui_cmd.home()


app.command("tasks")(tasks_cmd.tasks)
app.command("task")(tasks_cmd.task)
app.command("doctor")(doctor_cmd.doctor)
app.command("eval")(eval_cmd.eval_candidate)
app.command("run")(run_cmd.run)
app.add_typer(session_cmd.app, name="session")
app.command("replay")(tui_cmd.replay)
app.command("demo")(tui_cmd.demo)
app.command("author")(tui_cmd.author)
app.add_typer(pack_cmd.app, name="pack")


def main() -> None:
    try:
        app()
    except UserError as exc:
        print(f"ptxwb: {exc}", file=sys.stderr)
        sys.exit(2)
