"""Sweeps on a real local Ray cluster (two CPUs; two GPUs declared, none real; the static executor):
the same metrics and turn rows as the same sweep without Ray; a Ray sweep killed with SIGKILL, then
resumed with an evaluation actor killed mid-build, still exact, the requeue in its report; GPU actors
placed by the `GPU` resource, building on their node first; API keys kept in the driver; bad input
in one line. The cluster starts once for the module (about 8 s on two cores).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
import ray
from agent_support import (
    CANARY_KEY,
    answer,
    broken_kernel,
    simt_kernel,
    warmed_build_cache,
    wgmma_kernel,
    write_script,
)

from workbench.bench.folder import SweepFolder
from workbench.bench.metrics import compute
from workbench.bench.ray_backend import (
    ActorReady,
    ActorShape,
    Cluster,
    RayEvaluationPool,
    RayPools,
    actor_shape,
    candidate_id,
    parse_resources,
    plan_actors,
    ray_cluster,
)
from workbench.bench.runner import SweepRunner, SweepSummary
from workbench.bench.spec import parse_spec
from workbench.errors import UserError
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest
from workbench.session.events import Candidate, Evaluation, SessionEnd, SessionStart
from workbench.session.log import read_session

pytestmark = pytest.mark.nvcc
PTXWB = str(Path(sys.executable).parent / "ptxwb")
TASK = "gemm_n7168_k5120"
COMPILERS = {"nvcc", "cicc", "ptxas", "cudafe++", "cc1plus"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return warmed_build_cache(tmp_path_factory)


@pytest.fixture(scope="module")
def cluster(cache: Path) -> Iterator[Cluster]:
    """A local cluster started the way `--ray local` starts one, from a driver holding an API key."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", CANARY_KEY)
        env.setenv("PTXWB_CACHE", str(cache))  # the nodes' own build cache, for actors the CLI asks for
        with ray_cluster("local", num_cpus=2, num_gpus=2) as started:
            yield started


def spec_text(tmp: Path) -> str:
    """Two scripted models, one trajectory each, two turns: `fails` never passes the static tier,
    `fixes` does at turn 2; every kernel is in the warm cache."""
    write_script(tmp / "fails.json", [answer(broken_kernel()), answer(simt_kernel())])
    write_script(tmp / "fixes.json", [answer(simt_kernel()), answer(wgmma_kernel())])
    return _spec(["fails", "fixes"])


def cold_spec_text(tmp: Path) -> str:
    """One trajectory each of `warm` (two kernels the cache holds) and `cold`: kernels no cache has seen
    (a fresh comment each). Cold's first is a whole build (seconds of nvcc, so the test sees an actor
    building while warm has ended however the two are scheduled), its second a compile error."""
    write_script(tmp / "warm.json", [answer(broken_kernel()), answer(simt_kernel())])
    cold = [answer(simt_kernel() + f"// {uuid4().hex}\n"), answer(broken_kernel() + f"// {uuid4().hex}\n")]
    write_script(tmp / "cold.json", cold)
    return _spec(["warm", "cold"])


def _spec(scripts: list[str]) -> str:
    models = ", ".join(f'"scripted:{name}.json"' for name in scripts)
    return (
        f'name = "ray"\nmodels = [{models}]\ntasks = ["{TASK}"]\ntrajectories = 1\nturns = 2\n'
        'executor = "static"\n[[variants]]\nname = "no-pack"\npack = false\n'
    )


async def sweep(
    tmp: Path, out: str, cache: Path, pools: RayPools | None = None
) -> tuple[SweepFolder, SweepSummary]:
    text = (tmp / "spec.toml").read_text()
    folder = SweepFolder(tmp / out)
    runner = SweepRunner(folder, parse_spec(text, "spec.toml", tmp), cache_dir=cache, pool=pools)
    return folder, await runner.run(text, resume=False)


def results(folder: SweepFolder) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The metrics of every cell and turn limit, and every turn row but its model latency."""
    cells = [cell.as_dict() for cell in compute(folder.records(), [1, 2])]
    with folder.open_store() as store:
        rows = [{k: v for k, v in row.items() if k != "latency_s"} for row in store.dump_turns()]
    return cells, rows


def static_actors(cluster: Cluster) -> RayPools:
    return RayPools(plan_actors(cluster, ["static"], actor_shape(["static"])))


async def test_a_ray_sweep_has_the_metrics_of_the_same_sweep_without_ray(
    tmp_path: Path, cache: Path, cluster: Cluster
) -> None:
    (tmp_path / "spec.toml").write_text(spec_text(tmp_path))
    here, _ = await sweep(tmp_path, "here", cache)
    pools = static_actors(cluster)
    there, summary = await sweep(tmp_path, "ray", cache, pools)
    assert (summary.ran, summary.requeued) == (2, [])
    cells, rows = results(there)
    assert (cells, rows) == results(here)
    assert len(rows) == 4 and {c["static_passed"] for c in cells if c["turn_limit"] == 2} == {0, 1}
    # Every evaluation ran in one of the two CPU actors (one per CPU), none in the driver.
    pool = pools.made
    assert pool is not None and len(pool.actors) == 2 and pool.slots == 2
    assert sum(slot.evaluations for slot in pool.actors) == 4
    # An actor takes candidates only once it has answered; on a loaded machine the second may answer after
    # the first has judged all four, so the claim is about the actors that judged.
    judged = [slot for slot in pool.actors if slot.evaluations]
    assert judged and all(
        slot.ready and slot.ready.pid != os.getpid() and not slot.ready.gpus for slot in judged
    )
    start = read_session(next((there.root / "sessions").glob("*.jsonl"))).events[0]
    assert isinstance(start, SessionStart) and start.settings["executor"] == "ray:static"


def ended(path: Path) -> bool:
    return '"type":"session_end"' in path.read_text(errors="replace")


def processes() -> dict[int, tuple[int, str, str]]:
    """Every process here: pid -> (parent pid, command name, command line)."""
    found: dict[int, tuple[int, str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        found[int(entry.name)] = (int(stat[stat.rindex(")") + 2 :].split()[1]), name, cmdline)
    return found


def building_actor() -> int | None:
    """An evaluation actor's process with a compiler running under it (one building for seconds)."""
    table = processes()
    for pid, (_, name, _) in table.items():
        if name not in COMPILERS:
            continue
        ancestor = table.get(pid, (0, "", ""))[0]
        while ancestor in table:
            if table[ancestor][2].startswith("ray::EvaluationActor"):
                return ancestor
            ancestor = table[ancestor][0]
    return None


# 30 s of CPU (a cluster, cold builds): left to -m slow. The resume after a kill -9 is test_bench_sweep's,
# through the same resume; the Ray sweep itself is the metrics test's above.
@pytest.mark.slow
def test_a_ray_sweep_killed_then_resumed_with_an_actor_killed_mid_build(
    tmp_path: Path, cache: Path, cluster: Cluster
) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(cold_spec_text(tmp_path))
    out = tmp_path / "sweep"
    run = [PTXWB, "bench", "run", str(spec), "--out", str(out), "--ray", cluster.address]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # The first driver is killed with SIGKILL once `warm` has ended and `cold` waits on its first build.
    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen(run, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.poll() is None:
            files = list((out / "sessions").glob("*.jsonl")) if (out / "sessions").is_dir() else []
            warm = [f for f in files if "warm" in f.name]
            if warm and ended(warm[0]) and building_actor() is not None:
                break
            time.sleep(0.05)
        assert first.poll() is None, (tmp_path / "first.log").read_text()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    # Ray ends a dead driver's actors; the next driver's are the only ones then.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
        line.startswith("ray::EvaluationActor") for _, _, line in processes().values()
    ):
        time.sleep(0.1)
    cut = sorted(f.name for f in (out / "sessions").glob("*.jsonl") if not ended(f))
    assert len(cut) == 1 and "cold" in cut[0]

    # Resumed on the same cluster; the first actor seen building is killed: its candidate is requeued.
    resumed = subprocess.Popen(
        [*run, "--resume"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and resumed.poll() is None:
        if (killed := building_actor()) is not None:
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.02)
    said, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0 and killed is not None, said
    said = " ".join(said.split())  # rich wraps at 80 columns in a pipe
    assert "2 evaluation actors (CPU=1 each, executor static)" in said
    assert "2 trajectories, 1 finished before, 1 run now (1 again after a cut)" in said
    assert said.count("requeued ") == 1 and "(attempt 1)" in said and f"pid {killed})" in said
    assert "Ray: 2 evaluations on 2 actors" in said

    # Nothing lost or doubled: every session one uninterrupted run with one verdict per turn.
    files = sorted((out / "sessions").glob("*.jsonl"))
    assert len(files) == 2
    for path in files:
        events = read_session(path).events
        assert [e.turn for e in events if isinstance(e, Evaluation)] == [1, 2]
        assert isinstance(events[-1], SessionEnd) and events[-1].reason == "turn_limit"
        assert next(e for e in events if isinstance(e, SessionStart)).settings["executor"] == "ray:static"
    aside = sorted(p.name for p in (out / "sessions" / "unfinished").glob("*.jsonl"))
    assert aside == [n.removesuffix(".jsonl") + ".attempt1.jsonl" for n in cut]
    cold = read_session(next(p for p in files if "cold" in p.name)).events
    sources = {candidate_id(e.source) for e in cold if isinstance(e, Candidate)}
    words = said.split("requeued ", 1)[1].split()  # TASK TARGET candidate ID (attempt 1): …
    assert words[:3] == [TASK, "hopper", "candidate"] and words[3] in sources

    # The store holds each turn once, with the verdict its kernel earns anywhere.
    _, rows = results(SweepFolder(out))
    verdicts = [(row["model"].rsplit("/", 1)[-1], row["turn"], row["status"]) for row in rows]
    assert sorted(verdicts) == [("cold.json", 1, "static_missing_family"), ("cold.json", 2, "compile_error"),
                                ("warm.json", 1, "compile_error"), ("warm.json", 2, "static_missing_family")]  # fmt: skip


async def test_gpu_actors_take_one_gpu_each_and_build_on_their_node_first(
    tmp_path: Path, cluster: Cluster
) -> None:
    shape = actor_shape(["local"])
    assert shape == ActorShape(resources={"GPU": 1.0}, in_flight=2)
    plan = plan_actors(cluster, ["local"], shape)
    assert plan.count == 2  # the cluster declares two GPUs
    lost: list[object] = []
    builds = tmp_path / "builds"
    pool = RayEvaluationPool(plan, lost.append, builds)
    request = EvalRequest(task=TASK, target="hopper", source=broken_kernel())
    try:
        readies = [ActorReady.model_validate_json(await slot.handle.ready.remote()) for slot in pool.actors]
        assert sorted(r.gpus for r in readies) == [["0"], ["1"]]
        assert all(r.cuda_visible_devices == r.gpus[0] for r in readies)
        assert pool.slots == 4  # one candidate on each GPU, the next one building beside it
        # The build runs as a CPU task on the actor's node; then the GPU worker finds no real GPU.
        with pytest.raises(UserError, match="no NVIDIA GPU"):
            await pool.evaluate(request)
    finally:
        await pool.shutdown()
    assert lost == []
    judged = await make_executor("static", builds).evaluate(request)
    assert judged.stages.build.cache_hit and judged.stages.build.status.value == "compile_error"


def test_api_keys_stay_in_the_driver(cluster: Cluster) -> None:
    getenv = ray.remote(os.getenv)
    assert os.environ["OPENAI_API_KEY"] == CANARY_KEY  # the driver's own environment is whole again
    assert ray.get(getenv.remote("OPENAI_API_KEY")) is None
    assert ray.get(getenv.remote("PTXWB_CACHE")) == os.environ["PTXWB_CACHE"]


def test_bad_ray_input_is_one_line(tmp_path: Path, cluster: Cluster) -> None:
    for bad in ("GPU", "GPU=0", "GPU=1,GPU=2", "=1", "GPU=x"):
        with pytest.raises(UserError, match="--ray-resources: expected NAME=AMOUNT"):
            parse_resources(bad)
    with pytest.raises(UserError, match="ssh:// hosts need no Ray"):
        actor_shape(["local", "ssh://gpu-host"])
    with (
        pytest.raises(UserError, match="Ray Client addresses are not supported"),
        ray_cluster("ray://head:1"),
    ):
        pass
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(tmp_path))
    out = str(tmp_path / "out")
    hide_ray = "import sys; sys.modules['ray'] = None; from workbench.cli.main import main; main()"
    without_ray = [sys.executable, "-c", hide_ray]
    cases = [
        ([*without_ray, "bench", "run", str(spec), "--out", out, "--ray", "local"],
         "pip install 'ptx-workbench[ray]'"),
        ([PTXWB, "bench", "run", str(spec), "--out", out, "--ray-resources", "CPU=1"], "only with --ray"),
        ([PTXWB, "bench", "run", str(spec), "--out", out, "--ray", cluster.address, "--ray-resources", "TPU=1"],
         "no room for one evaluation actor (TPU=1)"),
    ]  # fmt: skip
    for args, message in cases:
        done = subprocess.run(args, check=False, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], done.stderr
    assert not Path(out).exists()
