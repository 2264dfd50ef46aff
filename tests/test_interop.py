"""mini-swe-agent trajectories: export, import back exactly, load in mini-swe-agent's own reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import record_session, three_turn_answers
from build_support import session_cache

from workbench.errors import UserError
from workbench.session import Candidate, Message, SessionEnd, read_session
from workbench.session.interop import TRAJECTORY_FORMAT, export_trajectory, import_trajectory, to_trajectory

pytestmark = pytest.mark.nvcc
PTXWB = Path(sys.executable).parent / "ptxwb"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio

    out = tmp_path_factory.mktemp("interop") / "session.jsonl"
    asyncio.run(record_session(out, three_turn_answers(), session_cache(tmp_path_factory)))
    return out


def test_export_has_the_trajectory_shape(recorded: Path) -> None:
    read = read_session(recorded)
    data = to_trajectory(read)
    assert data["trajectory_format"] == TRAJECTORY_FORMAT
    messages = data["messages"]
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "user"] * 3 + ["exit"]
    assert all(isinstance(m["extra"], dict) for m in messages)
    exit_message = messages[-1]
    last_source = [e for e in read.events if isinstance(e, Candidate)][-1].source
    assert exit_message["extra"]["exit_status"] == "LimitsExceeded" == data["info"]["exit_status"]
    assert exit_message["extra"]["submission"] == last_source == data["info"]["submission"]
    assert data["info"]["model_stats"]["api_calls"] == 0  # a scripted model makes no API calls
    assert data["info"]["config"]["model"]["model_name"].startswith("scripted:")
    assert [m["extra"]["turn"] for m in messages if m["role"] == "assistant"] == [1, 2, 3]


def test_export_import_round_trips_exactly(recorded: Path, tmp_path: Path) -> None:
    exported = export_trajectory(read_session(recorded), tmp_path / "t.traj.json")
    back = import_trajectory(exported, tmp_path / "back.jsonl")
    assert read_session(back).events == read_session(recorded).events
    with pytest.raises(UserError, match="already exists"):
        export_trajectory(read_session(recorded), exported)


def test_cli_export_and_import(recorded: Path, tmp_path: Path) -> None:
    exported = tmp_path / "cli.traj.json"
    env = {**os.environ}
    done = subprocess.run([str(PTXWB), "session", "export", str(recorded), "--format", "mini-swe-agent",
                           "--out", str(exported)], check=False, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = subprocess.run([str(PTXWB), "session", "import", str(exported)],
                          check=False, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert read_session(tmp_path / "cli.jsonl").events == read_session(recorded).events
    done = subprocess.run([str(PTXWB), "session", "export", str(recorded), "--format", "swe-agent"],
                          check=False, capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 2 and "unknown export format" in done.stderr


async def test_export_loads_in_mini_swe_agents_inspector(recorded: Path, tmp_path: Path) -> None:
    inspector_module = pytest.importorskip("minisweagent.run.utilities.inspector")
    exported = export_trajectory(read_session(recorded), tmp_path / "t.traj.json")
    inspector = inspector_module.TrajectoryInspector([exported])
    assert inspector.messages == json.loads(exported.read_text())["messages"]
    assert inspector.n_steps == 4  # the task, then one step per assistant answer
    async with inspector.run_test() as pilot:
        await pilot.pause()
        content = inspector.query_one("#content")
        assert len(content.children) > 0
        await pilot.press("l")  # next step: the first answer
        await pilot.pause()
        assert inspector.i_step == 1


PTXBENCH_STYLE = {
    "info": {
        "model_stats": {"instance_cost": 0.5, "api_calls": 2},
        "config": {"model": {"model_name": "anthropic/claude-test"}},
        "exit_status": "Submitted",
        "submission": "__global__ void k() {}",
    },
    "messages": [
        {"role": "system", "content": "You write kernels."},
        {"role": "user", "content": "Task: gemm"},
        {
            "role": "assistant",
            "content": "```cpp\nint a;\n```",
            "extra": {"cost": 0.2, "timestamp": 1700000000.0},
        },
        {"role": "user", "content": "compile error"},
        {"role": "assistant", "content": "```cpp\n__global__ void k() {}\n```", "extra": {"cost": 0.3}},
        {"role": "user", "content": "passed, speedup 1.1"},
        {
            "role": "exit",
            "content": "Target speedup achieved.",
            "extra": {"exit_status": "Submitted", "submission": ""},
        },
    ],
    "trajectory_format": "mini-swe-agent-1.1",
}


def test_import_a_trajectory_from_elsewhere(tmp_path: Path) -> None:
    source = tmp_path / "ptxbench.traj.json"
    source.write_text(json.dumps(PTXBENCH_STYLE))
    with pytest.raises(UserError, match="--task and --target"):
        import_trajectory(source, tmp_path / "x.jsonl")
    read = read_session(
        import_trajectory(source, tmp_path / "in.jsonl", task="gemm_n7168_k5120", target="hopper")
    )
    assert read.start.model == "anthropic/claude-test" and read.start.task == "gemm_n7168_k5120"
    messages = [e for e in read.events if isinstance(e, Message)]
    assert [(m.turn, m.role) for m in messages] == [
        (None, "system"), (None, "user"), (1, "assistant"), (1, "user"), (2, "assistant"), (2, "user"),
    ]  # fmt: skip
    assert messages[2].cost_usd == 0.2 and messages[2].ts == 1700000000.0
    end = read.events[-1]
    assert isinstance(end, SessionEnd) and end.reason == "target_met"


def test_import_rejects_what_is_not_a_trajectory(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"info": {}}')
    with pytest.raises(UserError, match="no `messages` list"):
        import_trajectory(bad, tmp_path / "x.jsonl", task="t", target="hopper")
    bad.write_text("{not json")
    with pytest.raises(UserError, match="malformed JSON"):
        import_trajectory(bad, tmp_path / "x.jsonl")
