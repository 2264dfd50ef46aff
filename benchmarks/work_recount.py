"""The work beside the required family, counted again from the per-opcode profiles already recorded under
benchmarks/results/ with today's weights (`profile.LEAST_FLOPS_PER_THREAD`): what an honest kernel's
`other_work_share` is under them, without a GPU, so the decoy bound (`profile.MAX_OTHER_SHARE`) is set
against what honest kernels measure.

`python benchmarks/work_recount.py` prints one line per distinct profile, highest share first. A verdict
printed whole gives its opcodes and task FLOPs; one whose JSON a test cut short gives only the opcodes
printed before the cut (ncu lists them most executed first) and its FLOPs from the timing line's rate,
so its share counts the listed opcodes only, and the line says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from workbench.evaluate.gpu.profile import (
    FAMILY_TENSOR_METRIC,
    METRIC_OPCODES,
    TENSOR_FLOPS_METRIC,
    other_work,
)

RESULTS = Path(__file__).resolve().parent / "results"
# What the task's tensor metric counts, as the dynamic tier excludes it: bf16 wgmma, or FP8's.
REQUIRED = {
    "GMMA": METRIC_OPCODES[TENSOR_FLOPS_METRIC["hopper"]],
    "QGMMA": METRIC_OPCODES[FAMILY_TENSOR_METRIC[("hopper", "QGMMA")]],
}
_OPCODE_LINE = re.compile(r'\s*"(\w+)": (\d+),?$')
_TIMING = re.compile(r"timing: candidate ([0-9.]+) ms.*?; ([0-9.]+) TFLOP/s")


def _whole_stages(text: str) -> Iterator[dict]:
    """Every dynamic stage in `text` with its opcodes, task FLOPs and tensor share, from whole JSON values."""
    decoder = json.JSONDecoder()
    start = 0
    while (brace := text.find("{", start)) >= 0:
        try:
            value, start = decoder.raw_decode(text, brace)
        except json.JSONDecodeError:
            start = brace + 1
            continue
        yield from _stages_in(value)


def _stages_in(value: object) -> Iterator[dict]:
    if isinstance(value, dict):
        if (
            value.get("executed_opcodes")
            and value.get("task_flops")
            and value.get("tensor_share") is not None
        ):
            yield value
        for inner in value.values():
            yield from _stages_in(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _stages_in(inner)


def _cut_stages(text: str) -> Iterator[tuple[dict[str, float], float]]:
    """Opcode listings printed one per line before a cut, each with the FLOPs its timing line implies."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if '"executed_opcodes": {' not in line:
            continue
        opcodes: dict[str, float] = {}
        for following in lines[index + 1 : index + 200]:
            match = _OPCODE_LINE.match(following)
            if match is None:
                break
            opcodes[match.group(1)] = float(match.group(2))
        timing = next((found for found in map(_TIMING.search, lines[index:]) if found), None)
        if opcodes and timing:
            yield opcodes, float(timing.group(1)) * 1e-3 * float(timing.group(2)) * 1e12


def shares(opcodes: dict[str, float], task_flops: float, required: frozenset[str]) -> dict[str, float]:
    """Each counted opcode's share of the task's FLOPs, outside the required family, as the tier counts it."""
    return {opcode: flops / task_flops for opcode, flops in other_work(opcodes, required).items()}


def main() -> None:
    rows: dict[tuple, tuple[float, str]] = {}
    for path in sorted(RESULTS.iterdir()):
        text = path.read_text(errors="replace") if path.is_file() else ""
        if "executed_opcodes" not in text:
            continue
        stages = list(_whole_stages(text))  # decoded once: the cut listings are read only without them
        for stage in stages:
            opcodes = stage["executed_opcodes"]
            required = REQUIRED["QGMMA" if "QGMMA" in opcodes else "GMMA"]
            found = shares(opcodes, stage["task_flops"], required)
            kernel = (stage.get("kernels") or ["?"])[0][:48]
            key = (round(stage["task_flops"]), round(sum(found.values()), 6))
            rows.setdefault(key, (sum(found.values()), f"{path.name}  {kernel}  {_top(found)}"))
        if '"executed_opcodes": {\n' in text and not stages:
            for opcodes, flops in _cut_stages(text):
                found = shares(opcodes, flops, REQUIRED["QGMMA" if "QGMMA" in opcodes else "GMMA"])
                key = (round(flops, -9), round(sum(found.values()), 6))
                note = f"listed opcodes only: the {len(opcodes)} most executed"
                rows.setdefault(key, (sum(found.values()), f"{path.name}  ({note})  {_top(found)}"))
    for total, text in sorted(rows.values(), key=lambda row: -row[0]):
        print(f"{total:8.3%}  {text}")
    print(f"{len(rows)} distinct profiles; the decoy bound is work beside the required family above 10 %")


def _top(found: dict[str, float]) -> str:
    return ", ".join(f"{op} {share:.3%}" for op, share in sorted(found.items(), key=lambda x: -x[1])[:5])


if __name__ == "__main__":
    main()
