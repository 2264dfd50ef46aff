"""Shared test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The fixtures the project did not write lie beside the checkout (CI lays shared/ there too).
SHARED_FIXTURES = ROOT.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES


@pytest.fixture(scope="session", autouse=True)
def private_worker_service_folder(tmp_path_factory: pytest.TempPathFactory):
    """Every test process gets its own runtime folder, so a `local` executor's worker service started by a
    test (or a `ptxwb` it runs) is never this machine user's, and is stopped when the tests end."""
    import os

    runtime = tmp_path_factory.mktemp("runtime")
    runtime.chmod(0o700)
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    yield runtime
    stop_worker_services()
    if before is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = before


def stop_worker_services() -> None:
    import asyncio

    from workbench.evaluate.service_client import stop_running

    asyncio.run(stop_running())


# The files that take the most CPU (seconds on CI's two cores at a4b6335, the run's own children included),
# handed out first: pytest-xdist gives each worker whole files in collection order, and one of these begun
# last would finish alone on one core while the other idles.
HEAVY_FIRST = (
    "test_honest_corpus.py",  # 204
    "test_judging_pipeline.py",  # 75
    "test_tasks_references.py",  # 66
    "test_bench_sweep.py",  # 50
    "test_cli_bad_input.py",  # 47
    "test_build.py",  # 39
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(HEAVY_FIRST)))  # stable: the rest keep order
