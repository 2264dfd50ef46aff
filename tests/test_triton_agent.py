"""The agent with `language = triton`: python fences extracted, the Triton system prompt and pack
section, the language recorded in the session (old sessions read as cuda), and one scripted session
through the static executor's Triton build."""

from __future__ import annotations

from pathlib import Path

import pytest
from agent_support import answer, record_session, simt_kernel
from build_support import session_cache

from workbench.agent.config import AgentConfig, recorded_settings
from workbench.agent.extract import extract_kernel
from workbench.agent.feedback import no_code
from workbench.agent.prompts import build, system_prompt
from workbench.errors import UserError
from workbench.evaluate.result import Status
from workbench.knowledge import load_pack
from workbench.session import Evaluation, Message, read_session
from workbench.tasks import get_target, resolve_task

KERNEL = (Path(__file__).parent / "data" / "triton" / "copy_no_dot.py").read_text()
GEMM = "gemm_n7168_k5120"


def test_python_fences_are_the_triton_candidates() -> None:
    notes = "```python\nimport torch\nprint(torch.__version__)\n```\n"
    reply = (
        f"A sketch:\n{answer(KERNEL, tag='py')}\nand a check:\n{notes}\nand CUDA:\n{answer(simt_kernel())}"
    )
    assert extract_kernel(reply, "triton") == KERNEL  # the block with `def run(`, not the later check
    assert extract_kernel(reply, "cuda") == simt_kernel()  # a CUDA run still takes its own block
    assert extract_kernel(answer(KERNEL, tag="python"), "triton") == KERNEL
    assert extract_kernel(answer(KERNEL, tag=""), "triton") == KERNEL
    assert extract_kernel(answer(simt_kernel()), "triton") is None  # a ```cuda block is not Triton


def test_the_triton_system_prompt_and_pack_section() -> None:
    task, target = resolve_task(GEMM), get_target("hopper")
    prompts = build(task, target, AgentConfig(language="triton"))
    assert "one Triton kernel file (`kernel.py`)" in prompts.system
    assert "Knowledge pack: Hopper H100/H200 (sm_90a, Triton)" in prompts.system
    assert "`tl.dot` → wgmma" in prompts.system and "TensorDescriptor.from_tensor" in prompts.system
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC" not in prompts.system
    assert prompts.pack_id is not None and prompts.pack_id.startswith("hopper:triton@")
    assert prompts.pack_hash == load_pack("hopper", language="triton").sha256()
    assert "run(A, B, C)" in prompts.task
    # The CUDA prompt and pack id are what they were.
    cuda = build(task, target, AgentConfig())
    assert cuda.pack_id == load_pack("hopper").pack_id() and ":triton" not in (cuda.pack_id or "")
    assert "Triton" not in cuda.system.splitlines()[0]
    blackwell = system_prompt(task, get_target("blackwell"), AgentConfig(language="triton"))[0]
    assert "tcgen05.mma" in blackwell and "UTCHMMA" in blackwell


def test_without_the_pack_a_triton_run_gets_the_python_example() -> None:
    text, pack_id, _ = system_prompt(
        resolve_task(GEMM), get_target("hopper"), AgentConfig(language="triton", pack=False)
    )
    assert pack_id is None and "```python" in text and "def run(x, y, out):" in text


def test_pattern_variants_are_cuda_only() -> None:
    with pytest.raises(UserError, match="the pattern variants are CUDA patterns"):
        load_pack("hopper", "warp_specialization", language="triton")


def test_messages_name_the_language_file() -> None:
    assert "`kernel.py` file in one ```python block" in no_code(1, AgentConfig(language="triton"))
    assert "`.cu` file in one ```cuda block" in no_code(1, AgentConfig())


def test_sessions_without_a_language_read_as_cuda() -> None:
    old = {"turns": 8, "pack": True, "executor": "static", "model_settings": {}}
    assert AgentConfig.model_validate(recorded_settings(old)).language == "cuda"
    assert AgentConfig.model_validate(recorded_settings({**old, "language": "triton"})).language == "triton"


async def test_a_scripted_triton_session_through_the_static_executor(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("triton")
    out = tmp_path / "triton.jsonl"
    config = AgentConfig(turns=2, pack=False, language="triton")
    await record_session(
        out,
        [answer(KERNEL, tag="python"), "I have no code this time."],
        session_cache(tmp_path_factory),
        config,
    )
    session = read_session(out)
    assert session.start.settings["language"] == "triton"
    evaluation = next(e for e in session.events if isinstance(e, Evaluation))
    build_stage = evaluation.result.stages.build
    assert build_stage.status == Status.passed and (build_stage.toolchain or "").startswith("triton ")
    assert evaluation.result.stages.static.status == Status.static_missing_family
    feedback = [
        e.content for e in session.events if isinstance(e, Message) and e.role == "user" and e.turn == 2
    ]
    assert any("`kernel.py` file in one ```python block" in text for text in feedback)
