"""What the worker's stages write into a stage's record, each a field of that stage's result model: the
models forbid any other key, and a record with one is not read back (no CPU test reaches the GPU-only
paths that write most of them, so the sources are read instead)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import BaseModel

from workbench.evaluate.result import CorrectnessStage, DynamicStage, TimingStage

GPU = Path(__file__).parent.parent / "workbench" / "evaluate" / "gpu"
RECORDS = {"stage", "base"}  # the names the stage modules give a record they fill in


def written_keys(source: str) -> set[str]:
    """Constant keys assigned by `stage["k"] = ...` (tuple targets too), passed as `stage.update(k=...)` or
    set beside a spread record (`{**base, "k": ...}`)."""
    keys: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            for target in node.targets:
                targets.extend(target.elts if isinstance(target, ast.Tuple) else [target])
        elif isinstance(node, ast.AugAssign):
            targets.append(node.target)
        for target in targets:
            if (
                isinstance(target, ast.Subscript)
                and isinstance(target.value, ast.Name)
                and target.value.id in RECORDS
                and isinstance(target.slice, ast.Constant)
            ):
                keys.add(str(target.slice.value))
        spread = isinstance(node, ast.Dict) and any(
            key is None and isinstance(value, ast.Name) and value.id in RECORDS
            for key, value in zip(node.keys, node.values, strict=True)
        )
        if isinstance(node, ast.Dict) and spread:  # `{**base, "k": ...}`: a record made afresh
            keys.update(str(key.value) for key in node.keys if isinstance(key, ast.Constant))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in RECORDS
        ):
            keys.update(keyword.arg for keyword in node.keywords if keyword.arg)
    return keys


@pytest.mark.parametrize(
    ("modules", "model"),
    [
        (("dynamic_stage.py", "negated_check.py", "profile.py"), DynamicStage),
        (("timing_stage.py",), TimingStage),
        (("correctness_stage.py",), CorrectnessStage),
    ],
    ids=["dynamic", "timing", "correctness"],
)
def test_every_key_a_stage_writes_is_a_field_of_its_result(
    modules: tuple[str, ...], model: type[BaseModel]
) -> None:
    keys = set().union(*(written_keys((GPU / name).read_text()) for name in modules))
    assert len(keys) >= 3  # the scan finds the records' writes
    assert sorted(keys - set(model.model_fields)) == []


def test_the_scan_sees_a_key_the_model_lacks() -> None:
    source = (
        'stage["status"] = 1\nbase["not_a_field"], stage["message"] = 2, 3\nstage.update(other=4)\n'
        'made = {**base, "spread": 5}\nplain = {"unrelated": 6}\n'
    )
    assert written_keys(source) == {"status", "not_a_field", "message", "other", "spread"}
