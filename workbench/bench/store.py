"""The results store: SQLite in the sweep folder, one row per turn and one per trajectory.

It is a cache of the session files (and of imported PTXBench data): `workbench.bench.folder` fills it
and can rebuild it from scratch. WAL mode, so a report can read while a sweep writes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Self

from workbench.bench.records import TrajectoryRecord, TurnRow
from workbench.bench.spec import TrajectoryKey
from workbench.errors import UserError

SCHEMA_VERSION = "1"
STORE_FILE = "results.sqlite"
KEY_COLUMNS = ("run", "model", "target", "task", "variant", "trajectory")
TIERS = ("build", "static", "correctness", "dynamic", "timing")
_KEY = ", ".join(KEY_COLUMNS)
_KEY_DDL = ", ".join(f"{c} TEXT NOT NULL" for c in KEY_COLUMNS)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trajectories (
    {_KEY_DDL},
    source TEXT NOT NULL, session_path TEXT, finished INTEGER NOT NULL, end_reason TEXT,
    file_size INTEGER, file_mtime_ns INTEGER,
    PRIMARY KEY ({_KEY})
);
CREATE TABLE IF NOT EXISTS turns (
    {_KEY_DDL}, turn INTEGER NOT NULL,
    status TEXT NOT NULL, {", ".join(f"{t}_status TEXT" for t in TIERS)},
    correct INTEGER NOT NULL, sass_verified INTEGER NOT NULL, static_passed INTEGER,
    speedup REAL, tensor_share REAL, prompt_tokens INTEGER, completion_tokens INTEGER,
    cost_usd REAL, latency_s REAL, source_sha256 TEXT, session_path TEXT,
    PRIMARY KEY ({_KEY}, turn)
);
"""
_TURN_COLUMNS = (
    *KEY_COLUMNS,
    "turn",
    "status",
    *(f"{t}_status" for t in TIERS),
    "correct",
    "sass_verified",
    "static_passed",
    "speedup",
    "tensor_share",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
    "source_sha256",
    "session_path",
)


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


# SQLite hands back what a column holds: INTEGER as int, REAL as float (or int where it was stored so).
def _int(value: object) -> int | None:
    if value is None or isinstance(value, int):
        return value
    raise TypeError(f"an integer column holds {value!r}")


def _float(value: object) -> float | None:
    if value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return float(value)
    raise TypeError(f"a real column holds {value!r}")


class Store:
    """`with Store(path) as store: …`; every write is one transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            found = self._schema_version()
            if found is not None and found != SCHEMA_VERSION:
                self._drop()  # a cache of the sessions: rebuilt, never migrated
            self._db.executescript(_SCHEMA)
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (SCHEMA_VERSION,))
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{path}: not a results store ({exc})") from None
        except OSError as exc:
            raise UserError(f"{path}: cannot open the results store ({exc.strerror})") from None

    def _schema_version(self) -> str | None:
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError:
            return None
        return row[0] if row else None

    def _drop(self) -> None:
        for table in ("meta", "trajectories", "turns"):
            self._db.execute(f"DROP TABLE IF EXISTS {table}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- writing ----------------------------------------------------------------------------------

    def put(
        self, records: Iterable[TrajectoryRecord], stamps: dict[str, tuple[int, int]] | None = None
    ) -> None:
        """Replace these trajectories and their turns; `stamps`: session path -> (size, mtime_ns)."""
        stamps = stamps or {}
        with self._db:
            for record in records:
                self._delete(record.key)
                size, mtime = stamps.get(record.session_path or "", (None, None))
                self._db.execute(
                    f"INSERT INTO trajectories VALUES ({', '.join('?' * 12)})",
                    (
                        *self._key(record.key),
                        record.source,
                        record.session_path,
                        int(record.finished),
                        record.end_reason,
                        size,
                        mtime,
                    ),
                )
                self._db.executemany(
                    f"INSERT INTO turns ({', '.join(_TURN_COLUMNS)}) VALUES ({', '.join('?' * len(_TURN_COLUMNS))})",
                    [self._turn_values(record, row) for row in record.rows],
                )

    def remove(self, keys: Iterable[TrajectoryKey]) -> None:
        with self._db:
            for key in keys:
                self._delete(key)

    def remove_source(self, source: str, runs: Iterable[str] | None = None) -> None:
        """Forget a source's trajectories (all, or those of some runs) before they are written anew."""
        with self._db:
            where, args = "source = ?", [source]
            if runs is not None:
                names = list(runs)
                where += f" AND run IN ({', '.join('?' * len(names))})"
                args.extend(names)
            keys = self._db.execute(f"SELECT {_KEY} FROM trajectories WHERE {where}", args).fetchall()
            for key in keys:
                self._delete(TrajectoryKey(*key))

    def _delete(self, key: TrajectoryKey) -> None:
        match = " AND ".join(f"{c} = ?" for c in KEY_COLUMNS)
        self._db.execute(f"DELETE FROM turns WHERE {match}", self._key(key))
        self._db.execute(f"DELETE FROM trajectories WHERE {match}", self._key(key))

    @staticmethod
    def _key(key: TrajectoryKey) -> tuple[str, ...]:
        return tuple(getattr(key, c) for c in KEY_COLUMNS)

    def _turn_values(self, record: TrajectoryRecord, row: TurnRow) -> tuple[object, ...]:
        tiers = [row.tiers.get(t) for t in TIERS]
        return (
            *self._key(record.key),
            row.turn,
            row.status,
            *tiers,
            int(row.correct),
            int(row.sass_verified),
            _flag(row.static_passed),
            row.speedup,
            row.tensor_share,
            row.prompt_tokens,
            row.completion_tokens,
            row.cost_usd,
            row.latency_s,
            row.source_sha256,
            record.session_path,
        )

    # --- reading ----------------------------------------------------------------------------------

    def stamps(self) -> dict[str, tuple[int | None, int | None, bool]]:
        """Session path -> (size, mtime_ns, finished) as last read, for the sweep's own trajectories."""
        rows = self._db.execute(
            "SELECT session_path, file_size, file_mtime_ns, finished FROM trajectories "
            "WHERE source = 'sweep' AND session_path IS NOT NULL"
        )
        return {path: (size, mtime, bool(done)) for path, size, mtime, done in rows}

    def records(self) -> list[TrajectoryRecord]:
        """Every trajectory with its turns, in key order."""
        turns: dict[tuple[str, ...], list[TurnRow]] = {}
        for values in self._db.execute(f"SELECT {', '.join(_TURN_COLUMNS)} FROM turns ORDER BY {_KEY}, turn"):
            item = dict(zip(_TURN_COLUMNS, values, strict=True))
            turns.setdefault(tuple(values[: len(KEY_COLUMNS)]), []).append(self._row(item))
        out: list[TrajectoryRecord] = []
        query = f"SELECT {_KEY}, source, session_path, finished, end_reason FROM trajectories ORDER BY {_KEY}"
        for values in self._db.execute(query):
            key = tuple(values[: len(KEY_COLUMNS)])
            source, session_path, finished, end_reason = values[len(KEY_COLUMNS) :]
            out.append(
                TrajectoryRecord(
                    key=TrajectoryKey(*key),
                    finished=bool(finished),
                    end_reason=end_reason,
                    rows=turns.get(key, []),
                    source=source,
                    session_path=session_path,
                )
            )
        return out

    @staticmethod
    def _row(item: dict[str, object]) -> TurnRow:
        static = item["static_passed"]
        return TurnRow(
            turn=_int(item["turn"]) or 0,
            status=str(item["status"]),
            correct=bool(item["correct"]),
            sass_verified=bool(item["sass_verified"]),
            static_passed=None if static is None else bool(static),
            speedup=_float(item["speedup"]),
            tiers={t: str(item[f"{t}_status"]) for t in TIERS if item[f"{t}_status"] is not None},
            tensor_share=_float(item["tensor_share"]),
            prompt_tokens=_int(item["prompt_tokens"]),
            completion_tokens=_int(item["completion_tokens"]),
            cost_usd=_float(item["cost_usd"]),
            latency_s=_float(item["latency_s"]),
            source_sha256=None if item["source_sha256"] is None else str(item["source_sha256"]),
        )

    def dump_turns(self) -> list[dict[str, object]]:
        """Every turn row as a dict (for CSV/JSON export and for comparing two stores)."""
        cursor = self._db.execute(f"SELECT {', '.join(_TURN_COLUMNS)} FROM turns ORDER BY {_KEY}, turn")
        return [dict(zip(_TURN_COLUMNS, values, strict=True)) for values in cursor]

    def meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: object) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))
