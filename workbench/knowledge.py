"""Knowledge packs: the architecture text and helper headers that go into the agent's system prompt.

A pack is a folder under `knowledge_packs/` with a `pack.json` manifest naming its files in prompt
order (markdown topics and `.cuh` helper headers, possibly shared from `knowledge_packs/common/`)
and its variant pattern files, of which a run may add one; `triton` names the files of its Triton
section, the pack a `--language triton` run gets instead. The prompt text is assembled in that
order; its sha256 and the id `<name>[:triton][+<variant>]@<first 12 hex digits>` are what sessions
record.

Tokens are counted with tiktoken's o200k_base encoding. Its BPE file is read offline from the copy
litellm ships (litellm points TIKTOKEN_CACHE_DIR there itself when imported).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from workbench.errors import UserError
from workbench.evaluate.request import Language
from workbench.paths import knowledge_packs_dir
from workbench.tasks.targets import get_target

TOKENIZER = "o200k_base"
TOKEN_BUDGET = (20_000, 32_000)
# tiktoken caches a download under sha1(url); litellm ships the file under that name.
_O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"

FileKind = Literal["topic", "header", "pattern"]


class PackManifest(BaseModel):
    """`knowledge_packs/<name>/pack.json`. Paths are relative to the pack folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    target: str
    title: str
    files: list[str]
    variants: dict[str, str] = {}
    triton: list[str] = []  # the Triton section's files, in prompt order


class PackFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str  # relative to knowledge_packs/, e.g. "common/mbarrier.md"
    kind: FileKind
    text: str

    def rendered(self) -> str:
        """The file as it appears in the prompt: markdown as is, headers in a fenced block."""
        if self.kind == "header":
            name = self.path.rsplit("/", 1)[-1]
            return f"## Helper header `{name}`\n\n```cuda\n{self.text.rstrip()}\n```\n"
        return self.text.rstrip() + "\n"


class Pack(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    target: str
    sm: str
    title: str
    variant: str | None
    files: list[PackFile]
    variants: list[str]
    language: Language = "cuda"

    def prompt_text(self) -> str:
        section = ", Triton" if self.language == "triton" else ""
        head = f"# Knowledge pack: {self.title} ({self.sm}{section})\n"
        return "\n".join([head, *(f.rendered() for f in self.files)])

    def sha256(self) -> str:
        return hashlib.sha256(self.prompt_text().encode("utf-8")).hexdigest()

    def pack_id(self) -> str:
        label = self.name if self.language == "cuda" else f"{self.name}:{self.language}"
        label = label if self.variant is None else f"{label}+{self.variant}"
        return f"{label}@{self.sha256()[:12]}"


class FileStats(BaseModel):
    path: str
    kind: FileKind
    tokens: int
    bytes: int


class PackStats(BaseModel):
    id: str
    sha256: str
    name: str
    target: str
    sm: str
    variant: str | None
    tokenizer: str
    files: list[FileStats]
    total_tokens: int
    budget: tuple[int, int]
    within_budget: bool


def _manifest_path(name: str) -> Path:
    return knowledge_packs_dir() / name / "pack.json"


def _read_manifest(path: Path) -> PackManifest:
    try:
        return PackManifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError, ValidationError) as exc:
        raise UserError(f"bad knowledge pack manifest {path}: {exc}") from None


def list_packs() -> list[PackManifest]:
    root = knowledge_packs_dir()
    if not root.is_dir():
        return []
    return [_read_manifest(p) for p in sorted(root.glob("*/pack.json"))]


def _read_file(pack_dir: Path, rel: str, kind: FileKind) -> PackFile:
    root = knowledge_packs_dir().resolve()
    path = (pack_dir / rel).resolve()
    if not path.is_relative_to(root):
        raise UserError(f"knowledge pack file {rel!r} lies outside {root}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"knowledge pack file {rel!r}: {exc.strerror}") from None
    if kind == "topic" and path.suffix == ".cuh":
        kind = "header"
    return PackFile(path=path.relative_to(root).as_posix(), kind=kind, text=text)


def load_pack(target: str, variant: str | None = None, language: Language = "cuda") -> Pack:
    """The pack for `target` (a target name such as `hopper`), optionally with one pattern file; for
    `triton`, its Triton section (the pattern files are CUDA's: no variant there)."""
    sm = get_target(target).sm
    manifest_path = _manifest_path(target)
    if not manifest_path.is_file():
        raise UserError(f"no knowledge pack for target {target!r} (looked for {manifest_path})")
    manifest = _read_manifest(manifest_path)
    pack_dir = manifest_path.parent
    if language == "triton":
        if not manifest.triton:
            raise UserError(f"pack {target!r} has no Triton section")
        if variant is not None:
            raise UserError(
                f"pack {target!r}: the pattern variants are CUDA patterns; a Triton run takes none"
            )
    files = [
        _read_file(pack_dir, rel, "topic")
        for rel in (manifest.triton if language == "triton" else manifest.files)
    ]
    if variant is not None:
        if variant not in manifest.variants:
            choices = ", ".join(sorted(manifest.variants)) or "none"
            raise UserError(f"pack {target!r} has no variant {variant!r}; choose one of: {choices}")
        files.append(_read_file(pack_dir, manifest.variants[variant], "pattern"))
    return Pack(
        name=manifest.name,
        target=manifest.target,
        sm=sm,
        title=manifest.title,
        variant=variant,
        files=files,
        variants=sorted(manifest.variants) if language == "cuda" else [],
        language=language,
    )


def _bundled_tiktoken_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    key = hashlib.sha1(_O200K_URL.encode()).hexdigest()
    return folder if (folder / key).is_file() else None


@cache
def _encoding():  # -> tiktoken.Encoding (imported lazily: tiktoken loads a Rust extension)
    import tiktoken

    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        bundled = _bundled_tiktoken_dir()
        if bundled is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    try:
        return tiktoken.get_encoding(TOKENIZER)
    except (OSError, ValueError) as exc:  # no network (requests errors are OSErrors), bad hash
        raise UserError(f"cannot load the {TOKENIZER} tokenizer offline: {exc}") from None


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def pack_stats(pack: Pack) -> PackStats:
    files = [
        FileStats(path=f.path, kind=f.kind, tokens=count_tokens(f.rendered()), bytes=len(f.text.encode()))
        for f in pack.files
    ]
    total = count_tokens(pack.prompt_text())
    return PackStats(
        id=pack.pack_id(),
        sha256=pack.sha256(),
        name=pack.name,
        target=pack.target,
        sm=pack.sm,
        variant=pack.variant,
        tokenizer=TOKENIZER,
        files=files,
        total_tokens=total,
        budget=TOKEN_BUDGET,
        within_budget=TOKEN_BUDGET[0] <= total <= TOKEN_BUDGET[1],
    )
