"""The syntax tree of a statement, built as the parser reduces: step 3 of :mod:`.parser`.

:class:`Builder` has one method per grammar rule (or alias); the parser calls it with the
rule's children (tokens and the nodes built so far) and it returns a frozen node whose span
covers the rule's tokens. Values are checked here: string escapes, integers too long to read,
floats too large to be finite; each problem is a diagnostic and a harmless value in its place.

>>> from policyc.compiler.source import SourceFile
>>> found = []
>>> Builder(SourceFile("p.dl", "1e999"), found).float([Token("FLOAT", "1e999", 0, 5)])
Float(value=0.0)
>>> [d.message for d in found]
['`1e999` is too large for a float (it would be infinite)']
"""

from __future__ import annotations

import builtins
import dataclasses
import math
import re
import sys
from bisect import bisect_right
from typing import Any

from . import ast, codes
from .desugar import alternatives
from .diagnostics import Diagnostic
from .source import SourceFile, Span
from .tokens import Token


def _is_token(x: object) -> bool:
    return isinstance(x, Token)


@dataclasses.dataclass(frozen=True, slots=True)
class _PlanOrder:
    """``1:(2,1)`` of a ``.plan``: a version of the rule and the order of its atoms."""

    version: int
    order: tuple[int, ...]
    span: Span


@dataclasses.dataclass(frozen=True, slots=True)
class _IoRelation:
    """A relation of ``.input``/``.output`` with the options written after it, if any."""

    name: ast.Ident
    options: tuple[ast.IoOption, ...]
    written: bool
    span: Span


def _values(children: list) -> list:
    """Children that are nodes, not punctuation."""
    return [c for c in children if not isinstance(c, Token)]


def _unescape(source: SourceFile, token: Token, diagnostics: list[Diagnostic]) -> str:
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


class Builder:
    """One method per grammar rule (or alias); each gets the rule's children, tokens included."""

    def __init__(self, source: SourceFile, diagnostics: list[Diagnostic]) -> None:
        self.source = source
        self.diagnostics = diagnostics
        self.path = source.path
        self.line_starts = source.line_starts

    def _span(self, first: Any, last: Any | None = None) -> Span:
        start = first.start if type(first) is Token else first.span.start
        if last is None:
            last = first
        end = last.end if type(last) is Token else last.span.end
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

    def _fold(self, name: str, args: list, span: Span, make: Any) -> Any:
        """``f(a, b, c)`` as ``f(f(a, b), c)``: an inner node spans from the call's start to
        its last argument."""
        node = args[0]
        for i, arg in enumerate(args[1:], start=1):
            at = span if i == len(args) - 1 else self.source.span(span.start, arg.span.end)
            node = make(name, node, arg, at)
        return node

    def _ident(self, token: Token) -> ast.Ident:
        return ast.Ident(token.value, span=self._span(token))

    # statements

    def item(self, children: list) -> ast.Statement:
        *annotations, statement = children
        if not annotations:
            return statement
        span = self._span(annotations[0], statement)
        if isinstance(statement, ast.Rule | ast.Compound):
            return dataclasses.replace(statement, annotations=tuple(annotations), span=span)
        return ast.Misplaced(tuple(annotations), statement, span=span)

    def rule(self, children: list) -> ast.Rule | ast.Compound:
        heads = tuple(c for c in children[:-2] if isinstance(c, ast.Atom))
        body: _Body = children[-2]
        span = self._span(children[0], children[-1])
        if len(heads) == 1 and len(body) == 1 and not any(isinstance(i, ast.Disjunction) for i in body[0]):
            return ast.Rule(heads[0], body[0], span=span)
        return ast.Compound(heads, tuple(body), span=span)

    def subsumption(self, children: list) -> ast.Rule | ast.Compound:
        dominated, _, dominating = children[:3]
        body: _Body = children[-2]
        span = self._span(children[0], children[-1])
        if len(body) == 1 and not any(isinstance(i, ast.Disjunction) for i in body[0]):
            return ast.Rule(dominated, (dominated, dominating, *body[0]), span=span, dominating=dominating)
        return ast.Compound((dominated,), tuple(body), span=span, dominating=dominating)

    def fact(self, children: list) -> ast.Rule:
        return ast.Rule(children[0], (), span=self._span(children[0], children[-1]))

    def annotation(self, children: list) -> ast.Annotation:
        return ast.Annotation(
            children[1].value, tuple(_values(children[3:-1])), span=self._span(children[0], children[-1])
        )

    def bare_word(self, children: list) -> ast.Var:
        return ast.Var(children[0].value, span=self._span(children[0]))

    def body(self, children: list) -> _Body:
        return _Body(_values(children))

    def conjunction(self, children: list) -> tuple[ast.Literal | ast.Disjunction, ...]:
        return tuple(_values(children))

    def group(self, children: list) -> ast.Disjunction:
        return ast.Disjunction(tuple(children[1]), span=self._span(children[0], children[-1]))

    def negated_group(self, children: list) -> ast.Disjunction:
        return ast.Disjunction(tuple(children[2]), True, span=self._span(children[0], children[-1]))

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

    def comparator(self, children: list) -> Token:
        return children[0]

    # terms

    def binop(self, children: list) -> ast.BinOp:
        left, op, right = children
        return ast.BinOp(op.value, left, right, span=self._span(left, right))

    def unop(self, children: list) -> ast.UnaryOp:
        op, operand = children
        return ast.UnaryOp(op.value, operand, span=self._span(op, operand))

    def extremum(self, children: list) -> ast.Term:
        """``max(a, b, c)``: ``max(max(a, b), c)``; ``count``, ``sum`` and ``mean`` have no
        such form (as in Soufflé)."""
        op = children[0]
        args = _values(children[2:-1])
        span = self._span(op, children[-1])
        if op.value not in ast.EXTREMA:
            self.diagnostics.append(
                codes.SYNTAX_ERROR(
                    span,
                    f"`{op.value}` is an aggregate and has no form with arguments",
                    help=f"write an aggregate, `{op.value} x : {{ ... }}`; `max(a, b)` and `min(a, b)` "
                    "are the functions of several values",
                )
            )
        return self._fold(
            op.value, args, span, lambda name, left, right, at: ast.BinOp(name, left, right, span=at)
        )

    def neg(self, children: list) -> ast.Term:
        operand = children[1]
        span = self._span(children[0], operand)
        if isinstance(operand, ast.Integer):
            return ast.Integer(-operand.value, span=span)
        if isinstance(operand, ast.Float):
            return ast.Float(-operand.value, span=span)
        return ast.Negate(operand, span=span)

    def variable(self, children: list) -> ast.Var | ast.Wildcard | ast.Nil | ast.String | ast.Integer:
        token = children[0]
        if token.value == "_":
            return ast.Wildcard(span=self._span(token))
        if token.value == "nil":
            return ast.Nil(span=self._span(token))
        if token.value in _PLACE_WORDS:  # Soufflé's `__FILE__`, `__LINE__`, `__INCL__`
            return self._place(token)
        return ast.Var(token.value, span=self._span(token))

    def _place(self, token: Token) -> ast.String | ast.Integer:
        """What Soufflé's scanner makes of ``__FILE__`` (the file's name, as given),
        ``__LINE__`` (the line the word is on) and ``__INCL__`` (where the file was included:
        ``file:line:column`` of each ``.include`` from the outermost, joined by ``;``; empty in
        a file no other includes)."""
        span = self._span(token)
        if token.value == "__LINE__":
            return ast.Integer(span.line, span=span)
        if token.value == "__FILE__":
            return ast.String(self.source.path, span=span)
        return ast.String(self.source.included_from, span=span)

    def paren(self, children: list) -> ast.Term:
        inner = children[1]
        return _with_span(inner, self._span(children[0], children[-1]))

    def call(self, children: list) -> ast.Call | ast.Cast:
        children = [c for c in children if c is not None]
        first = children[0]
        if first.type == "AT":  # `@f(x)`
            children = children[1:]
        name = children[0]
        args = _values(children[2:-1])
        span = self._span(first, children[-1])
        name_span = self._span(name)
        if name.value == "as" and first.type != "AT":  # `as(x, City)`: a type conversion
            if len(args) == 2 and isinstance(args[1], ast.Var):
                return ast.Cast(args[0], ast.Ident(args[1].name, span=args[1].span), span=span)
            self.diagnostics.append(
                codes.SYNTAX_ERROR(
                    span,
                    "`as` converts a term to a type: `as(term, Type)`",
                    help="write the term first and the name of a type second, as in `as(x, City)`",
                )
            )
        if name.value == "cat" and len(args) > 2:  # `cat(a, b, c)`: `cat(cat(a, b), c)`
            return self._fold(
                "cat",
                args,
                span,
                lambda n, left, right, at: ast.Call(n, (left, right), span=at, name_span=name_span),
            )
        return ast.Call(name.value, tuple(args), span=span, name_span=name_span)

    def record(self, children: list) -> ast.Record:
        return ast.Record(tuple(_values(children[1:-1])), span=self._span(children[0], children[-1]))

    def constructor(self, children: list) -> ast.Constructor:
        name = children[1]
        return ast.Constructor(
            name.value,
            tuple(_values(children[3:-1])),
            span=self._span(children[0], children[-1]),
            name_span=self._span(name),
        )

    def aggregate(self, children: list) -> ast.Aggregate:
        op = children[0]
        colon = next(i for i, c in enumerate(children) if _is_token(c) and c.type == "COLON")
        target = children[1] if colon == 2 else None
        rest = children[colon + 1 :]
        span = self._span(op, children[-1])
        body: tuple[ast.Literal, ...] = (rest[0],)
        if _is_token(rest[0]):
            written = rest[1]
            found = alternatives(tuple(written))
            body = found[0] if found else ()
            if len(found) > 1:
                self.diagnostics.append(
                    codes.SYNTAX_ERROR(
                        span,
                        "an aggregate's body cannot hold `;`",
                        help="aggregate over a relation the alternatives define, one rule each",
                    )
                )
        return ast.Aggregate(op.value, target, body, span=span)

    def aggregator(self, children: list) -> Token:
        return children[0]

    def string(self, children: list) -> ast.String:
        token = children[0]
        return ast.String(_unescape(self.source, token, self.diagnostics), span=self._span(token))

    def integer(self, children: list) -> ast.Integer:
        return ast.Integer(self._int(children[0]), span=self._span(children[0]))

    def unsigned(self, children: list) -> ast.Integer:
        """``5u``, ``0x1Fu``, ``0b101u``: an integer constant of type ``unsigned``."""
        token = children[0]
        digits = Token("INT", token.value[:-1], token.start, token.end - 1)
        return ast.Integer(self._int(digits), span=self._span(token), unsigned=True)

    def ipv4(self, children: list) -> ast.Integer:
        """``192.168.0.1``: the four bytes as one integer, as Soufflé's scanner computes it in a C
        ``int`` (``(a << 24) + (b << 16) + (c << 8) + d``, so an address from ``128.0.0.0`` up is
        negative: ``192.168.0.1`` is -1062731775); a part above 255 is an error."""
        token = children[0]
        parts = [int(part) for part in token.value.split(".")]
        if any(part > 255 for part in parts):
            self.diagnostics.append(
                codes.SYNTAX_ERROR(
                    self._span(token),
                    f"`{token.value}` is not an IPv4 address: each of its four parts is at most 255",
                    help="Soufflé reads four numbers joined by `.` as an IPv4 address",
                )
            )
            return ast.Integer(0, span=self._span(token))
        value = (parts[0] << 24) + (parts[1] << 16) + (parts[2] << 8) + parts[3]
        return ast.Integer(value - (1 << 32) if value >= 1 << 31 else value, span=self._span(token))

    def true_literal(self, children: list) -> ast.Comparison:
        """``true``: a constraint that always holds (``0 = 0``; the formatter writes it back)."""
        span = self._span(children[0])
        return ast.Comparison("=", ast.Integer(0, span=span), ast.Integer(0, span=span), span=span)

    def false_literal(self, children: list) -> ast.Comparison:
        """``false``: a constraint that never holds (``0 != 0``)."""
        span = self._span(children[0])
        return ast.Comparison("!=", ast.Integer(0, span=span), ast.Integer(0, span=span), span=span)

    def float(self, children: list) -> ast.Float:
        return ast.Float(self._float(children[0]), span=self._span(children[0]))

    def _int(self, token: Token) -> int:
        """An integer literal's value (0, and a diagnostic, for one Python will not convert);
        ``0x1F`` is hexadecimal and ``0b101`` binary."""
        text = token.value
        if text[:2] in ("0x", "0X", "0b", "0B"):
            return int(text[2:], 16 if text[1] in "xX" else 2)  # no digit limit for these bases
        try:
            return int(text)
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

    def _float(self, token: Token) -> builtins.float:  # `float` is the rule's method here
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
        closing = max(i for i, c in enumerate(children) if isinstance(c, Token) and c.type == "RPAR")
        qualifiers = children[closing + 1 :]
        kinds = {q.type for q in qualifiers if isinstance(q, Token)}
        choice = tuple(d for q in qualifiers if isinstance(q, tuple) for d in q)
        last = children[-1]
        return ast.Decl(
            self._ident(children[1]),
            tuple(a for a in children[3:closing] if isinstance(a, ast.Attribute)),
            "INLINE" in kinds,
            span=self._span(children[0], last[-1][-1] if isinstance(last, tuple) else last),
            overridable="OVERRIDABLE" in kinds,
            eqrel="EQREL" in kinds,
            choice=choice,
            storage=next(
                (self._ident(q) for q in qualifiers if isinstance(q, Token) and q.type == "STORAGE"), None
            ),
            hints=tuple(self._ident(q) for q in qualifiers if isinstance(q, Token) and q.type == "HINT"),
            io=tuple(self._ident(q) for q in qualifiers if isinstance(q, Token) and q.type == "IO_QUALIFIER"),
        )

    def inline_qualifier(self, children: list) -> Token:
        return children[0]

    def eqrel_qualifier(self, children: list) -> Token:
        return children[0]

    def overridable_qualifier(self, children: list) -> Token:
        return children[0]

    def storage_qualifier(self, children: list) -> Token:
        return children[0]

    def hint_qualifier(self, children: list) -> Token:
        return children[0]

    def io_qualifier(self, children: list) -> Token:
        return children[0]

    def choice_qualifier(self, children: list) -> tuple[tuple[ast.Ident, ...], ...]:
        return tuple(c for c in children if isinstance(c, tuple))

    def domain(self, children: list) -> tuple[ast.Ident, ...]:
        return tuple(self._ident(c) for c in children if c.type == "NAME")

    def attribute(self, children: list) -> ast.Attribute:
        name, _, type_ = children
        return ast.Attribute(name.value, self._ident(type_), span=self._span(name, type_))

    def input(self, children: list) -> ast.Input:
        names, options = self._io_relations(children[1:])
        return ast.Input(names, span=self._span(children[0], children[-1]), options=options)

    def output(self, children: list) -> ast.Output:
        names, options = self._io_relations(children[1:])
        return ast.Output(names, span=self._span(children[0], children[-1]), options=options)

    def printsize(self, children: list) -> ast.Output:
        names, options = self._io_relations(children[1:])
        span = self._span(children[0], children[-1])
        return ast.Output(names, span=span, options=options, printsize=True)

    def once(self, children: list) -> ast.Once:
        return ast.Once(span=self._span(children[0]))

    def _io_relations(
        self, children: list
    ) -> tuple[tuple[ast.Ident, ...], tuple[tuple[ast.IoOption, ...], ...]]:
        relations = [c for c in children if isinstance(c, _IoRelation)]
        names = tuple(r.name for r in relations)
        if not any(r.written for r in relations):
            return names, ()
        return names, tuple(r.options for r in relations)

    def io_relation(self, children: list) -> _IoRelation:
        """``edge`` or ``edge(IO=file, …)``."""
        present = [c for c in children if c is not None]
        return _IoRelation(
            self._ident(present[0]),
            tuple(c for c in present if isinstance(c, ast.IoOption)),
            len(present) > 1,
            self._span(present[0], present[-1]),
        )

    def io_option(self, children: list) -> ast.IoOption:
        key, _, value = children
        if isinstance(value, Token):
            value = self._ident(value)
        return ast.IoOption(self._ident(key), value, span=self._span(key, children[-1]))

    def plan(self, children: list) -> ast.QueryPlan:
        orders = [c for c in children if isinstance(c, _PlanOrder)]
        return ast.QueryPlan(
            tuple((o.version, o.order) for o in orders), span=self._span(children[0], orders[-1])
        )

    def plan_order(self, children: list) -> _PlanOrder:
        present = [c for c in children if c is not None]
        numbers = [self._int(c) for c in present if c.type == "INT"]
        return _PlanOrder(numbers[0], tuple(numbers[1:]), self._span(present[0], present[-1]))

    def pragma(self, children: list) -> ast.Pragma:
        present = [c for c in children if c is not None]
        strings = [self.string([c]) for c in present[1:]]
        return ast.Pragma(
            strings[0], strings[1] if len(strings) > 1 else None, span=self._span(present[0], present[-1])
        )

    def include(self, children: list) -> ast.Include:
        path = self.string([children[1]])
        return ast.Include(path, span=self._span(children[0], children[1]))

    def import_(self, children: list) -> ast.Import:
        return ast.Import(self._ident(children[1]), span=self._span(children[0], children[1]))

    def functor(self, children: list) -> ast.Functor:
        last = children[-1]  # `stateful`, or None where the optional word is not written
        stateful = last if isinstance(last, Token) and last.type == "STATEFUL" else None
        present = children[:-1] if stateful is not None or last is None else children
        params = tuple(c for c in present if isinstance(c, ast.Parameter))
        last = present[-1]
        return ast.Functor(
            self._ident(children[1]),
            params,
            self._ident(last),
            span=self._span(children[0], stateful or last),
            stateful=None if stateful is None else self._ident(stateful),
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

    def subtype(self, children: list) -> ast.TypeDecl:
        return ast.TypeDecl(
            self._ident(children[1]),
            "subtype",
            (self._ident(children[3]),),
            span=self._span(children[0], children[-1]),
        )

    def legacy_type(self, children: list) -> ast.TypeDecl:
        """``.number_type N`` and ``.symbol_type S``: Soufflé's older ``.type N <: number``."""
        base = "number" if children[0].type == "NUMBER_TYPE" else "symbol"
        span = self._span(children[0], children[-1])
        # the base is not written: its name has no place in the text (it is never wrong)
        return ast.TypeDecl(self._ident(children[1]), "subtype", (ast.Ident(base),), span=span)

    def bare_type(self, children: list) -> ast.TypeDecl:
        """``.type T``: Soufflé's oldest spelling of ``.type T <: symbol``."""
        span = self._span(children[0], children[-1])
        return ast.TypeDecl(self._ident(children[1]), "subtype", (ast.Ident("symbol"),), span=span)

    def limitsize(self, children: list) -> ast.LimitSize:
        keyword, relation, _, option, _, size, close = children
        if option.value != "n":
            self.diagnostics.append(
                codes.INVALID_DIRECTIVE(
                    self._span(option),
                    f"`.limitsize` takes the option `n`, not `{option.value}`",
                    help=f"write `.limitsize {relation.value}(n=100)`",
                )
            )
        return ast.LimitSize(self._ident(relation), self._int(size), span=self._span(keyword, close))

    def type_(self, children: list) -> ast.TypeDecl:
        kind, parts = children[3]
        members = tuple(p for p in parts if isinstance(p, ast.Ident))
        fields = tuple(p for p in parts if isinstance(p, ast.Attribute))
        branches = tuple(p for p in parts if isinstance(p, ast.Branch))
        return ast.TypeDecl(
            self._ident(children[1]),
            kind,
            members,
            fields,
            branches,
            span=self._span(children[0], parts[-1] if parts else children[2]),
        )

    def type_union(self, children: list) -> tuple[str, list]:
        return "union", [self._ident(t) for t in children if t.type == "NAME"]

    def type_record(self, children: list) -> tuple[str, list]:
        return "record", [*_values(children), children[-1]]  # `]` ends the declaration

    def type_adt(self, children: list) -> tuple[str, list]:
        return "adt", _values(children)

    def branch(self, children: list) -> ast.Branch:
        return ast.Branch(
            self._ident(children[0]),
            tuple(_values(children[2:-1])),
            span=self._span(children[0], children[-1]),
        )

    def field(self, children: list) -> ast.FieldMap:
        keyword, path_token, _, role = children
        tool, argument = self._tool_argument(
            path_token, codes.INVALID_DIRECTIVE, "`.field send_money.recipient : target`"
        )
        return ast.FieldMap(
            tool,
            argument,
            self._ident(role),
            span=self._span(keyword, role),
            path_span=self._span(path_token),
        )

    def arg(self, children: list) -> ast.ArgDecl:
        keyword, path_token, _, type_, *rest = children
        presence = next((c for c in rest if c is not None), None)
        tool, argument = self._tool_argument(
            path_token, codes.INVALID_ARGUMENT_DECLARATION, "`.arg pay.amount : number required`"
        )
        return ast.ArgDecl(
            tool,
            argument,
            self._ident(type_),
            self._ident(presence) if presence is not None else None,
            span=self._span(keyword, presence if presence is not None else type_),
            path_span=self._span(path_token),
        )

    def _tool_argument(self, path_token: Any, code: codes.Code, example: str) -> tuple[str, str]:
        """The tool and the argument a ``tool.argument`` path names (as `PATH` or `STRING`: the
        argument is what follows the last `.`), or a diagnostic and empty names."""
        path = self.string([path_token]).value if path_token.type == "STRING" else path_token.value
        tool, dot, argument = path.rpartition(".")
        if not dot or not tool or not argument:
            self.diagnostics.append(
                code(
                    self._span(path_token),
                    f"`{path}` is not a tool argument",
                    help=f"name the argument as `tool.argument`, e.g. {example}",
                )
            )
        return tool, argument

    # components: `.comp ... {` and `}` are statements of their own, nested by the parser

    def comp_open(self, children: list) -> ComponentOpen:
        brace = next(i for i, c in enumerate(children) if _is_token(c) and c.type == "LBRACE")
        colon = next((i for i, c in enumerate(children) if _is_token(c) and c.type == "COLON"), brace)
        params = tuple(self._ident(t) for t in children[2:colon] if t.type == "NAME")
        bases = tuple(c for c in children[colon:brace] if isinstance(c, ast.CompType))
        return ComponentOpen(self._ident(children[1]), params, bases, self._span(children[0], children[-1]))

    def comp_close(self, children: list) -> ComponentClose:
        return ComponentClose(self._span(children[0]))

    def comp_type(self, children: list) -> ast.CompType:
        args = tuple(self._ident(t) for t in children[2:-1] if t.type in ("NAME", "PATH"))
        return ast.CompType(self._ident(children[0]), args, span=self._span(children[0], children[-1]))

    def init(self, children: list) -> ast.Init:
        return ast.Init(self._ident(children[1]), children[3], span=self._span(children[0], children[3]))

    def override(self, children: list) -> ast.Override:
        return ast.Override(self._ident(children[1]), span=self._span(children[0], children[1]))

    def key(self, children: list) -> ast.Key:
        names = [c for c in children[3:-1] if isinstance(c, Token) and c.type == "NAME"]
        return ast.Key(
            self._ident(children[1]),
            tuple(self._ident(n) for n in names),
            span=self._span(children[0], children[-1]),
        )

    def host(self, children: list) -> ast.Host:
        names = [c for c in children[1:] if isinstance(c, Token) and c.type in ("NAME", "PATH")]
        return ast.Host(tuple(self._ident(n) for n in names), span=self._span(children[0], children[-1]))


_PLACE_WORDS = frozenset({"__FILE__", "__LINE__", "__INCL__"})


@dataclasses.dataclass(frozen=True)
class ComponentOpen:
    """``.comp Name<T> : Base {``: the statements up to the matching ``}`` are its body."""

    name: ast.Ident
    params: tuple[ast.Ident, ...]
    bases: tuple[ast.CompType, ...]
    span: Span


@dataclasses.dataclass(frozen=True)
class ComponentClose:
    """The ``}`` that closes a component."""

    span: Span


class _Body(list):
    """The alternatives of a body as written (one tuple of literals and groups each)."""


def _with_span(node: Any, span: Span) -> Any:
    return dataclasses.replace(node, span=span)
