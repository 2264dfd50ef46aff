"""A user's sweep of bad input through the real `ptxwb`: one line on stderr, a non-zero exit, nothing lost."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

PTXWB = Path(sys.executable).parent / "ptxwb"
TASK = "gemm_n7168_k5120"
SESSIONS = Path(__file__).resolve().parent.parent / "sessions"
LADDER = SESSIONS / "gemm_n7168_k5120_ladder_h200.jsonl"


def ptxwb(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PTXWB), *args],
        check=False,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "PTXWB_CACHE": str(cwd or Path.cwd())},
    )


def one_line_error(done: subprocess.CompletedProcess[str], message: str, code: int = 2) -> None:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert message in done.stderr, done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("task", "{file}"),
        ("eval", "{file}", "--task", TASK),
        ("session", "import", "{file}", "--task", TASK, "--target", "hopper"),
        ("run", "--task", TASK, "--model", "scripted:{file}", "--headless", "--out", "{out}"),
    ],
)
def test_a_json_file_that_is_not_utf8_is_one_line(args: tuple[str, ...], tmp_path: Path) -> None:
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"name": "caf\xe9"}')
    out = tmp_path / "s.jsonl"
    done = ptxwb(*(a.format(file=bad, out=out) for a in args), cwd=tmp_path)
    one_line_error(done, f"{bad}: not UTF-8 text")
    assert not out.exists()


def _write_targets(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Output paths a user may name by mistake, and the error each gives."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    (tmp_path / "folder").mkdir()
    return {
        "unwritable": (Path("/proc/ptxwb-test/out.jsonl"), "cannot"),
        "under a file": (a_file / "out.jsonl", "cannot create its folder"),
        "a folder": (tmp_path / "folder", "a folder already exists there"),
        "an existing file": (a_file, "already exists there"),
    }


# Every command writes its output through one helper (`session.log.create_new`): an existing file, where
# a slip would lose what the user made, is tried on every command; each other case on `run` and on one
# other command in turn.
@pytest.mark.parametrize(
    ("case", "commands"),
    [
        ("an existing file", ("run", "fork", "export", "import")),
        ("unwritable", ("run", "fork")),
        ("under a file", ("run", "export")),
        ("a folder", ("run", "import")),
    ],
)
def test_outputs_that_cannot_be_written_are_one_line_and_touch_nothing(
    case: str, commands: tuple[str, ...], tmp_path: Path
) -> None:
    out, message = _write_targets(tmp_path)[case]
    parent = tmp_path / "parent.jsonl"
    parent.write_bytes(LADDER.read_bytes())
    script = tmp_path / "script.json"
    script.write_text('["no code"]')
    trajectory = tmp_path / "t.traj.json"
    if "import" in commands:
        assert ptxwb("session", "export", str(parent), "--out", str(trajectory)).returncode == 0
    every = {
        "run": ("run", "--task", TASK, "--model", f"scripted:{script}", "--headless", "--out", str(out)),
        "fork": (
            "session",
            "fork",
            str(parent),
            "--turn",
            "1",
            "--model",
            f"scripted:{script}",
            "--out",
            str(out),
        ),
        "export": ("session", "export", str(parent), "--out", str(out)),
        "import": ("session", "import", str(trajectory), "--out", str(out)),
    }
    for command in commands:
        one_line_error(ptxwb(*every[command], cwd=tmp_path), message)
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    assert parent.read_bytes() == LADDER.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("eval",), "Missing argument 'candidate'. (`ptxwb eval --help` lists the options)"),
        (("run", "--task", TASK, "--model", "human", "--turns", "x"), "Invalid value for '--turns'"),
        (("session", "fork", "s.jsonl", "--turn", "abc", "--model", "x"), "Invalid value for '--turn'"),
        (("replay", "s.jsonl", "--speed", "fast"), "Invalid value for '--speed'"),
        (("tasks", "--jsn"), "No such option: --jsn"),
        (("tasks", "extra"), "unexpected extra argument"),
        (("frobnicate",), "No such command 'frobnicate'"),
        (("pack", "nope"), "No such command 'nope'"),
    ],
)
def test_the_parsers_own_errors_are_one_line(args: tuple[str, ...], message: str) -> None:
    one_line_error(ptxwb(*args), message)


def test_a_command_group_alone_shows_its_help() -> None:
    done = ptxwb("session")
    assert done.returncode == 2 and "Usage: ptxwb session" in done.stdout and done.stderr == ""
    assert ptxwb("tasks", "--help").returncode == 0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: (p / "k.cu").write_text(""), "k.cu: the file is empty"),
        (lambda p: (p / "k.cu").write_text("  \n\n"), "k.cu: the file is empty"),
        (lambda p: (p / "k.cu").mkdir(), "k.cu: a folder, not a .cu file"),
        (lambda p: (p / "k.cu").write_bytes(b"// caf\xe9\n"), "k.cu: not UTF-8 text (byte 6)"),
    ],
)
def test_eval_of_a_kernel_file_that_holds_no_source(make, message: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    make(tmp_path)
    one_line_error(ptxwb("eval", "k.cu", "--task", TASK, cwd=tmp_path), message)


def test_eval_of_empty_standard_input_is_bad_input(tmp_path: Path) -> None:
    one_line_error(ptxwb("eval", "-", "--task", TASK, cwd=tmp_path), "standard input held no source")


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_eval_compile_timeout_must_be_positive(value: str, tmp_path: Path) -> None:
    kernel = Path(__file__).resolve().parent / "data" / "kernels" / "wgmma_gemm.cu"
    done = ptxwb("eval", str(kernel), "--task", TASK, "--compile-timeout", value, cwd=tmp_path)
    one_line_error(done, "--compile-timeout must be a positive number of seconds")


def test_an_ssh_address_that_ssh_would_read_as_an_option_never_reaches_ssh(tmp_path: Path) -> None:
    kernel = Path(__file__).resolve().parent / "data" / "kernels" / "wgmma_gemm.cu"
    spec = "ssh://-oProxyCommand=touch$IFS.pwned"
    done = ptxwb("eval", str(kernel), "--task", TASK, "--executor", spec, cwd=tmp_path)
    one_line_error(done, "expected ssh://[user@]host[:port]")
    assert not (tmp_path / ".pwned").exists()


@pytest.mark.parametrize(
    ("trajectory", "message"),
    [
        ("[1, 2]", "message 1 is not an object"),
        ('{"messages": [{"role": "user", "content": "x"}, null]}', "message 2 is not an object"),
        (
            '{"messages": [{"role": "user", "content": "x", "extra": "x"}]}',
            "message 1: `extra` is not an object",
        ),
        ('{"info": "x", "messages": []}', "`info` is not an object"),
    ],
)
def test_import_of_a_malformed_trajectory_is_one_line(trajectory: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(trajectory)
    done = ptxwb("session", "import", str(path), "--task", TASK, "--target", "hopper", cwd=tmp_path)
    one_line_error(done, message)
    assert not (tmp_path / "t.jsonl").exists()


def test_import_tolerates_odd_optional_metadata_of_a_foreign_trajectory(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '{"info": {"config": {"model": "gpt"}, "exit_status": {"odd": 1}},'
        ' "messages": [{"role": "assistant", "content": "hi", "extra": null}]}'
    )
    done = ptxwb("session", "import", str(path), "--task", TASK, "--target", "hopper", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ptxwb("session", "show", str(tmp_path / "t.jsonl")).returncode == 0


def test_import_with_an_unknown_task_or_target_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"messages": []}')
    for task, target, message in [
        ("nope", "hopper", "unknown task 'nope'"),
        (TASK, "ampere", "unknown target"),
    ]:
        done = ptxwb("session", "import", str(path), "--task", task, "--target", target, cwd=tmp_path)
        one_line_error(done, message)
        assert not (tmp_path / "t.jsonl").exists()


def test_import_of_a_workbench_export_with_damaged_carried_events(tmp_path: Path) -> None:
    exported = tmp_path / "l.traj.json"
    assert ptxwb("session", "export", str(LADDER), "--out", str(exported)).returncode == 0
    data = json.loads(exported.read_text())
    data["messages"][1]["extra"]["ptxwb_events"] = 5
    exported.write_text(json.dumps(data))
    one_line_error(
        ptxwb("session", "import", str(exported), cwd=tmp_path), "message 2: damaged workbench events"
    )


@pytest.mark.parametrize(
    "args",
    [
        ("replay", str(LADDER)),
        ("demo",),
        ("author", "k.cu", "--task", TASK, "--out", "a.jsonl"),
    ],
)
def test_an_unknown_theme_is_one_line_before_the_screen_opens(args: tuple[str, ...], tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("// mine\n")
    done = ptxwb(*args, "--theme", "no-such-theme", cwd=tmp_path)
    one_line_error(done, "unknown theme 'no-such-theme'; choose one of: ")
    assert "textual-dark" in done.stderr and not (tmp_path / "a.jsonl").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--workload", "zzzz"), "no single workload matches 'zzzz'"),
        (("--out", "notes.txt"), "notes.txt: a session file already exists there"),
        (("--out", "folder"), "folder: a folder already exists there"),
        (("--out", "notes.txt/a.jsonl"), "cannot create its folder notes.txt (notes.txt is a file)"),
    ],
)
def test_author_says_what_it_could_only_find_out_on_screen(
    extra: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    (tmp_path / "k.cu").write_text("// mine\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "folder").mkdir()
    one_line_error(ptxwb("author", "k.cu", "--task", TASK, *extra, cwd=tmp_path), message)
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    one_line_error(
        ptxwb("author", "folder", "--task", TASK, cwd=tmp_path), "folder: a folder, not a .cu file"
    )


def _wait_for_descendant(root: int, name: str, limit_s: float) -> bool:
    """Whether a process named `name` descended from `root` appears within `limit_s` (read from /proc)."""
    import time

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        parents: dict[int, int] = {}
        names: dict[int, str] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:  # the process ended while the table was read
                continue
            pid = int(stat.parent.name)
            names[pid] = text[text.index("(") + 1 : text.rindex(")")]
            parents[pid] = int(text[text.rindex(")") + 2 :].split()[1])
        for pid in (pid for pid, comm in names.items() if comm == name):
            while pid > 1 and pid != root:
                pid = parents.get(pid, 0)
            if pid == root:
                return True
        time.sleep(0.05)
    return False


@pytest.mark.nvcc
@pytest.mark.parametrize("command", ["run", "eval"])
def test_ctrl_c_during_an_evaluation_is_quiet_and_keeps_the_session(command: str, tmp_path: Path) -> None:
    import signal

    kernel = Path(__file__).resolve().parent / "data" / "kernels" / "wgmma_gemm.cu"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([f"```cuda\n{kernel.read_text()}```"]))
    out = tmp_path / "s.jsonl"
    args = {
        "run": ["run", "--task", TASK, "--model", f"scripted:{script}", "--headless", "--out", str(out)],
        "eval": ["eval", str(kernel), "--task", TASK],
    }[command]
    # As in a terminal: ptxwb gets SIGINT's default even under a runner started with it ignored (a
    # background job), which exec would pass on; the same process then execs into ptxwb.
    as_in_a_terminal = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    process = subprocess.Popen(
        [sys.executable, "-c", as_in_a_terminal, str(PTXWB), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PTXWB_CACHE": str(tmp_path / "cache")},
        start_new_session=True,  # Ctrl-C reaches the whole foreground group: here, its own
    )
    # Ctrl-C while nvcc compiles the (uncached) kernel: waited for, not assumed after a fixed sleep.
    assert _wait_for_descendant(process.pid, "nvcc", 60), "nvcc never started"
    assert process.poll() is None
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "ResourceWarning" not in stderr
    if command == "run":
        from workbench.session import SessionEnd, read_session

        read = read_session(out)
        assert read.problems == [] and isinstance(read.events[-1], SessionEnd)
        assert read.events[-1].reason == "stopped_by_person"


@pytest.mark.parametrize("extra", [("--turns", "2"), ("--turns", "1"), ()])
def test_a_fork_whose_turn_limit_leaves_nothing_to_run_writes_nothing(
    extra: tuple[str, ...], tmp_path: Path
) -> None:
    parent = tmp_path / "parent.jsonl"
    parent.write_bytes(LADDER.read_bytes())
    script = tmp_path / "script.json"
    script.write_text('["no code"]')
    turn = "4" if not extra else "2"  # the ladder's own limit is 4 turns
    done = ptxwb(
        "session", "fork", str(parent), "--turn", turn, "--model", f"scripted:{script}", *extra, cwd=tmp_path
    )
    one_line_error(done, f"the fork keeps turns up to {turn}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parent.jsonl", "script.json"]


def ptxwb_on_a_terminal(
    *args: str, cwd: Path, file_blocks: int | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real `ptxwb` with a terminal as stdin and stdout, so it opens the TUI; stderr is kept apart.

    `file_blocks` caps the size of any file it writes (512-byte blocks): a disk that fills up mid-session.
    """
    command = [str(PTXWB), *args]
    if file_blocks is not None:
        # XFSZ ignored: a write past the cap fails with EFBIG instead of killing the process.
        command = ["sh", "-c", 'trap "" XFSZ; ulimit -f "$0"; exec "$@"', str(file_blocks), *command]
    terminal, child_end = pty.openpty()
    process = subprocess.Popen(
        command,
        stdin=child_end,
        stdout=child_end,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**(env or os.environ), "PTXWB_CACHE": str(cwd / "cache")},
    )
    os.close(child_end)

    def drain() -> None:  # the screen's output, read so the app never blocks on a full terminal
        try:
            while os.read(terminal, 65536):
                pass
        except OSError:
            pass  # the terminal closed with the process

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
        reader.join(timeout=10)
        os.close(terminal)
    return subprocess.CompletedProcess(process.args, process.returncode, "", stderr)


def _tui_command(command: str, out: Path, tmp_path: Path) -> tuple[str, ...]:
    if command == "author":
        return ("author", str(tmp_path / "k.cu"), "--task", TASK, "--out", str(out))
    script = tmp_path / "script.json"
    script.write_text('["no code"]')
    return ("run", "--task", TASK, "--model", f"scripted:{script}", "--turns", "1", "--out", str(out))


@pytest.mark.parametrize("command", ["author", "run"])
@pytest.mark.parametrize("case", ["unwritable", "under a file", "a folder", "an existing file"])
def test_the_tuis_outputs_that_cannot_be_written_are_one_line_before_the_screen_opens(
    command: str, case: str, tmp_path: Path
) -> None:
    (tmp_path / "k.cu").write_text("// mine\n")
    out, message = _write_targets(tmp_path)[case]
    one_line_error(ptxwb_on_a_terminal(*_tui_command(command, out, tmp_path), cwd=tmp_path), message)
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    assert (tmp_path / "k.cu").read_text() == "// mine\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--workload", "zzzz"), "no single workload matches 'zzzz'"),
        (("--pack-variant", "nope"), "pack 'hopper' has no variant 'nope'"),
    ],
)
def test_the_tuis_run_refuses_settings_its_prompts_cannot_use_before_the_screen_opens(
    extra: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "s.jsonl"
    one_line_error(ptxwb_on_a_terminal(*_tui_command("run", out, tmp_path), *extra, cwd=tmp_path), message)
    assert not out.exists()


@pytest.mark.parametrize("command", ["author", "run"])
def test_a_session_file_that_cannot_be_written_mid_session_ends_the_tui_with_one_line(
    command: str, tmp_path: Path
) -> None:
    # The first line fits under the cap; the next event (the system prompt, the candidate) does not.
    (tmp_path / "k.cu").write_text("// mine\n" + "// padding\n" * 2000)
    out = tmp_path / "s.jsonl"
    done = ptxwb_on_a_terminal(*_tui_command(command, out, tmp_path), cwd=tmp_path, file_blocks=32)
    one_line_error(done, f"{out}: cannot write the session file (File too large)")
    assert out.stat().st_size <= 32 * 512
    assert (tmp_path / "k.cu").read_text().startswith("// mine\n")


def _without_keys() -> dict[str, str]:
    """This environment without any provider key (names as litellm's providers read them)."""
    return {name: value for name, value in os.environ.items() if not name.endswith(("_API_KEY", "_TOKEN"))}


@pytest.mark.parametrize(
    "how",
    [
        "run --headless",
        pytest.param("run", marks=pytest.mark.slow),
        pytest.param("fork", marks=pytest.mark.slow),
    ],
)
def test_a_model_whose_key_is_not_set_is_one_line_before_any_session_file(how: str, tmp_path: Path) -> None:
    parent = tmp_path / "parent.jsonl"
    parent.write_bytes(LADDER.read_bytes())
    out = tmp_path / "s.jsonl"
    model = ("--model", "anthropic/claude-sonnet-4-5", "--out", str(out))
    args = {
        "run --headless": ("run", "--task", TASK, *model, "--headless"),
        "run": ("run", "--task", TASK, *model),
        "fork": ("session", "fork", str(parent), "--turn", "1", *model),
    }[how]
    if how == "run":  # on a terminal: the TUI would open
        done = ptxwb_on_a_terminal(*args, cwd=tmp_path, env=_without_keys())
    else:
        done = subprocess.run(
            [str(PTXWB), *args], check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=300, cwd=tmp_path, env=_without_keys(),
        )  # fmt: skip
    one_line_error(done, "no credentials for anthropic/claude-sonnet-4-5: ANTHROPIC_API_KEY not set")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parent.jsonl"]
    assert parent.read_bytes() == LADDER.read_bytes()


def test_json_and_feedback_together_are_bad_input(tmp_path: Path) -> None:
    kernel = tmp_path / "k.cu"
    kernel.write_text("// a kernel\n")
    done = ptxwb("eval", str(kernel), "--task", TASK, "--json", "--feedback", cwd=tmp_path)
    one_line_error(done, "--json and --feedback are two renderings of the one verdict")
    assert done.stdout == ""
