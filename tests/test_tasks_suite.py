"""The rest of PTXBench's suite: FP8 GEMM and attention, paged and ragged GQA, gated delta net.

Every definition loads, its inputs are generated and its reference runs on the CPU at a small workload
against an independent computation, and FLOPs and minimum bytes agree with counts made by hand.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from workbench.evaluate.build.sass import FAMILIES, NARROW_FAMILIES
from workbench.evaluate.gpu.correctness import compare_output, passes_quickly
from workbench.evaluate.gpu.inputs import compile_reference, make_inputs, make_outputs, run_reference
from workbench.evaluate.gpu_spec import gpu_spec
from workbench.tasks import Catalogue, Task, Workload, get_target
from workbench.tasks.cost import causal_pairs, split

FP8_MHA = [f"fp8_mha_with_lse_d{d}{c}" for d in (64, 96, 128, 256) for c in ("", "_causal")]
SUITE = [
    "fp8_gemm_nt_1d2d_n4096_k7168",
    *FP8_MHA,
    "gqa_paged_decode_h24_kv8_d128_ps1",
    "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
    "gqa_ragged_prefill_causal_h32_kv4_d128",
    "gdn_decode_qk4_v8_d128_k_last",
    "gdn_decode_qk8_v16_d128_k_last",
    "gdn_mtp_qk4_v8_d128_k_last",
]
# Small workloads for the CPU: every var axis, chosen so that requests are ragged and, for paged
# prefill, carry a cached prefix (more keys than queries).
SMALL = {
    "fp8_gemm_nt_1d2d_n4096_k7168": {"m": 8},
    **{name: {"L": 40} for name in FP8_MHA},
    "gqa_paged_decode_h24_kv8_d128_ps1": {
        "batch_size": 3,
        "num_pages": 64,
        "len_indptr": 4,
        "num_kv_indices": 40,
    },
    "gqa_paged_prefill_causal_h24_kv8_d128_ps1": {
        "total_q": 30,
        "num_pages": 80,
        "len_indptr": 4,
        "num_kv_indices": 60,
    },
    "gqa_ragged_prefill_causal_h32_kv4_d128": {"total_q": 30, "total_kv": 45, "len_indptr": 4},
    "gdn_decode_qk4_v8_d128_k_last": {"batch_size": 2},
    "gdn_decode_qk8_v16_d128_k_last": {"batch_size": 2},
    "gdn_mtp_qk4_v8_d128_k_last": {"batch_size": 2, "seq_len": 3, "pool_size": 5},
}


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.load()


def small(task: Task) -> tuple[dict, list[object], list[torch.Tensor]]:
    """The task's spec at its small workload, the generated inputs and the reference outputs, on the CPU."""
    first = task.workloads[0]
    workload = Workload(
        uuid="5a110000-0000-4000-8000-000000000000", axes=SMALL[task.name], inputs=first.inputs
    )
    spec = gpu_spec(task, workload, task.target("hopper"))
    inputs = make_inputs(spec, seed=7, device="cpu")
    function = compile_reference(task.definition.reference)
    outputs = run_reference(function, spec["definition"], spec["axes"], inputs)
    return spec, inputs, outputs


def agree(actual: torch.Tensor, expected: torch.Tensor, task: Task, ratio: float = 1.0) -> None:
    _, check = compare_output("out", actual, expected, task.facts.atol, task.facts.rtol)
    assert check["matched_ratio"] >= ratio, check.get("reason")


@pytest.mark.parametrize("name", SUITE)
def test_definition_loads_with_facts_and_a_seeded_headline(catalogue: Catalogue, name: str) -> None:
    task = catalogue.get(name)
    facts = task.facts
    assert task.workloads and set(facts.seeds) == {w.uuid for w in task.workloads}
    assert task.workload().uuid == facts.headline_workload
    for target in ("hopper", "blackwell"):
        assert task.target(target).required_family in FAMILIES
    assert {"required", "tolerance"} <= set(facts.rationale)
    assert task.definition.to_trace_json()["name"] == name  # plain FlashInfer-Trace JSON, no workbench keys


@pytest.mark.parametrize("name", SUITE)
def test_reference_runs_on_the_cpu_with_the_definitions_shapes_and_dtypes(
    catalogue: Catalogue, name: str
) -> None:
    task = catalogue.get(name)
    spec, inputs, outputs = small(task)
    wanted = make_outputs(spec, device="cpu")
    assert len(outputs) == len(wanted)
    for got, empty in zip(outputs, wanted, strict=True):
        assert got.shape == empty.shape and got.dtype == empty.dtype
        assert not torch.isnan(got.float()).any()
    again = make_inputs(spec, seed=7, device="cpu")
    for one, two in zip(inputs, again, strict=True):  # the judge redraws the same inputs from the seed
        assert not isinstance(one, torch.Tensor) or torch.equal(one.view(torch.uint8), two.view(torch.uint8))


def test_fp8_gemm_reference_is_deepgemms_blockwise_sum(catalogue: Catalogue) -> None:
    task = catalogue.get("fp8_gemm_nt_1d2d_n4096_k7168")
    _, (A, SF_A, B, SF_B), (D,) = small(task)
    assert A.dtype == B.dtype == torch.float8_e4m3fn and (SF_A > 0).all() and (SF_B > 0).all()
    # Every 128-wide block is scaled so that its largest magnitude is e4m3's 448.
    assert torch.allclose(A.float().view(8, 56, 128).abs().amax(-1), torch.full((8, 56), 448.0))
    expected = torch.zeros(A.shape[0], B.shape[0])
    for kb in range(56):
        block = slice(kb * 128, (kb + 1) * 128)
        partial = A[:, block].float() @ B[:, block].float().T
        expected += partial * (SF_A[:, kb, None] * SF_B[:, kb].repeat_interleave(128)[None, :])
    agree(D, expected.bfloat16(), task)


@pytest.mark.parametrize("name", ["fp8_mha_with_lse_d64", "fp8_mha_with_lse_d128_causal"])
def test_fp8_attention_reference_matches_sdpa_on_the_dequantized_inputs(
    catalogue: Catalogue, name: str
) -> None:
    task = catalogue.get(name)
    _, (Q, K, V, dq, dk, dv), (O, LSE) = small(task)
    q, k, v = Q.float() * dq, K.float() * dk, V.float() * dv
    out = F.scaled_dot_product_attention(q, k, v, is_causal=task.facts.causal)
    agree(O, out.clamp(-448, 448).to(torch.float8_e4m3fn), task, ratio=task.facts.matched_ratio)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if task.facts.causal:
        scores = scores.masked_fill(torch.ones(40, 40, dtype=torch.bool).triu(1), float("-inf"))
    agree(LSE, torch.logsumexp(scores, dim=-1), task)


def test_paged_decode_reference_matches_a_per_head_loop(catalogue: Catalogue) -> None:
    task = catalogue.get("gqa_paged_decode_h24_kv8_d128_ps1")
    _, (q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale), (output, lse) = small(task)
    assert kv_indptr.diff().tolist() == split(40, 3) and len(set(kv_indices.tolist())) == 40
    for b in range(3):
        pages = kv_indices[kv_indptr[b] : kv_indptr[b + 1]].long()
        for h in range(24):
            keys = k_cache[pages, 0, h // 3].float()
            scores = keys @ q[b, h].float() * sm_scale
            agree(
                output[b, h], (torch.softmax(scores, 0) @ v_cache[pages, 0, h // 3].float()).bfloat16(), task
            )
            agree(lse[b, h], torch.log2(torch.exp(scores).sum()), task)


def causal_loop(q, keys, values, sm_scale, group):
    """Token by token: query i of nq sees keys 0 .. i + nk - nq; lse in base 2."""
    nq, nk = q.shape[0], keys.shape[0]
    out = torch.empty(q.shape)
    lse = torch.empty(q.shape[:2])
    for i in range(nq):
        seen = i + 1 + nk - nq
        for h in range(q.shape[1]):
            scores = keys[:seen, h // group].float() @ q[i, h].float() * sm_scale
            out[i, h] = torch.softmax(scores, 0) @ values[:seen, h // group].float()
            lse[i, h] = torch.log2(torch.exp(scores).sum())
    return out, lse


def test_paged_prefill_reference_masks_bottom_right_over_a_prefix(catalogue: Catalogue) -> None:
    task = catalogue.get("gqa_paged_prefill_causal_h24_kv8_d128_ps1")
    _, (q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale), (output, lse) = small(task)
    assert qo_indptr.diff().tolist() == split(30, 3) and kv_indptr.diff().tolist() == split(60, 3)
    for b in range(3):
        rows = slice(int(qo_indptr[b]), int(qo_indptr[b + 1]))
        pages = kv_indices[kv_indptr[b] : kv_indptr[b + 1]].long()
        out, rows_lse = causal_loop(q[rows], k_cache[pages, 0], v_cache[pages, 0], sm_scale, group=3)
        agree(output[rows], out.bfloat16(), task)
        agree(lse[rows], rows_lse, task)


def test_ragged_prefill_reference_matches_a_token_loop(catalogue: Catalogue) -> None:
    task = catalogue.get("gqa_ragged_prefill_causal_h32_kv4_d128")
    _, (q, k, v, qo_indptr, kv_indptr, sm_scale), (output, lse) = small(task)
    for b in range(3):
        rows = slice(int(qo_indptr[b]), int(qo_indptr[b + 1]))
        keys = slice(int(kv_indptr[b]), int(kv_indptr[b + 1]))
        out, rows_lse = causal_loop(q[rows], k[keys], v[keys], sm_scale, group=8)
        agree(output[rows], out.bfloat16(), task)
        agree(lse[rows], rows_lse, task)


def delta_rule(state, q, k, v, A_log, a, dt_bias, b, scale):
    """One token, one value head, the state [V, K] as a matrix: the op-type schema's update, step by step."""
    q = q.float() / torch.sqrt((q.float() ** 2).sum() + 1e-6)
    k = k.float() / torch.sqrt((k.float() ** 2).sum() + 1e-6)
    decay = torch.exp(-torch.exp(A_log) * torch.log1p(torch.exp(a.float() + dt_bias.float())))
    state = state * decay
    new_v = (v.float() - state @ k) * torch.sigmoid(b.float())
    state = state + torch.outer(new_v, k)
    return state, scale * (state @ q)


@pytest.mark.parametrize("name", ["gdn_decode_qk4_v8_d128_k_last", "gdn_decode_qk8_v16_d128_k_last"])
def test_gdn_decode_reference_follows_the_delta_rule(catalogue: Catalogue, name: str) -> None:
    task = catalogue.get(name)
    _, (q, k, v, state, A_log, a, dt_bias, b, scale), (output, new_state) = small(task)
    group = v.shape[2] // q.shape[2]
    for r in range(2):
        for hv in range(v.shape[2]):
            h = hv // group
            after, out = delta_rule(
                state[r, hv],
                q[r, 0, h],
                k[r, 0, h],
                v[r, 0, hv],
                A_log[hv],
                a[r, 0, hv],
                dt_bias[hv],
                b[r, 0, hv],
                scale,
            )
            agree(new_state[r, hv], after, task)
            agree(output[r, 0, hv], out.bfloat16(), task)


def test_gdn_mtp_reference_runs_the_tokens_in_order_from_the_pool(catalogue: Catalogue) -> None:
    task = catalogue.get("gdn_mtp_qk4_v8_d128_k_last")
    _, (q, k, v, pool, indices, A_log, a, dt_bias, b, scale), (output, final) = small(task)
    assert len(set(indices.tolist())) == 2 and max(indices.tolist()) < 5
    for r in range(2):
        for hv in range(8):
            state = pool[int(indices[r]), hv]
            for t in range(3):
                state, out = delta_rule(
                    state, q[r, t, hv // 2], k[r, t, hv // 2], v[r, t, hv], A_log[hv], a[r, t, hv], dt_bias[hv],
                    b[r, t, hv], scale,
                )  # fmt: skip
                agree(output[r, t, hv], out.bfloat16(), task)
            agree(final[r, hv], state, task)


def kept_pairs(qo_indptr: torch.Tensor, kv_indptr: torch.Tensor) -> int:
    """Query-key pairs the bottom-right causal mask keeps, counted from the generated index tensors."""
    total = 0
    for nq, nk in zip(qo_indptr.diff().tolist(), kv_indptr.diff().tolist(), strict=True):
        total += sum(max(0, min(i + 1 + nk - nq, nk)) for i in range(nq))
    return total


@pytest.mark.parametrize(
    ("name", "heads", "kv"),
    [("gqa_paged_prefill_causal_h24_kv8_d128_ps1", 24, 4), ("gqa_ragged_prefill_causal_h32_kv4_d128", 32, 4)],
)
def test_prefill_flops_count_the_pairs_the_generated_requests_keep(
    catalogue: Catalogue, name: str, heads: int, kv: int
) -> None:
    task = catalogue.get(name)
    _, inputs, _ = small(task)
    qo_indptr, kv_indptr = inputs[3], inputs[kv]
    assert task.flops(Workload(uuid="x", axes=SMALL[name], inputs={})) == 4 * heads * 128 * kept_pairs(
        qo_indptr, kv_indptr
    )


def test_split_and_causal_pairs_by_hand() -> None:
    assert split(10, 4) == [1, 2, 3, 4] and split(8192, 8) == [227, 455, 683, 910, 1138, 1365, 1593, 1821]
    assert sum(split(65536, 64)) == 65536 and min(split(65536, 64)) >= 31
    assert causal_pairs([3], [3]) == 6 and causal_pairs([2], [5]) == 4 + 5 and causal_pairs([4], [2]) == 3


def headline(catalogue: Catalogue, name: str) -> tuple[float | None, float]:
    task = catalogue.get(name)
    return task.flops(task.workload()), task.min_bytes(task.workload())


def test_flops_and_bytes_by_hand(catalogue: Catalogue) -> None:
    # FP8 GEMM, m=4096: A and B one byte an element, fp32 scales per (row, 128 K) and per 128x128 block, bf16 D.
    assert headline(catalogue, "fp8_gemm_nt_1d2d_n4096_k7168") == (
        2 * 4096 * 4096 * 7168,
        4096 * 7168 + 4096 * 56 * 4 + 4096 * 7168 + 32 * 56 * 4 + 4096 * 4096 * 2,
    )
    # FP8 attention, L=4096, D=128: Q, K, V, O one byte, three fp32 descales, fp32 LSE.
    qkvo = 4 * 48 * 4096 * 128
    assert headline(catalogue, "fp8_mha_with_lse_d128") == (
        4 * 4 * 48 * 4096 * 4096 * 128,
        4 * qkvo + 3 * 4 + 4 * 48 * 4096 * 4,
    )
    assert headline(catalogue, "fp8_mha_with_lse_d128_causal")[0] == 4 * 4 * 48 * 128 * 4096 * 4097 / 2
    # Paged decode, 64 requests over 65536 cached tokens: per token and query head 2 x 128 x 2 FLOPs.
    assert headline(catalogue, "gqa_paged_decode_h24_kv8_d128_ps1") == (
        4 * 24 * 128 * 65536,
        64 * 24 * 128 * 2 * 2 + 2 * 65536 * 8 * 128 * 2 + 65 * 4 + 65536 * 4 + 64 * 24 * 4,
    )
    # Paged prefill, 8 requests, 8192 tokens, no prefix: the lengths are split(8192, 8).
    pairs = sum(n * (n + 1) // 2 for n in (227, 455, 683, 910, 1138, 1365, 1593, 1821))
    assert headline(catalogue, "gqa_paged_prefill_causal_h24_kv8_d128_ps1") == (
        4 * 24 * 128 * pairs,
        2 * 8192 * 24 * 128 * 2 + 2 * 8192 * 8 * 128 * 2 + 2 * 9 * 4 + 8192 * 4 + 8192 * 24 * 4,
    )
    assert headline(catalogue, "gqa_ragged_prefill_causal_h32_kv4_d128") == (
        4 * 32 * 128 * pairs,
        2 * 8192 * 32 * 128 * 2 + 2 * 8192 * 4 * 128 * 2 + 2 * 9 * 4 + 8192 * 32 * 4,
    )
    # GDN decode, 64 rows: q, k (4 heads), v (8), gates, state in and out (8 x 128 x 128 fp32 each).
    state = 64 * 8 * 128 * 128 * 4
    small_inputs = 2 * 64 * 4 * 128 * 2 + 64 * 8 * 128 * 2 + 8 * 4 + 2 * 64 * 8 * 2 + 8 * 2
    assert headline(catalogue, "gdn_decode_qk4_v8_d128_k_last") == (
        7 * 64 * 8 * 128 * 128,
        small_inputs + 2 * state + 64 * 8 * 128 * 2,
    )
    # GDN MTP, 48 rows x 4 tokens from a pool of 49: only the 48 starting slots are read.
    state = 48 * 8 * 128 * 128 * 4
    tokens = 48 * 4
    assert headline(catalogue, "gdn_mtp_qk4_v8_d128_k_last") == (
        7 * tokens * 8 * 128 * 128,
        2 * tokens * 4 * 128 * 2 + tokens * 8 * 128 * 2 + state + 48 * 4 + 8 * 4 + 2 * tokens * 8 * 2 + 8 * 2
        + tokens * 8 * 128 * 2 + state,
    )  # fmt: skip


def test_fp8_tasks_reach_light_at_the_fp8_peak(catalogue: Catalogue) -> None:
    task = catalogue.get("fp8_gemm_nt_1d2d_n4096_k7168")
    flops = 2 * 4096 * 4096 * 7168
    light = task.speed_of_light_ms(task.workload())
    assert light["H200"] == pytest.approx(flops / 1978.9e12 * 1e3)
    assert light["B200"] == pytest.approx(flops / 4500e12 * 1e3)
    bf16 = catalogue.get("gemm_n4096_k4096")
    assert bf16.speed_of_light_ms(bf16.workload())["H200"] == pytest.approx(
        2 * 8192 * 4096 * 4096 / 989.4e12 * 1e3
    )


def test_required_families_per_task_and_target(catalogue: Catalogue) -> None:
    required = {
        name: (
            catalogue.get(name).target("hopper").required_family,
            catalogue.get(name).target("blackwell").required_family,
        )
        for name in SUITE
    }
    assert required["fp8_gemm_nt_1d2d_n4096_k7168"] == ("QGMMA", "UTCQMMA")
    assert all(required[name] == ("QGMMA", "UTCQMMA") for name in FP8_MHA)
    assert required["gqa_paged_decode_h24_kv8_d128_ps1"] == ("ASYNC_COPY", "ASYNC_COPY")
    assert required["gqa_ragged_prefill_causal_h32_kv4_d128"] == ("GMMA", "TCGEN05_MMA")
    assert required["gdn_mtp_qk4_v8_d128_k_last"] == ("ASYNC_COPY", "ASYNC_COPY")
    assert {family for pair in required.values() for family in pair} - {
        "GMMA",
        "TCGEN05_MMA",
    } <= NARROW_FAMILIES
    # The catalogue's earlier tasks keep their target's family, the Target itself unchanged.
    gemm = catalogue.get("gemm_n7168_k5120")
    assert gemm.target("hopper") == get_target("hopper") and gemm.target("blackwell") == get_target(
        "blackwell"
    )


@pytest.mark.parametrize("name", SUITE[:2] + SUITE[-6:])
def test_each_family_has_a_baseline_or_says_why_it_times_the_reference(
    catalogue: Catalogue, name: str
) -> None:
    from workbench.evaluate.gpu.baselines import make_baselines
    from workbench.evaluate.gpu.inputs import fill_inputs

    task = catalogue.get(name)
    spec, _, outputs = small(task)
    (baseline,), notes = make_baselines(spec, device="cpu")
    # No CUDA library runs on this machine: each family says so in one line and times its reference.
    assert baseline.name == "torch reference (no library baseline)"
    assert len(notes) == 1 and notes[0].startswith("timed against the task's torch reference: ")
    fill_inputs(spec, baseline.inputs, seed=7)
    baseline.prepare()
    timed = baseline.call()
    timed = list(timed) if isinstance(timed, tuple) else [timed]
    for got, want in zip(timed, outputs, strict=True):
        assert torch.equal(got, want)  # the same reference on the same seeded inputs
    baseline.clear()
    assert all(not got.any() for got in timed)


def test_a_matched_ratio_lets_that_share_of_elements_miss_but_never_a_nan() -> None:
    expected = torch.ones(1000)
    actual = expected.clone()
    actual[:5] = 1.5  # 0.5 % of the elements one FP8 step off
    assert compare_output("O", actual, expected, 1e-2, 1e-2)[0] == "incorrect_numerical"
    status, check = compare_output("O", actual, expected, 1e-2, 1e-2, ratio=0.995)
    assert status == "passed" and check["matched_ratio"] == pytest.approx(0.995)
    actual[5] = 1.5
    status, check = compare_output("O", actual, expected, 1e-2, 1e-2, ratio=0.995)
    assert status == "incorrect_numerical" and "(at most 5 may be)" in check["reason"]
    actual[:6] = 1.0
    actual[0] = float("nan")
    assert compare_output("O", actual, expected, 1e-2, 1e-2, ratio=0.995)[0] == "incorrect_numerical"


def test_an_outlier_bound_keeps_the_elements_allowed_outside_near_the_tolerance() -> None:
    """A few elements may be outside, by rounding, but none far: causal attention backward's rule. The
    quick check of timed calls applies the same rule."""
    expected = torch.ones(1_000_000)
    actual = expected.clone()
    actual[0] = 1.0 + 1.5 * 1e-2  # 1.5x the tolerance, as bf16 P moves dV
    for bound in (None, 2.0):
        status, check = compare_output("dV", actual, expected, 1e-2, 1e-2, ratio=0.999999, bound=bound)
        assert status == "passed", check
        assert passes_quickly(actual, expected, 1e-2, 1e-2, 0.999999, bound)
    actual[0] = 1.0 + 2.5 * 1e-2  # 2.5x: a wrong element, not rounding
    status, check = compare_output("dV", actual, expected, 1e-2, 1e-2, ratio=0.999999, bound=2.0)
    assert status == "incorrect_numerical"
    assert (
        "1 beyond 2 times them (none may be)" in check["reason"] and "(at most 1 may be)" in check["reason"]
    )
    assert not passes_quickly(actual, expected, 1e-2, 1e-2, 0.999999, 2.0)
    assert compare_output("dV", actual, expected, 1e-2, 1e-2, ratio=0.999999)[0] == "passed"  # unbounded
    actual[0] = actual[1] = 1.0 + 1.5 * 1e-2  # two near ones where one may be outside
    assert compare_output("dV", actual, expected, 1e-2, 1e-2, ratio=0.999999, bound=2.0)[0] != "passed"
    assert not passes_quickly(actual, expected, 1e-2, 1e-2, 0.999999, 2.0)
