"""Shared pieces of the agent tests: real kernels, model answers around them, a build cache."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from build_support import session_cache

from workbench.agent.approval import Approver
from workbench.agent.config import AgentConfig
from workbench.agent.items import LoopItem
from workbench.agent.loop import MiniPTXAgent
from workbench.agent.models import ScriptedModel
from workbench.evaluate.executors import make_executor
from workbench.evaluate.request import EvalRequest

KERNELS = Path(__file__).resolve().parent / "data" / "kernels"
CANARY_KEY = "sk-canary-7f3a9c1e5b2d4f60"


def simt_kernel() -> str:
    """Builds for sm_90a, but SIMT only: the static tier reports the GMMA family missing."""
    return (KERNELS / "abi_example.cu").read_text()


def wgmma_kernel() -> str:
    """wgmma.mma_async: passes build and static."""
    return (KERNELS / "wgmma_gemm.cu").read_text()


def broken_kernel() -> str:
    """The SIMT kernel with an undefined identifier: a compile error."""
    return simt_kernel().replace("const int m = ", "const int m = no_such_identifier + ", 1)


def answer(source: str, tag: str = "cuda", words: str = "Here is the kernel.") -> str:
    return f"{words}\n\n```{tag}\n{source}```\n\nIt launches on the TVM-FFI stream."


def three_turn_answers() -> list[str]:
    """Turn 1 does not compile, turn 2 has no wgmma, turn 3 passes the static tier."""
    return [answer(broken_kernel()), answer(simt_kernel(), tag="cu"), answer(wgmma_kernel())]


def write_script(path: Path, answers: list[str]) -> Path:
    path.write_text(json.dumps(answers), encoding="utf-8")
    return path


def warmed_build_cache(factory: pytest.TempPathFactory) -> Path:
    """The run's build cache holding the three kernels above, so a sweep's timing is the sweep's own."""
    path = session_cache(factory)
    executor = make_executor("static", path)

    async def warm() -> None:
        for source in (broken_kernel(), simt_kernel(), wgmma_kernel()):
            await executor.evaluate(EvalRequest(task="gemm_n7168_k5120", target="hopper", source=source))

    asyncio.run(warm())
    return path


async def record_session(
    out: Path,
    answers: list[str],
    cache: Path,
    config: AgentConfig | None = None,
    approver: Approver | None = None,
) -> list[LoopItem]:
    """A session by the scripted model over the static executor; returns everything the loop yielded."""
    script = write_script(out.with_suffix(".script.json"), answers)
    agent = MiniPTXAgent(
        task="gemm_n7168_k5120",
        target="hopper",
        model=ScriptedModel(script),
        executor=make_executor("static", cache),
        out=out,
        config=config or AgentConfig(turns=len(answers), pack=False),
        approver=approver,
    )
    return [item async for item in agent.run()]
