"""The task catalogue: every definition loads, facts agree, FLOPs and bytes are right."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from workbench.errors import UserError
from workbench.tasks import Catalogue, get_target, resolve_task
from workbench.tasks.catalogue import load_definition

GEMM_SHAPES = {
    (128, 2048),
    (256, 7168),
    (2048, 4096),
    (2048, 5376),
    (4096, 4096),
    (4096, 5376),
    (4096, 14336),
    (5120, 2048),
    (5120, 5120),
    (5120, 17408),
    (5376, 4096),
    (5376, 21504),
    (6144, 4096),
    (7168, 5120),
    (21504, 5376),
    (28672, 4096),
    (34816, 5120),
}
HEADLINE = {
    "gemm_n7168_k5120",
    "mha_with_lse_d128",
    "mha_with_lse_d128_causal",
    "mha_bwd_d128",
    "mha_bwd_d128_causal",
}


@pytest.fixture(scope="module")
def catalogue() -> Catalogue:
    return Catalogue.load()


def test_catalogue_has_the_designed_tasks(catalogue: Catalogue) -> None:
    names = set(catalogue.tasks)
    assert {f"gemm_n{n}_k{k}" for n, k in GEMM_SHAPES} <= names
    forward = {f"mha_with_lse_d{d}{c}" for d in (64, 96, 128, 256) for c in ("", "_causal")}
    backward = {f"mha_bwd_d{d}{c}" for d in (64, 96, 128) for c in ("", "_causal")}
    fp8_forward = {f"fp8_mha_with_lse_d{d}{c}" for d in (64, 96, 128, 256) for c in ("", "_causal")}
    rest = {
        "fp8_gemm_nt_1d2d_n4096_k7168",
        "gqa_paged_decode_h24_kv8_d128_ps1",
        "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
        "gqa_ragged_prefill_causal_h32_kv4_d128",
        "gdn_decode_qk4_v8_d128_k_last",
        "gdn_decode_qk8_v16_d128_k_last",
        "gdn_mtp_qk4_v8_d128_k_last",
    }
    gemms = {f"gemm_n{n}_k{k}" for n, k in GEMM_SHAPES}
    assert names == gemms | forward | backward | fp8_forward | rest
    assert len(names) == 46
    assert {n for n, t in catalogue.tasks.items() if t.facts.headline} == HEADLINE


def test_every_task_has_seeded_workloads_and_a_headline_where_marked(catalogue: Catalogue) -> None:
    for task in catalogue.tasks.values():
        assert task.workloads, task.name
        assert set(task.facts.seeds) == {w.uuid for w in task.workloads}, task.name
        if task.facts.headline:
            head = task.workload()
            assert head.uuid == task.facts.headline_workload
            assert head.axes == ({"M": 8192} if task.facts.family == "gemm" else {"S": 4096})


def test_attention_layout(catalogue: Catalogue) -> None:
    fwd = catalogue.get("mha_with_lse_d128_causal").definition
    assert fwd.const_axes() == {"B": 4, "H": 48, "D": 128}
    assert list(fwd.outputs) == ["O", "LSE"]
    assert fwd.outputs["LSE"].dtype == "float32" and fwd.outputs["LSE"].shape == ["B", "H", "S"]
    bwd = catalogue.get("mha_bwd_d64")
    assert list(bwd.definition.inputs) == ["Q", "K", "V", "O", "dO", "LSE"]
    assert list(bwd.definition.outputs) == ["dQ", "dK", "dV"]
    assert bwd.facts.derived_inputs == ["O", "LSE"]


def test_headline_gemm_flops_and_bytes(catalogue: Catalogue) -> None:
    task = catalogue.get("gemm_n7168_k5120")
    workload = task.workload()
    assert task.flops(workload) == 2 * 8192 * 7168 * 5120
    assert task.min_bytes(workload) == 2 * (8192 * 5120 + 7168 * 5120 + 8192 * 7168)
    sol = task.speed_of_light_ms(workload)
    assert sol["H200"] == pytest.approx(2 * 8192 * 7168 * 5120 / 989.4e12 * 1e3)
    assert sol["B200"] < sol["H200"]


def test_attention_flops_conventions(catalogue: Catalogue) -> None:
    plain = catalogue.get("mha_with_lse_d128")
    causal = catalogue.get("mha_with_lse_d128_causal")
    backward = catalogue.get("mha_bwd_d128")
    s = 4096
    assert plain.flops(plain.workload()) == 4 * 4 * 48 * s * s * 128
    assert causal.flops(causal.workload()) == 4 * 4 * 48 * (s * (s + 1) / 2) * 128
    assert backward.flops(backward.workload()) == 10 * 4 * 48 * s * s * 128


def test_attention_tasks_count_their_query_key_scores_whatever_the_head_dimension(catalogue: Catalogue) -> None:
    s = 4096
    for dim in (64, 128):
        for name in (f"mha_with_lse_d{dim}", f"mha_bwd_d{dim}", f"fp8_mha_with_lse_d{dim}"):
            task = catalogue.get(name)
            assert task.scores(task.workload()) == 4 * 48 * s * s, name
        causal = catalogue.get(f"mha_with_lse_d{dim}_causal")
        assert causal.scores(causal.workload()) == 4 * 48 * s * (s + 1) / 2
    ragged = catalogue.get("gqa_ragged_prefill_causal_h32_kv4_d128")
    workload = ragged.workload()
    assert ragged.scores(workload) == ragged.flops(workload) / (4 * 128)
    for other in ("gemm_n4096_k4096", "fp8_gemm_nt_1d2d_n4096_k7168", "gdn_mtp_qk4_v8_d128_k_last"):
        task = catalogue.get(other)
        assert task.scores(task.workload()) == 0.0


def test_targets() -> None:
    assert get_target("hopper").gencode == "arch=compute_90a,code=sm_90a"
    assert get_target("hopper").required_family == "GMMA"
    assert get_target("blackwell").sm == "sm_100a"
    assert get_target("blackwell").required_family == "TCGEN05_MMA"
    with pytest.raises(UserError, match="unknown target"):
        get_target("ampere")


def test_external_definitions_load_unchanged(shared_fixtures: Path) -> None:
    for name in ("gemm_n4096_k4096", "gemm_n7168_k5120"):
        path = shared_fixtures / "flashinfer-trace" / "definitions" / f"{name}.json"
        task = resolve_task(str(path))
        original = json.loads(path.read_text())
        # Every key survives a load/dump round trip (unknown ones are kept, nulls included).
        assert task.definition.to_trace_json() == original
        assert task.facts is not None and task.facts.family == "gemm"
    fp16 = resolve_task(str(shared_fixtures / "flashinfer-trace" / "definitions" / "gemm_n4096_k4096.json"))
    assert len(fp16.workloads) == 43
    assert fp16.flops(fp16.workloads[0]) == 2 * fp16.workloads[0].axes["M"] * 4096 * 4096


def test_validation_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "name": "x",
                "op_type": "gemm",
                "axes": {"M": {"type": "var"}},
                "inputs": {"A": {"shape": ["M", "Q"], "dtype": "bfloat16"}},
                "outputs": {"C": {"shape": ["M"], "dtype": "bfloat16"}},
                "reference": "def run(A):\n    return A\n",
            }
        )
    )
    with pytest.raises(UserError, match=r"bad\.json.*unknown axis 'Q'"):
        load_definition(bad)
    bad.write_text('{"name": "x",')
    with pytest.raises(UserError, match=r"bad\.json: malformed JSON at line 1"):
        load_definition(bad)
    bad.write_text(
        json.dumps(
            {
                "name": "x",
                "op_type": "gemm",
                "axes": {"M": {"type": "const", "value": 0}},
                "inputs": {},
                "outputs": {},
                "reference": "x = 1",
            }
        )
    )
    with pytest.raises(UserError, match=r"field axes\.M\.const\.value"):
        load_definition(bad)


def test_catalogue_rejects_a_definition_without_sidecar_entry(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    shutil.copytree(Catalogue.load().root, root)
    sidecar = json.loads((root / "workbench.json").read_text())
    del sidecar["tasks"]["gemm_n128_k2048"]
    (root / "workbench.json").write_text(json.dumps(sidecar))
    with pytest.raises(UserError, match="no entry for task gemm_n128_k2048"):
        Catalogue.load(root)
