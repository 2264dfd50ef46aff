"""Read a file the user named, text or JSON, with one-line errors (missing, a folder, unreadable,
not UTF-8, malformed)."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.errors import UserError


def read_text(path: Path, kind: str = "file") -> str:
    """The file's UTF-8 text; `kind` names what was expected, for the error about a folder."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: a folder, not a {kind}") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def read_json(path: Path) -> object:
    text = read_text(path, "JSON file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
