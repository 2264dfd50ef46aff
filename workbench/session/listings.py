"""An evaluation's PTX and SASS carried in the session, compressed, so a replay anywhere shows them.

A session records where the build kept its listings; on another machine those paths are empty. The
listings ride along in the evaluation event instead (xz, then base64: a 220 kB PTX is 14 kB), with
the cubin's sha256, so a rebuild made elsewhere can be checked against the recorded one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import lzma
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from workbench.evaluate.build.lineinfo import line_table
from workbench.evaluate.result import EvalResult
from workbench.session.hostpaths import local_file


class Listings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    encoding: Literal["xz+base64"] = "xz+base64"
    ptx: str | None = Field(default=None, description="the PTX the build kept, compressed")
    sass: str | None = Field(default=None, description="cuobjdump --dump-sass of the cubin, compressed")
    cubin_sha256: str | None = None
    lines: str | None = Field(
        default=None, description="the cubin's line table, compressed JSON: kernel -> address -> CUDA line"
    )

    def text(self, which: Literal["ptx", "sass", "lines"]) -> str | None:
        packed = {"ptx": self.ptx, "sass": self.sass, "lines": self.lines}[which]
        return None if packed is None else lzma.decompress(base64.b64decode(packed)).decode("utf-8")

    def line_table(self) -> dict[str, dict[int, int]] | None:
        text = self.text("lines")
        if text is None:
            return None
        return {
            kernel: {int(a): line for a, line in lines.items()} for kernel, lines in json.loads(text).items()
        }


def _compressed(data: bytes) -> str:
    return base64.b64encode(lzma.compress(data)).decode("ascii")


def _packed(path: str | None) -> str | None:
    found = local_file(path)
    if found is None:
        return None
    try:
        return _compressed(found.read_bytes())
    except OSError:
        return None


def carry(result: EvalResult) -> Listings | None:
    """The listings of `result`'s build that are on this machine (none when it built elsewhere): its
    files by path, or `cache:<key>/<file>` in this machine's build cache."""
    build, static = result.stages.build, result.stages.static
    cubin_sha = lines = None
    cubin = local_file(build.cubin_path)
    if cubin is not None:
        try:
            cubin_sha = hashlib.sha256(cubin.read_bytes()).hexdigest()
        except OSError:
            cubin_sha = None
        table = line_table(cubin) if cubin_sha else None
        lines = _compressed(json.dumps(table).encode()) if table else None
    listings = Listings(
        ptx=_packed(build.ptx_path), sass=_packed(static.sass_path), cubin_sha256=cubin_sha, lines=lines
    )
    return listings if listings.ptx or listings.sass or cubin_sha else None
