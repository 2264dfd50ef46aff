"""Seeded inputs, derived backward inputs and chunked references, on CPU tensors."""

from __future__ import annotations

import torch

from workbench.evaluate.gpu.inputs import compile_reference, make_inputs, make_outputs, run_reference
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, get_target

SMALL_ATTENTION = {"B": 2, "H": 3, "S": 32, "D": 64}


def spec_for(name: str, axes: dict[str, int] | None = None) -> dict:
    catalogue = Catalogue.load()
    task = catalogue.get(name)
    spec = gpu_spec(task, task.smallest_workload(), get_target("hopper"), catalogue)
    spec["device"] = "cpu"
    if axes:
        spec["axes"] = dict(axes)
    return spec


def test_inputs_are_a_function_of_the_seed() -> None:
    spec = spec_for("gemm_n128_k2048")
    a1, b1 = make_inputs(spec, 7, "cpu")
    a2, b2 = make_inputs(spec, 7, "cpu")
    a3, _ = make_inputs(spec, 8, "cpu")
    assert torch.equal(a1, a2) and torch.equal(b1, b2) and not torch.equal(a1, a3)
    assert a1.dtype == torch.bfloat16 and list(a1.shape) == [spec["axes"]["M"], 2048]
    assert 0.9 < float(a1.float().std()) < 1.1  # standard normal, not zeros


def test_outputs_start_as_nan() -> None:
    (c,) = make_outputs(spec_for("gemm_n128_k2048"), "cpu")
    assert bool(torch.isnan(c.float()).all())


def test_backward_inputs_o_and_lse_come_from_the_forward_reference() -> None:
    spec = spec_for("mha_bwd_d64_causal", SMALL_ATTENTION)
    assert spec["derived_inputs"] == ["O", "LSE"] and spec["forward"]["outputs"] == ["O", "LSE"]
    q, k, v, o, d_o, lse = make_inputs(spec, 11, "cpu")
    forward = compile_reference(spec["forward"]["reference"])
    want_o, want_lse = forward(q, k, v)
    assert torch.equal(o, want_o) and torch.equal(lse, want_lse)
    assert lse.dtype == torch.float32 and list(lse.shape) == [2, 3, 32]
    # The causal forward: the first query attends to itself only, so its LSE is its own scaled score.
    first = (q[0, 0, 0].float() @ k[0, 0, 0].float()) / 8.0
    assert torch.allclose(lse[0, 0, 0], first, atol=1e-4)
    assert not torch.equal(d_o, q)


def test_chunked_reference_equals_the_whole_one() -> None:
    spec = spec_for("mha_bwd_d64", SMALL_ATTENTION)
    inputs = make_inputs(spec, 3, "cpu")
    reference = compile_reference(spec["definition"]["reference"])
    whole = run_reference(reference, spec["definition"], spec["axes"], inputs)
    one_head_at_a_time = run_reference(
        reference, spec["definition"], spec["axes"], inputs, chunk_elements=32 * 32
    )
    assert len(whole) == 3
    for a, b in zip(whole, one_head_at_a_time, strict=True):
        assert torch.equal(a, b)


def test_the_spec_carries_the_smallest_workload_for_memcheck() -> None:
    catalogue = Catalogue.load()
    task = catalogue.get("gemm_n7168_k5120")
    spec = gpu_spec(task, task.workload(), get_target("hopper"), catalogue)
    assert spec["axes"] == {"M": 8192, "N": 7168, "K": 5120}
    assert spec["smallest"]["axes"]["M"] == min(w.axes["M"] for w in task.workloads)
    assert spec["smallest"]["flops"] == 2.0 * spec["smallest"]["axes"]["M"] * 7168 * 5120
    assert spec["flops"] == 2.0 * 8192 * 7168 * 5120
    assert spec["required_family"] == "GMMA" and "HGMMA" in spec["families"]["GMMA"]


def test_fresh_values_in_place_are_the_values_the_seed_draws_and_no_other_seed_does() -> None:
    from workbench.evaluate.gpu.inputs import fill_inputs, random_inputs

    spec = spec_for("mha_bwd_d128", SMALL_ATTENTION)
    drawn = make_inputs(spec, 21, "cpu")
    names = list(spec["definition"]["inputs"])
    buffers = {name: torch.empty_like(value) for name, value in zip(names, drawn, strict=True)}
    addresses = {name: t.data_ptr() for name, t in buffers.items()}
    fill_inputs(spec, buffers, 21)
    assert all(torch.equal(buffers[name], value) for name, value in zip(names, drawn, strict=True))
    assert {name: t.data_ptr() for name, t in buffers.items()} == addresses
    judge_side = random_inputs(spec, 21, "cpu")  # what the judge redraws: the random ones, bit for bit
    assert set(judge_side) == {"Q", "K", "V", "dO"} and all(
        torch.equal(judge_side[n], buffers[n]) for n in judge_side
    )
    assert not torch.equal(random_inputs(spec, 22, "cpu")["Q"], buffers["Q"])
