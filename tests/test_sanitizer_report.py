"""compute-sanitizer's memcheck report read into the line the agent gets: kind, kernel, source line
(quoted from the candidate's source), thread, block and address. The report below is written in
compute-sanitizer's layout; on the H200 (2026-12-01, benchmarks/results/2026-12-01_gpu_tests_integrity_run1.log)
the parser read the kind, kernel, line, thread and block of real reports, but no address: the address
line is now read whatever few words lead to it, which no real report has shown yet."""

from __future__ import annotations

from workbench.evaluate.gpu.sanitizer import SANITIZER_EXIT, memcheck_message, nothing_found, parse_memcheck

REPORT = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 2 bytes
=========     at stray::past_the_end(__nv_bfloat16 *, unsigned long)+0x70 in /tmp/ptxwb/ab/kernel.cu:3
=========     by thread (0,0,0) in block (0,0,0)
=========     Access at 0x7f1e2c380000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1e2c000000 of size 3670016 bytes
=========
========= Target application returned an error
========= ERROR SUMMARY: 1 error
"""
SOURCE = "// line 1\nnamespace stray {\n__global__ void past_the_end(__nv_bfloat16* c, size_t n) { c[n] = 1; }\n}\n"


def test_the_first_fault_is_read_whole() -> None:
    (fault,), count = parse_memcheck(REPORT)
    assert count == 1
    assert fault.kind == "Invalid __global__ write of size 2 bytes"
    assert fault.kernel == "stray::past_the_end" and fault.line == 3 and fault.file.endswith("kernel.cu")
    assert (fault.thread, fault.block, fault.address) == ("0,0,0", "0,0,0", "0x7f1e2c380000")
    assert "1 bytes after the nearest allocation" in fault.detail


def test_the_message_quotes_the_candidate_line_and_names_the_workload() -> None:
    message = memcheck_message(REPORT, SOURCE, {"M": 256})
    assert message.startswith("memcheck at the smallest workload (M=256): Invalid __global__ write")
    assert (
        "kernel.cu:3 (`__global__ void past_the_end" in message and "thread (0,0,0) block (0,0,0)" in message
    )


def test_a_rerun_at_the_failing_workload_says_so() -> None:
    message = memcheck_message(REPORT, SOURCE, {"M": 1024}, where="the failing workload")
    assert message is not None and message.startswith("memcheck at the failing workload (M=1024): Invalid")


def test_the_address_is_read_whatever_words_lead_to_it() -> None:
    for wording in ("Access at", "Access to", "Address", "Access to address"):
        (fault,), _ = parse_memcheck(REPORT.replace("Access at", wording))
        assert fault.address == "0x7f1e2c380000", wording
        assert "address 0x7f1e2c380000 is out of bounds" in fault.describe()


def test_a_clean_report_is_no_message() -> None:
    assert (
        memcheck_message("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n", None, {}) is None
    )


def test_a_crash_memcheck_does_not_explain_says_whether_it_recurred_under_memcheck() -> None:
    """PTXBench's own debug trial (a wgmma GEMM whose host code exits on `unspecified launch failure`) got
    only "found no memory error" on an H100 at 7827607: the line now says whether the call failed under
    memcheck too, with the child's own words, or ran through (a fault that hangs on timing)."""
    axes = {"M": 8192}
    ran = nothing_found(axes, 0, "")
    assert ran.startswith(
        "memcheck at the failing workload (M=8192) found no memory error, and the call did not"
    )
    assert "depends on timing" in ran
    output = "\n  \nCUDA error unspecified launch failure at kernel.cu:237\n"
    failed = nothing_found(axes, 1, output)
    assert (
        "though the call failed under it too (exited with status 1: CUDA error unspecified launch failure"
        in failed
    )
    assert failed.endswith("a fault memcheck does not report")
    assert "(killed by SIGKILL)" in nothing_found(axes, -9, "")
    assert nothing_found(axes, SANITIZER_EXIT, "").endswith("though its exit status says it found errors")
