"""Syntax highlighting for the code pane: pygments tokens to Rich styles, a line at a time.

PTX and SASS are line-oriented, so each line is lexed on its own when it first scrolls into view:
a 20k-line listing costs nothing until it is looked at. CUDA and diffs (block comments, small files)
are lexed whole once.
"""

from __future__ import annotations

from functools import cache

from pygments.lexer import Lexer
from pygments.lexers import CudaLexer, DiffLexer, PtxLexer
from pygments.token import Token, _TokenType
from rich.style import Style
from rich.syntax import PygmentsSyntaxTheme
from rich.text import Text

from workbench.tui.sass_lexer import SassLexer

Language = str  # "cuda", "ptx", "sass", "diff", "text"

LINE_ORIENTED = {"ptx", "sass"}


@cache
def lexer_for(language: Language) -> Lexer | None:
    lexers: dict[str, type[Lexer]] = {
        "cuda": CudaLexer,
        "ptx": PtxLexer,
        "sass": SassLexer,
        "diff": DiffLexer,
    }
    kind = lexers.get(language)
    return kind(stripnl=False, ensurenl=False) if kind else None


class TokenStyles:
    """Rich styles per token type from a pygments style, without its background (the pane has one)."""

    def __init__(self, dark: bool) -> None:
        self._theme = PygmentsSyntaxTheme("monokai" if dark else "friendly")
        self._cache: dict[_TokenType, Style] = {}

    def style(self, token: _TokenType) -> Style:
        found = self._cache.get(token)
        if found is None:
            full = self._theme.get_style_for_token(token)
            found = Style(color=full.color, bold=full.bold, italic=full.italic, underline=full.underline)
            self._cache[token] = found
        return found


def highlight_line(line: str, language: Language, styles: TokenStyles) -> Text:
    lexer = lexer_for(language)
    text = Text(line, no_wrap=True, end="")
    if lexer is None:
        return text
    offset = 0
    for token, value in lexer.get_tokens(line):
        if token is not Token.Text and token is not Token.Text.Whitespace and value:
            text.stylize(styles.style(token), offset, offset + len(value))
        offset += len(value)
    return text


def highlight_whole(source: str, language: Language, styles: TokenStyles) -> list[Text]:
    """Lex a whole document once and split it into one Text per line."""
    lexer = lexer_for(language)
    lines: list[Text] = [Text(no_wrap=True, end="")]
    if lexer is None:
        return [Text(line, no_wrap=True, end="") for line in source.split("\n")]
    for token, value in lexer.get_tokens(source):
        style = styles.style(token)
        parts = value.split("\n")
        for index, part in enumerate(parts):
            if index:
                lines.append(Text(no_wrap=True, end=""))
            if part:
                lines[-1].append(part, style)
    return lines
