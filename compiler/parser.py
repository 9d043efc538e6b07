"""Text to AST, reporting every syntax error of a file.

The grammar (``grammar/policy.lark``) is compiled once by Lark into an LALR table (cached on
disk). Parsing is then three steps:

1. **tokenize** the whole file with Lark's lexer, resuming after text it cannot read, so a
   stray character or an unterminated string is one error, not the end of the file;
2. **drive** the LALR automaton over the tokens one statement at a time (start symbol
   ``item``); when it gets stuck, report the error with a friendly message
   (:mod:`.syntax_errors`), skip to the next place a statement can start and go on;
3. **build** the AST during the parse: each grammar rule has a method in :class:`_Builder`
   that returns a frozen node with the span of its tokens.

>>> module, diagnostics = parse(SourceFile("p.dl", "Deny(a) :- Send(a), not Ok(a)."))
>>> module.statements[0].body[1]
Negation(atom=Atom(name='Ok', args=(Var(name='a'),)))
>>> diagnostics
[]
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import sys
from bisect import bisect_right
from importlib import resources
from typing import Any

from lark import Lark
from lark.parsers.lalr_analysis import Shift

from . import ast, codes, syntax_errors
from .diagnostics import Diagnostic
from .source import SourceFile, Span

MAX_LEXICAL_ERRORS = 50
MAX_NESTING = 200  # deeper terms are refused rather than risk exhausting the stack later

_SYNC_TYPES = frozenset({"AT", "UNKNOWN_DIRECTIVE"} | {d[1:].upper() for d in syntax_errors.DIRECTIVES})


@functools.cache
def _lark() -> Lark:
    grammar = resources.files("policyc.grammar").joinpath("policy.lark").read_text("utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="basic",
        start=["item", "comment"],
        keep_all_tokens=True,
        maybe_placeholders=False,
        cache=True,
    )


class _Tok:
    """A token: its terminal's name, its text and its offsets (all the parser needs)."""

    __slots__ = ("end", "start", "type", "value")

    def __init__(self, type_: str, value: str, start: int, end: int) -> None:
        self.type = type_
        self.value = value
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"_Tok({self.type}, {self.value!r}, {self.start})"


@dataclasses.dataclass(frozen=True)
class _Lexer:
    """The grammar's terminals as one regular expression, tried in Lark's order.

    Lark's own lexer builds the same alternation (priority, then width, then name) and turns
    keywords that NAME also matches into a lookup on NAME's text; doing both here, with a
    single ``finditer`` over the file, is several times faster than Lark's per-token loop.
    Three fallback alternatives catch what no terminal matches, so that the scan never skips
    text silently: an unterminated string, an unterminated block comment, any other character.
    """

    regex: re.Pattern[str]
    keywords: dict[str, str]
    ignore: frozenset[str]


@functools.cache
def _lexer() -> _Lexer:
    lark = _lark()
    terminals = [t for t in lark.terminals if t.pattern.value]
    regexps = [t for t in terminals if t.pattern.type == "re"]
    keywords: dict[str, str] = {}
    embedded = set()
    for t in terminals:
        if t.pattern.type != "str":
            continue
        for r in regexps:
            m = re.match(r.pattern.to_regexp(), t.pattern.value)
            if r.priority == t.priority and m and m.group(0) == t.pattern.value:
                keywords[t.pattern.value] = t.name
                embedded.add(t.name)
    ordered = sorted(
        (t for t in terminals if t.name not in embedded),
        key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name),
    )
    alternatives = [r"(?P<_BAD_COMMENT>/\*(?![\s\S]*?\*/)[\s\S]*)"]  # before `/` can match
    alternatives += [f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in ordered]
    alternatives += [
        r'(?P<_BAD_STRING>"(?:[^"\\\n]|\\.)*\\?)',
        r"(?P<_BAD_QUOTES>\u201c[^\u201d\n]*\u201d|'[^'\n]*')",
        r"(?P<_BAD>[\s\S])",
    ]
    return _Lexer(re.compile("|".join(alternatives)), keywords, frozenset(lark.lexer_conf.ignore))


def parse(source: SourceFile) -> tuple[ast.Module, list[Diagnostic]]:
    """Parse one file. The module holds every statement that parsed; the list, every error."""
    tokens, comments, diagnostics = _tokenize(source)
    builder = _Builder(source, diagnostics)
    statements = _drive(source, tokens, builder, diagnostics)
    module = ast.Module(source.path, tuple(statements), tuple(comments), source)
    return module, diagnostics


# ------------------------------------------------------------------------------ tokens


def _tokenize(source: SourceFile) -> tuple[list[_Tok], list[ast.Comment], list[Diagnostic]]:
    lexer = _lexer()
    keywords, ignore = lexer.keywords, lexer.ignore
    tokens: list[_Tok] = []
    comments: list[ast.Comment] = []
    bad: list[list[int]] = []  # [start, end) runs of unreadable text
    append = tokens.append
    for m in lexer.regex.finditer(source.text):
        kind = m.lastgroup
        if kind in ignore:
            continue
        if kind == "NAME":
            value = m.group()
            append(_Tok(keywords.get(value, "NAME"), value, m.start(), m.end()))
        elif kind == "COMMENT":
            comments.append(ast.Comment(m.group(), span=source.span(m.start(), m.end())))
        elif kind.startswith("_BAD"):
            start, end = m.span()
            if kind == "_BAD" and bad and bad[-1][1] == start and tokens and tokens[-1].end == start:
                bad[-1][1] = end  # one diagnostic for a run of unreadable characters
                tokens[-1].end = end
            else:
                if len(bad) < MAX_LEXICAL_ERRORS:
                    bad.append([start, end])
                # the token stands for the unreadable text: the parser skips its statement quietly
                append(_Tok("LEXERROR", m.group(), start, end))
        else:
            append(_Tok(kind, m.group(), m.start(), m.end()))
    diagnostics = [syntax_errors.unexpected_character(source, s, e) for s, e in bad]
    if len(bad) >= MAX_LEXICAL_ERRORS:
        diagnostics.append(
            codes.SYNTAX_ERROR(
                source.span(bad[-1][1], bad[-1][1]),
                "too many unreadable characters; later ones are not reported",
            )
        )
    _retype_soft_keywords(tokens)
    _mark_unknown_directives(source.text, tokens)
    return tokens, comments, diagnostics


def _mark_unknown_directives(text: str, tokens: list[_Tok]) -> None:
    """A `.` that starts a line and is glued to a name (`.type X`) is a directive the
    grammar does not know, not the end of the statement before it."""
    merged: list[_Tok] = []
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
            merged.append(_Tok("UNKNOWN_DIRECTIVE", "." + name.value, token.start, name.end))
            i += 2
            continue
        merged.append(token)
        i += 1
    if len(merged) != n:
        tokens[:] = merged


def _retype_soft_keywords(tokens: list[_Tok]) -> None:
    """``budget`` and ``pool`` are keywords only in ``.role NAME budget N pool NAME``, and
    ``inline`` only right after the closing parenthesis of a ``.decl``."""
    n = len(tokens)
    for i, token in enumerate(tokens):
        if token.type == "DECL":
            j = i + 1
            while j < n and tokens[j].type not in ("RPAR", "DECL"):
                j += 1
            if (
                j + 1 < n
                and tokens[j].type == "RPAR"
                and tokens[j + 1].type == "NAME"
                and tokens[j + 1].value == "inline"
                and (j + 2 >= n or tokens[j + 2].type != "LPAR")
            ):
                tokens[j + 1].type = "INLINE"
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


# ------------------------------------------------------------------------------ driver


class _Splice(list):
    """The children of one of Lark's helper rules (``x*``), to be spliced into the parent's."""


@dataclasses.dataclass(frozen=True)
class _Automaton:
    """Lark's LALR table for ``item``, re-keyed for a tight loop.

    ``actions[state][symbol]`` is ``(True, next_state)`` for a shift (or a goto on a
    nonterminal) and ``(False, rule)`` for a reduction by ``rules[rule]``, which is
    ``(origin, length, builder method name or None, splices)``; a ``None`` method means the
    rule is a helper whose children go up to its parent (``_Splice``) or a ``?rule`` with
    one child that passes it through.
    """

    actions: dict[int, dict[str, tuple[bool, int]]]
    rules: tuple[tuple[str, int, str | None, bool], ...]
    start: int
    end: int


@functools.cache
def _automaton() -> _Automaton:
    table = _lark().parse_interactive(None, start="item").parser_state.parse_conf.parse_table
    index: dict[Any, int] = {}
    rules: list[tuple[str, int, str | None, bool]] = []
    for rule in _lark().rules:
        if rule.origin.name == "comment":
            continue  # a start symbol only there to keep COMMENT in the grammar
        splices = any(not s.is_term and s.name.startswith("_") for s in rule.expansion)
        if rule.origin.name.startswith("_"):
            method = "_splice"
        elif rule.options.expand1 and not rule.alias and len(rule.expansion) == 1:
            method = None
        else:
            method = rule.alias or rule.origin.name
        index[rule] = len(rules)
        rules.append((rule.origin.name, len(rule.expansion), method, splices))
    actions = {
        state: {
            symbol: (True, arg) if action is Shift else (False, index[arg])
            for symbol, (action, arg) in row.items()
            if action is Shift or arg in index
        }
        for state, row in table.states.items()
    }
    return _Automaton(actions, tuple(rules), table.start_states["item"], table.end_states["item"])


def _reducers(builder: _Builder) -> list[tuple[str, int, Any]]:
    """Per rule of the automaton: (origin, length, callable building its value)."""
    reducers = []
    for origin, length, method, splices in _automaton().rules:
        if method == "_splice":
            build: Any = _Splice
        elif method is None:
            build = _first
        else:
            build = getattr(builder, method, None)
            if build is None:
                raise AssertionError(f"grammar rule {method!r} has no AST builder")
        if splices:
            build = _splicing(build)
        reducers.append((origin, length, build))
    return reducers


def _first(children: list) -> Any:
    return children[0]


def _splicing(method: Any) -> Any:
    def call(children: list) -> Any:
        flat: list = []
        for child in children:
            if isinstance(child, _Splice):
                flat.extend(child)
            else:
                flat.append(child)
        return method(flat)

    return call


class _Stuck(Exception):
    def __init__(self, expected: set[str]) -> None:
        self.expected = expected


def _drive(
    source: SourceFile, tokens: list[_Tok], builder: _Builder, diagnostics: list[Diagnostic]
) -> list[ast.Statement]:
    automaton = _automaton()
    actions, start_state, end_state = automaton.actions, automaton.start, automaton.end
    reducers = _reducers(builder)
    states: list[int] = []
    values: list[Any] = []

    def feed(token: _Tok, is_end: bool = False) -> Any:
        while True:
            row = actions[states[-1]]
            action = row.get(token.type)
            if action is None:
                raise _Stuck({name for name in row if name.isupper()})
            shift, arg = action
            if shift:
                states.append(arg)
                values.append(token)
                return None
            origin, length, build = reducers[arg]
            if length:
                children = values[-length:]
                del states[-length:]
                del values[-length:]
            else:
                children = []
            value = build(children)
            states.append(actions[states[-1]][origin][1])
            values.append(value)
            if is_end and states[-1] == end_state:
                return value

    n = len(tokens)
    end = _Tok("$END", "", len(source.text), len(source.text))
    statements: list[ast.Statement] = []
    i = 0
    first = 0
    fresh = True
    while True:
        token = tokens[i] if i < n else end
        if fresh:
            if i >= n:
                break
            states[:] = [start_state]
            values.clear()
            first = i
            fresh = False
        row = actions[states[-1]]
        try:
            if token.type in row and token is not end:
                feed(token)
                i += 1
                continue
            if i > first and "$END" in row:
                statement = feed(_Tok("$END", "", token.start, token.start), True)
                fresh = True
                # each level of nesting takes a token, so short statements cannot be too deep
                if i - first > MAX_NESTING and _depth(statement) > MAX_NESTING:
                    diagnostics.append(
                        codes.SYNTAX_ERROR(
                            statement.span,
                            f"this statement nests terms more than {MAX_NESTING} levels deep",
                            help="split the expression with intermediate variables",
                        )
                    )
                else:
                    statements.append(statement)
                continue
            expected = {name for name in row if name.isupper()}
        except _Stuck as stuck:
            expected = stuck.expected
        if token.type != "LEXERROR":  # unreadable text is reported by the tokenizer already
            diagnostics.append(_unexpected(source, tokens, i, first, expected, end))
        fresh = True
        i = _resync(source, tokens, i, first)
    return statements


def _depth(statement: ast.Statement) -> int:
    """How deeply the terms of a statement nest (aggregate bodies included)."""
    if isinstance(statement, ast.Misplaced):
        statement = statement.statement
    if not isinstance(statement, ast.Rule):
        return 0
    stack: list[tuple[object, int]] = [(statement.head, 1)]
    stack.extend((lit, 1) for lit in statement.body)
    deepest = 0
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        if isinstance(node, ast.Atom | ast.Negation | ast.Comparison):
            stack.extend((t, depth + 1) for t in ast.literal_terms(node))
        elif isinstance(node, ast.Aggregate):
            if node.target is not None:
                stack.append((node.target, depth + 1))
            stack.extend((lit, depth + 1) for lit in node.body)
        else:
            stack.extend((t, depth + 1) for t in ast.term_children(node))  # type: ignore[arg-type]
    return deepest


def _unexpected(
    source: SourceFile, tokens: list[_Tok], i: int, first: int, expected: set[str], end: _Tok
) -> Diagnostic:
    token = tokens[i] if i < len(tokens) else end
    previous = source.span(tokens[i - 1].start, tokens[i - 1].end) if i > first else None
    following = tokens[i + 1] if i + 1 < len(tokens) else None
    next_value = None
    if following is not None and following.type == "NAME" and following.start == token.end:
        next_value = following.value
    consumed = tokens[first:i]
    return syntax_errors.unexpected_token(
        source,
        token.type,
        token.value,
        source.span(token.start, token.end),
        expected,
        previous,
        next_value,
        in_rule=any(t.type == "IF" for t in consumed),
        annotations_pending=bool(consumed) and consumed[0].type == "AT",
        previous_type=tokens[i - 1].type if i > first else None,
        previous_value=tokens[i - 1].value if i > first else "",
    )


def _resync(source: SourceFile, tokens: list[_Tok], i: int, first: int) -> int:
    """Where to start parsing again after an error at token ``i``.

    Skip to just after the next `.`, or to the next token that starts a line and can start
    a statement: at column 1, or a directive or annotation (in any sensibly laid-out file,
    that is where the next statement begins). The failing token itself may start the next
    statement, unless it was the first token of a statement already.
    """
    n = len(tokens)
    text = source.text
    j = i
    if i == first:
        if i < n and tokens[i].type == "DOT":
            return i + 1
        j = i + 1
    while j < n:
        token = tokens[j]
        if token.type == "DOT":
            return j + 1
        starts_line = j == 0 or "\n" in text[tokens[j - 1].end : token.start]
        if starts_line and (token.type in _SYNC_TYPES or token.start == 0 or text[token.start - 1] == "\n"):
            return j
        j += 1
    return n


# ----------------------------------------------------------------------------- builder


def _is_token(x: object) -> bool:
    return isinstance(x, _Tok)


def _values(children: list) -> list:
    """Children that are nodes, not punctuation."""
    return [c for c in children if not isinstance(c, _Tok)]


def _unescape(source: SourceFile, token: _Tok, diagnostics: list[Diagnostic]) -> str:
    raw = token.value[1:-1]
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    simple = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
    while i < len(raw):
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = raw[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
            continue
        if e == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) == 4 and all(d in "0123456789abcdefABCDEF" for d in digits):
                code = int(digits, 16)
                low = raw[i + 8 : i + 12] if raw[i + 6 : i + 8] == "\\u" else ""
                if 0xD800 <= code <= 0xDBFF and re.fullmatch(r"[dD][c-fC-F][0-9a-fA-F]{2}", low):
                    out.append(chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)))
                    i += 12  # a UTF-16 pair, as JSON writes a character beyond U+FFFF
                    continue
                if 0xD800 <= code <= 0xDFFF:  # half of a UTF-16 pair: no character of its own
                    start = token.start + 1 + i
                    diagnostics.append(
                        codes.SYNTAX_ERROR(
                            source.span(start, start + 6),
                            f"`\\u{digits}` is a surrogate, not a character",
                            help="write the character itself, or a \\uXXXX escape of a character",
                        )
                    )
                    out.append("\ufffd")
                else:
                    out.append(chr(code))
                i += 6
                continue
        start = token.start + 1 + i
        diagnostics.append(
            codes.SYNTAX_ERROR(
                source.span(start, start + 2),
                f"unknown escape `\\{e}` in string",
                help='the escapes are \\" \\\\ \\/ \\n \\t \\r \\b \\f and \\uXXXX',
            )
        )
        out.append(e)
        i += 2
    return "".join(out)


class _Builder:
    """One method per grammar rule (or alias); each gets the rule's children, tokens included."""

    def __init__(self, source: SourceFile, diagnostics: list[Diagnostic]) -> None:
        self.source = source
        self.diagnostics = diagnostics
        self.path = source.path
        self.line_starts = source.line_starts

    def _span(self, first: Any, last: Any | None = None) -> Span:
        start = first.start if type(first) is _Tok else first.span.start
        if last is None:
            last = first
        end = last.end if type(last) is _Tok else last.span.end
        starts = self.line_starts
        line = bisect_right(starts, start)
        same_line = line == len(starts) or end < starts[line]
        end_line = line if same_line else bisect_right(starts, end)
        return Span(
            self.path,
            start,
            end,
            line,
            start - starts[line - 1] + 1,
            end_line,
            end - starts[end_line - 1] + 1,
        )

    def _ident(self, token: _Tok) -> ast.Ident:
        return ast.Ident(token.value, span=self._span(token))

    # statements

    def item(self, children: list) -> ast.Statement:
        *annotations, statement = children
        if not annotations:
            return statement
        span = self._span(annotations[0], statement)
        if isinstance(statement, ast.Rule):
            return ast.Rule(statement.head, statement.body, tuple(annotations), span=span)
        return ast.Misplaced(tuple(annotations), statement, span=span)

    def rule(self, children: list) -> ast.Rule:
        head, _, body, _ = children
        return ast.Rule(head, body, span=self._span(children[0], children[-1]))

    def fact(self, children: list) -> ast.Rule:
        return ast.Rule(children[0], (), span=self._span(children[0], children[-1]))

    def annotation(self, children: list) -> ast.Annotation:
        return ast.Annotation(
            children[1].value, tuple(_values(children[3:-1])), span=self._span(children[0], children[-1])
        )

    def bare_word(self, children: list) -> ast.Var:
        return ast.Var(children[0].value, span=self._span(children[0]))

    def body(self, children: list) -> tuple[ast.Literal, ...]:
        return tuple(_values(children))

    # literals

    def atom(self, children: list) -> ast.Atom:
        name = children[0]
        return ast.Atom(
            name.value,
            tuple(_values(children[2:-1])),
            span=self._span(name, children[-1]),
            name_span=self._span(name),
        )

    def negation(self, children: list) -> ast.Negation:
        return ast.Negation(children[1], span=self._span(children[0], children[1]))

    def comparison(self, children: list) -> ast.Comparison:
        left, op, right = children
        return ast.Comparison(op.value, left, right, span=self._span(left, right))

    def comparator(self, children: list) -> _Tok:
        return children[0]

    # terms

    def binop(self, children: list) -> ast.BinOp:
        left, op, right = children
        return ast.BinOp(op.value, left, right, span=self._span(left, right))

    def neg(self, children: list) -> ast.Term:
        operand = children[1]
        span = self._span(children[0], operand)
        if isinstance(operand, ast.Integer):
            return ast.Integer(-operand.value, span=span)
        if isinstance(operand, ast.Float):
            return ast.Float(-operand.value, span=span)
        return ast.Negate(operand, span=span)

    def variable(self, children: list) -> ast.Var | ast.Wildcard:
        token = children[0]
        if token.value == "_":
            return ast.Wildcard(span=self._span(token))
        return ast.Var(token.value, span=self._span(token))

    def paren(self, children: list) -> ast.Term:
        inner = children[1]
        return _with_span(inner, self._span(children[0], children[-1]))

    def call(self, children: list) -> ast.Call:
        name = children[0]
        return ast.Call(
            name.value,
            tuple(_values(children[2:-1])),
            span=self._span(name, children[-1]),
            name_span=self._span(name),
        )

    def aggregate(self, children: list) -> ast.Aggregate:
        op = children[0]
        colon = next(i for i, c in enumerate(children) if _is_token(c) and c.type == "COLON")
        target = children[1] if colon == 2 else None
        rest = children[colon + 1 :]
        body = rest[1] if _is_token(rest[0]) else (rest[0],)
        return ast.Aggregate(op.value, target, body, span=self._span(op, children[-1]))

    def aggregator(self, children: list) -> _Tok:
        return children[0]

    def string(self, children: list) -> ast.String:
        token = children[0]
        return ast.String(_unescape(self.source, token, self.diagnostics), span=self._span(token))

    def integer(self, children: list) -> ast.Integer:
        return ast.Integer(self._int(children[0]), span=self._span(children[0]))

    def float(self, children: list) -> ast.Float:
        return ast.Float(self._float(children[0]), span=self._span(children[0]))

    def _int(self, token: _Tok) -> int:
        """An integer literal's value (0, and a diagnostic, for one Python will not convert)."""
        try:
            return int(token.value)
        except ValueError:
            digits = len(token.value.lstrip("-+"))
            self.diagnostics.append(
                codes.SYNTAX_ERROR(
                    self._span(token),
                    f"this integer has {digits:,} digits; policyc reads integers of at most "
                    f"{sys.get_int_max_str_digits():,}",
                )
            )
            return 0

    def _float(self, token: _Tok) -> float:
        """A float literal's value (0.0, and a diagnostic, for one too large to be finite)."""
        value = float(token.value)
        if math.isinf(value):
            self.diagnostics.append(
                codes.SYNTAX_ERROR(
                    self._span(token),
                    f"`{token.value[:30]}` is too large for a float (it would be infinite)",
                    help="floats are at most about 1.8e308",
                )
            )
            return 0.0
        return value

    # directives

    def decl(self, children: list) -> ast.Decl:
        inline = children[-1].type == "INLINE"
        attributes = children[3:-2] if inline else children[3:-1]
        return ast.Decl(
            self._ident(children[1]),
            tuple(_values(attributes)),
            inline,
            span=self._span(children[0], children[-1]),
        )

    def attribute(self, children: list) -> ast.Attribute:
        name, _, type_ = children
        return ast.Attribute(name.value, self._ident(type_), span=self._span(name, type_))

    def input(self, children: list) -> ast.Input:
        names = tuple(self._ident(t) for t in children[1:] if t.type == "NAME")
        return ast.Input(names, span=self._span(children[0], children[-1]))

    def output(self, children: list) -> ast.Output:
        names = tuple(self._ident(t) for t in children[1:] if t.type == "NAME")
        return ast.Output(names, span=self._span(children[0], children[-1]))

    def include(self, children: list) -> ast.Include:
        path = self.string([children[1]])
        return ast.Include(path, span=self._span(children[0], children[1]))

    def import_(self, children: list) -> ast.Import:
        return ast.Import(self._ident(children[1]), span=self._span(children[0], children[1]))

    def functor(self, children: list) -> ast.Functor:
        params = tuple(c for c in children[3:-3] if isinstance(c, ast.Parameter))
        return ast.Functor(
            self._ident(children[1]),
            params,
            self._ident(children[-1]),
            span=self._span(children[0], children[-1]),
        )

    def parameter(self, children: list) -> ast.Parameter:
        if len(children) == 1:
            return ast.Parameter(None, self._ident(children[0]), span=self._span(children[0]))
        name, _, type_ = children
        return ast.Parameter(name.value, self._ident(type_), span=self._span(name, type_))

    def default(self, children: list) -> ast.Default:
        return ast.Default(self._ident(children[1]), span=self._span(children[0], children[1]))

    def role(self, children: list) -> ast.Role:
        number = children[3]
        if number.type == "INT":
            budget: ast.Integer | ast.Float = ast.Integer(self._int(number), span=self._span(number))
        else:
            budget = ast.Float(self._float(number), span=self._span(number))
        pool = self._ident(children[5]) if len(children) > 5 else None
        return ast.Role(
            self._ident(children[1]),
            budget,
            pool,
            span=self._span(children[0], children[-1]),
        )

    def field(self, children: list) -> ast.FieldMap:
        keyword, path_token, _, role = children
        span = self._span(path_token)
        path = self.string([path_token]).value if path_token.type == "STRING" else path_token.value
        tool, dot, argument = path.rpartition(".")
        if not dot or not tool or not argument:
            self.diagnostics.append(
                codes.INVALID_DIRECTIVE(
                    span,
                    f"`{path}` is not a tool argument",
                    help="name the argument as `tool.argument`, e.g. `.field send_money.recipient : target`",
                )
            )
        return ast.FieldMap(tool, argument, self._ident(role), span=self._span(keyword, role), path_span=span)


def _with_span(node: Any, span: Span) -> Any:
    return dataclasses.replace(node, span=span)
