"""How a timeout names the kernel a call was stuck in, from what the runner's watch thread reported."""

from __future__ import annotations

from workbench.evaluate.gpu.hang import stuck_kernel

OWN = {"_Z9prologuePf", "_Z4mainPf", "_Z8epiloguePf"}


def test_launch_names_name_the_first_launch_that_did_not_finish() -> None:
    hang = {
        "window": "call",
        "launched": ["_Z9prologuePf", "_Z4mainPf", "_Z8epiloguePf"],
        "finished": ["_Z9prologuePf"],
    }
    assert (
        stuck_kernel(hang, OWN, [])
        == "the kernel running when the limit struck: main(float*) (launch 2 of the call)"
    )


def test_a_kernel_launched_twice_is_counted_per_launch() -> None:
    hang = {"launched": ["_Z4mainPf", "_Z4mainPf"], "finished": ["_Z4mainPf"]}
    assert "main(float*) (launch 2 of the call)" in (stuck_kernel(hang, OWN, []) or "")


def test_without_launch_names_the_last_completed_calls_order_is_used() -> None:
    # A timed call: no launch callbacks; the correctness calls ran prologue, main, epilogue.
    hang = {"window": "call:candidate", "finished": ["_Z9prologuePf", "_Z4mainPf"]}
    order = ["_Z9prologuePf", "_Z4mainPf", "_Z8epiloguePf"]
    said = stuck_kernel(hang, OWN, order)
    assert said == (
        "the kernel running when the limit struck: epilogue(float*) (launch 3 of the call, as the last "
        "completed call ran them)"
    )


def test_with_neither_the_unfinished_own_kernels_are_listed() -> None:
    assert stuck_kernel({"finished": ["_Z9prologuePf"]}, OWN, []) == (
        "the call was stuck in one of the candidate's unfinished kernels: main(float*), epilogue(float*)"
    )
    only = stuck_kernel({"finished": ["_Z9prologuePf", "_Z4mainPf"]}, OWN, [])
    assert (
        only
        == "the kernel running when the limit struck: epilogue(float*) (the candidate's only unfinished kernel)"
    )


def test_nothing_is_claimed_from_no_report_or_a_malformed_one() -> None:
    # The report comes from the candidate's process: anything that is not lists of names is ignored.
    assert stuck_kernel(None, None, ["_Z4mainPf"]) is None
    # No report at all: the own kernels are still known (all of them unfinished, as far as is known).
    assert stuck_kernel(None, {"_Z4mainPf"}, ["_Z4mainPf"]) == (
        "the kernel running when the limit struck: main(float*) (the candidate's only unfinished kernel)"
    )
    assert stuck_kernel({"launched": "main", "finished": [1, 2]}, None, []) is None
    assert stuck_kernel({"finished": sorted(OWN)}, OWN, []) is None


def test_launches_without_what_finished_name_no_single_kernel() -> None:
    # The flush that tells what finished did not return in time: any launch may be the running one.
    said = stuck_kernel({"launched": ["_Z9prologuePf", "_Z4mainPf"]}, OWN, ["_Z9prologuePf"])
    assert said is not None and said.startswith(
        "the call was stuck in one of the candidate's unfinished kernels"
    )
