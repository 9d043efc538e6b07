"""``type-mismatch``: values are used consistently with ``.decl`` and ``.functor`` signatures.

There are three value types: ``symbol`` (strings), ``number`` (integers) and ``float``.
Types are inferred with union-find over *slots*: each variable of a rule, each attribute of
an undeclared relation, each subterm. A slot holds the set of types it may still have;
string constants are symbols, float constants floats, and integer constants either number
or float (as in Soufflé, ``1`` fits a float attribute). Arithmetic needs numbers on both
sides, the bitwise and logical operators (``band``, ``lnot``, ...) integers (``number``),
``max`` and ``min`` the same type on both sides; a comparison needs the same type on both sides; an argument must have the type of
its attribute or parameter. When a constraint leaves a slot with no type, the place is
reported with where the conflicting type came from, and the slot keeps its old type so one
mistake is reported once.

Declared attribute and parameter types are fixed; undeclared relations get the types their
uses imply, which :func:`infer` returns for later stages.
"""

from __future__ import annotations

from itertools import count

from .. import ast, codes, scopes
from ..diagnostics import Diagnostic, Related
from ..generators import is_range
from ..loader import Program
from ..source import Span
from ..symbols import Symbols

ANY = frozenset({"symbol", "number", "float"})
NUMERIC = frozenset({"number", "float"})
SYMBOL = frozenset({"symbol"})
FLOAT = frozenset({"float"})
INTEGER = frozenset({"number"})


def describe(types: frozenset[str]) -> str:
    if types == NUMERIC:
        return "a number"
    if len(types) == 1:
        (only,) = types
        return "a value of any type" if only == "any" else f"a `{only}`"
    return "any value"


def infer(program: Program, symbols: Symbols) -> tuple[dict[str, tuple[str | None, ...]], list[Diagnostic]]:
    """Attribute types of every relation (``None`` where nothing constrains one) and the errors."""
    solver = _Solver(program, symbols)
    for index, (module, rule) in enumerate(program.rules()):
        solver.rule(index, rule, report=not program.is_library(module.path))
    return solver.relation_types(), solver.diagnostics


class _Solver:
    def __init__(self, program: Program, symbols: Symbols) -> None:
        self.program = program
        self.symbols = symbols
        self.parent: dict[object, object] = {}
        self.allowed: dict[object, frozenset[str]] = {}
        self.origin: dict[object, tuple[Span, str]] = {}  # why a slot has its types; `{}` is its text
        self.local: dict[object, tuple[Span, str]] = {}  # why a variable has its type, in its own rule
        self.fresh = count()
        self.diagnostics: list[Diagnostic] = []
        self.report = True
        self.rule_index = 0

    # ------------------------------------------------------------------ union-find

    def find(self, key: object) -> object:
        parent = self.parent
        if key not in parent:
            parent[key] = key
            self.allowed[key] = ANY
            return key
        root = key
        while parent[root] != root:
            root = parent[root]
        while parent[key] != root:
            parent[key], key = root, parent[key]
        return root

    def new_slot(self, types: frozenset[str] = ANY, origin: tuple[Span, str] | None = None) -> object:
        key = ("tmp", next(self.fresh))
        self.parent[key] = key
        self.allowed[key] = types
        if origin is not None:
            self.origin[key] = origin
        return key

    def types(self, key: object) -> frozenset[str]:
        return self.allowed[self.find(key)]

    def restrict(self, key: object, types: frozenset[str], origin: tuple[Span, str]) -> frozenset[str] | None:
        """Narrow a slot; on conflict leave it alone and return its current types."""
        root = self.find(key)
        current = self.allowed[root]
        narrowed = current & types
        if not narrowed:
            return current
        if narrowed != current:
            self.allowed[root] = narrowed
            self.origin.setdefault(root, origin)
        return None

    def unify(self, a: object, b: object) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return True
        both = self.allowed[ra] & self.allowed[rb]
        if not both:
            return False
        self.parent[rb] = ra
        self.allowed[ra] = both
        if ra not in self.origin and rb in self.origin:
            self.origin[ra] = self.origin[rb]
        return True

    # ---------------------------------------------------------------------- rules

    def text(self, span: Span) -> str:
        source = self.program.source(span.file)
        return source.text[span.start : span.end] if source else "?"

    def error(self, span: Span, message: str, related: list[Related | None]) -> None:
        if self.report:
            shown = [r for r in related if r is not None and r.span != span]
            self.diagnostics.append(codes.TYPE_MISMATCH(span, message, related=shown))

    def why(self, key: object) -> Related | None:
        """Where a slot got its type: a place in the current rule if there is one."""
        origin = self.local.get(key) or self.origin.get(self.find(key))
        if origin is None:
            return None
        span, note = origin
        return Related(span, note.replace("{}", self.text(span)))

    def note_local(self, term: ast.Term, key: object, note: str) -> None:
        if isinstance(term, ast.Var) and key not in self.local and self.types(key) != ANY:
            self.local[key] = (term.span, note)

    def expect(self, term: ast.Term, key: object, types: frozenset[str], what: str, origin: Related) -> None:
        """The term (typed by ``key``) must have one of ``types``; ``what`` names the place."""
        clash = self.restrict(key, types, (term.span, f"`{{}}` is {describe(types)} because of this use"))
        if clash is None:
            self.note_local(term, key, f"`{{}}` is {describe(types)} because of this use")
        else:
            self.error(
                term.span,
                f"{what} is {describe(types)}, but `{self.text(term.span)}` is {describe(clash)}",
                [self.why(key), origin],
            )

    def rule(self, index: int, rule: ast.Rule, report: bool) -> None:
        self.report = report
        self.rule_index = index
        if self.program.summary(rule).aggregates:  # an aggregate's own variables have types of their own
            given = None
            if self.symbols.is_inline(rule.head.name):
                given = {a.name for a in rule.head.args if isinstance(a, ast.Var)}
            rule = scopes.localized(rule, self.binds, given)
        for literal in rule.body:
            self.literal(literal)
        self.atom(rule.head)

    def binds(self, atom: ast.Atom) -> bool:
        return atom.name not in self.symbols.functors and not self.symbols.is_inline(atom.name)

    def literal(self, literal: ast.Literal) -> None:
        if isinstance(literal, ast.Atom):
            self.atom(literal)
        elif isinstance(literal, ast.Negation):
            self.atom(literal.atom)
        else:
            left, right = self.term(literal.left), self.term(literal.right)
            left_types, right_types = self.types(left), self.types(right)
            if not self.unify(left, right):
                self.error(
                    literal.span,
                    f"cannot compare {describe(left_types)} with {describe(right_types)}: "
                    f"`{self.text(literal.left.span)}` and `{self.text(literal.right.span)}` differ in type",
                    [self.why(left), self.why(right)],
                )

    def atom(self, atom: ast.Atom) -> None:
        sig = self.symbols.functors.get(atom.name)
        if sig is not None:
            if not sig.is_predicate and sig.returns is not None:
                self.error(
                    atom.span,
                    f"`{atom.name}` returns {describe(frozenset({sig.returns}))}, so it cannot be a condition",
                    [Related(sig.span, "declared here")],
                )
            self.arguments(atom.name, atom.args, sig)
            return
        relation = self.symbols.relations.get(atom.name)
        if relation is None or relation.arity != len(atom.args):
            for arg in atom.args:
                self.term(arg)
            return
        for i, arg in enumerate(atom.args):
            key = self.term(arg)
            declared = relation.types[i] if relation.declared else None
            if declared is not None:
                what = f"argument {i + 1} of `{atom.name}`"
                self.expect(
                    arg,
                    key,
                    frozenset({declared}),
                    what,
                    Related(relation.span, f"`{atom.name}` is declared here"),
                )
            elif not relation.declared:
                slot = ("rel", atom.name, i)
                before_types, before_origin = self.types(slot), self.why(slot)
                if not self.unify(key, slot):
                    self.error(
                        arg.span,
                        f"argument {i + 1} of `{atom.name}` is {describe(before_types)} elsewhere, "
                        f"but `{self.text(arg.span)}` is {describe(self.types(key))}",
                        [self.why(key), before_origin],
                    )
                else:
                    self.note_local(
                        arg,
                        key,
                        f"`{{}}` is {describe(self.types(key))} as argument {i + 1} of `{atom.name}`",
                    )

    def arguments(self, name: str, args: tuple[ast.Term, ...], sig) -> None:
        if len(args) != len(sig.params):
            for arg in args:
                self.term(arg)
            return
        for i, (arg, param) in enumerate(zip(args, sig.params, strict=True)):
            key = self.term(arg)
            if param is not None and param != "any":
                label = f"`{sig.param_names[i]}`" if sig.param_names[i] else f"{i + 1}"
                self.expect(
                    arg,
                    key,
                    frozenset({param}),
                    f"parameter {label} of `{name}`",
                    Related(sig.span, f"`{name}` is declared here"),
                )

    def term(self, term: ast.Term) -> object:
        """The slot of a term, after checking the terms inside it."""
        if isinstance(term, ast.Var):
            return self.find(("var", self.rule_index, term.name))
        if isinstance(term, ast.String):
            return self.new_slot(SYMBOL, (term.span, "a string constant"))
        if isinstance(term, ast.Integer):
            return self.new_slot(NUMERIC)
        if isinstance(term, ast.Float):
            return self.new_slot(FLOAT, (term.span, "a float constant"))
        if isinstance(term, ast.Wildcard):
            return self.new_slot()
        if isinstance(term, ast.Call):
            return self.call(term)
        if isinstance(term, ast.BinOp) and term.op in ast.EXTREMA:
            left, right = self.term(term.left), self.term(term.right)
            if not self.unify(left, right):
                self.error(
                    term.span,
                    f"`{term.op}` compares {describe(self.types(left))} with {describe(self.types(right))}",
                    [self.why(left), self.why(right)],
                )
            return left
        if isinstance(term, ast.BinOp) and term.op in ast.BITWISE + ast.LOGICAL:
            left, right = self.term(term.left), self.term(term.right)
            self.integer(term.left, left, term.op)
            self.integer(term.right, right, term.op)
            return self.new_slot(INTEGER)
        if isinstance(term, ast.UnaryOp):
            self.integer(term.operand, self.term(term.operand), term.op)
            return self.new_slot(INTEGER)
        if isinstance(term, ast.BinOp):
            left, right = self.term(term.left), self.term(term.right)
            if not (self.numeric(term.left, left) and self.numeric(term.right, right)):
                return self.new_slot(NUMERIC)  # reported; do not spread the error further
            if not self.unify(left, right):
                self.error(
                    term.span,
                    f"arithmetic mixes {describe(self.types(left))} and {describe(self.types(right))}",
                    [self.why(left), self.why(right)],
                )
            return left
        if isinstance(term, ast.Negate):
            operand = self.term(term.operand)
            return operand if self.numeric(term.operand, operand) else self.new_slot(NUMERIC)
        if isinstance(term, ast.Aggregate):
            return self.aggregate(term)
        raise AssertionError(f"unknown term {term!r}")

    def numeric(self, term: ast.Term, key: object) -> bool:
        clash = self.restrict(key, NUMERIC, (term.span, "used in arithmetic here"))
        if clash is not None:
            self.error(
                term.span,
                f"arithmetic needs numbers, but `{self.text(term.span)}` is {describe(clash)}",
                [self.why(key)],
            )
        return clash is None

    def integer(self, term: ast.Term, key: object, op: str) -> bool:
        clash = self.restrict(key, INTEGER, (term.span, f"used with `{op}` here"))
        if clash is not None:
            self.error(
                term.span,
                f"`{op}` needs integers (`number`), but `{self.text(term.span)}` is {describe(clash)}",
                [self.why(key)],
            )
        return clash is None

    def call(self, call: ast.Call) -> object:
        sig = self.symbols.functors.get(call.name)
        if is_range(call, self.symbols.functors):
            return self.range(call)
        if sig is None:
            for arg in call.args:
                self.term(arg)
            return self.new_slot()
        self.arguments(call.name, call.args, sig)
        if sig.is_predicate:
            self.error(
                call.span,
                f"`{call.name}` is a predicate (it returns `bool`), so it has no value to use here",
                [Related(sig.span, "declared here")],
            )
            return self.new_slot()
        if sig.returns is None or sig.returns == "any":
            return self.new_slot()
        return self.new_slot(frozenset({sig.returns}), (call.span, f"`{call.name}` returns `{sig.returns}`"))

    def range(self, call: ast.Call) -> object:
        """``range(a, b[, step])``: numbers of one type, and its values are of that type."""
        slots = [(arg, self.term(arg)) for arg in call.args]
        if not all(self.numeric(arg, key) for arg, key in slots):
            return self.new_slot(NUMERIC)
        if not slots:
            return self.new_slot(NUMERIC)
        first = slots[0][1]
        for arg, key in slots[1:]:
            if not self.unify(first, key):
                self.error(
                    arg.span,
                    f"`range` mixes {describe(self.types(first))} and {describe(self.types(key))}",
                    [self.why(first), self.why(key)],
                )
        return first

    def aggregate(self, aggregate: ast.Aggregate) -> object:
        for literal in aggregate.body:
            self.literal(literal)
        if aggregate.op == "count":
            return self.new_slot(frozenset({"number"}), (aggregate.span, "a count is a `number`"))
        if aggregate.target is None:
            return self.new_slot()
        target = self.term(aggregate.target)
        if not self.numeric(aggregate.target, target):
            return self.new_slot(NUMERIC)
        if aggregate.op == "mean":
            return self.new_slot(FLOAT, (aggregate.span, "a mean is a `float`"))
        return target

    # -------------------------------------------------------------------- results

    def relation_types(self) -> dict[str, tuple[str | None, ...]]:
        result: dict[str, tuple[str | None, ...]] = {}
        for name, relation in self.symbols.relations.items():
            if relation.declared or relation.arity is None:
                result[name] = relation.types
                continue
            types: list[str | None] = []
            for i in range(relation.arity):
                slot = ("rel", name, i)
                allowed = self.types(slot) if slot in self.parent else ANY
                types.append(_pick(allowed))
            result[name] = tuple(types)
        return result


def _pick(allowed: frozenset[str]) -> str | None:
    if allowed == ANY:
        return None
    if allowed == NUMERIC:
        return "number"
    return sorted(allowed)[0]
