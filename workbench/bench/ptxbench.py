"""PTXBench's published per-turn results as runs of the store, and its trajectories as sessions.

The per-turn CSV has (at least) `model, arch, definition, exp_dir, trajectory_id, turn, correctness,
speedup, correct_with_arch`; each `exp_dir` is a run named by its last path part. PTXBench counts turns
from 0; the store counts them from 1. Its data has no static tier, so static_passed is unknown there.
"""

from __future__ import annotations

import csv
import shutil
from dataclasses import replace
from pathlib import Path, PurePosixPath

from workbench.bench.records import NO_CODE, TrajectoryRecord, TurnRow
from workbench.bench.spec import TrajectoryKey
from workbench.bench.store import STORE_FILE, Store
from workbench.errors import UserError
from workbench.session.interop import import_trajectory

SOURCE = "ptxbench"
COLUMNS = (
    "model",
    "arch",
    "definition",
    "exp_dir",
    "trajectory_id",
    "turn",
    "correctness",
    "speedup",
    "correct_with_arch",
)
CORRECT = "Correct"
# PTXBench's failure classes, as the nearest workbench status (any other class keeps its own name).
STATUS = {
    "Compilation error": "compile_error",
    "Numerical error": "incorrect_numerical",
    "Runtime error": "runtime_error",
    "Kernel Execution Timeout": "timeout",
    "Sanitize Timeout": "timeout",
    "Profiling Service Timeout": "timeout",
    "Extraction error": NO_CODE,
}
ARCH = {"hopper": "hopper", "sm_90a": "hopper", "blackwell": "blackwell", "sm_100a": "blackwell"}
VARIANT = "paper"


def run_name(exp_dir: str) -> str:
    name = PurePosixPath(exp_dir.strip().rstrip("/")).name
    if not name:
        raise ValueError(f"exp_dir {exp_dir!r} names no run")
    return name


def _status(correctness: str, with_arch: bool) -> str:
    if correctness == CORRECT:
        return "passed" if with_arch else "correct_without_arch"
    return STATUS.get(correctness, correctness.strip().lower().replace(" ", "_") or "unknown")


def _row(row: dict[str, str]) -> TurnRow:
    correct = row["correctness"].strip() == CORRECT
    with_arch = row["correct_with_arch"].strip() in ("1", "True", "true")
    speedup = float(row["speedup"]) if correct and row["speedup"].strip() else None
    return TurnRow(
        turn=int(row["turn"]) + 1,
        status=_status(row["correctness"].strip(), with_arch),
        correct=correct,
        sass_verified=correct and with_arch,
        static_passed=None,
        speedup=speedup,
    )


def read_per_turn(path: Path) -> list[TrajectoryRecord]:
    """The CSV's trajectories, one record each; a bad line is one error naming it."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    rows: dict[TrajectoryKey, dict[int, TurnRow]] = {}
    with handle:
        try:
            reader = csv.DictReader(handle)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(f"{path}: not PTXBench per-turn data (no column {', '.join(missing)})")
            for line, row in enumerate(reader, start=2):
                try:
                    arch = ARCH[row["arch"].strip().lower()]
                    key = TrajectoryKey(
                        run_name(row["exp_dir"]),
                        row["model"].strip(),
                        arch,
                        row["definition"].strip(),
                        VARIANT,
                        row["trajectory_id"].strip(),
                    )
                    turn = _row(row)
                except KeyError:
                    raise UserError(
                        f"{path}:{line}: unknown arch {row['arch']!r} (hopper or blackwell)"
                    ) from None
                except (ValueError, TypeError, AttributeError) as exc:
                    raise UserError(f"{path}:{line}: {exc}") from None
                turns = rows.setdefault(key, {})
                if turn.turn in turns:
                    raise UserError(
                        f"{path}:{line}: turn {turn.turn - 1} of {key.trajectory} is listed twice"
                    )
                turns[turn.turn] = turn
        except (csv.Error, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: not a CSV file ({exc})") from None
    return [
        TrajectoryRecord(
            key=key, finished=True, end_reason=None, source=SOURCE, rows=[turns[t] for t in sorted(turns)]
        )
        for key, turns in sorted(rows.items())
    ]


IMPORTS = "imports"  # under the sweep folder: the CSVs imported, read again by a rebuild
SESSIONS = "imported"  # under the sweep folder: <run>/<trajectory_id>.jsonl


def session_relpath(key: TrajectoryKey) -> str:
    return f"{SESSIONS}/{key.run}/{key.trajectory}.jsonl"


def import_into(store: Store, path: Path, root: Path) -> list[TrajectoryRecord]:
    """Replace the store's rows of the runs this CSV holds with the CSV's, linked to imported sessions."""
    records = [
        replace(r, session_path=session_relpath(r.key)) if (root / session_relpath(r.key)).is_file() else r
        for r in read_per_turn(path)
    ]
    store.remove_source(SOURCE, runs={r.key.run for r in records})
    store.put(records)
    return records


def keep_copy(path: Path, imports: Path) -> Path:
    """The CSV copied into the sweep folder, so that a rebuilt store can read it again."""
    imports.mkdir(parents=True, exist_ok=True)
    copy = imports / path.name
    if copy.exists() and copy.resolve() == path.resolve():
        return copy
    shutil.copyfile(path, copy)
    return copy


def import_sessions(records: list[TrajectoryRecord], runs_root: Path, root: Path) -> int:
    """Each run's mini-swe-agent trajectories (`RUNS/<run>/trajectories/<trajectory_id>.json`) as sessions.

    A trajectory file that is missing is skipped; one imported before is kept as it is. Returns how
    many sessions the folder now has for these records.
    """
    count = 0
    for record in records:
        key = record.key
        source = runs_root / key.run / "trajectories" / f"{key.trajectory}.json"
        session = root / session_relpath(key)
        if source.is_file() and not session.exists():
            import_trajectory(source, session, task=key.task, target=key.target)
        count += session.is_file()
    return count


def import_ptxbench(
    path: Path, root: Path, runs_root: Path | None = None
) -> tuple[list[TrajectoryRecord], int]:
    """`ptxwb bench import-ptxbench`: the CSV kept in the folder, its runs in the store; (records, sessions)."""
    if root.exists() and not root.is_dir():
        raise UserError(f"{root}: not a folder")
    records = read_per_turn(path)  # bad data is said before anything is written
    root.mkdir(parents=True, exist_ok=True)
    sessions = import_sessions(records, runs_root, root) if runs_root is not None else 0
    copy = keep_copy(path, root / IMPORTS)
    with Store(root / STORE_FILE) as store:
        return import_into(store, copy, root), sessions
