"""Wall seconds by part of one piece of work (a stage, a check), for the verdict's `parts_s`. Standard
library only: the worker uses it as well as the judge."""

from __future__ import annotations

import time
from collections.abc import Callable


class PartClock:
    """Each `mark` closes a part begun at the previous mark (or at the start); a part marked again adds
    up. `sync` runs first at every mark (the judge's device synchronisation), so work queued on a device
    in a part is counted in that part."""

    def __init__(self, sync: Callable[[], object] | None = None) -> None:
        self.sync = sync
        self.parts: dict[str, float] = {}
        self.last = time.perf_counter()

    def mark(self, part: str) -> None:
        if self.sync is not None:
            self.sync()
        now = time.perf_counter()
        self.parts[part] = self.parts.get(part, 0.0) + now - self.last
        self.last = now

    def rounded(self, digits: int = 4) -> dict[str, float]:
        return {part: round(seconds, digits) for part, seconds in self.parts.items()}
