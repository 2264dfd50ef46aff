"""Which kernel a call was stuck in when its time limit struck, for the `timeout` message. Standard
library only, like the worker.

The runner's watch thread reports, for the window it is stuck in, the kernels launched there (their
names from CUPTI's launch callbacks, on correctness calls) and those that finished (activity records).
The report comes from the candidate's own process, so it only ever words a message: the verdict is a
timeout either way. Without launch names, the launch order of the candidate's last completed call, then
its own kernels that did not finish, say as much as can be said.
"""

from __future__ import annotations

from collections.abc import Iterable

from workbench.evaluate.gpu.demangle import demangle


def _names(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _first_unfinished(launched: list[str], finished: list[str]) -> int | None:
    """Index of the first launch that no finished kernel of the same name accounts for, in order."""
    left = list(finished)
    for index, name in enumerate(launched):
        if name in left:
            left.remove(name)
        else:
            return index
    return None


def stuck_kernel(hang: dict | None, own: Iterable[str] | None, last_order: list[str]) -> str | None:
    """A clause naming the kernel the call was stuck in, or None when nothing can be told. Without a
    report (the watch thread gave none in time), only the candidate's own kernels are left to say."""
    if not isinstance(hang, dict) or "finished" not in hang:
        # What finished is unknown: no launch (nor the last call's first kernel) can be told running.
        hang, last_order = {}, []
    launched, finished = _names(hang.get("launched")), _names(hang.get("finished"))
    for sequence, source in ((launched, "launched"), (last_order, "as the last completed call ran them")):
        index = _first_unfinished(sequence, finished)
        if index is not None:
            name = demangle([sequence[index]])[sequence[index]]
            where = f"launch {index + 1} of the call"
            if source != "launched":
                where += f", {source}"
            return f"the kernel running when the limit struck: {name} ({where})"
    pending = sorted(set(own or ()) - set(finished))
    if not pending:
        return None
    readable = demangle(pending)
    if len(pending) == 1:
        return f"the kernel running when the limit struck: {readable[pending[0]]} (the candidate's only unfinished kernel)"
    listed = ", ".join(readable[name] for name in pending[:4])
    return f"the call was stuck in one of the candidate's unfinished kernels: {listed}"
