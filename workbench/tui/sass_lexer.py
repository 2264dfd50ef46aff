"""A pygments lexer for NVIDIA SASS as `cuobjdump --dump-sass` prints it.

Pygments has none (its `sass` is the CSS dialect). The listing is line-oriented, so the lexer keeps
no state across lines: the code view can highlight any single line on its own.
"""

from __future__ import annotations

from typing import ClassVar

from pygments.lexer import RegexLexer, bygroups
from pygments.token import Comment, Generic, Keyword, Name, Number, Operator, Punctuation, Text, Whitespace


class SassLexer(RegexLexer):
    name = "NVIDIA SASS"
    aliases: ClassVar[list[str]] = ["nvsass", "cuda-sass"]
    filenames: ClassVar[list[str]] = ["*.sass"]

    tokens: ClassVar[dict[str, list[object]]] = {
        "root": [
            (r"[ \t]+", Whitespace),
            (r"\n", Whitespace),
            # Per-instruction address, e.g. /*0a40*/, and the encoding words, /* 0x000fe20000000800 */.
            (r"/\*[0-9a-fA-F]{4,}\*/", Comment.Special),
            (r"/\*\s*0x[0-9a-fA-F]+\s*\*/", Comment.Single),
            (r"/\*.*?\*/", Comment.Multiline),
            (r"//.*?$", Comment.Single),
            # Listing structure: "code for sm_90a", "Function : name", ".headerflags", ".target".
            (r"(code for)(\s+)(\S+)", bygroups(Generic.Heading, Whitespace, Keyword.Type)),
            (r"(Function)(\s*:\s*)(\S+)", bygroups(Generic.Heading, Punctuation, Name.Function)),
            (r"(\.[A-Za-z_][\w.]*)", Keyword.Declaration),
            (r"@\"[^\"]*\"", Comment.Preproc),
            # Labels such as .L_x_12: are caught above as directives; plain ones here.
            (r"[A-Za-z_][\w]*:", Name.Label),
            (r"(@!?)(U?P[0-7T])", bygroups(Operator, Keyword.Pseudo)),
            # The opcode is the first word after the address and predicate; the rest are operands.
            (r"([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)", bygroups(Keyword, Name.Attribute), "operands"),
            (r".", Text),
        ],
        "operands": [
            (r"\n", Whitespace, "#pop"),
            (r"(?=/\*)", Text, "#pop"),
            (r"[ \t]+", Whitespace),
            (r";", Punctuation),
            (r"[,\[\]{}|+\-~!()]", Punctuation),
            (r"\b(?:U?R(?:\d+|Z)|U?P(?:[0-7]|T)|SR_\w+|SRZ|B\d+)\b", Name.Variable),
            (r"\b(?:c|desc|gdesc|tmem)(?=\[)", Name.Builtin),
            (r"-?0x[0-9a-fA-F]+", Number.Hex),
            (r"-?\d+\.\d*(?:e[+-]?\d+)?", Number.Float),
            (r"-?\d+", Number.Integer),
            (r"\b(?:QNAN|INF|-INF)\b", Number.Float),
            (r"`\([^)]*\)", Name.Label),
            (r"\.L_\w+", Name.Label),
            (r"[A-Za-z_][\w.]*", Name.Other),
            (r".", Text),
        ],
    }
