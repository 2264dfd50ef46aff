"""Which tasks' timed calls may be checked against torch's flash-attention kernels, and the half-and-half
rule that keeps such a pass within the task's tolerance (the kernels themselves need a GPU:
tests/gpu/test_fast_reference_gpu.py)."""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu.fast_reference import has_fast_reference, within_half
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target


def spec_of(name: str) -> dict:
    catalogue = Catalogue.load()
    task = catalogue.get(name)
    return gpu_spec(task, task.smallest_workload(), get_target("hopper"), catalogue)


@pytest.mark.parametrize(
    ("task", "has"),
    [
        ("mha_with_lse_d128", True),
        ("mha_with_lse_d64_causal", True),
        ("mha_bwd_d128", True),
        ("mha_bwd_d96_causal", True),
        ("fp8_mha_with_lse_d128", False),  # flash attention takes no fp8
        ("gemm_n7168_k5120", False),
        ("gqa_paged_decode_h24_kv8_d128_ps1", False),
    ],
)
def test_only_bf16_attention_in_the_flash_layout_has_a_library_answer(task: str, has: bool) -> None:
    assert has_fast_reference(spec_of(task), "cuda") is has
    assert not has_fast_reference(spec_of(task), "cpu")


def test_a_renamed_output_has_no_library_answer() -> None:
    spec = spec_of("mha_bwd_d128")
    outputs = spec["definition"]["outputs"]
    spec["definition"]["outputs"] = {
        "dK" if name == "dQ" else "dQ" if name == "dK" else name: t for name, t in outputs.items()
    }
    assert not has_fast_reference(spec, "cuda")


def test_a_call_passes_against_the_library_within_half_the_tolerance_and_no_further() -> None:
    answer = torch.linspace(-4, 4, 1000, dtype=torch.float32)
    tolerance = [(1e-2, 1e-2)]
    limit = torch.maximum(torch.full_like(answer, 1e-2), 1e-2 * answer.abs())
    assert within_half([answer + 0.45 * limit], [answer], tolerance)
    assert not within_half([answer + 0.55 * limit], [answer], tolerance)
    # One element past half, in a second output: the whole call goes to the task's reference.
    beyond = answer.clone()
    beyond[500] += limit[500]
    assert not within_half([answer, beyond], [answer, answer], tolerance * 2)
    # The share of elements a task lets miss is kept: one miss in 1000 at a 0.999 ratio passes.
    assert within_half([beyond], [answer], tolerance, ratio=0.999)


def test_the_two_halves_add_up_to_the_tasks_tolerance() -> None:
    """A call within half of a library answer within half of the reference passes the reference's rule."""
    reference = torch.linspace(-4, 4, 1001, dtype=torch.float32)
    limit = torch.maximum(torch.full_like(reference, 1e-2), 1e-2 * reference.abs())
    library = reference + 0.49 * limit
    call = library + 0.49 * torch.maximum(torch.full_like(library, 1e-2), 1e-2 * library.abs())
    assert within_half([library], [reference], [(1e-2, 1e-2)])
    assert within_half([call], [library], [(1e-2, 1e-2)])
    assert within_half([call], [reference], [(2e-2, 2e-2)])  # i.e. within the full 1e-2
