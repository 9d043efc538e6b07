"""A policy file as tokens: step 1 of :mod:`.parser`.

The whole file is tokenized with one regular expression made of the grammar's terminals
(``grammar/policy.lark``), resuming after text no terminal matches, so that a stray character
or an unterminated string is one error, not the end of the file. Soft keywords (``budget``,
``pool``, ``inline``, ``overridable``, an ``.arg``'s ``required``) and unknown directives (``.type``) are told apart here, from their
neighbours.

>>> tokens, comments, diagnostics = tokenize(SourceFile("p.dl", "Deny(a). // why"))
>>> [t.type for t in tokens], [c.text for c in comments], diagnostics
(['NAME', 'LPAR', 'NAME', 'RPAR', 'DOT'], ['// why'], [])
"""

from __future__ import annotations

import dataclasses
import functools
import re

from . import ast, codes, syntax_errors
from .diagnostics import Diagnostic
from .grammar_tables import tables
from .source import SourceFile

MAX_LEXICAL_ERRORS = 50


class Token:
    """A token: its terminal's name, its text and its offsets (all the parser needs)."""

    __slots__ = ("end", "start", "type", "value")

    def __init__(self, type_: str, value: str, start: int, end: int) -> None:
        self.type = type_
        self.value = value
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"Token({self.type}, {self.value!r}, {self.start})"


@dataclasses.dataclass(frozen=True)
class _Lexer:
    """The grammar's terminals as one regular expression, tried in Lark's order
    (:mod:`.grammar_tables` says how it is made).

    A single ``finditer`` over the file, with keywords looked up on NAME's text, is several
    times faster than Lark's per-token loop.
    """

    regex: re.Pattern[str]
    keywords: dict[str, str]
    ignore: frozenset[str]


@functools.cache
def _lexer() -> _Lexer:
    found = tables()
    return _Lexer(re.compile(found.pattern), found.keywords, found.ignore)


def tokenize(source: SourceFile) -> tuple[list[Token], list[ast.Comment], list[Diagnostic]]:
    """The tokens of a file, its comments, and one error per run of unreadable text."""
    lexer = _lexer()
    keywords, ignore = lexer.keywords, lexer.ignore
    tokens: list[Token] = []
    comments: list[ast.Comment] = []
    bad: list[list[int]] = []  # [start, end) runs of unreadable text
    preprocessed: list[Diagnostic] = []  # lines of a C preprocessor
    append = tokens.append
    for m in lexer.regex.finditer(source.text):
        kind = m.lastgroup or "_BAD"  # every alternative is a named group
        if kind in ignore:
            continue
        if kind == "NAME":
            value = m.group()
            append(Token(keywords.get(value, "NAME"), value, m.start(), m.end()))
        elif kind == "COMMENT":
            comments.append(ast.Comment(m.group(), span=source.span(m.start(), m.end())))
        elif kind == "PREPROCESSOR":  # Soufflé's `#define`, `#include`: said, and skipped
            start = m.start() + len(m.group()) - len(m.group().lstrip())
            preprocessed.append(syntax_errors.preprocessor_line(source, start, m.end()))
        elif kind.startswith("_BAD"):
            start, end = m.span()
            if kind == "_BAD" and bad and bad[-1][1] == start and tokens and tokens[-1].end == start:
                bad[-1][1] = end  # one diagnostic for a run of unreadable characters
                tokens[-1].end = end
            else:
                if len(bad) < MAX_LEXICAL_ERRORS:
                    bad.append([start, end])
                # the token stands for the unreadable text: the parser skips its statement quietly
                append(Token("LEXERROR", m.group(), start, end))
        else:
            append(Token(kind, m.group(), m.start(), m.end()))
    diagnostics = preprocessed + [syntax_errors.unexpected_character(source, s, e) for s, e in bad]
    if len(bad) >= MAX_LEXICAL_ERRORS:
        diagnostics.append(
            codes.SYNTAX_ERROR(
                source.span(bad[-1][1], bad[-1][1]),
                "too many unreadable characters; later ones are not reported",
            )
        )
    _retype_soft_keywords(tokens)
    _mark_unknown_directives(source.text, tokens)
    _mark_groups(tokens)
    return tokens, comments, diagnostics


# what may follow a parenthesised term: an operator or a comparison
_AFTER_TERM = frozenset(
    {"EQ", "NE", "LT", "LE", "GT", "GE", "PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "CARET"}
    | {"BAND", "BOR", "BXOR", "BSHL", "BSHR", "BSHRU", "LAND", "LOR", "LXOR"}
)
# after these (in a rule's body) a literal starts; after a `,` too, unless it is in parentheses
_LITERAL_AFTER = frozenset({"IF", "SEMICOLON", "LGROUP", "LBRACE", "NOT", "BANG"})


def _mark_groups(tokens: list[Token]) -> None:
    """A `(` where a body literal starts opens a group of literals (`(a(x) ; b(x))`), unless
    the matching `)` is followed by an operator or a comparison (`(n + 1) > m`): it becomes
    LGROUP. One pass finds the matching parentheses, a second the places literals start."""
    matching: dict[int, int] = {}
    opened: list[int] = []
    for i, token in enumerate(tokens):
        if token.type == "LPAR":
            opened.append(i)
        elif token.type == "RPAR" and opened:
            matching[opened.pop()] = i
        elif token.type == "DOT" or token.type in _DIRECTIVE_TYPES:
            opened.clear()
    n = len(tokens)
    in_body = False
    inside: list[bool] = []  # per open bracket: whether literals are listed inside it
    previous = ""
    for i, token in enumerate(tokens):
        kind = token.type
        if kind == "DOT" or kind in _DIRECTIVE_TYPES:
            in_body = False
            inside.clear()
        elif kind == "IF":
            in_body = True
            inside.clear()
        elif kind == "LPAR":
            at_literal = in_body and (
                previous in _LITERAL_AFTER or (previous == "COMMA" and (not inside or inside[-1]))
            )
            close = matching.get(i)
            if (
                at_literal
                and close is not None
                and (close + 1 >= n or tokens[close + 1].type not in _AFTER_TERM)
            ):
                token.type = kind = "LGROUP"
            inside.append(kind == "LGROUP")
        elif kind == "LBRACE":
            inside.append(True)
        elif kind in ("RPAR", "RBRACE") and inside:
            inside.pop()
        elif (
            kind == "NAME"
            and token.value in _BOOLEANS
            and in_body
            and (previous in _LITERAL_AFTER or (previous == "COMMA" and (not inside or inside[-1])))
            and (i + 1 >= n or tokens[i + 1].type in _LITERAL_END)
        ):  # `true` and `false` as whole literals: Soufflé's constraints
            token.type = kind = _BOOLEANS[token.value]
        previous = kind


_BOOLEANS = {"true": "TRUE", "false": "FALSE"}
_LITERAL_END = frozenset({"COMMA", "DOT", "SEMICOLON", "RPAR", "RBRACE"})


_DIRECTIVE_TYPES = frozenset({d[1:].upper() for d in syntax_errors.DIRECTIVES} | {"UNKNOWN_DIRECTIVE", "AT"})


def _mark_unknown_directives(text: str, tokens: list[Token]) -> None:
    """A `.` that starts a line and is glued to a name (`.type X`) is a directive the
    grammar does not know, not the end of the statement before it."""
    merged: list[Token] = []
    i = 0
    n = len(tokens)
    while i < n:
        token = tokens[i]
        if (
            token.type == "DOT"
            and i + 1 < n
            and tokens[i + 1].start == token.end
            and tokens[i + 1].type in ("NAME", "PATH")
            and (not merged or "\n" in text[merged[-1].end : token.start])
        ):
            name = tokens[i + 1]
            merged.append(Token("UNKNOWN_DIRECTIVE", "." + name.value, token.start, name.end))
            i += 2
            continue
        merged.append(token)
        i += 1
    if len(merged) != n:
        tokens[:] = merged


_QUALIFIERS = {
    "overridable": "OVERRIDABLE",
    "inline": "INLINE",
    "eqrel": "EQREL",
    "btree": "STORAGE",
    "brie": "STORAGE",
    "btree_delete": "STORAGE",
    "magic": "HINT",
    "no_magic": "HINT",
    "no_inline": "HINT",
    "input": "IO_QUALIFIER",
    "output": "IO_QUALIFIER",
    "printsize": "IO_QUALIFIER",
}


def _retype_qualifiers(tokens: list[Token], j: int) -> None:
    """The qualifiers of a ``.decl`` from token ``j`` on (a name followed by ``(`` starts a
    rule instead)."""
    while j < len(tokens) and tokens[j].type == "NAME":
        token = tokens[j]
        following = tokens[j + 1] if j + 1 < len(tokens) else None
        if token.value in _QUALIFIERS and (following is None or following.type != "LPAR"):
            token.type = _QUALIFIERS[token.value]
            j += 1
            continue
        if (
            token.value == "choice"
            and j + 2 < len(tokens)
            and tokens[j + 1].type == "MINUS"
            and tokens[j + 2].type == "NAME"
            and tokens[j + 2].value == "domain"
            and tokens[j + 1].start == token.end
            and tokens[j + 2].start == tokens[j + 1].end
        ):
            tokens[j : j + 3] = [Token("CHOICE_DOMAIN", "choice-domain", token.start, tokens[j + 2].end)]
            return  # the domains follow: names and parenthesised lists of names
        return


def _retype_presence(tokens: list[Token], i: int) -> None:
    """The name after the type of ``.arg tool.argument : TYPE`` is its presence (``required``),
    unless a ``(`` follows it: then it starts the next statement, an atom."""
    if (
        i + 4 < len(tokens)
        and tokens[i + 1].type in ("PATH", "STRING")
        and tokens[i + 2].type == "COLON"
        and tokens[i + 3].type == "NAME"
        and tokens[i + 4].type == "NAME"
        and (i + 5 >= len(tokens) or tokens[i + 5].type != "LPAR")
    ):
        tokens[i + 4].type = "PRESENCE"


def _retype_stateful(tokens: list[Token], i: int) -> None:
    """``stateful`` after the result type of ``.functor f(...): T`` is Soufflé's qualifier,
    unless a ``(`` follows it: then it starts the next statement, an atom."""
    j = i + 1
    while j < len(tokens) and tokens[j].type not in ("RPAR", "FUNCTOR", "DECL"):
        j += 1
    if (
        j + 3 < len(tokens)
        and tokens[j].type == "RPAR"
        and tokens[j + 1].type == "COLON"
        and tokens[j + 2].type == "NAME"
        and tokens[j + 3].type == "NAME"
        and tokens[j + 3].value == "stateful"
        and (j + 4 >= len(tokens) or tokens[j + 4].type != "LPAR")
    ):
        tokens[j + 3].type = "STATEFUL"


def _retype_soft_keywords(tokens: list[Token]) -> None:
    """``budget`` and ``pool`` are keywords only in ``.role NAME budget N pool NAME``, and
    ``inline``, ``overridable``, ``eqrel``, ``choice-domain`` and the data structures only after
    the closing parenthesis of a ``.decl`` (the three tokens of ``choice-domain`` become one); the
    name after the type of an ``.arg`` is its presence."""
    n = len(tokens)
    for i, token in enumerate(tokens):
        if token.type == "DECL":
            j = i + 1
            while j < n and tokens[j].type not in ("RPAR", "DECL"):
                j += 1
            if j < n and tokens[j].type == "RPAR":
                _retype_qualifiers(tokens, j + 1)
                n = len(tokens)
            continue
        if token.type == "ARG":
            _retype_presence(tokens, i)
            continue
        if token.type == "FUNCTOR":
            _retype_stateful(tokens, i)
            continue
        if token.type != "ROLE":
            continue
        if i + 2 < n and tokens[i + 2].type == "NAME" and tokens[i + 2].value == "budget":
            tokens[i + 2].type = "BUDGET"
        if (
            i + 5 < n
            and tokens[i + 4].type == "NAME"
            and tokens[i + 4].value == "pool"
            and tokens[i + 5].type == "NAME"
        ):
            tokens[i + 4].type = "POOL"
