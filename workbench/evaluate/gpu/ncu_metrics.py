"""Which metrics this Nsight Compute can collect on a target's chip, asked offline.

ncu refuses a whole profile when one metric name is unknown to it, so a metric whose name changed
between versions would fail every dynamic tier that asks for it. A metric that only sharpens a rule
(the bytes ordinary loads fetched, for a memory-bound task) is asked for only where this ncu lists it:
`ncu --query-metrics --chip CHIP` needs no GPU and no permission, so the worker may ask at any time
without touching the device it is timing.

Standard library only: the worker runs this on a bare GPU host.
"""

from __future__ import annotations

import re
import subprocess

# The chip of each target's datacenter part (H100/H200: GH100; B200: GB100).
CHIPS = {"hopper": "gh100", "blackwell": "gb100"}
QUERY_TIMEOUT_S = 60.0
# A listing line starts with the metric's base name (`unit__counter_qualifiers`), then its description.
_NAME = re.compile(r"^\s*([a-z0-9]+__[a-z0-9_]+)\b")


def parse_listing(text: str) -> frozenset[str]:
    """The base metric names of `ncu --query-metrics` output (headers and descriptions left out)."""
    return frozenset(match.group(1) for line in text.splitlines() if (match := _NAME.match(line)))


def listed_metrics(ncu: str, target: str) -> frozenset[str]:
    """The base metric names this ncu lists for `target`'s chip; empty when it cannot say (an unknown
    target, a query that failed or hung): a metric not listed is then not asked for."""
    chip = CHIPS.get(target)
    if chip is None:
        return frozenset()
    try:
        done = subprocess.run(
            [ncu, "--query-metrics", "--chip", chip],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return parse_listing(done.stdout) if done.returncode == 0 else frozenset()
