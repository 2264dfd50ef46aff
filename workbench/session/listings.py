"""An evaluation's PTX and SASS carried in the session, compressed, so a replay anywhere shows them.

A session records where the build kept its listings; on another machine those paths are empty. The
listings ride along in the evaluation event instead (xz, then base64: a 220 kB PTX is 14 kB), with
the cubin's sha256, so a rebuild made elsewhere can be checked against the recorded one.
"""

from __future__ import annotations

import base64
import hashlib
import lzma
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from workbench.evaluate.result import EvalResult


class Listings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    encoding: Literal["xz+base64"] = "xz+base64"
    ptx: str | None = Field(default=None, description="the PTX the build kept, compressed")
    sass: str | None = Field(default=None, description="cuobjdump --dump-sass of the cubin, compressed")
    cubin_sha256: str | None = None

    def text(self, which: Literal["ptx", "sass"]) -> str | None:
        packed = self.ptx if which == "ptx" else self.sass
        return None if packed is None else lzma.decompress(base64.b64decode(packed)).decode("utf-8")


def _packed(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    return base64.b64encode(lzma.compress(data)).decode("ascii")


def carry(result: EvalResult) -> Listings | None:
    """The listings of `result`'s build that are on this machine (none when it built elsewhere)."""
    build, static = result.stages.build, result.stages.static
    cubin_sha = None
    if build.cubin_path is not None:
        try:
            cubin_sha = hashlib.sha256(Path(build.cubin_path).read_bytes()).hexdigest()
        except OSError:
            cubin_sha = None
    listings = Listings(ptx=_packed(build.ptx_path), sass=_packed(static.sass_path), cubin_sha256=cubin_sha)
    return listings if listings.ptx or listings.sass or cubin_sha else None
