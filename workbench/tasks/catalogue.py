"""Load task definitions, workloads and the workbench sidecar; resolve a task by name or path."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from workbench.errors import UserError
from workbench.jsonfile import read_json, read_text
from workbench.paths import tasks_dir
from workbench.tasks import cost
from workbench.tasks.devices import DEVICES, speed_of_light_ms
from workbench.tasks.models import Definition, Sidecar, TaskFacts, Workload, WorkloadRow
from workbench.tasks.targets import Target, get_target

SIDECAR = "workbench.json"
M = TypeVar("M", bound=BaseModel)


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"field {where}: {first['msg']}{more}"


def _validate(model: type[M], data: object, where: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{where}: {_describe(exc)}") from None


def load_definition(path: Path) -> Definition:
    return _validate(Definition, read_json(path), str(path))


def load_workloads(path: Path, definition: Definition) -> list[Workload]:
    """Read a FlashInfer-Trace workloads JSONL file, keeping the rows for this definition."""
    workloads: list[Workload] = []
    lines = read_text(path, "workloads file").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: malformed JSON: {exc.msg}") from None
        row = _validate(WorkloadRow, data, f"{path}:{number}")
        if row.definition != definition.name:
            continue
        try:
            definition.axis_values(row.workload.axes)
        except ValueError as exc:
            raise UserError(f"{path}:{number}: {exc}") from None
        workloads.append(row.workload)
    return workloads


def _natural(path: Path) -> list[object]:
    # gemm_n256 before gemm_n2048: numbers compare as numbers.
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.stem)]


def infer_facts(definition: Definition) -> TaskFacts | None:
    """Facts for a definition from outside the catalogue; only the GEMM shape is recognised."""
    if definition.op_type == "gemm" and {"M", "N", "K"} <= set(definition.axes):
        return TaskFacts(family="gemm", baseline="cublas")
    return None


@dataclass
class Task:
    definition: Definition
    facts: TaskFacts | None
    workloads: list[Workload] = field(default_factory=list)
    source: Path | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    def workload(self, key: str | None = None) -> Workload:
        """A workload by uuid (or its first 8 characters); the headline one, or the first, by default."""
        if not self.workloads:
            raise UserError(f"task {self.name} has no workloads")
        if key is None:
            key = self.facts.headline_workload if self.facts and self.facts.headline_workload else None
            if key is None:
                return self.workloads[0]
        matches = [w for w in self.workloads if w.uuid == key or w.uuid.startswith(key)]
        if len(matches) != 1:
            raise UserError(f"task {self.name}: no single workload matches {key!r}")
        return matches[0]

    def seed(self, workload: Workload) -> int:
        if self.facts and workload.uuid in self.facts.seeds:
            return self.facts.seeds[workload.uuid]
        return int(workload.uuid.replace("-", "")[:8], 16)

    def flops(self, workload: Workload) -> float | None:
        return cost.flops(self.definition, self.facts, workload.axes) if self.facts else None

    def scores(self, workload: Workload) -> float:
        """Query-key scores of an attention task's workload (0 for any other task)."""
        return cost.scores(self.definition, self.facts, workload.axes) if self.facts else 0.0

    def min_bytes(self, workload: Workload) -> float:
        return cost.min_bytes(self.definition, workload.axes, self.facts)

    def smallest_workload(self) -> Workload:
        """The cheapest workload: where memcheck's call runs (it is slow per kernel)."""
        return min(self.workloads, key=lambda workload: self.flops(workload) or self.min_bytes(workload))

    def speed_of_light_ms(self, workload: Workload) -> dict[str, float]:
        work = self.flops(workload)
        if work is None or self.facts is None:
            return {}
        moved = self.min_bytes(workload)
        dtype = self.facts.compute_dtype
        return {key: speed_of_light_ms(work, moved, device, dtype) for key, device in DEVICES.items()}

    def required_family(self, target: Target) -> str:
        """The instruction family this task must prove on `target`: the task's own where it names one
        (QGMMA for FP8 matrix work on Hopper), else the target's."""
        if self.facts is not None and target.name in self.facts.required:
            return self.facts.required[target.name]
        return target.required_family

    def target(self, name: str) -> Target:
        """The target `name` as this task is judged on it (its required family resolved)."""
        target = get_target(name)
        return target.model_copy(update={"required_family": self.required_family(target)})


@dataclass
class Catalogue:
    root: Path
    tasks: dict[str, Task]

    @classmethod
    def load(cls, root: Path | None = None) -> Catalogue:
        root = root or tasks_dir()
        sidecar = _validate(Sidecar, read_json(root / SIDECAR), str(root / SIDECAR))
        tasks: dict[str, Task] = {}
        for path in sorted((root / "definitions").glob("*.json"), key=_natural):
            definition = load_definition(path)
            if definition.name != path.stem:
                raise UserError(f"{path}: field name: {definition.name!r} differs from the file name")
            facts = sidecar.tasks.get(definition.name)
            if facts is None:
                raise UserError(f"{root / SIDECAR}: no entry for task {definition.name}")
            strange = sorted(set(facts.output_tolerances) - set(definition.outputs))
            if strange:
                raise UserError(
                    f"{root / SIDECAR}: task {definition.name}: field output_tolerances: "
                    f"{', '.join(strange)} is no output of the task"
                )
            workloads_path = root / "workloads" / f"{definition.name}.jsonl"
            workloads = load_workloads(workloads_path, definition) if workloads_path.exists() else []
            tasks[definition.name] = Task(definition, facts, workloads, path)
        unknown = set(sidecar.tasks) - set(tasks)
        if unknown:
            raise UserError(
                f"{root / SIDECAR}: entries for missing definitions: {', '.join(sorted(unknown))}"
            )
        return cls(root, tasks)

    def get(self, name: str) -> Task:
        try:
            return self.tasks[name]
        except KeyError:
            close = [n for n in self.tasks if name in n][:3]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise UserError(f"unknown task {name!r}{hint}; `ptxwb tasks` lists them") from None


def resolve_task(name_or_path: str, catalogue: Catalogue | None = None) -> Task:
    """A catalogue task by name, or a Definition JSON file (with workloads beside it, if any)."""
    if name_or_path.endswith(".json") or "/" in name_or_path:
        path = Path(name_or_path)
        definition = load_definition(path)
        workloads_path = path.parent.parent / "workloads" / f"{definition.name}.jsonl"
        workloads = load_workloads(workloads_path, definition) if workloads_path.exists() else []
        return Task(definition, infer_facts(definition), workloads, path)
    return (catalogue or Catalogue.load()).get(name_or_path)
