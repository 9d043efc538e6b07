"""Every name in a program and where it occurs: the table behind hover, go to definition,
find references, rename, document symbols and completion.

A :class:`Symbol` is a relation, a functor, a variable (local to its rule: every occurrence
of the name in the rule, aggregates and ``{var}`` placeholders of ``@message``/``@suggest``
included), a library module, an included file, a role, a type (``.type``) or a branch of an
ADT (its constructor ``$A``), or a tool's argument (``pay.amount``: declared by ``.arg``, used
by ``tool_arg(a, "amount")`` where the rule fixes ``a``'s tool). An :class:`Occurrence` is one place
a symbol is written, with its role there: declared (``.decl``, ``.functor``, ``.role``, ``.arg``),
defined (the head of a rule or fact), named by a directive (``.input``, ``.output``,
``.field``, ``.import``, ``.include``) or used.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from policyc.compiler import ast
from policyc.compiler.arguments import TOOL_ARG, fixed_tools
from policyc.compiler.loader import file_key, include_target
from policyc.compiler.source import Span
from policyc.compiler.stages import Resolved

RELATION, FUNCTOR, VARIABLE, MODULE, FILE, ROLE = "relation", "functor", "variable", "module", "file", "role"
TYPE, CONSTRUCTOR = "type", "constructor"
ARGUMENT = "argument"  # a tool's argument, named `tool.argument`
PRIMITIVE_TYPES = frozenset({"symbol", "number", "unsigned", "float"})
DECLARATION, DEFINITION, DIRECTIVE, USE = "declaration", "definition", "directive", "use"

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}\n]*)\}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*['\u2019]*")


@dataclass(frozen=True)
class Symbol:
    kind: str
    name: str
    scope: int = -1  # a variable's rule (its place in :attr:`Index.rules`)


@dataclass(frozen=True)
class Occurrence:
    symbol: Symbol
    span: Span
    role: str


@dataclass(frozen=True)
class Index:
    occurrences: tuple[Occurrence, ...]
    rules: tuple[tuple[ast.Module, ast.Rule], ...]  # every rule, in program order (variables' scopes)
    by_file: dict[str, list[Occurrence]]  # sorted by position
    by_symbol: dict[Symbol, list[Occurrence]]

    @classmethod
    def build(cls, compilation: Resolved) -> Index:
        program = compilation.program
        functors = {s.name.name for _, s in program.statements() if isinstance(s, ast.Functor)}
        functors |= set(compilation.symbols.functors)
        occurrences: list[Occurrence] = []
        rules: list[tuple[ast.Module, ast.Rule]] = []
        for module in program.modules:
            walker = _Walker(occurrences, rules, module, functors)
            for statement in module.statements:
                walker.statement(statement)
        by_file: dict[str, list[Occurrence]] = {}
        by_symbol: dict[Symbol, list[Occurrence]] = {}
        for occurrence in occurrences:
            by_file.setdefault(occurrence.span.file, []).append(occurrence)
            by_symbol.setdefault(occurrence.symbol, []).append(occurrence)
        for found in by_file.values():
            found.sort(key=lambda o: o.span.start)
        return cls(tuple(occurrences), tuple(rules), by_file, by_symbol)

    def at(self, path: str, offset: int) -> Occurrence | None:
        """The occurrence under a cursor at ``offset`` (just after a name counts)."""
        found = self.by_file.get(path, [])
        starts = [o.span.start for o in found]
        i = bisect.bisect_right(starts, offset) - 1
        candidates = [o for o in found[max(i - 1, 0) : i + 1] if o.span.start <= offset <= o.span.end]
        inside = [o for o in candidates if offset < o.span.end]
        return (inside or candidates or [None])[-1]

    def of(self, symbol: Symbol) -> list[Occurrence]:
        return self.by_symbol.get(symbol, [])

    def rule_at(self, path: str, offset: int) -> int | None:
        """The rule (its place in :attr:`rules`) whose text contains ``offset``."""
        for n, (module, rule) in enumerate(self.rules):
            if module.path == path and rule.span.start <= offset <= rule.span.end:
                return n
        return None

    def variables(self, scope: int) -> list[str]:
        """The variables of a rule, in order of first occurrence."""
        names: dict[str, None] = {}
        for occurrence in self.occurrences:
            if occurrence.symbol.kind == VARIABLE and occurrence.symbol.scope == scope:
                names.setdefault(occurrence.symbol.name)
        return list(names)


class _Walker:
    def __init__(
        self,
        occurrences: list[Occurrence],
        rules: list[tuple[ast.Module, ast.Rule]],
        module: ast.Module,
        functors: set[str],
    ) -> None:
        self.occurrences = occurrences
        self.rules = rules
        self.module = module
        self.functors = functors
        self.scope = -1
        self.written: Span | None = None  # the statement the rules being walked were written as
        self.seen: set[tuple[str, str, Span, str]] = set()
        self.tools: dict[str, frozenset[str]] = {}  # the tools the rule being walked fixes its calls to

    def add(self, kind: str, name: str, span: Span, role: str) -> None:
        scope = self.scope if kind == VARIABLE else -1
        key = (kind, name, span, role)
        if key in self.seen:  # a place shared by the rules of one statement (`;`, several heads)
            return
        self.seen.add(key)
        self.occurrences.append(Occurrence(Symbol(kind, name, scope), span, role))

    def statement(self, statement: ast.Statement) -> None:
        if isinstance(statement, ast.Misplaced):
            statement = statement.statement
        if isinstance(statement, ast.Rule):
            # the rules one statement stands for are one scope: a variable of the statement is
            # one variable, whichever alternative or head it is in
            if statement.span != self.written:
                self.written = statement.span
                self.scope = len(self.rules)
                self.seen = set()
            self.rules.append((self.module, statement))
            self.tools = fixed_tools(statement.body)
            if not statement.is_subsumption:  # its two atoms start its body: uses, not definitions
                self.atom(statement.head, DEFINITION)
            self.literals(statement.body)
            self.placeholders(statement)
        elif isinstance(statement, ast.Decl):
            self.add(RELATION, statement.name.name, statement.name.span, DECLARATION)
            for attribute in statement.attributes:
                self.type_use(attribute.type)
        elif isinstance(statement, ast.TypeDecl):
            self.add(TYPE, statement.name.name, statement.name.span, DECLARATION)
            for ident in statement.members:
                self.type_use(ident)
            for attribute in statement.fields:
                self.type_use(attribute.type)
            for branch in statement.branches:
                self.add(CONSTRUCTOR, branch.name.name, branch.name.span, DECLARATION)
                for attribute in branch.fields:
                    self.type_use(attribute.type)
        elif isinstance(statement, ast.Input | ast.Output):
            for ident in statement.names:
                kind = FUNCTOR if ident.name in self.functors else RELATION
                self.add(kind, ident.name, ident.span, DIRECTIVE)
        elif isinstance(statement, ast.Key):
            self.add(RELATION, statement.relation.name, statement.relation.span, DIRECTIVE)
        elif isinstance(statement, ast.Functor):
            self.add(FUNCTOR, statement.name.name, statement.name.span, DECLARATION)
        elif isinstance(statement, ast.Import):
            self.add(MODULE, statement.module.name, statement.module.span, DIRECTIVE)
        elif isinstance(statement, ast.Include):
            self.add(FILE, file_key(include_target(self.module, statement)), statement.path.span, DIRECTIVE)
        elif isinstance(statement, ast.Role):
            self.add(ROLE, statement.name.name, statement.name.span, DECLARATION)
        elif isinstance(statement, ast.FieldMap):
            self.add(ROLE, statement.role.name, statement.role.span, DIRECTIVE)
        elif isinstance(statement, ast.ArgDecl) and statement.tool and statement.argument:
            self.add(ARGUMENT, f"{statement.tool}.{statement.argument}", statement.path_span, DECLARATION)

    def type_use(self, ident: ast.Ident) -> None:
        if ident.name not in PRIMITIVE_TYPES:
            self.add(TYPE, ident.name, ident.span, USE)

    def atom(self, atom: ast.Atom, role: str) -> None:
        kind = FUNCTOR if atom.name in self.functors else RELATION
        self.add(kind, atom.name, atom.name_span, role)
        for arg in atom.args:
            self.term(arg)

    def literals(self, body: tuple[ast.Literal, ...]) -> None:
        for literal in body:
            if isinstance(literal, ast.Atom):
                self.atom(literal, USE)
            elif isinstance(literal, ast.Negation):
                self.atom(literal.atom, USE)
            else:
                self.term(literal.left)
                self.term(literal.right)

    def term(self, term: ast.Term) -> None:
        if isinstance(term, ast.Var):
            self.add(VARIABLE, term.name, term.span, USE)
        elif isinstance(term, ast.Call):
            self.add(FUNCTOR, term.name, term.name_span, USE)
            for arg in term.args:
                self.term(arg)
            self.argument(term)
        elif isinstance(term, ast.Aggregate):
            outer = self.tools
            inner = fixed_tools(term.body)
            self.tools = {v: outer.get(v, frozenset()) | inner.get(v, frozenset()) for v in {*outer, *inner}}
            if term.target is not None:
                self.term(term.target)
            self.literals(term.body)
            self.tools = outer
        elif isinstance(term, ast.Constructor):
            self.add(CONSTRUCTOR, term.name, term.name_span, USE)
            for arg in term.args:
                self.term(arg)
        else:
            for child in ast.term_children(term):
                self.term(child)

    def argument(self, call: ast.Call) -> None:
        """``tool_arg(a, "key")`` where the rule fixes ``a`` to one tool uses its argument."""
        if call.name != TOOL_ARG or len(call.args) != 2:
            return
        variable, key = call.args
        if isinstance(variable, ast.Var) and isinstance(key, ast.String):
            tools = self.tools.get(variable.name, frozenset())
            if len(tools) == 1:
                (tool,) = tools
                self.add(ARGUMENT, f"{tool}.{key.value}", key.span, USE)

    def placeholders(self, rule: ast.Rule) -> None:
        """``{var}`` in ``@message`` and ``@suggest`` name variables of the rule."""
        source = self.module.source
        if source is None:
            return
        for annotation in rule.annotations:
            if annotation.name not in ("message", "suggest") or not annotation.args:
                continue
            arg = annotation.args[0]
            if not isinstance(arg, ast.String):
                continue
            raw = source.text[arg.span.start : arg.span.end]
            for match in _PLACEHOLDER.finditer(raw):
                inner = match.group(1)
                if inner is None:
                    continue
                name = NAME.fullmatch(inner.strip())
                if name is None:
                    continue
                start = arg.span.start + match.start(1) + (len(inner) - len(inner.lstrip()))
                span = source.span(start, start + len(name.group()))
                self.add(VARIABLE, name.group(), span, USE)
