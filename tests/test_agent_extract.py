"""Code extraction: which fenced block of an answer becomes the candidate."""

from __future__ import annotations

import pytest

from workbench.agent.extract import extract_kernel, fenced_blocks

KERNEL = "__global__ void k() {}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(run, impl);\n"


@pytest.mark.parametrize("tag", ["cuda", "cu", "cpp", "c++", "", "CUDA"])
def test_accepted_tags(tag: str) -> None:
    assert extract_kernel(f"text\n```{tag}\n{KERNEL}```\nmore") == KERNEL


@pytest.mark.parametrize("tag", ["python", "bash", "json", "ptx"])
def test_other_languages_are_not_candidates(tag: str) -> None:
    assert extract_kernel(f"```{tag}\n{KERNEL}```") is None


def test_no_block_gives_none() -> None:
    assert extract_kernel("I would use wgmma here, but no code today.") is None


def test_last_complete_kernel_wins() -> None:
    first = KERNEL.replace("k()", "first()")
    second = KERNEL.replace("k()", "second()")
    assert extract_kernel(f"```cuda\n{first}```\nbetter:\n```cuda\n{second}```") == second


def test_unclosed_block_at_the_end_is_ignored() -> None:
    # A cut answer: the complete earlier kernel stands.
    cut = KERNEL.replace("k()", "cut()")[:20]
    assert extract_kernel(f"```cuda\n{KERNEL}```\nnow faster:\n```cuda\n{cut}") == KERNEL


def test_a_later_untagged_shell_line_does_not_replace_the_kernel() -> None:
    text = f"```cuda\n{KERNEL}```\nBuild it with\n```\nnvcc -arch=sm_90a kernel.cu\n```\n"
    assert extract_kernel(text) == KERNEL


def test_longer_fences_and_tildes() -> None:
    inner = "// a comment with ``` inside\n" + KERNEL
    assert extract_kernel(f"````cuda\n{inner}````") == inner
    assert extract_kernel(f"~~~cu\n{KERNEL}~~~") == KERNEL


def test_fenced_blocks_keeps_tags_in_order() -> None:
    blocks = fenced_blocks("```python\nx = 1\n```\n```cuda\nint y;\n```\n")
    assert [(b.tag, b.code) for b in blocks] == [("python", "x = 1\n"), ("cuda", "int y;\n")]
