"""The runtime cache a Triton candidate runs from on the GPU host (`triton_runtime`), on the CPU: its
kernels' groups are found under the keys Triton computes when the candidate's file is imported from
elsewhere (no compile, no write), what the trace reports is checked before the workbench generates and
compiles launcher code from it, and autotune choices travel from the runner to the tool processes."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from build_support import session_cache

from workbench.evaluate.build.negated import NEGATED_DIR, negate_products, products_not_negated, sass_listings
from workbench.evaluate.build.triton_build import build_triton, with_negated_triton
from workbench.evaluate.gpu.sandbox import landlock_abi
from workbench.evaluate.gpu.triton_runtime import (
    Opened,
    RuntimeRefused,
    launcher_inputs,
    own_kernels,
    trace_kernels,
    write_groups,
)
from workbench.evaluate.result import BuildStage
from workbench.tasks import get_target, resolve_task

pytest.importorskip("triton")
DATA = Path(__file__).parent / "data" / "triton"
GEMM = "gemm_n7168_k5120"


@pytest.fixture(scope="module")
def entry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    task = resolve_task(GEMM)
    source = (DATA / "gemm_tma.py").read_text()
    stage = asyncio.run(
        build_triton(
            source, task, task.workload(None), get_target("hopper"), cache_dir=session_cache(tmp_path_factory)
        )
    )
    assert stage.status == "passed", stage.message
    return Path(stage.cubin_path).parent


def test_the_trace_keeps_each_kernels_key_metadata_and_launcher_signature(entry: Path) -> None:
    kernels = trace_kernels(entry)
    # Two autotune configs at the headline workload; the smallest workload is traced too (memcheck's).
    assert len(kernels) >= 2 and own_kernels(entry) == ["gemm_tma"]
    for kernel in kernels:
        signature, layouts = launcher_inputs(kernel)
        assert signature[:3] == [
            "tensordesc<bf16[128, 64]>",
            "tensordesc<bf16[128, 64]>",
            "tensordesc<bf16[128, 128]>",
        ]
        assert signature[3:6] == ["i32", "i32", "i32"] and layouts and len(layouts) == 3
        assert json.loads(kernel["metadata_json"])["name"] == "gemm_tma"


@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
def test_the_candidate_imported_from_elsewhere_finds_every_kernel_in_the_cache_and_compiles_none(
    entry: Path, tmp_path: Path
) -> None:
    groups = tmp_path / "runtime"
    groups.mkdir()
    write_groups(entry, groups, groups)
    keys = sorted(p.name for p in groups.iterdir())
    # The trace child again, from another folder, on that cache; it may write only in its own folder,
    # so a kernel missing from the cache (a compile would write it) is an error, not a new entry.
    work = tmp_path / "elsewhere"
    (work / "kernels").mkdir(parents=True)
    (work / "kernel.py").write_text((entry / "kernel.py").read_text())
    request = json.loads((entry / "request.json").read_text())
    request.update(source=str(work / "kernel.py"), out=str(work / "kernels"), writable=str(work))
    (work / "request.json").write_text(json.dumps(request))
    subprocess.run(
        [sys.executable, "-m", "workbench.evaluate.build.triton_trace", str(work / "request.json")],
        check=True,
        cwd=work,
        capture_output=True,
        timeout=180,
        env={"TRITON_CACHE_DIR": str(groups), "TMPDIR": str(work), "PATH": "/usr/bin:/bin"},
    )
    report = json.loads((work / "kernels" / "trace.json").read_text())
    assert report["error"] is None, report["error"]
    assert sorted(k["hash"] for k in report["kernels"]) == sorted(k["hash"] for k in trace_kernels(entry))
    assert sorted(p.name for p in groups.iterdir()) == keys
    built = {(entry / "kernels" / k["ptx"]).read_text() for k in trace_kernels(entry)}
    assert {(work / "kernels" / k["ptx"]).read_text() for k in report["kernels"]} == built


def _with(entry: Path, folder: Path, change) -> Path:
    """A copy of the build's trace report with one kernel changed as `change` says."""
    (folder / "kernels").mkdir(parents=True)
    report = json.loads((entry / "kernels" / "trace.json").read_text())
    change(report["kernels"][0])
    (folder / "kernels" / "trace.json").write_text(json.dumps(report))
    for ptx in (entry / "kernels").glob("*.ptx"):
        (folder / "kernels" / ptx.name).write_bytes(ptx.read_bytes())
        (folder / "kernels" / ptx.with_suffix(".cubin").name).write_bytes(
            ptx.with_suffix(".cubin").read_bytes()
        )
    return folder


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda k: k["launcher"]["signature"].__setitem__(3, 'i32 a); system("id"); (int'), "argument types"),
        (lambda k: k["launcher"].__setitem__("tensordesc_meta", [{"swizzle": "3; evil"}]), "integer fields"),
        (lambda k: k.__setitem__("hash", "../../etc"), "key"),
        (lambda k: k.__setitem__("ptx", "../../../etc/passwd"), "outside the build"),
        (
            lambda k: k.__setitem__(
                "metadata_json", k["metadata_json"].replace('"name": "gemm_tma"', '"name": "x"')
            ),
            "does not describe",
        ),
    ],
    ids=["c-in-signature", "layout", "hash", "ptx-path", "metadata-name"],
)
def test_what_the_trace_reports_is_checked_before_any_code_is_made_from_it(
    entry: Path, tmp_path: Path, change, words: str
) -> None:
    folder = _with(entry, tmp_path / "entry", change)
    with pytest.raises(RuntimeRefused, match=words):
        write_groups(folder, tmp_path / "out", tmp_path / "out")


def test_the_runners_autotune_choice_is_the_only_config_a_tool_process_runs(entry: Path) -> None:
    runner, tool = Opened(entry), Opened(entry)
    tuned = runner.module().gemm_tma
    key = (8192, 7168, 5120, "torch.bfloat16")
    tuned.cache[key] = tuned.configs[1]
    choices = runner.autotuned()
    assert choices == {"gemm_tma": [[list(key), 1]]}
    seeded = tool.module().gemm_tma
    second = seeded.configs[1]
    tool.seed(json.loads(json.dumps(choices)))
    assert seeded.configs == [second]
    untuned = Opened(entry)
    module = untuned.module()
    first = module.gemm_tma.configs[0]
    untuned.seed({})  # no choice made (memcheck's smallest workload): the first config, no tuning
    assert module.gemm_tma.configs == [first]


def test_a_runtime_cache_that_cannot_be_made_is_one_line_of_why(entry: Path) -> None:
    """Here, with no libcuda, Triton's launchers cannot be compiled: the GPU executor gets the last line
    the preparation printed, for an infrastructure_error verdict."""
    from workbench.evaluate.gpu_executor import _triton_runtime
    from workbench.evaluate.result import BuildStage

    if any(Path(d, "libcuda.so.1").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        pytest.skip("this machine has libcuda: the preparation would succeed")
    build = BuildStage(status="passed", message="", cubin_path=str(entry / "kernel.cubin"))
    why = asyncio.run(_triton_runtime(build, 120.0))
    assert isinstance(why, str) and why.startswith("preparing Triton's runtime cache failed: ")
    assert "\n" not in why and not (entry / "runtime").exists()  # nothing half-made left in place


def test_the_negated_twin_is_an_entry_of_its_own_with_every_product_negated(entry: Path) -> None:
    """The dependence check's twin of a Triton build: its source and trace, each kernel's PTX flipped and
    assembled by Triton's ptxas with the build's flags, every HGMMA of each cubin negated and nothing else
    changed; made once into the build's cache entry."""
    build = BuildStage(status="passed", message="", cubin_path=str(entry / "kernel.cubin"))
    twin = asyncio.run(with_negated_triton(build, get_target("hopper"), entry.parent.parent))
    assert twin.negated_note == "" and not twin.negated_hidden
    assert twin.negated_library_path == str(entry / NEGATED_DIR)
    made = Path(twin.negated_library_path)
    assert (made / "kernel.py").read_bytes() == (entry / "kernel.py").read_bytes()
    assert trace_kernels(made) == trace_kernels(
        entry
    )  # the runtime cache is made from it as from the original
    for kernel in trace_kernels(entry):
        ptx = kernel["ptx"]
        assert (made / "kernels" / ptx).read_text() == negate_products((entry / "kernels" / ptx).read_text())
        cubins = [folder / "kernels" / Path(ptx).with_suffix(".cubin").name for folder in (entry, made)]
        listings = asyncio.run(sass_listings(*cubins))
        assert isinstance(listings, list)
        products, left, other = products_not_negated(*listings)
        assert products > 0 and left == 0 and other == "", (products, left, other)
    stamp = (made / "kernels" / "trace.json").stat().st_mtime_ns
    again = asyncio.run(with_negated_triton(build, get_target("hopper"), entry.parent.parent))
    assert (
        again.negated_library_path == str(made)
        and (made / "kernels" / "trace.json").stat().st_mtime_ns == stamp
    )


def test_products_left_un_negated_in_one_kernel_outrank_another_kernels_failure(
    entry: Path, tmp_path: Path
) -> None:
    """Two traced kernels: the first's PTX no ptxas takes, the second's wgmma already flipped in the PTX its
    cubin was not built from (so flipping it again leaves every product as the cubin runs it). The twin
    names the hiding, whichever kernel comes first."""
    copy = tmp_path / "cache" / "ab" / entry.name
    shutil.copytree(entry, copy, ignore=shutil.ignore_patterns(NEGATED_DIR, "runtime"))
    first, second = (kernel["ptx"] for kernel in trace_kernels(copy))
    folder = copy / "kernels"
    (folder / first).write_text((folder / first).read_text() + "\nnot an instruction;\n")
    (folder / second).write_text(negate_products((folder / second).read_text()))
    build = BuildStage(status="passed", message="", cubin_path=str(copy / "kernel.cubin"))
    twin = asyncio.run(with_negated_triton(build, get_target("hopper"), tmp_path / "cache"))
    assert twin.negated_hidden and "still run un-negated" in twin.negated_note, twin.negated_note
