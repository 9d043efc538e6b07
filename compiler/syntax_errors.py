"""Friendly messages for syntax errors.

The parser reports *where* it got stuck (the unexpected token, the one before it, the set of
terminals it could have accepted); this module says *what went wrong* in the words a policy
author uses: "expected `.` at the end of the rule" rather than "unexpected NAME".
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

from . import codes
from .diagnostics import Diagnostic, Edit, Fix
from .source import SourceFile, Span

DIRECTIVES = (
    ".decl",
    ".input",
    ".output",
    ".include",
    ".import",
    ".functor",
    ".default",
    ".role",
    ".field",
    ".arg",
    ".type",
    ".plan",
    ".pragma",
    ".comp",
    ".init",
    ".override",
    ".key",
    ".host",
    ".number_type",
    ".symbol_type",
    ".limitsize",
    ".printsize",
    ".once",
)

# Soufflé's directives policyc does not read, and why (an error at each, saying so)
UNSUPPORTED_DIRECTIVES = {
    ".lattice": (
        "lattices (`.lattice`) are not supported: policyc's relations hold sets of facts",
        "derive the least upper bound with an aggregate (`max`, `min`) over a relation of the values",
    ),
    ".debug_delta": (
        "`.debug_delta` is not supported: it shows Soufflé's evaluation from the inside",
        "`policyc explain` shows why a fact holds",
    ),
}

TERMINALS: dict[str, str] = {
    "NAME": "a name",
    "PATH": "`tool.argument`",
    "STRING": "a string",
    "INT": "an integer",
    "FLOAT": "a number",
    "IF": "`:-`",
    "DOT": "`.`",
    "COMMA": "`,`",
    "SEMICOLON": "`;`",
    "COLON": "`:`",
    "LPAR": "`(`",
    "LGROUP": "`(`",
    "RPAR": "`)`",
    "LBRACE": "`{`",
    "RBRACE": "`}`",
    "AT": "`@`",
    "BANG": "`!`",
    "NOT": "`not`",
    "EQ": "`=`",
    "NE": "`!=`",
    "LT": "`<`",
    "LE": "`<=`",
    "GT": "`>`",
    "GE": "`>=`",
    "PLUS": "`+`",
    "MINUS": "`-`",
    "STAR": "`*`",
    "SLASH": "`/`",
    "PERCENT": "`%`",
    "CARET": "`^`",
    "COUNT": "`count`",
    "SUM": "`sum`",
    "MIN": "`min`",
    "MAX": "`max`",
    "MEAN": "`mean`",
    "BAND": "`band`",
    "BOR": "`bor`",
    "BXOR": "`bxor`",
    "BSHL": "`bshl`",
    "BSHR": "`bshr`",
    "BSHRU": "`bshru`",
    "BNOT": "`bnot`",
    "LAND": "`land`",
    "LOR": "`lor`",
    "LXOR": "`lxor`",
    "LNOT": "`lnot`",
    "BUDGET": "`budget`",
    "PRESENCE": "`required`",
    "POOL": "`pool`",
    "INLINE": "`inline`",
    "SUBTYPE": "`<:`",
    "PIPE": "`|`",
    "LSQB": "`[`",
    "RSQB": "`]`",
    "DOLLAR": "`$`",
    "$END": "end of file",
}
TERMINALS.update({d[1:].upper(): f"`{d}`" for d in DIRECTIVES})

# Soufflé's operators written as words
OPERATOR_WORDS = ("band", "bor", "bxor", "bshl", "bshr", "bshru", "bnot", "land", "lor", "lxor", "lnot")
RESERVED = {"NOT": "not", "COUNT": "count", "SUM": "sum", "MIN": "min", "MAX": "max", "MEAN": "mean"}
RESERVED.update({w.upper(): w for w in OPERATOR_WORDS})
AGGREGATORS = frozenset({"COUNT", "SUM", "MIN", "MAX", "MEAN"})
COMPARATORS = frozenset({"EQ", "NE", "LT", "LE", "GT", "GE"})
OPERATORS = frozenset(
    {"PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "CARET"}
    | {w.upper() for w in OPERATOR_WORDS if w not in ("bnot", "lnot")}
)
TERM_START = frozenset(
    {
        "NAME",
        "STRING",
        "INT",
        "FLOAT",
        "LPAR",
        "MINUS",
        "COUNT",
        "SUM",
        "MIN",
        "MAX",
        "MEAN",
        "BNOT",
        "LNOT",
        "LSQB",
        "DOLLAR",
    }
)
STATEMENT_START = frozenset({"NAME", "AT"} | {d[1:].upper() for d in DIRECTIVES})


def describe_token(token_type: str, value: str) -> str:
    if token_type == "$END":
        return "end of file"
    if token_type in ("NAME", "PATH", "STRING", "INT", "FLOAT"):
        return f"`{value}`"
    return TERMINALS.get(token_type, f"`{value}`")


def describe_expected(expected: Collection[str]) -> str:
    """Turn a set of terminal names into "a term", "`,` or `.`", ..."""
    names = set(expected) - {"$END"}
    if "LPAR" in names:
        names.discard("LGROUP")  # both are written `(`
    groups: list[str] = []
    if STATEMENT_START <= names:
        groups.append("a rule, a fact or a directive")
        names -= STATEMENT_START
    if TERM_START <= names:
        groups.append("a term")
        names -= TERM_START
    if COMPARATORS <= names:
        groups.append("a comparison operator")
        names -= COMPARATORS
    if names - OPERATORS or groups:
        names -= OPERATORS  # arithmetic is rarely what was meant when something else fits
    groups.extend(sorted(TERMINALS.get(n, n) for n in names))
    if not groups:
        return "end of file"
    if len(groups) == 1:
        return groups[0]
    return ", ".join(groups[:-1]) + " or " + groups[-1]


def did_you_mean(word: str, candidates: Collection[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def unexpected_token(
    source: SourceFile,
    token_type: str,
    value: str,
    span: Span,
    expected: Collection[str],
    previous: Span | None,
    next_value: str | None,
    in_rule: bool,
    annotations_pending: bool,
    previous_type: str | None = None,
    previous_value: str = "",
) -> Diagnostic:
    """The diagnostic for a token the parser could not accept."""
    error = codes.SYNTAX_ERROR
    found = describe_token(token_type, value)
    at_new_line = previous is not None and (token_type == "$END" or span.line > previous.end_line)

    if "DOT" in expected and at_new_line and previous is not None:
        what = "rule" if in_rule else "fact"
        where = previous.at_end()
        return error(
            where,
            f"expected `.` at the end of the {what}",
            help=f"every {what} ends with `.`; the next statement starts on line {span.line}"
            if token_type != "$END"
            else f"every {what} ends with `.`",
            fix=Fix("add `.`", (Edit(where, "."),), safe=False),
        )
    if token_type == "$END":
        if annotations_pending:
            return error(span, "expected a rule after the annotations")
        return error(span, f"unexpected end of file; expected {describe_expected(expected)}")
    if token_type == "UNKNOWN_DIRECTIVE" or (
        token_type == "DOT" and next_value is not None and "NAME" not in expected and "DOT" not in expected
    ):
        word = value if token_type == "UNKNOWN_DIRECTIVE" else "." + (next_value or "")
        if word in UNSUPPORTED_DIRECTIVES:
            why, instead = UNSUPPORTED_DIRECTIVES[word]
            return error(source.span(span.start, span.start + len(word)), why, help=instead)
        close = did_you_mean(word, DIRECTIVES)
        return error(
            source.span(span.start, span.start + len(word)),
            f"unknown directive `{word}`",
            help=(f"did you mean `{close}`? " if close else "")
            + "the directives are "
            + ", ".join(f"`{d}`" for d in DIRECTIVES),
        )
    if token_type == "AT" and previous_type == "AT" and previous is not None and previous.end == span.start:
        return error(
            source.span(previous.start, span.end),
            "user-defined aggregators (`@@f x : init, { ... }`) are not supported: the aggregates are "
            "`count`, `sum`, `min`, `max` and `mean`",
            help="fold the values with a recursive rule over them in order, or give a functor the "
            "values collected in a record",
        )
    if previous_type in AGGREGATORS and previous is not None:
        return error(
            previous,
            f"`{previous_value}` is a reserved word (it starts an aggregate) and cannot be used as a name",
            help=f"rename the variable, or write an aggregate: `n = {previous_value} : {{ ... }}`",
        )
    if token_type in RESERVED and "NAME" in expected:
        return error(
            span,
            f"`{value}` is a reserved word and cannot be used as a name here",
            help="rename the variable or relation",
        )
    if token_type == "COLON" and "IF" in expected:
        return error(
            span,
            "expected `:-` between the rule's head and its body",
            fix=Fix("write `:-`", (Edit(span, ":-"),), safe=False),
        )
    if (
        token_type == "EQ"
        and previous is not None
        and previous.end == span.start
        and (source.text[previous.start : previous.end] == "=")
    ):
        return error(
            span,
            "there is no `==`; equality is written `=`",
            fix=Fix("write `=`", (Edit(span, ""),), safe=True),
        )
    if token_type == "BUDGET" or (token_type == "NAME" and "BUDGET" in expected):
        return error(
            span,
            f"expected `budget` after the role name, found {found}",
            help="write `.role NAME budget ALPHA`, e.g. `.role target budget 0.01`",
        )
    message = f"unexpected {found}; expected {describe_expected(expected)}"
    if (
        token_type in ("COMMA", "DOT", "RBRACE")
        and expected
        and set(expected) <= (COMPARATORS | OPERATORS | {"LPAR"})
    ):
        message = f"unexpected {found}; expected `(` or a comparison"
        return error(
            span,
            message,
            help="a relation with no arguments is written with parentheses, e.g. `UserConfirmed()`",
        )
    return error(span, message)


def preprocessor_line(source: SourceFile, start: int, end: int) -> Diagnostic:
    """The diagnostic for a line of Soufflé's C preprocessor (``#define``, ``#include``, ...),
    which policyc does not run; the line is skipped."""
    line = source.text[start:end].strip()
    word = line[1:].lstrip().split(None, 1)[0] if line[1:].strip() else ""
    instead = {
        "include": 'read another file with `.include "file.dl"` (each file is read once)',
        "define": "write the constant where it is used, or as a fact of a relation the rules join",
    }.get(word, "keep one version of the program; `.include` reads other files")
    return codes.SYNTAX_ERROR(
        source.span(start, end),
        f"`#{word}` is a line of the C preprocessor Soufflé runs over a program first; policyc "
        "reads the program as it is written, without one",
        help=instead,
    )


def unexpected_character(source: SourceFile, start: int, end: int) -> Diagnostic:
    """The diagnostic for text the tokenizer cannot read, from ``start`` to ``end``."""
    error = codes.SYNTAX_ERROR
    text = source.text
    char = text[start]
    if char == '"':
        line_end = text.find("\n", start)
        line_end = len(text) if line_end == -1 else line_end
        return error(
            source.span(start, line_end),
            "unterminated string",
            help='strings end on the line they start; close it with `"`',
        )
    if text.startswith("/*", start):
        return error(
            source.span(start, start + 2), "unterminated block comment", help="close the comment with `*/`"
        )
    if char in "\u201c\u201d":
        return error(
            source.span(start, start + 1),
            'typographic quote; strings use straight quotes `"`',
            fix=Fix('write `"`', (Edit(source.span(start, start + 1), '"'),), safe=True),
        )
    if char == "'":
        return error(
            source.span(start, start + 1),
            "strings are written in double quotes",
            help="a `'` is only allowed at the end of a variable name, as in `e'`",
        )
    shown = char if char.isprintable() else f"\\u{ord(char):04x}"
    if end - start > 1:
        return error(source.span(start, end), f"unexpected characters starting with `{shown}`")
    return error(source.span(start, end), f"unexpected character `{shown}`")
