"""A digest of the code that judges a build, for the build cache's key.

A cache entry holds the verdict its build got (the link policy's refusals, the Triton trace's bans), so the
key names the rules that gave it: when a rule changes, an entry made under the old one is never read, and
a kernel refused (or let through) before is judged again.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path


@cache
def rules_digest(*files: Path) -> str:
    """sha256 over the files' bytes, in order (read once per process)."""
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.read_bytes())
        digest.update(b"\0\1")
    return digest.hexdigest()
