"""The run-time kernel checks: foreign kernels and work left running on another stream, decided from
kernel records (a stand-in for CUPTI's, which need a GPU), and the module's own kernel names."""

from __future__ import annotations

import asyncio
from pathlib import Path

from build_support import needs_nvcc

from workbench.evaluate.build import compile_source
from workbench.evaluate.correctness import kernel_problems
from workbench.evaluate.kernel_trace import KernelRecord, Window
from workbench.evaluate.result import Status
from workbench.evaluate.worker import module_kernels
from workbench.tasks import get_target

FAULTS = Path(__file__).parent / "gpu" / "faults"
OWN = "_Z16simt_gemm_kernelPK13__nv_bfloat16S1_PS_iii"
CUBLAS = "nvjet_sm90_tst_176x128_64x5_1x2_h_bz_TNN"
READBACK = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BinaryFunctorIN3c108BFloat16E"


class RecordedTrace:
    """Kernel records by window label, as CUPTI attributes them (see kernel_trace.py)."""

    method = "cupti"

    def __init__(self, by_label: dict[str, list[KernelRecord]]) -> None:
        self.by_label = by_label

    def kernels_in(self, window: Window) -> list[KernelRecord]:
        return self.by_label.get(window.label, [])


def windows() -> tuple[Window, Window]:
    return Window(None, "call"), Window(None, "readback")


def check(call: list[KernelRecord], readback: list[KernelRecord], own: set[str] | None):
    return kernel_problems(RecordedTrace({"call": call, "readback": readback}), *windows(), own)


def test_a_kernel_the_module_does_not_define_is_foreign() -> None:
    call = [KernelRecord(OWN, 100, 200, 4, 7), KernelRecord(CUBLAS, 210, 300, 5, 7)]
    status, message = check(call, [KernelRecord(READBACK, 310, 320, 6, 7)], {OWN})
    assert status == "foreign_kernel" and CUBLAS in message


def test_a_module_without_kernels_makes_every_launched_kernel_foreign() -> None:
    status, _ = check([KernelRecord(CUBLAS, 210, 300, 5, 7)], [], set())
    assert status == "foreign_kernel"


def test_unknown_kernel_names_skip_the_foreign_check_only() -> None:
    assert (
        check([KernelRecord(CUBLAS, 210, 300, 5, 7)], [KernelRecord(READBACK, 310, 320, 6, 7)], None) is None
    )


def test_work_still_running_on_another_stream_when_the_caller_reads_is_caught() -> None:
    call = [KernelRecord(OWN, 100, 5000, 4, 13)]
    status, message = check(call, [KernelRecord(READBACK, 300, 320, 6, 7)], {OWN})
    assert status == "runtime_error" and "another stream" in message


def test_another_stream_ordered_before_the_readback_is_fine() -> None:
    assert (
        check([KernelRecord(OWN, 100, 200, 4, 13)], [KernelRecord(READBACK, 300, 320, 6, 7)], {OWN}) is None
    )


@needs_nvcc
def test_module_kernels_tells_none_defined_from_unknown(tmp_path: Path) -> None:
    stage = asyncio.run(
        compile_source((FAULTS / "dlopen_cublas.cu").read_text(), get_target("hopper"), 300, tmp_path)
    )
    assert stage.status == Status.passed, stage.message
    assert module_kernels(stage.library_path) == []
    assert module_kernels(str(tmp_path / "missing.so")) is None
