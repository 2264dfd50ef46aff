"""Keep secrets out of everything the workbench writes: error notes, settings, exports."""

from __future__ import annotations

import os
import re

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
# Provider key shapes, whole or masked with `*`, that may reach us outside the environment (an error echo).
_KEY_SHAPES = re.compile(r"\b(sk|rk|pk|xai|gsk|hf|ghp|AIza)[-_][A-Za-z0-9_\-*]{6,}")
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
REDACTED = "[redacted]"


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret (an API key, a token, a password)."""
    return _SECRET_NAME.search(name) is not None


def _secret_values() -> list[str]:
    values = {value for name, value in os.environ.items() if is_secret_name(name) and len(value) >= 8}
    # Longest first, so a value that contains another is replaced whole.
    return sorted(values, key=len, reverse=True)


def redact(text: str) -> str:
    """The text with every secret-looking environment value, key-shaped token and URL password removed."""
    for value in _secret_values():
        text = text.replace(value, REDACTED)
        # Providers echo keys partly masked ("sk-canar*****1234"): drop any long prefix of a secret too.
        text = text.replace(value[:8], REDACTED)
    text = _KEY_SHAPES.sub(REDACTED, text)
    return _URL_USERINFO.sub(f"{REDACTED}@", text)
