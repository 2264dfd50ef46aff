"""The runner finds a library's local functions (a kernel's host function is one) where they sit in the
process: offsets from the ELF symbol table, base from the loader. Checked on a library gcc builds here,
against nm's table and dlsym's address for an exported function."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from workbench.evaluate.gpu.eager_kernels import function_offsets, load_base

SOURCE = """
static int hidden_helper(int x) { return x * 3 + 1; }
__attribute__((visibility("hidden"))) int hidden_global(int x) { return hidden_helper(x) + 2; }
int exported_entry(int x) { return hidden_global(x); }
int (*keep_helper)(int) = hidden_helper;
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc on this machine")
    folder = tmp_path_factory.mktemp("eager")
    (folder / "lib.c").write_text(SOURCE)
    out = folder / "libeager.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(folder / "lib.c")], check=True)
    return out


def nm_table(library: Path) -> dict[str, int]:
    listed = subprocess.run(["nm", str(library)], check=True, capture_output=True, text=True).stdout
    return {
        parts[2]: int(parts[0], 16)
        for parts in (line.split() for line in listed.splitlines())
        if len(parts) == 3 and parts[1] in "tT"
    }


def test_offsets_are_the_symbol_tables_for_local_and_exported_functions(library: Path) -> None:
    names = ["hidden_helper", "hidden_global", "exported_entry"]
    offsets = function_offsets(library, [*names, "not_there"])
    table = nm_table(library)
    assert offsets == {name: table[name] for name in names}


def test_only_functions_are_found(library: Path) -> None:
    assert function_offsets(library, ["keep_helper"]) == {}  # a data symbol


def test_a_file_that_is_not_elf_or_is_cut_short_gives_nothing(tmp_path: Path, library: Path) -> None:
    text = tmp_path / "kernel.so"
    text.write_text("not a library")
    assert function_offsets(text, ["anything"]) == {}
    cut = tmp_path / "cut.so"
    cut.write_bytes(library.read_bytes()[:200])
    assert function_offsets(cut, ["exported_entry"]) == {}
    assert function_offsets(tmp_path / "missing.so", ["exported_entry"]) == {}


def test_base_plus_offset_is_the_loaded_function(library: Path) -> None:
    assert load_base(library) is None  # not loaded yet
    loaded = ctypes.CDLL(str(library))
    base = load_base(library)
    assert base is not None
    exported = ctypes.cast(loaded.exported_entry, ctypes.c_void_p).value
    assert base + function_offsets(library, ["exported_entry"])["exported_entry"] == exported
    # The hidden function at its computed address computes what it should.
    hidden = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(
        base + function_offsets(library, ["hidden_helper"])["hidden_helper"]
    )
    assert hidden(4) == 13
