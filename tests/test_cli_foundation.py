"""`ptxwb tasks`, `task`, `doctor`, `session show`, and one-line errors, through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.session import SessionEnd, SessionStart, SessionWriter

PTXWB = Path(sys.executable).parent / "ptxwb"


def ptxwb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PTXWB), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_tasks_json_lists_every_definition_with_five_headline() -> None:
    from workbench.paths import tasks_dir

    done = ptxwb("tasks", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert len(rows) == len(list((tasks_dir() / "definitions").glob("*.json")))
    assert sorted(r["name"] for r in rows if r["headline"]) == [
        "gemm_n7168_k5120",
        "mha_bwd_d128",
        "mha_bwd_d128_causal",
        "mha_with_lse_d128",
        "mha_with_lse_d128_causal",
    ]


def test_task_json_reports_headline_flops() -> None:
    done = ptxwb("task", "gemm_n7168_k5120", "--json")
    assert done.returncode == 0, done.stderr
    details = json.loads(done.stdout)
    (headline,) = [w for w in details["workloads"] if w["headline"]]
    assert headline["axes"] == {"M": 8192}
    assert headline["flops"] == 2 * 8192 * 7168 * 5120
    assert set(headline["speed_of_light_ms"]) == {"H100", "H200", "B200"}


def test_task_table_and_fixture_paths(shared_fixtures: Path) -> None:
    for name in ("gemm_n4096_k4096", "gemm_n7168_k5120"):
        done = ptxwb("task", str(shared_fixtures / "flashinfer-trace" / "definitions" / f"{name}.json"))
        assert done.returncode == 0, done.stderr
        assert name in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("task", "gemm_n1_k1"), "unknown task 'gemm_n1_k1'"),
        (("task", "/nonexistent/def.json"), "/nonexistent/def.json: no such file"),
        (("session", "show", "/nonexistent/s.jsonl"), "/nonexistent/s.jsonl: no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    done = ptxwb(*args)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and message in done.stderr
    assert "Traceback" not in done.stderr


def test_malformed_definition_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"name": ')
    done = ptxwb("task", str(bad))
    assert done.returncode == 2 and "malformed JSON" in done.stderr and "Traceback" not in done.stderr


def test_doctor_names_keys_but_never_values() -> None:
    canary = "sk-canary-0123456789"
    done = ptxwb("doctor", "--json", env={"OPENAI_API_KEY": canary, "MYCORP_API_KEY": canary})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {"OPENAI_API_KEY", "MYCORP_API_KEY"} <= set(report["api_keys_set"])
    assert canary not in done.stdout
    assert report["tools"]["nvcc"]["path"] is None or report["tools"]["nvcc"]["version"]
    assert set(report["packages"]) >= {"torch", "apache-tvm-ffi", "cupti-python"}


def test_doctor_says_what_each_missing_tool_costs() -> None:
    done = ptxwb("doctor", "--json")
    report = json.loads(done.stdout)
    absent = {name for name, tool in report["tools"].items() if tool["path"] is None}
    absent |= {name for name, version in report["packages"].items() if version is None}
    if not report["gpu"]["available"]:
        absent.add("GPU")
    # Exactly what is missing is named, each with the tier or feature it costs.
    assert set(report["missing"]) == absent
    assert all(report["missing"][name] for name in absent)
    if "GPU" in absent:
        assert "correctness, dynamic and timing" in report["missing"]["GPU"]
    plain = ptxwb("doctor", env={"COLUMNS": "200"}).stdout
    for name in absent:
        assert report["missing"][name].split(" (")[0] in plain, name


def test_session_show_reports_what_a_cut_file_dropped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SessionWriter(
        path,
        SessionStart(
            session_id="abc", task="gemm_n7168_k5120", target="hopper", model="human", author="human"
        ),
    ) as writer:
        writer.append(SessionEnd(reason="stopped_by_person"))
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    done = ptxwb("session", "show", str(path), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["session_id"] == "abc" and summary["end"] is None
    assert summary["dropped_bytes"] == len(data.splitlines(keepends=True)[-1]) - 5
