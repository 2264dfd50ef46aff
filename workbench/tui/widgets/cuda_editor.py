"""A TextArea with CUDA highlighting from pygments (Textual's tree-sitter grammars have no CUDA).

Textual 8.2's TextArea paints the highlights it finds in `_highlights` (line -> byte ranges and a
theme name); this fills that map from pygments' CUDA lexer instead of a tree-sitter query. The hook
is private, which is one reason Textual is pinned exactly.
"""

from __future__ import annotations

from pygments.token import Comment, Keyword, Name, Number, Operator, String, Token, _TokenType
from textual.widgets import TextArea

from workbench.tui.highlight import lexer_for

# pygments token -> TextArea theme highlight name, most specific first.
_NAMES: list[tuple[_TokenType, str]] = [
    (Comment.Preproc, "keyword"),
    (Comment, "comment"),
    (Keyword.Type, "type.builtin"),
    (Keyword, "keyword"),
    (String, "string"),
    (Number, "number"),
    (Name.Function, "function"),
    (Name.Builtin, "type.builtin"),
    (Name.Class, "type"),
    (Operator, "operator"),
]


def _highlight_name(token: _TokenType) -> str | None:
    for kind, name in _NAMES:
        if token in kind:
            return name
    return None


class CudaEditor(TextArea):
    def _build_highlight_map(self) -> None:
        self._line_cache.clear()
        highlights = self._highlights
        highlights.clear()
        lexer = lexer_for("cuda")
        if lexer is None:
            return
        row = 0
        column = 0  # in bytes, as TextArea expects
        for token, value in lexer.get_tokens(self.text):
            name = None if token is Token.Text else _highlight_name(token)
            pieces = value.split("\n")
            for index, piece in enumerate(pieces):
                if index:
                    row += 1
                    column = 0
                width = len(piece.encode("utf-8"))
                if name and width:
                    highlights[row].append((column, column + width, name))
                column += width
