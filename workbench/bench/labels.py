"""The names a report shows: the ones a person chose, never a host path.

A sweep records a scripted or replayed model by its file's absolute path (so a session says which
file played it); a report names it by the file's name. Sources are said in words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import replace

from workbench.bench.ptxbench import SOURCE as PTXBENCH
from workbench.bench.records import TrajectoryRecord

SOURCES = {"sweep": "this workbench", PTXBENCH: "PTXBench (published)"}
FILE_MODELS = ("scripted:", "replay:")


def model_label(model: str) -> str:
    """`scripted:/home/me/sweep/refs.json` → `scripted:refs.json`; any other model string as it is."""
    for prefix in FILE_MODELS:
        if model.startswith(prefix):
            return prefix + model.removeprefix(prefix).replace("\\", "/").rsplit("/", 1)[-1]
    return model


def model_labels(models: Iterable[str]) -> dict[str, str]:
    """Every model's label; two files of one name in different folders get a short hash of their
    path each, so that they stay apart without showing where they live."""
    models = sorted(set(models))
    labels = {model: model_label(model) for model in models}
    shared = {label for label in labels.values() if list(labels.values()).count(label) > 1}
    for model, label in labels.items():
        if label in shared:
            labels[model] = f"{label} #{hashlib.sha256(model.encode()).hexdigest()[:6]}"
    return labels


def source_label(source: str) -> str:
    return SOURCES.get(source, source)


def labelled(records: Sequence[TrajectoryRecord]) -> list[TrajectoryRecord]:
    """The records with each model named by its label, so that no report built from them holds a path."""
    labels = model_labels(r.key.model for r in records)
    return [replace(r, key=replace(r.key, model=labels[r.key.model])) for r in records]
