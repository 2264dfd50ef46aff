"""Nothing from the host in a row: no keys, no absolute paths, no user or host names.

Text the workbench wrote (the task prompt, feedback, a teacher's reasoning) is scrubbed; kernel sources
are never changed (their hashes are their provenance), so a row whose kernel holds a host detail is
dropped instead.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from workbench.secrets import REDACTED, is_secret_name, redact

# An absolute (or home-relative) path's folders: `/home/ann/runs/kernel.cu` keeps `kernel.cu`. Only at
# the start, after a space, a quote, a bracket, `=` or a compiler's -I/-L, so `TFLOP/s`, `a/b` and URLs
# are left alone.
_FOLDERS = re.compile(r"(?:^|(?<=[\s\"'(\[{<=,])|(?<=-[IL]))(?:~[\w.-]*)?/(?:[\w.+@-]+/)+", re.MULTILINE)


@dataclass(frozen=True)
class Host:
    """What would identify this machine or its user in a row; read once per export."""

    user: str
    hostname: str
    home: str
    secrets: tuple[tuple[str, str], ...]  # (variable, value)

    @classmethod
    def current(cls) -> Host:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = ""
        secrets = tuple((k, v) for k, v in os.environ.items() if is_secret_name(k) and len(v) >= 8)
        return cls(user, socket.gethostname(), str(Path.home()), secrets)

    def leaks(self, text: str) -> list[str]:
        """What of this host the text still holds, described without repeating it."""
        found = [f"the value of ${name}" for name, value in self.secrets if value in text]
        if len(self.home) > 1 and self.home in text:
            found.append("the home folder")
        if len(self.user) >= 2 and re.search(rf"(/|~|\b){re.escape(self.user)}(/|@)", text):
            found.append("the user name in a path or address")
        if len(self.hostname) >= 4 and re.search(rf"\b{re.escape(self.hostname)}\b", text):
            found.append("the host name")
        return found


def scrub(text: str, host: Host) -> str:
    """Workbench-written text with secrets redacted and every absolute path cut to its last part."""
    for _, value in host.secrets:
        text = text.replace(value, REDACTED)
    return _FOLDERS.sub("", redact(text))


def public_model(name: str) -> str:
    """A model as a row may name it: `scripted:/home/ann/teacher.json` -> `scripted:teacher.json`."""
    for prefix in ("scripted:", "replay:"):
        if name.startswith(prefix):
            return prefix + Path(name.removeprefix(prefix)).name
    return name


def public_executor(name: str) -> str:
    """`ssh://ann@gpu7:22` -> `ssh`: the kind of executor, never its user or host."""
    return name.split("://", 1)[0] if "://" in name else name
