"""The sweep spec: the issue's example, bad input as one line, task selection, the plan's files."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.bench.spec import load_spec, parse_spec, plan, select_tasks
from workbench.errors import UserError
from workbench.tasks import Catalogue

SMOKE = """
name = "smoke"
models = ["openai/stub-a", "openai/stub-b"]
tasks = ["gemm_n7168_k5120", "gemm_n4096_k4096"]
targets = ["hopper"]
trajectories = 3
turns = 2
executor = "static"
concurrency = 4
"""


def test_the_issue_example_plans_twelve_trajectories_each_with_its_own_file() -> None:
    spec = parse_spec(SMOKE, "smoke.toml", Path("/specs"))
    assert (spec.trajectories, spec.turns, spec.executors, spec.concurrency) == (3, 2, ["static"], 4)
    planned = plan(spec)
    assert len(planned) == 12 and len({p.relpath for p in planned}) == 12
    assert len({p.key.cell for p in planned}) == 4
    assert all(p.relpath.startswith("sessions/") and p.variant.pack for p in planned)
    assert sorted({p.key.trajectory for p in planned}) == ["t000", "t001", "t002"]
    assert plan(spec) == planned  # the same spec always plans the same files


def test_variants_model_options_and_relative_scripts(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    path = tmp_path / "specs" / "ablation.toml"
    path.write_text(
        'name = "ablation"\nmodels = ["scripted:refs/a.json", "replay:/abs/s.jsonl"]\ntasks = ["headline"]\n'
        'targets = ["hopper", "blackwell"]\ntrajectories = 2\ncost_limit = 5.0\n'
        '[[variants]]\nname = "pack"\n[[variants]]\nname = "no-pack"\npack = false\n'
        '[[variants]]\nname = "ws"\npack_variant = "warp_specialization"\ncontext = "latest-pair"\n'
        '[model_options]\napi_base = "http://127.0.0.1:9/v1"\ntemperature = 0.2\nmax_tokens = 4096\n'
    )
    spec = load_spec(path)
    assert spec.models == [f"scripted:{tmp_path / 'specs' / 'refs' / 'a.json'}", "replay:/abs/s.jsonl"]
    assert spec.model_options.max_tokens == 4096 and spec.cost_limit == 5.0
    planned = plan(spec)
    assert len(planned) == 3 * 2 * 2 * 5 * 2  # variants × models × targets × headline tasks × trajectories
    assert {p.variant.name: p.variant.pack for p in planned} == {"pack": True, "no-pack": False, "ws": True}
    # The two scripted/replay models get different file names, readable from the file's name.
    assert any("scripted-a-" in p.relpath for p in planned) and any("replay-s-" in p.relpath for p in planned)


def test_task_globs_and_headline() -> None:
    catalogue = Catalogue.load()
    headline = select_tasks(["headline"], catalogue)
    assert len(headline) == 5 and "gemm_n7168_k5120" in headline
    gemms = select_tasks(["gemm_*", "gemm_n7168_k5120"], catalogue)
    assert len(gemms) == 17 and len(set(gemms)) == 17
    with pytest.raises(UserError, match="matches no task"):
        select_tasks(["conv_*"], catalogue)
    with pytest.raises(UserError, match="unknown task"):
        select_tasks(["gemm_n1_k1"], catalogue)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = 'x'\nmodels = ['m']\ntasks = [", "not TOML"),
        ("name = 'x'\nmodels = ['m']\ntasks = ['t']\nturn = 3", "turn: Extra inputs"),
        ("name = 'x'\nmodels = []\ntasks = ['t']", "models: List should have at least 1 item"),
        ("name = 'x'\nmodels = ['human']\ntasks = ['t']", "unattended"),
        ("name = 'x y'\nmodels = ['m']\ntasks = ['t']", "name: String should match"),
        ("name = 'x'\nmodels = ['m', 'm']\ntasks = ['t']", "listed twice"),
        ("name = 'x'\nmodels = ['m']\ntasks = ['t']\nexecutor = ['static', 'local']", "cannot share"),
        ("name = 'x'\nmodels = ['m']\ntasks = ['t']\nexecutor = 'gpu'", "unknown executor"),
        ("name = 'x'\nmodels = ['m']\ntasks = ['t']\ntargets = ['ampere']", "targets.0"),
        ("name = 'x'\nmodels = ['m']\ntasks = ['t']\ntrajectories = 0", "trajectories"),
    ],
)
def test_bad_specs_are_one_line(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as caught:
        parse_spec(text, "bad.toml", Path("."))
    assert "\n" not in str(caught.value) and str(caught.value).startswith("bad.toml: ")


def test_resume_may_change_the_pools_and_the_limit_only() -> None:
    spec = parse_spec(SMOKE, "a.toml", Path("."))
    looser = parse_spec(
        SMOKE.replace("concurrency = 4", "concurrency = 9\ncost_limit = 2.0"), "b.toml", Path(".")
    )
    other = parse_spec(SMOKE.replace("turns = 2", "turns = 3"), "c.toml", Path("."))
    assert spec.resumable_as(looser) and not spec.resumable_as(other)
