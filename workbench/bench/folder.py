"""A sweep folder: the spec it runs, its session files, imported data, and the results store.

DIR/sweep.toml            the spec as the user wrote it (for people)
DIR/sweep.json            the spec as run (scripted paths made absolute): what --resume compares
DIR/sessions/*.jsonl      one session per trajectory, the source of truth
DIR/sessions/unfinished/  attempts cut short by a crash, kept, never counted
DIR/imports/*.csv         PTXBench per-turn data imported here, so a rebuild can read it again
DIR/results.sqlite        the store: a cache of all of the above
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from workbench.bench.ptxbench import IMPORTS, import_into
from workbench.bench.records import TrajectoryRecord, from_session
from workbench.bench.spec import Planned, SweepSpec, plan
from workbench.bench.store import STORE_FILE, Store
from workbench.errors import UserError
from workbench.session.log import read_session

SPEC_TEXT = "sweep.toml"
SPEC_JSON = "sweep.json"
UNFINISHED = "sessions/unfinished"


class SweepFolder:
    def __init__(self, root: Path) -> None:
        if root.exists() and not root.is_dir():
            raise UserError(f"{root}: not a folder")
        self.root = root

    @property
    def store_path(self) -> Path:
        return self.root / STORE_FILE

    def has_sweep(self) -> bool:
        return (self.root / SPEC_JSON).is_file()

    def spec(self) -> SweepSpec | None:
        path = self.root / SPEC_JSON
        if not path.is_file():
            return None
        try:
            return SweepSpec.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: damaged sweep spec ({str(exc).splitlines()[0]})") from None

    def write_spec(self, spec: SweepSpec, text: str) -> None:
        """Record the spec being run; written through a temporary file, so a crash leaves the old or the new."""
        self.root.mkdir(parents=True, exist_ok=True)
        for name, content in ((SPEC_TEXT, text), (SPEC_JSON, spec.model_dump_json(indent=2) + "\n")):
            temporary = self.root / f".{name}.tmp"
            temporary.write_text(content, encoding="utf-8")
            os.replace(temporary, self.root / name)

    def planned(self) -> list[Planned]:
        spec = self.spec()
        return plan(spec) if spec is not None else []

    def open_store(self) -> Store:
        if not self.root.is_dir():
            raise UserError(f"{self.root}: no such folder")
        return Store(self.store_path)

    def sync(self, store: Store) -> None:
        """Bring the store up to date with the session files: only files whose size or time changed are read."""
        known = store.stamps()
        changed: list[TrajectoryRecord] = []
        stamps: dict[str, tuple[int, int]] = {}
        gone = []
        for item in self.planned():
            path = self.root / item.relpath
            try:
                stat = path.stat()
            except FileNotFoundError:
                if item.relpath in known:
                    gone.append(item.key)
                continue
            stamp = (stat.st_size, stat.st_mtime_ns)
            if known.get(item.relpath, (None, None, False))[:2] == stamp:
                continue
            changed.append(from_session(item.key, read_session(path), item.relpath))
            stamps[item.relpath] = stamp
        store.remove(gone)
        store.put(changed, stamps)

    def records(self) -> list[TrajectoryRecord]:
        """Every trajectory of the folder (the sweep's, synced first, and imported ones)."""
        with self.open_store() as store:
            self.sync(store)
            return store.records()

    def rebuild(self) -> None:
        """Throw the store away and make it again from the session files and the imported CSVs."""
        self.store_path.unlink(missing_ok=True)
        for suffix in ("-wal", "-shm"):
            Path(f"{self.store_path}{suffix}").unlink(missing_ok=True)
        with self.open_store() as store:
            self.sync(store)
            for csv_path in sorted((self.root / IMPORTS).glob("*.csv")):
                import_into(store, csv_path, self.root)


def read_folders(roots: list[Path]) -> list[TrajectoryRecord]:
    records: list[TrajectoryRecord] = []
    for root in roots:
        folder = SweepFolder(root)
        if not folder.store_path.is_file() and not folder.has_sweep():
            raise UserError(f"{root}: no sweep and no results store here")
        records.extend(folder.records())
    return records
