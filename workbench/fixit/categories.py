"""Failure categories of repair pairs: the evaluator's statuses grouped by what the fix has to change."""

from __future__ import annotations

from workbench.evaluate.result import Status

IMPROVEMENT = "improvement"
OTHER = "other"

_CATEGORY: dict[str, str] = {
    Status.banned: "banned",
    Status.foreign_kernel: "banned",  # a library kernel caught at run time instead of in the source
    Status.unsupported: "compile",  # a construct the workbench does not run: rewritten like a build error
    Status.compile_error: "compile",
    Status.abi_mismatch: "compile",
    Status.runtime_error: "runtime",
    Status.timeout: "timeout",
    Status.incorrect_numerical: "numerical",
    Status.incorrect_shape: "numerical",
    Status.incorrect_dtype: "numerical",
    Status.inputs_modified: "numerical",
    Status.static_missing_family: "family_missing",
    Status.dynamic_not_executed: "not_executed",
    Status.low_tensor_share: "not_executed",
    Status.faster_than_light: "integrity",
    Status.profile_mismatch: "integrity",
    Status.decoy: "integrity",
    Status.stray_kernel: "integrity",
    Status.tampered: "integrity",
}

# Verdicts that are no failure of the kernel: nothing to repair.
NOT_FAILURES = frozenset({Status.passed, Status.not_run, Status.infrastructure_error})


def category(status: str) -> str:
    """The category of a failed verdict; a status this version does not know is `other`, never an error."""
    return _CATEGORY.get(str(status), OTHER)
