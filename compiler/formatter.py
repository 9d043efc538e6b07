"""The canonical layout of policy files (``policyc fmt``; docs/formatting.md describes it).

The formatter prints the syntax tree again, so the layout of the input does not matter, and
puts every comment back where it was: between the same statements, next to the same literal
or argument. Its output parses to the same tree (spans aside) and is its own layout
(``format_source(format_source(x)) == format_source(x)``); the tests check both on every
example policy and on random programs.

>>> print(format_source("Deny(a):-Send(a),!Ok(a). // why"), end="")
Deny(a) :- Send(a), not Ok(a).  // why

A rule that does not fit in :data:`WIDTH` columns puts each literal on a line of its own:

>>> print(format_source("Deny(a) :- " + ", ".join(f"StepIsDone{i}(a)" for i in range(6)) + "."), end="")
Deny(a) :-
    StepIsDone0(a),
    StepIsDone1(a),
    StepIsDone2(a),
    StepIsDone3(a),
    StepIsDone4(a),
    StepIsDone5(a).
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import ast
from .diagnostics import Diagnostic, sort_diagnostics
from .loader import decode
from .parser import parse
from .pretty import HARD, Doc, IfBroken, Line, Suffix, Text, Unit, group, nest, render_text
from .source import SourceFile

WIDTH = 100  # a rule longer than this breaks, one literal per line
INDENT = 4

# Soufflé's precedence (grammar/policy.lark), loosest first; `^` groups to the right
_PRECEDENCE = {"lor": 1, "lxor": 2, "land": 3, "bor": 4, "bxor": 5, "band": 6}
_PRECEDENCE.update({"bshl": 7, "bshr": 7, "bshru": 7, "+": 8, "-": 8, "*": 9, "/": 9, "%": 9})
_UNARY = 10
_POWER = 11
_PRIMARY = 12
_IPV4 = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_RADIX = re.compile(r"([\s(\-]*)(0[xX][0-9a-fA-F]+|0[bB][01]+)[\s)]*")
_FLOAT = re.compile(r"([\s(\-]*)([0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)[\s)]*")
_STRING = re.compile(r'[\s(]*("(?:[^"\\\n]|\\.)*")[\s)]*')
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


class FormatError(Exception):
    """The text has syntax errors: it is not formatted. ``diagnostics`` says where."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        count = len(diagnostics)
        super().__init__(f"{count} syntax error{'s' if count != 1 else ''}: the text is not formatted")
        self.diagnostics = diagnostics


def format_source(text: str, path: str = "<input>") -> str:
    """The canonical text of a policy; :class:`FormatError` when it does not parse."""
    module, diagnostics = parse(SourceFile(path, text), surface=True)
    errors = [d for d in diagnostics if d.is_error]
    if errors:
        raise FormatError(errors)
    return format_module(module)


@dataclass(frozen=True)
class FileResult:
    """One file through the formatter: its text, and its canonical text or why there is none."""

    path: str
    source: SourceFile | None  # None when the bytes are not a text policyc reads
    formatted: str | None  # None when the file has errors
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def changed(self) -> bool:
        return self.formatted is not None and self.source is not None and self.formatted != self.source.text

    def diff(self) -> str:
        """A unified diff from the file to its canonical text ('' when it is canonical)."""
        if self.formatted is None or self.source is None:
            return ""
        return unified_diff(self.source.text, self.formatted, self.path)


def format_bytes(data: bytes, path: str) -> FileResult:
    """Decode and format a file's bytes the way ``policyc check`` reads them: an undecodable
    file or a syntax error gives the same diagnostics as ``policyc check`` and no text."""
    return format_read(decode(path, data))


def format_read(source: SourceFile | Diagnostic) -> FileResult:
    """Format a file as the loader read it (:func:`~policyc.compiler.loader.read_file`): its
    text, or the diagnostic of why it is not text."""
    if isinstance(source, Diagnostic):
        return FileResult(source.span.file, None, None, (source,))
    module, diagnostics = parse(source, surface=True)
    errors = tuple(sort_diagnostics(d for d in diagnostics if d.is_error))
    if errors:
        return FileResult(source.path, source, None, errors)
    return FileResult(source.path, source, format_module(module))


def unified_diff(before: str, after: str, path: str) -> str:
    """``diff -u`` of two texts of ``path`` (lines are ended by ``\\n`` only)."""
    lines = difflib.unified_diff(_lines(before), _lines(after), fromfile=path, tofile=path)
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )


def _lines(text: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def format_module(module: ast.Module) -> str:
    """The canonical text of a module parsed without errors (it needs its source)."""
    if module.source is None:
        raise ValueError("the module has no source text to take comments and spellings from")
    printer = _Printer(module.source.text, module.comments)
    doc = printer.module(module.statements)
    if printer.next < len(printer.comments):  # every comment lies before the end of the text
        raise AssertionError("the formatter lost a comment")
    return render_text(doc, WIDTH)


# ------------------------------------------------------------------------------ comments


@dataclass(frozen=True)
class _Comment:
    text: str  # as printed: line comments without trailing blanks, line ends as `\n`
    start: int
    end: int
    follows_code: bool  # code before it on its line, with no comment in between
    newline_before: bool  # a line break between it and what comes before (code or comment)
    newline_after: bool  # nothing but blanks after it on its line
    blank_before: bool  # an empty line before it


@dataclass(frozen=True)
class _Run:
    """Comments next to each other on one line of the input, joined by one space."""

    text: str
    first_line: bool  # on the line of the code before it
    ends_line: bool  # nothing but blanks after it on its line
    blank_before: bool
    final: bool  # ends with a line comment: nothing may follow it on its line


def _comments(text: str, comments: Sequence[ast.Comment]) -> list[_Comment]:
    found: list[_Comment] = []
    previous_end = -1
    for comment in comments:
        start, end = comment.span.start, comment.span.end
        body = comment.text.rstrip() if comment.text.startswith("//") else comment.text.replace("\r\n", "\n")
        before = start
        while before > 0 and text[before - 1].isspace():
            before -= 1
        after = end
        while after < len(text) and text[after].isspace():
            after += 1
        newlines_before = text.count("\n", before, start)
        found.append(
            _Comment(
                body,
                start,
                end,
                follows_code=before > 0 and before != previous_end and newlines_before == 0,
                newline_before=before == 0 or newlines_before > 0,
                newline_after=after == len(text) or "\n" in text[end:after],
                blank_before=before > 0 and newlines_before >= 2,
            )
        )
        previous_end = end
    return found


def _runs(comments: list[_Comment]) -> list[_Run]:
    if not comments:
        return []
    lines: list[list[_Comment]] = []
    for comment in comments:
        if not lines or comment.newline_before or comment.follows_code:
            lines.append([comment])
        else:
            lines[-1].append(comment)
    return [
        _Run(
            " ".join(c.text for c in line),
            first_line=line[0].follows_code,
            ends_line=line[-1].newline_after,
            blank_before=line[0].blank_before,
            final=line[-1].text.startswith("//"),
        )
        for line in lines
    ]


def _comment(text: str) -> Text:
    return Text(text, comment=True)


# ------------------------------------------------------------------------------- printer


class _Printer:
    """Builds the document of a module, taking the comments in the order of the text."""

    def __init__(self, text: str, comments: Sequence[ast.Comment]) -> None:
        self.text = text
        self.comments = _comments(text, comments)
        self.starts = [c.start for c in self.comments]
        self.next = 0

    def take(self, offset: int) -> list[_Comment]:
        """The comments not printed yet that start before ``offset``."""
        start = self.next
        while self.next < len(self.comments) and self.comments[self.next].start < offset:
            self.next += 1
        return self.comments[start : self.next]

    # gaps: the places between tokens where comments go

    def gap(self, offset: int, line: Doc) -> list[Doc]:
        """The comments before ``offset``, around the line break ``line`` before an element."""
        before: list[Suffix] = []
        after: list[Doc] = []
        for run in _runs(self.take(offset)):
            if run.first_line and run.ends_line and not after and not (before and before[-1].final):
                before.append(Suffix(run.text, final=run.final))
            elif run.ends_line:
                after += [_comment(run.text), HARD]
            else:
                after += [_comment(run.text), _comment(" ")]
        return [*before, line, *after]

    def close(self, offset: int, line: Doc | None, closer: str) -> list[Doc]:
        """The comments before the closer at ``offset``, then the closer: ``line`` before it
        (when there is one), a line break when a comment has its own line. Without ``line``
        (the `.` of a rule), a comment on the line of the code before follows the `.`."""
        inside: list[Doc] = []
        own_line = False  # a comment on a line of its own: the closer goes on the next line
        trailing = True  # comments can still trail the code before them
        for run in _runs(self.take(offset)):
            if run.first_line and line is None and trailing:
                inside.append(Suffix(run.text, breaks=False, final=run.final))
                trailing = not run.final
            elif run.first_line and run.ends_line and trailing:
                inside.append(Suffix(run.text, final=run.final))
                trailing = not run.final
            elif run.first_line and trailing:
                inside.append(IfBroken(Suffix(run.text, breaks=False), [" ", _comment(run.text)]))
            else:
                inside += [HARD, _comment(run.text)]
                own_line = True
                trailing = False
        ending: Doc = HARD if own_line else line if line is not None else ""
        return [nest(INDENT, inside), ending, closer]

    def closer_at(self, offset: int, char: str) -> int:
        """The offset of ``char``, the first character after ``offset`` that is not blank or
        in a comment."""
        i = offset
        following = bisect.bisect_left(self.starts, offset)
        while i < len(self.text):
            if following < len(self.comments) and i == self.comments[following].start:
                i = self.comments[following].end
                following += 1
            elif self.text[i].isspace():
                i += 1
            else:
                break
        if self.text[i : i + 1] != char:
            raise AssertionError(f"expected {char!r} at offset {i}")
        return i

    def listing(self, items: Sequence, print_item: Callable[[Any], Doc], first_line: Doc) -> list[Doc]:
        """Items separated by commas, each after a gap; ``first_line`` before the first."""
        parts: list[Doc] = []
        for i, item in enumerate(items):
            if i:
                parts.append(",")
            parts += self.gap(item.span.start, first_line if i == 0 else Line())
            parts.append(print_item(item))  # after the gap: the comments come in order
        return parts

    def arguments(
        self, opening: str, items: Sequence, print_item: Callable[[Any], Doc], closing: int, closer: str = ")"
    ) -> Doc:
        """``opening``, comma-separated items, ``)``: on one line unless comments break it."""
        parts = self.listing(items, print_item, Line(""))
        return group([opening, nest(INDENT, parts), *self.close(closing, Line(""), closer)])

    # the module

    def module(self, statements: Sequence[ast.Statement], end: int | None = None) -> list[Doc]:
        """The statements one after another, and the comments up to ``end`` (the end of the
        text; or of the component whose body they are, after its ``{``)."""
        parts: list[Doc] = []
        started = end is not None  # something is printed: what comes next starts a new line
        for statement in [*statements, None]:
            offset = (len(self.text) if end is None else end) if statement is None else statement.span.start
            inline = False
            for run in _runs(self.take(offset)):
                if run.first_line and run.ends_line and started:
                    parts.append(Suffix(run.text, final=run.final))
                    continue
                if started and not inline:
                    parts.append(HARD)
                    if run.blank_before:
                        parts.append(HARD)
                parts.append(_comment(run.text))
                started = True
                inline = not run.ends_line
                if inline:
                    parts.append(_comment(" "))
            if statement is None:
                break
            if started and not inline:
                parts.append(HARD)
                if self._blank_before(offset):
                    parts.append(HARD)
            parts.append(Unit(self.statement(statement)))
            # comments left inside the statement (between tokens that take none) follow it
            parts += [
                Suffix(r.text, breaks=False, final=r.final) for r in _runs(self.take(statement.span.end))
            ]
            started = True
        return parts

    def _blank_before(self, offset: int) -> bool:
        """Whether an empty line comes before ``offset`` (after something)."""
        start = offset
        while start > 0 and self.text[start - 1].isspace():
            start -= 1
        return start > 0 and self.text.count("\n", start, offset) >= 2

    # statements

    def statement(self, statement: ast.Statement) -> Doc:
        if isinstance(statement, ast.Rule):
            return self.rule(statement)
        if isinstance(statement, ast.Compound):
            return self.compound(statement)
        if isinstance(statement, ast.Misplaced):
            annotations = self.annotations(statement.annotations, statement.statement.span.start)
            return [*annotations, self.directive(statement.statement)]
        if isinstance(statement, ast.Component):
            return self.component(statement)
        return self.directive(statement)

    def component(self, component: ast.Component) -> Doc:
        """``.comp Name<T> : Base<T> {``, the body indented, ``}`` on a line of its own."""
        head = f".comp {component.name.name}"
        if component.params:
            head += "<" + ", ".join(p.name for p in component.params) + ">"
        if component.bases:
            head += " : " + ", ".join(_comp_type(b) for b in component.bases)
        body = self.module(component.body, component.close_span.start)
        return [head + " {", nest(INDENT, body), HARD if body else "", "}"]

    def annotations(self, annotations: Sequence[ast.Annotation], then: int) -> list[Doc]:
        parts: list[Doc] = []
        for i, annotation in enumerate(annotations):
            if i:
                parts += self.gap(annotation.span.start, HARD)
            parts.append(self.annotation(annotation))
        if annotations:
            parts += self.gap(then, HARD)
        return parts

    def annotation(self, annotation: ast.Annotation) -> Doc:
        return self.arguments(f"@{annotation.name}(", annotation.args, self.term, annotation.span.end - 1)

    def rule(self, rule: ast.Rule) -> Doc:
        parts = self.annotations(rule.annotations, rule.head.span.start)
        head = self.dominance(rule.head, rule.dominating)
        dot = rule.span.end - 1
        if not rule.body:
            parts.append(group([head, *self.close(dot, None, ".")]))
            return parts
        body = self.listing(rule.conditions, self.literal, Line())
        parts.append(group([head, " :-", nest(INDENT, body), *self.close(dot, None, ".")], fit=True))
        return parts

    def dominance(self, head: ast.Atom, dominating: ast.Atom | None) -> Doc:
        """A rule's head, or a subsumption rule's two atoms: ``r(a) <= r(b)``."""
        if dominating is None:
            return self.atom(head)
        return group([self.atom(head), " <=", nest(INDENT, [Line(), self.atom(dominating)])])

    def compound(self, rule: ast.Compound) -> Doc:
        """Several heads and ``;``: the alternatives one after another, each ended by ``;``."""
        parts = self.annotations(rule.annotations, rule.heads[0].span.start)
        if rule.dominating is not None:
            heads = self.dominance(rule.heads[0], rule.dominating)
        else:
            heads = group(self.listing(rule.heads, self.atom, ""))
        body = self.alternatives(rule.body, Line())
        parts.append(
            group([heads, " :-", nest(INDENT, body), *self.close(rule.span.end - 1, None, ".")], fit=True)
        )
        return parts

    def alternatives(self, alternatives: Sequence[Sequence[Any]], first_line: Doc) -> list[Doc]:
        parts: list[Doc] = []
        for i, alternative in enumerate(alternatives):
            if i:
                parts.append(" ;")
            parts += self.listing(alternative, self.literal, first_line if i == 0 else Line())
        return parts

    def disjunction(self, disjunction: ast.Disjunction) -> Doc:
        body = self.alternatives(disjunction.alternatives, Line(""))
        opening = "not (" if disjunction.negated else "("
        return group(
            [opening, nest(INDENT, body), *self.close(disjunction.span.end - 1, Line(""), ")")], fit=True
        )

    def directive(self, directive: ast.Directive) -> Doc:
        if isinstance(directive, ast.Decl):
            after = (
                directive.attributes[-1].span.end
                if directive.attributes
                else self.closer_at(directive.name.span.end, "(") + 1
            )
            qualified = (
                directive.inline
                or directive.overridable
                or directive.eqrel
                or directive.choice
                or directive.storage
                or directive.hints
                or directive.io
            )
            closing = self.closer_at(after, ")") if qualified else directive.span.end - 1
            return [
                self.arguments(
                    f".decl {directive.name.name}(", directive.attributes, self.attribute, closing
                ),
                f" {directive.storage.name}" if directive.storage else "",
                " inline" if directive.inline else "",
                " overridable" if directive.overridable else "",
                " eqrel" if directive.eqrel else "",
                "".join(f" {word.name}" for word in (*directive.hints, *directive.io)),
                _choice_text(directive.choice),
            ]
        if isinstance(directive, ast.Init):
            return f".init {directive.name.name} = {_comp_type(directive.component)}"
        if isinstance(directive, ast.Override):
            return f".override {directive.name.name}"
        if isinstance(directive, ast.Key):
            opening = f".key {directive.relation.name}("
            return self.arguments(
                opening, directive.attributes, lambda name: name.name, directive.span.end - 1
            )
        if isinstance(directive, ast.Host):
            names = self.listing(directive.names, lambda name: name.name, Line())
            return group([".host", nest(INDENT, names)])
        if isinstance(directive, ast.Input | ast.Output):
            keyword = (
                ".input"
                if isinstance(directive, ast.Input)
                else ".printsize"
                if directive.printsize
                else ".output"
            )
            options = dict(zip(map(id, directive.names), directive.options, strict=False))
            names = self.listing(
                directive.names, lambda name: self.io_relation(name, options.get(id(name), ())), Line()
            )
            return group([keyword, nest(INDENT, names)])
        if isinstance(directive, ast.Include):
            return f".include {self.string(directive.path)}"
        if isinstance(directive, ast.Import):
            return f".import {directive.module.name}"
        if isinstance(directive, ast.Functor):
            after = (
                directive.params[-1].span.end
                if directive.params
                else self.closer_at(directive.name.span.end, "(") + 1
            )
            closing = self.closer_at(after, ")")
            return [
                self.arguments(f".functor {directive.name.name}(", directive.params, self.parameter, closing),
                f": {directive.returns.name}",
                " stateful" if directive.stateful is not None else "",
            ]
        if isinstance(directive, ast.Default):
            return f".default {directive.verdict.name}"
        if isinstance(directive, ast.Role):
            budget = self.number(directive.budget)
            pool = f" pool {directive.pool.name}" if directive.pool is not None else ""
            return f".role {directive.name.name} budget {budget}{pool}"
        if isinstance(directive, ast.FieldMap):
            path = self.spelling(directive.path_span.start, directive.path_span.end)
            return f".field {path} : {directive.role.name}"
        if isinstance(directive, ast.ArgDecl):
            path = self.spelling(directive.path_span.start, directive.path_span.end)
            presence = f" {directive.presence.name}" if directive.presence is not None else ""
            return f".arg {path}: {directive.type.name}{presence}"
        if isinstance(directive, ast.TypeDecl):
            return self.type_decl(directive)
        if isinstance(directive, ast.QueryPlan):
            orders = (f"{v}:({','.join(map(str, order))})" for v, order in directive.orders)
            return ".plan " + ", ".join(orders)
        if isinstance(directive, ast.Once):
            return ".once"
        if isinstance(directive, ast.Pragma):
            value = f" {self.string(directive.value)}" if directive.value is not None else ""
            return f".pragma {self.string(directive.key)}{value}"
        if isinstance(directive, ast.LimitSize):
            return f".limitsize {directive.relation.name}(n={directive.size})"
        raise TypeError(f"no layout for {type(directive).__name__}")

    def type_decl(self, directive: ast.TypeDecl) -> Doc:
        name = directive.name.name
        legacy = self.code_text(directive.span.start, directive.span.start + len(".number_type"))
        if directive.kind == "subtype" and legacy in (".number_type", ".symbol_type"):
            return f"{legacy} {name}"  # Soufflé's older spelling, as written
        written = self.code_text(directive.span.start, directive.span.end)
        if directive.kind == "subtype" and "<:" not in written:
            return f".type {name}"  # Soufflé's oldest spelling of `.type T <: symbol`, as written
        if directive.kind == "subtype":
            return f".type {name} <: {directive.members[0].name}"
        if directive.kind == "union":
            return f".type {name} = " + " | ".join(m.name for m in directive.members)
        if directive.kind == "record":
            return self.arguments(
                f".type {name} = [", directive.fields, self.attribute, directive.span.end - 1, "]"
            )
        branches: list[Doc] = []
        for i, branch in enumerate(directive.branches):
            if i:
                branches.append(" | ")
            branches.append(
                self.arguments(
                    f"{branch.name.name} {{", branch.fields, self.attribute, branch.span.end - 1, "}"
                )
            )
        return [f".type {name} = ", *branches]

    def attribute(self, attribute: ast.Attribute) -> Doc:
        return f"{attribute.name}: {attribute.type.name}"

    def parameter(self, parameter: ast.Parameter) -> Doc:
        if parameter.name is None:
            return parameter.type.name
        return f"{parameter.name}: {parameter.type.name}"

    # literals

    def literal(self, literal: ast.Literal | ast.Disjunction) -> Doc:
        if isinstance(literal, ast.Disjunction):
            return self.disjunction(literal)
        if isinstance(literal, ast.Atom):
            return self.atom(literal)
        if isinstance(literal, ast.Negation):
            return ["not ", self.atom(literal.atom)]
        if isinstance(literal, ast.Comparison):
            written = self.code_text(literal.span.start, literal.span.end)
            if written in ("true", "false"):  # Soufflé's constraints, as written
                return written
            return [self.term(literal.left), f" {literal.op} ", self.term(literal.right)]
        raise TypeError(f"no layout for {type(literal).__name__}")

    def atom(self, atom: ast.Atom | ast.Call) -> Doc:
        if isinstance(atom, ast.Call) and atom.name == "cat":
            return self.arguments("cat(", _unfolded(atom, "cat"), self.term, atom.span.end - 1)
        at = "@" if self.code_text(atom.span.start, atom.span.start + 1) == "@" else ""  # `@f(x)`
        return self.arguments(f"{at}{atom.name}(", atom.args, self.term, atom.span.end - 1)

    # terms

    def term(self, term: ast.Term, context: int = 0) -> Doc:
        """A term inside an operator of precedence ``context`` (0: no operator)."""
        if isinstance(term, ast.Var):
            return term.name
        if isinstance(term, ast.Wildcard):
            return "_"
        if isinstance(term, ast.String | ast.Integer):
            spelled = self.code_text(term.span.start, term.span.end)
            if spelled in ("__FILE__", "__LINE__", "__INCL__") or _IPV4.fullmatch(spelled):
                return spelled  # Soufflé's words for the place, an IPv4 address: as written
        if isinstance(term, ast.String):
            return self.string(term)
        if isinstance(term, ast.Integer | ast.Float):
            return self.number(term)
        if isinstance(term, ast.Call):
            return self.atom(term)
        if isinstance(term, ast.Aggregate):
            return self.aggregate(term)
        if isinstance(term, ast.BinOp) and term.op in ast.EXTREMA:
            return self.arguments(f"{term.op}(", _unfolded(term, term.op), self.term, term.span.end - 1)
        if isinstance(term, ast.Cast):
            return ["as(", self.term(term.operand), f", {term.type.name})"]
        if isinstance(term, ast.Nil):
            return "nil"
        if isinstance(term, ast.Record):
            return self.arguments("[", term.args, self.term, term.span.end - 1, "]")
        if isinstance(term, ast.Constructor):
            if not term.args and self.text[term.span.end - 1 : term.span.end] != ")":
                return f"${term.name}"
            return self.arguments(f"${term.name}(", term.args, self.term, term.span.end - 1)
        if isinstance(term, ast.BinOp):
            if term.op == ast.POWER:  # `primary ^ unary`: a negative constant needs parentheses
                precedence = _POWER
                left = self.term(term.left, _PRIMARY)
                if isinstance(term.left, ast.Integer | ast.Float) and self.number(term.left).startswith("-"):
                    left = ["(", left, ")"]
                doc: Doc = [left, " ^ ", self.term(term.right, _UNARY)]
            else:
                precedence = _PRECEDENCE[term.op]
                doc = [
                    self.term(term.left, precedence),
                    f" {term.op} ",
                    self.term(term.right, precedence + 1),
                ]
            written = term.span.start < term.left.span.start  # the policy's own parentheses
        elif isinstance(term, ast.Negate):
            precedence = _UNARY
            operand = term.operand
            doc = ["-", self.term(operand, _UNARY + (1 if isinstance(operand, ast.Negate) else 0))]
            written = self.text[term.span.start : term.span.start + 1] == "("
        elif isinstance(term, ast.UnaryOp):
            precedence = _UNARY
            doc = [f"{term.op} ", self.term(term.operand, _UNARY)]
            written = self.text[term.span.start : term.span.start + 1] == "("
        else:
            raise TypeError(f"no layout for {type(term).__name__}")
        if written or precedence < context:
            return ["(", doc, ")"]
        return doc

    def aggregate(self, aggregate: ast.Aggregate) -> Doc:
        target = [" ", self.term(aggregate.target)] if aggregate.target is not None else []
        body = self.listing(aggregate.body, self.literal, Line())
        return group(
            [
                aggregate.op,
                *target,
                " : {",
                nest(INDENT, body),
                *self.close(aggregate.span.end - 1, Line(), "}"),
            ]
        )

    # constants, spelled as written

    def code_text(self, start: int, end: int) -> str:
        """The text between two offsets without the comments in it (none starts inside a
        token, so a comment is either wholly inside the range or wholly outside)."""
        pieces = []
        i = bisect.bisect_left(self.starts, start)
        while i < len(self.comments) and self.comments[i].start < end:
            pieces.append(self.text[start : self.comments[i].start])
            start = self.comments[i].end
            i += 1
        pieces.append(self.text[start:end])
        return "".join(pieces)

    def spelling(self, start: int, end: int) -> str:
        return self.code_text(start, end).strip()

    def io_relation(self, name: ast.Ident, options: tuple[ast.IoOption, ...]) -> str:
        """``edge`` or ``edge(IO=file, filename="edge.csv")``."""
        if not options:
            return name.name
        written = []
        for option in options:
            value = option.value
            if isinstance(value, ast.Ident):
                text = value.name
            elif isinstance(value, ast.String):
                text = self.string(value)
            else:
                text = self.number(value)
            written.append(f"{option.key.name}={text}")
        return f"{name.name}({', '.join(written)})"

    def string(self, string: ast.String) -> str:
        written = _STRING.fullmatch(self.code_text(string.span.start, string.span.end))
        if written:
            return written.group(1)
        return (
            '"' + "".join(_ESCAPES.get(c, c if c >= " " else f"\\u{ord(c):04x}") for c in string.value) + '"'
        )

    def number(self, number: ast.Integer | ast.Float) -> str:
        if isinstance(number, ast.Integer):
            suffix = "u" if number.unsigned else ""  # `5u`: an unsigned constant
            text = self.code_text(number.span.start, number.span.end)
            radix = _RADIX.fullmatch(text[:-1] if suffix and text.endswith("u") else text)
            if radix:  # `0x1F` and `0b101` as written
                sign = "-" if radix.group(1).count("-") % 2 else ""
                digits = radix.group(2)
                if int(sign + digits[2:], 16 if digits[1] in "xX" else 2) == number.value:
                    return sign + digits + suffix
            return str(number.value) + suffix
        written = _FLOAT.fullmatch(self.code_text(number.span.start, number.span.end))
        if written:
            spelled = ("-" if written.group(1).count("-") % 2 else "") + written.group(2)
            if float(spelled) == number.value:
                return spelled
        return repr(number.value)


def _comp_type(ref: ast.CompType) -> str:
    if not ref.args:
        return ref.name.name
    return f"{ref.name.name}<{', '.join(a.name for a in ref.args)}>"


def _unfolded(term: ast.BinOp | ast.Call, name: str) -> list[ast.Term]:
    """The arguments of ``max(a, b, c)`` (or ``cat``), which the parser nests to the left: an
    inner node that starts where the outer one does was written as one call."""
    args: list[ast.Term] = []
    node: ast.Term = term
    while True:
        if isinstance(node, ast.BinOp):
            left, right = node.left, node.right
        else:
            assert isinstance(node, ast.Call)
            if len(node.args) != 2:
                return [*node.args, *reversed(args)]
            left, right = node.args
        args.append(right)
        inner = left
        folded = (
            inner.span.start == node.span.start
            and inner.span != node.span
            and (
                (isinstance(inner, ast.BinOp) and inner.op == name)
                or (isinstance(inner, ast.Call) and inner.name == name)
            )
        )
        if not folded:
            args.append(left)
            return list(reversed(args))
        node = inner


def _choice_text(domains: tuple[tuple[ast.Ident, ...], ...]) -> str:
    """`` choice-domain x, (y, z)`` (empty without domains)."""
    if not domains:
        return ""
    written = [d[0].name if len(d) == 1 else "(" + ", ".join(i.name for i in d) + ")" for d in domains]
    return " choice-domain " + ", ".join(written)
