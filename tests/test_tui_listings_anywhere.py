"""PTX and SASS of a session replayed on a machine without its build folder: carried, or rebuilt and checked."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import tui_synthetic
from agent_support import answer, record_session, wgmma_kernel
from build_support import needs_nvcc, session_cache
from tui_pilot import until

from workbench.evaluate.result import EvalResult, StaticStage
from workbench.session.events import Candidate, Evaluation, Event
from workbench.session.listings import Listings, carry
from workbench.session.log import read_session
from workbench.tui.app import WorkbenchApp
from workbench.tui.drivers.replay import ReplayDriver
from workbench.tui.rebuild import mismatch
from workbench.tui.widgets.code_pane import CodePane

SIZE = (140, 44)
PROBE_SASS = Path(__file__).resolve().parent / "data" / "tui" / "families_probe.sm_90a.sass"


async def instant(_: float) -> None:
    await asyncio.sleep(0)


async def shown(path: Path, tab: str, ready: str = "") -> str:
    """The text the `tab` tab shows for the last turn once nothing is under way any more."""
    driver = ReplayDriver(read_session(path), speed=100.0, sleep=instant)
    app = WorkbenchApp.for_driver(driver, theme="textual-dark")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: driver.state == "ended")
        await pilot.press({"ptx": "2", "sass": "3"}[tab])
        code = app.screen.query_one(CodePane)

        def settled() -> bool:
            document = code.view(tab).document
            return not any(w in document.unavailable for w in ("…", "loading", "unpacking")) and ready in (
                document.unavailable or "\n".join(document.lines)
            )

        await until(pilot, settled, limit=6000)
        document = code.view(tab).document
        return document.unavailable or "\n".join(document.lines)


def moved_away(events: list[Event], tmp_path: Path) -> list[Event]:
    """The session as another machine reads it: every recorded build folder gone."""
    for event in events:
        if isinstance(event, Evaluation):
            for path in (event.result.stages.build.ptx_path, event.result.stages.static.sass_path):
                if path:
                    Path(path).unlink(missing_ok=True)
            if event.result.stages.build.cubin_path:
                Path(event.result.stages.build.cubin_path).unlink(missing_ok=True)
    return events


async def test_listings_carried_in_the_session_show_without_the_build_folder(tmp_path: Path) -> None:
    ptx, sass, cubin = tmp_path / "kernel.ptx", tmp_path / "kernel.sass", tmp_path / "kernel.cubin"
    ptx.write_text(
        "// PTX of the synthetic kernel\n\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1};\n"
    )
    shutil.copy(PROBE_SASS, sass)
    cubin.write_bytes(b"\x7fELF synthetic")
    events = tui_synthetic.events(2, ptx=ptx, sass=sass, cubin=cubin, kinds=["full", "full"])
    for index, event in enumerate(events):
        if isinstance(event, Evaluation):
            listings = carry(event.result)
            assert listings is not None and listings.text("ptx") == ptx.read_text()
            events[index] = event.model_copy(update={"listings": listings})
    session = tui_synthetic.write(tmp_path / "s.jsonl", moved_away(events, tmp_path))
    assert "wgmma.mma_async" in await shown(session, "ptx")
    assert "HGMMA" in await shown(session, "sass")


def test_listings_are_compressed_and_keep_the_cubins_hash(tmp_path: Path) -> None:
    text = PROBE_SASS.read_text()
    sass = tmp_path / "kernel.sass"
    sass.write_text(text * 20)
    result = tui_synthetic.result(1, "static", "source", sass=sass, cubin=PROBE_SASS)
    listings = carry(result)
    assert listings is not None and listings.text("sass") == text * 20 and listings.text("ptx") is None
    assert listings.sass is not None and len(listings.sass) < len(text)  # twenty copies in less than one
    assert listings.cubin_sha256 is not None and len(listings.cubin_sha256) == 64
    assert (
        carry(tui_synthetic.result(1, "static", "source")) is None
    )  # nothing on this machine: nothing carried
    assert Listings.model_validate_json(listings.model_dump_json()) == listings


def test_a_rebuild_is_shown_only_when_it_is_the_recorded_code() -> None:
    text = PROBE_SASS.read_text()
    from workbench.evaluate.build.sass import parse_sass

    kernels = {f"demangled {i}": dict(c) for i, c in enumerate(parse_sass(text).kernels.values())}
    assert mismatch(text, b"cubin", StaticStage(kernels=kernels), None) is None  # names aside, counts agree
    changed = {name: {**counts, "HGMMA": counts.get("HGMMA", 0) + 1} for name, counts in kernels.items()}
    assert "opcode counts differ" in (mismatch(text, b"cubin", StaticStage(kernels=changed), None) or "")
    import hashlib

    sha = hashlib.sha256(b"cubin").hexdigest()
    assert mismatch(text, b"cubin", StaticStage(kernels=changed), sha) is None  # the hash decides first
    assert "is not the recorded" in (mismatch(text, b"other", StaticStage(), sha) or "")
    assert "neither the cubin's hash nor the SASS counts" in (mismatch(text, b"x", StaticStage(), None) or "")


@needs_nvcc
async def test_a_recorded_session_replayed_elsewhere_rebuilds_and_shows_its_listings(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Recorded with the listings left out (as the shipped sessions were), its build folder then gone.
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    out = tmp_path / "session.jsonl"
    await record_session(out, [answer(wgmma_kernel())], recorded)
    events = read_session(out).events
    evaluation = next(e for e in events if isinstance(e, Evaluation))
    assert evaluation.listings is not None and evaluation.listings.text("ptx")  # the loop carries them now
    stripped = [e.model_copy(update={"listings": None}) if isinstance(e, Evaluation) else e for e in events]
    shutil.rmtree(recorded)
    session = tui_synthetic.write(tmp_path / "elsewhere.jsonl", stripped)
    monkeypatch.setenv("PTXWB_CACHE", str(session_cache(tmp_path_factory)))
    ptx = await shown(session, "ptx", ready="wgmma")
    assert "wgmma.mma_async" in ptx and ".version" in ptx
    assert "HGMMA" in await shown(session, "sass", ready="HGMMA")
    # The same source with other recorded SASS counts is not the recorded code: it is not shown.
    # Built elsewhere (its build is in no cache here: a rebuild it is, checked against the recording).
    result: EvalResult = evaluation.result
    elsewhere = f"cache:{'0' * 64}/"
    files = {"library_path": "kernel.so", "ptx_path": "kernel.ptx", "cubin_path": "kernel.cubin"}
    build = result.stages.build.model_copy(update={k: elsewhere + name for k, name in files.items()})
    static = StaticStage(kernels={"k": {"HGMMA": 1}}, sass_path=f"{elsewhere}kernel.sass")
    forged = result.model_copy(
        update={"stages": result.stages.model_copy(update={"build": build, "static": static})}
    )
    other = [
        e.model_copy(update={"result": forged, "listings": None}) if isinstance(e, Evaluation) else e
        for e in events
    ]
    assert any(isinstance(e, Candidate) for e in other)
    session = tui_synthetic.write(tmp_path / "forged.jsonl", other)
    message = await shown(session, "ptx", ready="not shown")
    assert "rebuilt here, but its SASS opcode counts differ from the recorded ones" in message
