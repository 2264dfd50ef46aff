"""No host paths in what the workbench writes: sessions, exports, re-judge files.

A build keeps its files in the build cache, `<cache>/<key[:2]>/<key>/<file>`; an `EvalResult` names
them by absolute path, which only this machine can use. What is written names them
`cache:<key>/<file>` instead, and a reader looks for the file in this machine's build cache
(`$PTXWB_CACHE`); a session made elsewhere has the listings it carries, or a rebuild here.
Free text (compiler output, the nvcc line, notes) gets the same treatment: a cache entry becomes
`cache:<key>/`, a build's temporary folder goes, the TVM-FFI package, the Python environment, the
checkout and the build cache become `<tvm_ffi>`, `<python>`, `<checkout>` and `<cache>`, and a path
in the temporary or the home folder, or anywhere under /home, /root, /tmp or /Users, is cut to its
last part (`/home/ann/x/kernel.cu` -> `kernel.cu`; the folder alone is `<tmp>` or `~`).

Older sessions hold absolute paths: they still load, and a path that is not on this machine is taken
as absent (a path in a build cache's layout is looked up in this machine's cache by its key).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import tempfile
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel

from workbench.evaluate.result import EvalResult

CACHE_REF = "cache:"
# The fields where an `EvalResult` names a file of its build (the build and the static stage).
PATH_NAMES = frozenset({"library_path", "negated_library_path", "ptx_path", "cubin_path", "sass_path"})

_KEY = r"[0-9a-f]{64}"
_NAME = r"[\w.+@~-]"  # a character of a file or folder name
# Before a path: the start, a space, a quote, a bracket, `=`, `,`, `:` or a compiler's -I / -L.
_BEFORE = r"(?:(?<![\w.~/\\-])|(?<=-[IL]))"
_FOLDERS = rf"(?:/{_NAME}+)*"
# `<folder>/<xx>/<key>/`: a build cache entry, wherever that cache is.
_ENTRY = re.compile(rf"{_BEFORE}(?:~?{_FOLDERS})?/([0-9a-f]{{2}})/(\1[0-9a-f]{{62}})/")
# A build's temporary folder (tempfile.mkdtemp in the build cache), which nvcc and Triton name.
_WORK = re.compile(rf"{_BEFORE}(?:~?{_FOLDERS})?/(?:build|triton)-\w{{8}}/")
# The TVM-FFI package's headers and library, wherever it is installed (the nvcc line names them).
_TVM_FFI = re.compile(rf"{_BEFORE}(?:~?{_FOLDERS})?/tvm_ffi(?=/(?:include|lib)(?!{_NAME}))")
# Any other absolute path under a person's or a temporary folder: its folders go, its last part stays.
_PRIVATE = re.compile(rf"{_BEFORE}/(?:home|root|tmp|Users|private|var/folders){_FOLDERS}/(?={_NAME})")


@cache
def _tvm_ffi_dir() -> str | None:
    spec = importlib.util.find_spec("tvm_ffi")  # located, not imported (importing loads torch)
    if spec is None or not spec.submodule_search_locations:
        return None
    return next(iter(spec.submodule_search_locations))


def _forms(folder: str | None) -> list[str]:
    """A folder as written and as resolved (/tmp may be /private/tmp), when it stands for this machine."""
    if not folder:
        return []
    forms = {folder.rstrip("/"), os.path.realpath(folder).rstrip("/")}
    return [form for form in forms if form not in ("", "/")]


def _known_folders() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(folder, its name) to name, and (folder, its name) whose paths are cut to their last part."""
    from workbench.evaluate.build.nvcc import cache_root
    from workbench.paths import project_root

    named = [
        (_tvm_ffi_dir(), "<tvm_ffi>"),
        (sys.prefix if sys.prefix != sys.base_prefix else None, "<python>"),  # a virtual environment
        (str(project_root()), "<checkout>"),
        (str(Path(__file__).resolve().parents[2]), "<checkout>"),
        (str(cache_root()), "<cache>"),
    ]
    cut = [(tempfile.gettempdir(), "<tmp>"), (str(Path.home()), "~")]
    return (
        [(form, name) for folder, name in named for form in _forms(folder) if form.count("/") >= 2],
        [(form, name) for folder, name in cut for form in _forms(folder)],
    )


class Scrubber:
    """Cuts host paths out of text; made once per result or file written (it reads the environment)."""

    def __init__(self) -> None:
        named, cut = _known_folders()
        rules: list[tuple[str, re.Pattern[str], str]] = []
        for folder, name in named:  # `<checkout>/workbench/x.py`
            rules.append((folder, re.compile(rf"{_BEFORE}{re.escape(folder)}(?!{_NAME})"), name))
        for folder, name in cut:  # `~/work/ann/x.cu` -> `x.cu`; the folder alone -> `~`
            folders = rf"{_BEFORE}{re.escape(folder)}{_FOLDERS}/(?={_NAME})"
            rules.append((folder, re.compile(folders), ""))
            rules.append((folder, re.compile(rf"{_BEFORE}{re.escape(folder)}/?(?![\w/.+@~-])"), name))
        # The longest first, so a folder inside another (the checkout in the home folder) is named by itself.
        rules.sort(key=lambda rule: -len(rule[0]))
        self._rules = [(pattern, name) for _, pattern, name in rules]

    def text(self, text: str) -> str:
        if "/" not in text:
            return text
        text = _ENTRY.sub(lambda m: f"{CACHE_REF}{m.group(2)}/", text)
        text = _WORK.sub("", text)
        text = _TVM_FFI.sub("<tvm_ffi>", text)
        for pattern, name in self._rules:
            text = pattern.sub(name, text)
        return _PRIVATE.sub("", text)

    def value(self, value: Any) -> Any:
        """Every string in a JSON-like value scrubbed (dict keys too)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        return value


def scrub_text(text: str) -> str:
    return Scrubber().text(text)


def portable_path(value: str | None) -> str | None:
    """A build's file as a session names it: `cache:<key>/<file>`; None for a path outside a build cache."""
    if value is None or value.startswith(CACHE_REF):
        return value
    parts = PurePosixPath(value.replace("\\", "/")).parts
    for index in range(len(parts) - 2, 0, -1):
        key, shard = parts[index], parts[index - 1]
        if re.fullmatch(_KEY, key) and shard == key[:2]:
            rest = parts[index + 1 :]
            if rest and ".." not in rest:
                return f"{CACHE_REF}{key}/{'/'.join(rest)}"
    return None


def portable_result(result: EvalResult, scrubber: Scrubber | None = None) -> EvalResult:
    """`result` with no host path: its build's files as `cache:<key>/<file>`, every text scrubbed.

    Only what changes is replaced, so the fields a result was made with stay the ones it holds (an
    export writes only those), and a result already portable comes back as it was.
    """
    portable = _portable_model(result, scrubber or Scrubber())
    assert isinstance(portable, EvalResult)
    return portable


def _portable_model(model: BaseModel, scrubber: Scrubber) -> BaseModel:
    update: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if name in PATH_NAMES and (value is None or isinstance(value, str)):
            new = portable_path(value)
        else:
            new = _portable_value(value, scrubber)
        if new != value:
            update[name] = new
    return model.model_copy(update=update) if update else model


def _portable_value(value: Any, scrubber: Scrubber) -> Any:
    if isinstance(value, BaseModel):
        return _portable_model(value, scrubber)
    if isinstance(value, str):
        return scrubber.text(value)
    if isinstance(value, list):
        return [_portable_value(item, scrubber) for item in value]
    if isinstance(value, dict):
        return {
            scrubber.text(k) if isinstance(k, str) else k: _portable_value(v, scrubber)
            for k, v in value.items()
        }
    return value


def public_model(name: str) -> str:
    """A model as a session names it: `scripted:/home/ann/teacher.json` -> `scripted:teacher.json`; a
    file named relative to where it ran (`scripted:references/scripts/ladder.json`) stays as it is."""
    prefix, colon, file = name.partition(":")
    if not colon or prefix not in ("scripted", "replay"):
        return name
    if file.startswith(("/", "~", "\\")) or re.match(r"[A-Za-z]:[\\/]", file):
        return f"{prefix}:{file.replace(chr(92), '/').rstrip('/').rsplit('/', 1)[-1]}"
    return name


def local_file(value: str | None, cache_dir: Path | None = None) -> Path | None:
    """The file a result names, on this machine: `cache:<key>/<file>` in this machine's build cache
    (`cache_dir`, else `$PTXWB_CACHE`), an absolute path where it exists (else, in a build cache's
    layout, by its key here); None when it is not here."""
    if value is None:
        return None
    if not value.startswith(CACHE_REF):
        path = Path(value)
        if path.is_absolute() and path.exists():
            return path
        value = portable_path(value)  # recorded elsewhere: the same build may be in this cache
        if value is None:
            return None
    key, _, rest = value.removeprefix(CACHE_REF).partition("/")
    parts = PurePosixPath(rest).parts
    if not re.fullmatch(_KEY, key) or not parts or ".." in parts or PurePosixPath(rest).is_absolute():
        return None
    if cache_dir is None:
        from workbench.evaluate.build.nvcc import cache_root

        cache_dir = cache_root()
    found = cache_dir / key[:2] / key / Path(*parts)
    return found if found.exists() else None
