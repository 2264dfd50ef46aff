"""Entry point of `ptxwb`.

Only the command being run is imported: `ptxwb eval` does not pay for the TUI's or the agent's
modules. `--help` (or no known command) registers them all so the help lists every one.
"""

from __future__ import annotations

import importlib
import sys

import typer
from typer._click.exceptions import NoArgsIsHelpError

from workbench.errors import UserError

# name -> (module, attribute, a command function or a sub-app); the order is the help's order.
_COMMANDS: dict[str, tuple[str, str, bool]] = {
    "tasks": ("workbench.cli.tasks_cmd", "tasks", False),
    "task": ("workbench.cli.tasks_cmd", "task", False),
    "doctor": ("workbench.cli.doctor_cmd", "doctor", False),
    "eval": ("workbench.cli.eval_cmd", "eval_candidate", False),
    "run": ("workbench.cli.run_cmd", "run", False),
    "replay": ("workbench.cli.tui_cmd", "replay", False),
    "demo": ("workbench.cli.tui_cmd", "demo", False),
    "author": ("workbench.cli.tui_cmd", "author", False),
    "session": ("workbench.cli.session_cmd", "app", True),
    "pack": ("workbench.cli.pack_cmd", "app", True),
    "bench": ("workbench.cli.bench_cmd", "app", True),
    "fixit": ("workbench.cli.fixit_cmd", "app", True),
    "worker": ("workbench.cli.worker_cmd", "app", True),
}


def _home(ctx: typer.Context) -> None:
    """With no command: the home screen (tasks, recent sessions, start a run)."""
    if ctx.invoked_subcommand is None:
        from workbench.cli import tui_cmd

        tui_cmd.home()


def build_app(argv: list[str]) -> typer.Typer:
    app = typer.Typer(
        name="ptxwb",
        help="PTX Workbench: write, judge and time hand-written PTX kernels for Hopper and Blackwell.",
        no_args_is_help=False,
        pretty_exceptions_enable=False,
        add_completion=False,
        # Click's plain help: Typer's rich panels label every flag `<bool>` (`--help <bool>`).
        rich_markup_mode=None,
        context_settings={"max_content_width": 200},  # as wide as the terminal: no summary cut at 120
    )
    app.callback(invoke_without_command=True)(_home)
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    for name in [first] if first in _COMMANDS else list(_COMMANDS):
        module, attribute, group = _COMMANDS[name]
        target = getattr(importlib.import_module(module), attribute)
        if group:
            app.add_typer(target, name=name)
        else:
            app.command(name)(target)
    return app


def main() -> None:
    try:
        code = build_app(sys.argv[1:])(prog_name="ptxwb", standalone_mode=False)
    except UserError as exc:
        print(f"ptxwb: {exc}", file=sys.stderr)
        sys.exit(2)
    except NoArgsIsHelpError as exc:
        # A command group given no command: its help, as `--help` prints it, and the usage error's code.
        print(exc.format_message())
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:
        # The parser's own errors (a missing argument, a non-numeric --turns, an unknown option).
        message = exc.format_message()
        ctx: typer.Context | None = getattr(exc, "ctx", None)
        if not message.strip():
            pass  # a command group given no command: the parser printed its help
        elif ctx is not None:
            print(f"ptxwb: {message} (`{ctx.command_path} --help` lists the options)", file=sys.stderr)
        else:
            print(f"ptxwb: {message}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("ptxwb: aborted", file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
