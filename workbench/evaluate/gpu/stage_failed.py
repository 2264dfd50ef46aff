"""How a stage ends early: the exception that carries its record, and the record for a child that gave
no answer. Standard library only, like the worker."""

from __future__ import annotations

from workbench.evaluate.gpu.isolation import Reply
from workbench.evaluate.gpu.protocol import StageRecord, Status


class StageFailed(Exception):
    """A stage ends early with this stage record."""

    def __init__(self, stage: StageRecord) -> None:
        super().__init__(stage.get("message", ""))
        self.stage = stage


def failure(status: Status, what: str, reply: Reply) -> StageRecord:
    """A stage record for a child that gave no reply: timed out, crashed, exited, or forged its reply."""
    if reply.forged:
        return {
            "status": Status.tampered,
            "message": f"{what}: a line that does not answer the request came back on the harness's channel: "
            "the candidate wrote to it",
        }
    if reply.timed_out:
        message = f"{what}: no answer within the time limit; the candidate's process group was killed"
    else:
        message = f"{what}: the candidate's process {reply.exit_description}"
    if reply.evidence:
        message += f" ({reply.evidence})"
    return {"status": Status.timeout if reply.timed_out else status, "message": message}
