"""The HTML report in a real browser (headless Chromium, 1280×900): a sweep's and an imported PTXBench
fixture's pages fit the window without horizontal scrolling, the pivot's cells hold the metrics' numbers,
the filter hides rows, columns and plot lines, legends cover no data, and dark mode keeps the plots'
text readable. A screenshot of each page is kept (in $PTXWB_TEST_ARTEFACTS, else the test's folder)."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench_support import (
    FIXTURE_MODELS,
    STATIC_TIERS,
    gpu_sweep_records,
    needs_chromium,
    probe_page,
    screenshot,
    store_records,
    turn,
    write_ptxbench_fixture,
)

from workbench.bench.ptxbench import import_ptxbench
from workbench.bench.records import TrajectoryRecord
from workbench.bench.spec import TrajectoryKey

pytestmark = needs_chromium
PTXWB = Path(sys.executable).parent / "ptxwb"

PROBE = """
const shown = (el) => el.getClientRects().length > 0;
const page = document.scrollingElement;
const cells = [...document.querySelectorAll(".pivot td.cell")].map((td) => ({
  target: td.closest("section").dataset.target, model: td.closest("tr").dataset.model, task: td.dataset.task,
  texts: Object.fromEntries([...td.querySelectorAll("[data-metric]")].map((s) => [s.dataset.metric, s.querySelector(".r").textContent])),
  details: Object.fromEntries([...td.querySelectorAll("[data-metric]")].map((s) => [s.dataset.metric, s.querySelector(".i").textContent])),
}));
const boxes = [...document.querySelectorAll(".scroll")].map((box) => ({
  table: box.querySelector("table").className, scroll: box.scrollWidth, client: box.clientWidth }));
const overlap = (a, b) => Math.max(0, Math.min(a.right, b.right) - Math.max(a.left, b.left)) *
  Math.max(0, Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top));
const legends = [...document.querySelectorAll("svg")].map((svg) => {
  const legend = svg.querySelector('g[id$="-legend_1"]');
  const axes = svg.querySelector('g[id*="-axes_"] > g[id*="-patch_"]');
  return legend && axes ? overlap(legend.getBoundingClientRect(), axes.getBoundingClientRect()) : null;
}).filter((area) => area !== null);
function visible() {
  return {
    rows: [...document.querySelectorAll(".pivot tbody tr")].filter(shown).map((r) => r.closest("section").dataset.target + "|" + r.dataset.model),
    tasks: [...new Set([...document.querySelectorAll(".pivot th.task")].filter(shown).map((t) => t.dataset.task))],
    lines: [...new Set([...document.querySelectorAll("svg g.series")].filter(shown).map((g) => g.dataset.model))],
    runs: [...document.querySelectorAll(".runs tbody tr")].filter(shown).map((r) => r.dataset.model),
    count: document.getElementById("f-count").textContent,
  };
}
function filtered(id, value) {
  const field = document.getElementById(id);
  field.value = value;
  field.dispatchEvent(new Event("input"));
  const seen = visible();
  field.value = "";
  field.dispatchEvent(new Event("input"));
  return seen;
}
const style = (el) => getComputedStyle(el);
const firstValue = document.querySelector(".pivot [data-metric]");
const before = shown(firstValue.querySelector(".r")) && !shown(firstValue.querySelector(".i"));
document.getElementById("f-intervals").click();
const intervals = !shown(firstValue.querySelector(".r")) && shown(firstValue.querySelector(".i"));
probe = {
  scrollWidth: page.scrollWidth, clientWidth: page.clientWidth, cells, boxes, legends,
  all: visible(), byModel: filtered("f-model", MODEL), byTask: filtered("f-task", "gemm"),
  byTarget: filtered("f-target", "blackwell"), intervalsToggle: before && intervals,
  colours: { background: style(document.body).backgroundColor, text: style(document.body).color,
    plotText: style(document.querySelector("svg text")).fill },
};
"""


def _rgb(css: str) -> tuple[float, ...]:
    return tuple(float(v) for v in re.findall(r"[\d.]+", css)[:3])


def _contrast(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """The WCAG contrast ratio of two sRGB colours."""

    def luminance(rgb: tuple[float, ...]) -> float:
        c = [v / 255 for v in rgb]
        c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _artefacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PTXWB_TEST_ARTEFACTS", tmp_path / "artefacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def _report(tmp_path: Path, *folders: Path) -> tuple[Path, dict[str, Any]]:
    page, data = tmp_path / "report.html", tmp_path / "report.json"
    done = subprocess.run([PTXWB, "bench", "report", *folders, "--html", page, "--json", data],
                          capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return page, json.loads(data.read_text())


def _check_page(page: Path, report: dict[str, Any], model: str, tmp_path: Path) -> dict[str, Any]:
    """Everything both pages must hold; returns what the browser measured, for the caller's own checks."""
    seen = probe_page(page, f"const MODEL = {json.dumps(model)};\n{PROBE}", tmp_path)
    # No horizontal scrolling at 1280 pixels: wide tables scroll inside their own box.
    assert seen["clientWidth"] <= 1280 and seen["scrollWidth"] <= seen["clientWidth"], seen["scrollWidth"]
    # The pivot's cells hold the metrics' numbers, as --json has them.
    expected = {(c["target"], c["label"], c["task"]): c["texts"] for c in report["pivot"]}
    assert {(c["target"], c["model"], c["task"]): c["texts"] for c in seen["cells"]} == expected
    assert len(seen["cells"]) == len(report["pivot"]) > 0
    assert seen["intervalsToggle"] and all(re.fullmatch(r"\d+/\d+ \d+% \[\d+–\d+\]|not measured|–", d)
                                           for c in seen["cells"] for k, d in c["details"].items() if "best" not in k)  # fmt: skip
    # Filters: by model, rows and plot lines of other models go; by task, columns; by target, sections.
    every_row = seen["all"]["rows"]
    assert len(every_row) > len(seen["byModel"]["rows"]) > 0
    assert all(row.split("|", 1)[1].startswith(model) for row in seen["byModel"]["rows"])
    assert seen["byModel"]["lines"] == [model] and len(seen["all"]["lines"]) > 1
    assert set(seen["byModel"]["runs"]) == {model}
    assert seen["byModel"]["count"] == f"{len(seen['byModel']['rows'])} of {len(every_row)} table rows shown"
    assert seen["byTask"]["tasks"] == ["gemm_n7168_k5120"] and len(seen["all"]["tasks"]) > 1
    assert all(row.startswith("blackwell|") for row in seen["byTarget"]["rows"]) and seen["byTarget"]["rows"]
    # Legends sit beside the plots, never over them.
    assert seen["legends"] and all(area == 0 for area in seen["legends"])
    # Dark mode: the page turns dark and the plots' text follows the page's text colour.
    dark = probe_page(page, f"const MODEL = {json.dumps(model)};\n{PROBE}", tmp_path, "--force-dark-mode")
    for colours in (seen["colours"], dark["colours"]):
        assert _rgb(colours["plotText"]) == _rgb(colours["text"])
        assert _contrast(_rgb(colours["plotText"]), _rgb(colours["background"])) >= 7
    assert sum(_rgb(dark["colours"]["background"])) < 100 < sum(_rgb(seen["colours"]["background"]))
    assert dark["scrollWidth"] <= dark["clientWidth"]
    return seen


def test_a_sweep_report_in_the_browser(tmp_path: Path) -> None:
    model = "scripted:/home/someone/refs.json"
    static = [
        TrajectoryRecord(
            TrajectoryKey("static-sweep", model, target, task, "no-pack", f"t{i:03d}"),
            True,
            "turn_limit",
            [turn(1, "not_run", STATIC_TIERS)],
        )
        for target, task in (
            ("hopper", "gemm_n7168_k5120"),
            ("hopper", "mha_with_lse_d128"),
            ("blackwell", "mha_with_lse_d128"),
        )
        for i in range(2)
    ]
    store_records(tmp_path / "gpu", gpu_sweep_records())
    store_records(tmp_path / "static", static)
    page, report = _report(tmp_path, tmp_path / "gpu", tmp_path / "static")
    seen = _check_page(page, report, "scripted:ladder.json", tmp_path)
    texts = {(c["model"], c["task"]): c["texts"] for c in seen["cells"]}
    assert texts[("scripted:refs.json · no-pack", "mha_with_lse_d128")]["correct@1"] == "not measured"
    assert texts[("scripted:ladder.json", "gemm_n7168_k5120")] == {
        "correct@1": "33%", "SASS@1": "0%", "best×@1": "0.500×"}  # fmt: skip
    # ladder ran Hopper's GEMM only: filtered to it, Blackwell's section and Hopper's attention column go.
    assert seen["byModel"]["rows"] == ["hopper|scripted:ladder.json"]
    assert seen["byModel"]["tasks"] == ["gemm_n7168_k5120"] and len(seen["all"]["tasks"]) == 2
    assert "/home/someone" not in page.read_text()
    shot = screenshot(page, _artefacts(tmp_path) / "bench_report_sweep.png", tmp_path)
    assert _png_size(shot)[0] == 1280


def test_the_imported_ptxbench_report_in_the_browser(tmp_path: Path) -> None:
    import_ptxbench(write_ptxbench_fixture(tmp_path / "per_turn.csv"), tmp_path / "paper")
    page, report = _report(tmp_path, tmp_path / "paper")
    assert report["turn_limits"] == [1, 8]
    seen = _check_page(page, report, FIXTURE_MODELS[1], tmp_path)
    # The per-run table is wider than the page: it scrolls inside its own box, the page does not.
    runs = next(box for box in seen["boxes"] if box["table"] == "runs")
    assert runs["scroll"] > runs["client"]
    assert {row.split("|")[1] for row in seen["all"]["rows"]} == set(FIXTURE_MODELS)
    shot = screenshot(page, _artefacts(tmp_path) / "bench_report_ptxbench.png", tmp_path)
    assert _png_size(shot) == (1280, 900)


def test_chromium_is_what_the_skip_reason_says(tmp_path: Path) -> None:
    """The probe itself works: a page wider than the window is measured as such."""
    page = tmp_path / "wide.html"
    page.write_text('<!doctype html><html><body><div style="width:2000px">wide</div></body></html>')
    seen = probe_page(page, "probe = [document.scrollingElement.scrollWidth, innerWidth];", tmp_path)
    assert seen[1] == 1280 and seen[0] > 2000
