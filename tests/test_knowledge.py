"""Knowledge packs: manifests, prompt assembly, ids and hashes, token counts, and `ptxwb pack`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.errors import UserError
from workbench.knowledge import TOKEN_BUDGET, TOKENIZER, count_tokens, list_packs, load_pack, pack_stats
from workbench.paths import knowledge_packs_dir

PTXWB = Path(sys.executable).parent / "ptxwb"
TARGETS = ("hopper", "blackwell")


def ptxwb(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PTXWB), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_both_targets_have_a_pack() -> None:
    assert {m.name for m in list_packs()} >= set(TARGETS)
    for manifest in list_packs():
        assert manifest.target == manifest.name


@pytest.mark.parametrize("target", TARGETS)
def test_prompt_follows_manifest_order_and_fences_headers(target: str) -> None:
    pack = load_pack(target)
    manifest = json.loads((knowledge_packs_dir() / target / "pack.json").read_text())
    assert len(pack.files) == len(manifest["files"])
    text = pack.prompt_text()
    positions = [text.index(f.rendered()) for f in pack.files]
    assert positions == sorted(positions)
    headers = [f for f in pack.files if f.kind == "header"]
    assert headers, "every pack documents its helper headers"
    for header in headers:
        assert f"```cuda\n{header.text.rstrip()}\n```" in text
    assert pack.sm in text.splitlines()[0]


@pytest.mark.parametrize("target", TARGETS)
def test_id_and_hash_are_stable_and_name_the_prompt(target: str) -> None:
    first, second = load_pack(target), load_pack(target)
    assert first.sha256() == second.sha256() == hashlib.sha256(first.prompt_text().encode()).hexdigest()
    assert first.pack_id() == f"{target}@{first.sha256()[:12]}"


@pytest.mark.parametrize("target", TARGETS)
def test_each_variant_appends_one_pattern_and_changes_the_id(target: str) -> None:
    base = load_pack(target)
    assert len(base.variants) >= 3
    for variant in base.variants:
        pack = load_pack(target, variant)
        assert pack.files[:-1] == base.files
        assert pack.files[-1].kind == "pattern"
        assert pack.pack_id().startswith(f"{target}+{variant}@")
        assert pack.sha256() != base.sha256()


def test_hopper_offers_the_four_paper_variants() -> None:
    assert set(load_pack("hopper").variants) == {
        "warp_specialization",
        "cluster_multicast",
        "fa3_forward",
        "fa3_backward",
    }


def test_unknown_target_and_variant_are_user_errors() -> None:
    with pytest.raises(UserError, match="unknown target"):
        load_pack("ampere")
    with pytest.raises(UserError, match="no variant 'nope'.*fa3_forward"):
        load_pack("hopper", "nope")


def test_tokenizer_is_o200k_offline() -> None:
    # o200k_base has whole-word Cyrillic tokens that cl100k_base lacks (cl100k gives 8 here).
    assert TOKENIZER == "o200k_base"
    assert count_tokens("hello world") == 2
    assert count_tokens("Здравствуйте мир") == 2


@pytest.mark.parametrize("target", TARGETS)
def test_each_pack_is_within_the_token_budget(target: str) -> None:
    stats = pack_stats(load_pack(target))
    assert TOKEN_BUDGET == (20_000, 32_000)
    assert stats.within_budget, stats.total_tokens
    per_file = sum(f.tokens for f in stats.files)
    assert abs(per_file - stats.total_tokens) < 0.02 * stats.total_tokens
    assert stats.id == load_pack(target).pack_id()


@pytest.mark.parametrize("target", TARGETS)
def test_every_variant_is_within_the_token_budget(target: str) -> None:
    """A run gets the pack plus one pattern: that prompt must fit too (the patterns are whole kernels)."""
    for variant in load_pack(target).variants:
        stats = pack_stats(load_pack(target, variant))
        assert stats.within_budget, (variant, stats.total_tokens)


def test_editing_a_file_changes_the_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(knowledge_packs_dir(), tmp_path / "knowledge_packs")
    before = load_pack("hopper").sha256()
    monkeypatch.setenv("PTXWB_HOME", str(tmp_path))
    assert load_pack("hopper").sha256() == before
    mbarrier = tmp_path / "knowledge_packs" / "common" / "mbarrier.md"
    mbarrier.write_text(mbarrier.read_text() + "\nOne more line.\n")
    assert load_pack("hopper").sha256() != before


def test_manifest_paths_may_not_escape_the_packs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pack_dir = tmp_path / "knowledge_packs" / "hopper"
    pack_dir.mkdir(parents=True)
    (tmp_path / "secret.md").write_text("outside")
    (pack_dir / "pack.json").write_text(
        json.dumps({"name": "hopper", "target": "hopper", "title": "x", "files": ["../../secret.md"]})
    )
    monkeypatch.setenv("PTXWB_HOME", str(tmp_path))
    with pytest.raises(UserError, match="outside"):
        load_pack("hopper")


def test_cli_stats_json_reports_every_pack() -> None:
    done = ptxwb("pack", "stats", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    for target in TARGETS:
        row = rows[target]
        assert row["tokenizer"] == "o200k_base"
        assert TOKEN_BUDGET[0] <= row["total_tokens"] <= TOKEN_BUDGET[1]
        assert row["id"] == load_pack(target).pack_id()
        assert row["sha256"] == load_pack(target).sha256()


def test_cli_show_text_is_the_prompt_and_list_names_variants() -> None:
    shown = ptxwb("pack", "show", "hopper", "--variant", "fa3_forward", "--text")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == load_pack("hopper", "fa3_forward").prompt_text()
    listed = ptxwb("pack", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    hopper = next(row for row in json.loads(listed.stdout) if row["name"] == "hopper")
    assert "fa3_backward" in hopper["variants"] and hopper["sm"] == "sm_90a"


def test_cli_bad_target_is_one_line_exit_2() -> None:
    done = ptxwb("pack", "show", "volta")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "unknown target" in done.stderr
