"""The code pane's listings: the SASS lexer, family marks and SASS compaction on real compiler output."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from pygments.token import Comment, Keyword, Name, Number

from workbench.evaluate.gpu.toolchain import find_tool
from workbench.tui.document import CodeDocument, compact_sass
from workbench.tui.families import mark_lines
from workbench.tui.sass_lexer import SassLexer

PROBE = Path(__file__).resolve().parent / "data" / "tui" / "families_probe.cu"


@pytest.fixture(scope="module")
def listings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PTX and SASS of the probe kernel from the real nvcc and cuobjdump."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    cuobjdump = find_tool("cuobjdump")
    out = tmp_path_factory.mktemp("probe")
    cubin, ptx = out / "probe.cubin", out / "probe.ptx"
    subprocess.run(
        ["nvcc", "-arch=sm_90a", "-cubin", "-o", str(cubin), str(PROBE)], check=True, capture_output=True
    )
    subprocess.run(
        ["nvcc", "-arch=sm_90a", "-ptx", "-o", str(ptx), str(PROBE)], check=True, capture_output=True
    )
    sass = subprocess.run(
        [str(cuobjdump), "--dump-sass", str(cubin)], check=True, capture_output=True, text=True
    ).stdout
    return {"sass": sass, "ptx": ptx.read_text()}


def tokens(line: str) -> list[tuple[object, str]]:
    return [(t, v) for t, v in SassLexer().get_tokens(line) if v.strip()]


def test_sass_lexer_splits_an_instruction_line() -> None:
    line = "        /*0100*/              @!P0 HGMMA.64x8x16.F32.BF16 R24, gdesc[UR8], RZ, !UPT, gsb0 ;  /* 0x00000000081879f0 */"
    found = tokens(line)
    assert found[0] == (Comment.Special, "/*0100*/")
    assert (Keyword, "HGMMA") in found
    assert (Name.Attribute, ".64x8x16.F32.BF16") in found
    assert (Name.Variable, "R24") in found and (Name.Variable, "UR8") in found
    assert (Name.Builtin, "gdesc") in found
    assert found[-1] == (Comment.Single, "/* 0x00000000081879f0 */")


def test_sass_lexer_numbers_and_constants() -> None:
    found = tokens("/*0000*/ LDC R1, c[0x0][0x28] ;")
    assert (Name.Builtin, "c") in found
    assert (Number.Hex, "0x28") in found


def test_sass_lexer_is_not_the_css_one() -> None:
    from pygments.lexers import get_lexer_by_name

    assert get_lexer_by_name("sass").name != SassLexer.name  # pygments' `sass` is the CSS dialect


def test_real_sass_marks_the_hopper_families(listings: dict[str, str]) -> None:
    sass = listings["sass"]
    document = CodeDocument.from_text(sass, "sass", "hopper")
    counts = document.family_counts()
    assert counts["GMMA"] >= 1 and counts["MBARRIER"] >= 1
    for line, family in document.marks.items():
        text = document.line(line)
        assert {"GMMA": "GMMA", "MBARRIER": "SYNCS"}[family] in text
    # For Blackwell the wgmma is no family of the target's (mbarriers are shared by both).
    assert set(mark_lines(sass, "sass", "blackwell").values()) == {"MBARRIER"}


def test_sass_compaction_drops_encodings_and_keeps_instructions(listings: dict[str, str]) -> None:
    sass = listings["sass"]
    compact = compact_sass(sass)
    assert "0x000fe2" not in compact
    instructions = [
        line
        for line in sass.splitlines()
        if "/*0" in line and "*/" in line and not line.strip().startswith("/* 0x")
    ]
    assert len([line for line in compact.splitlines() if line.startswith("  /*")]) == len(instructions)
    assert all(not line.endswith(" ") for line in compact.splitlines())


def test_real_ptx_marks_wgmma_and_mbarrier(listings: dict[str, str]) -> None:
    document = CodeDocument.from_text(listings["ptx"], "ptx", "hopper")
    marked = {document.lines[line].strip().split()[0]: family for line, family in document.marks.items()}
    assert marked.get("mbarrier.init.shared.b64") == "MBARRIER"
    assert any(family == "GMMA" for family in marked.values())
    # wgmma.fence is no GMMA instruction: only mma_async is.
    assert all("wgmma.fence" not in document.lines[line] for line in document.marks)


def test_cuda_source_marks_inline_asm() -> None:
    document = CodeDocument.from_text(PROBE.read_text(), "cuda", "hopper")
    assert sorted(document.family_counts().items()) == [("GMMA", 1), ("MBARRIER", 1)]


def test_missing_document_says_why() -> None:
    document = CodeDocument.missing("SASS not available on this machine")
    assert document.summary() == "SASS not available on this machine"
    assert document.lines == []


def test_marks_count_code_only_never_a_comment_quoting_an_instruction() -> None:
    source = (
        "// the MMA is wgmma.mma_async, issued below\n"
        "/* a pipeline of cp.async.bulk.tensor loads and\n"
        "   mbarrier.try_wait spins */\n"
        'asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0}, %1, %2;" : "+f"(x)); // wgmma.mma_async\n'
        'const char* s = "// not a comment"; asm("mbarrier.init.shared.b64 [%0], 1;");\n'
    )
    document = CodeDocument.from_text(source, "cuda", "hopper")
    assert document.marks == {3: "GMMA", 4: "MBARRIER"}
    assert document.summary() == "5 lines · GMMA ×1 · MBAR ×1"
    ptx = "\t// wgmma.mma_async in a comment\n\twgmma.fence.sync.aligned;\n\twgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f1}, %rd1, %rd2, p, 1, 1, 1, 1;\n"
    assert mark_lines(ptx, "ptx", "hopper") == {2: "GMMA"}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt is not installed")
def test_sass_functions_are_named_as_in_the_source() -> None:
    text = (Path(__file__).resolve().parent / "data" / "tui" / "families_probe.sm_90a.sass").read_text()
    document = CodeDocument.from_text(text, "sass", "hopper")
    headers = [line.strip() for line in document.lines if "Function" in line]
    assert headers == ["Function : families_probe(float*, unsigned long, unsigned long)"]
    assert len(document.lines) == len(CodeDocument.from_text(text, "sass", "").lines)  # lines stay put
