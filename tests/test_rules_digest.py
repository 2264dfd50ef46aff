"""The build cache's key names the rules that judged a build: an entry made under other rules is not read."""

from __future__ import annotations

from pathlib import Path

from tests.build_support import needs_nvcc
from workbench.evaluate.build import link_policy, tvm_ffi_symbols
from workbench.evaluate.build.nvcc import build_key, build_toolchain, library_rules, nvcc_command
from workbench.evaluate.build.rules_digest import rules_digest
from workbench.evaluate.build.triton_build import trace_rules
from workbench.tasks import get_target


def test_the_digest_follows_every_byte_of_every_file(tmp_path: Path) -> None:
    first, second = tmp_path / "policy_a.py", tmp_path / "policy_b.py"
    first.write_text("ALLOWED = {'malloc'}\n")
    second.write_text("DENIED = {'dlopen'}\n")
    before = rules_digest(first, second)
    assert rules_digest(second, first) != before  # the order is part of it
    changed = tmp_path / "policy_c.py"  # rules_digest reads a path once per process: a new path, new bytes
    changed.write_text("ALLOWED = {'malloc', 'getenv'}\n")
    assert rules_digest(changed, second) != before


def test_the_shipped_rules_have_digests_of_their_own() -> None:
    assert len({library_rules(), trace_rules()}) == 2
    # The library's rules are the link policy's and TVM-FFI's symbol classes together, not either alone.
    alone = {rules_digest(Path(module.__file__)) for module in (link_policy, tvm_ffi_symbols)}
    assert library_rules() not in alone


@needs_nvcc
def test_a_build_key_differs_when_the_library_rules_do() -> None:
    target = get_target("hopper")
    toolchain = build_toolchain()
    command = nvcc_command(target, toolchain)
    source = "__global__ void k() {}\n"
    now = build_key(source, command, toolchain, target, library_rules())
    assert now == build_key(source, command, toolchain, target, library_rules())
    assert now != build_key(source, command, toolchain, target, rules_digest(Path(__file__)))
