"""Prompts: the system prompt's parts, the knowledge pack recorded in the session, the ABI example builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_support import record_session
from build_support import session_cache

from workbench.agent import prompts
from workbench.agent.config import AgentConfig
from workbench.agent.extract import extract_kernel
from workbench.evaluate.build.nvcc import build
from workbench.evaluate.result import Status
from workbench.knowledge import load_pack
from workbench.session import Message, read_session
from workbench.tasks import get_target, resolve_task

TASK = resolve_task("gemm_n7168_k5120")
HOPPER = get_target("hopper")


ABI_CHAPTER = "# The kernel contract (TVM-FFI `run`)"


@pytest.mark.parametrize("target", ["hopper", "blackwell"])
def test_system_prompt_has_instructions_and_pack_whose_abi_chapter_is_the_abi_example(target: str) -> None:
    system, pack_id, pack_hash = prompts.system_prompt(TASK, get_target(target), AgentConfig())
    pack = load_pack(target)
    assert (pack_id, pack_hash) == (pack.pack_id(), pack.sha256())
    assert system.startswith("You write one CUDA kernel") and system.endswith(pack.prompt_text())
    assert (
        "one fenced ```cuda block" in system and get_target(target).gencode in system and "cuBLAS" in system
    )
    # The kernel contract appears once: as the pack's ABI chapter, with its own `run` example.
    assert system.count(ABI_CHAPTER) == 1 and "# ABI example" not in system
    abi = next(f for f in pack.files if f.path == "common/abi.md")
    assert abi.text.startswith(ABI_CHAPTER)
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run" in (extract_kernel(abi.text) or "")


def test_no_pack_and_a_variant() -> None:
    system, pack_id, pack_hash = prompts.system_prompt(TASK, HOPPER, AgentConfig(pack=False))
    assert (pack_id, pack_hash) == (None, None) and "Knowledge pack" not in system
    assert ABI_CHAPTER not in system
    assert system.index("You write one CUDA kernel") < system.index("# ABI example")
    assert system.endswith(prompts.template("abi_example.md"))
    variant = load_pack("hopper").variants[0]
    _, with_variant, _ = prompts.system_prompt(TASK, HOPPER, AgentConfig(pack_variant=variant))
    assert with_variant == load_pack("hopper", variant).pack_id() and f"+{variant}@" in with_variant


def test_task_prompt_carries_the_definition_and_workload_facts() -> None:
    text = prompts.task_prompt(TASK, HOPPER, AgentConfig(target_speedup=1.5, turns=5))
    block = text.split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(block) == TASK.definition.model_dump(mode="json", exclude_none=True)
    assert "`run(A, B, C)`" in text and "M=8192" in text and "C [8192, 7168]" in text
    assert "1.5×" in text and "5 turns" in text and "cuBLAS" in text


@pytest.mark.nvcc
async def test_the_abi_example_compiles_with_nvcc(tmp_path_factory: pytest.TempPathFactory) -> None:
    source = extract_kernel(prompts.template("abi_example.md"))
    assert source is not None and "TVM_FFI_DLL_EXPORT_TYPED_FUNC(run" in source
    stage = await build(source, HOPPER, 300.0, session_cache(tmp_path_factory))
    assert stage.status == Status.passed, stage.errors or stage.message


@pytest.mark.nvcc
async def test_the_session_records_the_pack(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    out = tmp_path / "s.jsonl"
    await record_session(out, ["no code"], session_cache(tmp_path_factory), config=AgentConfig(turns=1))
    read = read_session(out)
    pack = load_pack("hopper")
    assert (read.start.pack_id, read.start.pack_hash) == (pack.pack_id(), pack.sha256())
    system = next(e for e in read.events if isinstance(e, Message) and e.role == "system")
    assert pack.prompt_text() in system.content and system.turn is None and system.source == "workbench"
