"""``type-mismatch``: values are used consistently with ``.decl`` and ``.functor`` signatures.

The primitive value types are ``symbol`` (strings), ``number`` (integers), ``unsigned``
(integers of at least 0) and ``float``; ``.type`` declares subtypes, aliases, unions, record
types and ADTs (:mod:`..typedefs`). Types are inferred with union-find over *slots*: each
variable of a rule, each attribute of an undeclared relation, each subterm. A slot holds the
set of the most specific types (:meth:`~..typedefs.TypeTable.leaves`) it may still have:
string constants may be any symbol type, float constants floats, and integer constants any
numeric type (as in Soufflé, ``1`` fits a float attribute); a value of a subtype fits where
its base is expected, and two subtypes of one base do not mix. Arithmetic needs numbers of
one type on both sides, the bitwise and logical operators (``band``, ``lnot``, ...)
integers (``number``), ``max`` and ``min`` the same type on both sides; a comparison needs the same type on both sides; an argument must
have the type of its attribute or parameter. A record ``[a, b]`` takes the record type its
place expects (or the only record type of its number of fields) and its fields are checked
against that type's; ``nil`` is a value of every record type; a constructor ``$A(x)`` is a
value of its ADT, its arguments checked against the branch's fields. When a constraint
leaves a slot with no type, the place is reported with where the conflicting type came
from, and the slot keeps its old type so one mistake is reported once.

``+`` and ``*`` refuse an operand of type ``any`` (a call of a functor returning ``any``, such as
``tool_arg``, or a variable holding its value and bound by no typed attribute): an agent's
text there would make Python join (``"5" + "00"``) or repeat texts instead of adding or
multiplying numbers. The operand is converted (``to_number(...)``) or compared as text.
``tool_arg(a, "key")`` has the type of its value when the rule fixes the tool ``a`` calls
(``ToolCall(a, "pay")``, ``is_tool(a, "pay")``, ``tool_name(a) = "pay"``) and that tool's
argument is declared (``.arg pay.key: number``; :mod:`..arguments`); any type otherwise.

Declared attribute and parameter types are fixed; undeclared relations get the types their
uses imply, which :func:`infer` returns (as the primitive types values are kept in:
``record`` for records and ADTs) for later stages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from itertools import count

from .. import ast, codes, scopes
from ..arguments import declared_for, fixed_tools
from ..diagnostics import Diagnostic, Edit, Fix, Related
from ..generators import is_range
from ..loader import Program
from ..source import Span
from ..symbols import Symbols
from ..typedefs import NUMERIC_PRIMITIVES, PRIMITIVES, TypeTable


class _Sets:
    """The type sets of one program: every type's leaves, and the names to describe them."""

    def __init__(self, table: TypeTable) -> None:
        self.table = table
        self.names: dict[frozenset[str], str] = {}
        for name in (*PRIMITIVES, *table.types):
            if table.representation(name) is not None:
                self.names.setdefault(self.of(name), table.canonical(name))
        self.any = frozenset().union(*(self.of(t) for t in PRIMITIVES), table.structured())
        self.numeric = frozenset().union(*(self.of(t) for t in NUMERIC_PRIMITIVES))
        self.symbol = self.of("symbol")
        self.float = self.of("float")
        self.number = self.of("number")
        # a record where no record type is declared has a type of its own, which fits nowhere
        self.records = table.records() or frozenset({"[record]"})

    def of(self, name: str) -> frozenset[str]:
        return self.table.leaves(name)

    def describe(self, types: frozenset[str]) -> str:
        if types == self.any:
            return "any value"
        if types == self.numeric:
            return "a number"
        if types in self.names:
            return f"a `{self.names[types]}`"
        if types and types <= self.records | {"[record]"}:
            return "a record"
        return "a value of one of " + ", ".join(f"`{t}`" for t in sorted(types))


def infer(program: Program, symbols: Symbols) -> tuple[dict[str, tuple[str | None, ...]], list[Diagnostic]]:
    """Attribute types of every relation (``None`` where nothing constrains one) and the errors."""
    types, diagnostics, _ = infer_program(program, symbols)
    return types, diagnostics


def infer_program(
    program: Program, symbols: Symbols
) -> tuple[dict[str, tuple[str | None, ...]], list[Diagnostic], Program]:
    """What :func:`infer` finds, and the program with each integer constant whose place is a
    float written as the float (``a(42)`` with ``a(x: float)`` holds 42.0, and ``x / 5`` of it
    is 8.4, as in Soufflé, where a constant has the type of its place)."""
    solver = _Solver(program, symbols)
    for index, (module, rule) in enumerate(program.rules()):
        solver.rule(index, rule, report=not program.is_library(module.path))
    return solver.relation_types(), solver.diagnostics, solver.rewritten()


class _Solver:
    def __init__(self, program: Program, symbols: Symbols) -> None:
        self.program = program
        self.symbols = symbols
        self.sets = sets = _Sets(symbols.typedefs)
        self.table = symbols.typedefs
        self.ANY, self.NUMERIC, self.SYMBOL, self.FLOAT = sets.any, sets.numeric, sets.symbol, sets.float
        self.describe = sets.describe
        self.parent: dict[object, object] = {}
        self.allowed: dict[object, frozenset[str]] = {}
        self.origin: dict[object, tuple[Span, str]] = {}  # why a slot has its types; `{}` is its text
        self.local: dict[object, tuple[Span, str]] = {}  # why a variable has its type, in its own rule
        self.fresh = count()
        self.diagnostics: list[Diagnostic] = []
        self.report = True
        self.rule_index = 0
        self.any_values: dict[str, Span] = {}  # the current rule's variables of type `any`
        self.tools: dict[str, frozenset[str]] = {}  # the tools the rule fixes its calls to
        self.integers: list[tuple[int, int, object]] = []  # (rule, id of an integer constant, slot)
        self.joins: set[tuple[int, int]] = set()  # (rule, id of a `+` of texts)

    # ------------------------------------------------------------------ union-find

    def find(self, key: object) -> object:
        parent = self.parent
        if key not in parent:
            parent[key] = key
            self.allowed[key] = self.ANY
            return key
        root = key
        while parent[root] != root:
            root = parent[root]
        while parent[key] != root:
            parent[key], key = root, parent[key]
        return root

    def new_slot(self, types: frozenset[str] | None = None, origin: tuple[Span, str] | None = None) -> object:
        key = ("tmp", next(self.fresh))
        self.parent[key] = key
        self.allowed[key] = self.ANY if types is None else types
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
        if isinstance(term, ast.Var) and key not in self.local and self.types(key) != self.ANY:
            self.local[key] = (term.span, note)

    def expect(self, term: ast.Term, key: object, types: frozenset[str], what: str, origin: Related) -> None:
        """The term (typed by ``key``) must have one of ``types``; ``what`` names the place."""
        clash = self.restrict(
            key, types, (term.span, f"`{{}}` is {self.describe(types)} because of this use")
        )
        if clash is None:
            self.note_local(term, key, f"`{{}}` is {self.describe(types)} because of this use")
        else:
            self.error(
                term.span,
                f"{what} is {self.describe(types)}, but `{self.text(term.span)}` is {self.describe(clash)}",
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
        self.tools = fixed_tools(rule.body)
        self.any_values = any_variables(rule, self.symbols, self.declared)
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
        elif isinstance(literal.left, ast.STRUCTURED) and not isinstance(literal.right, ast.STRUCTURED):
            right = self.term(literal.right)
            left = self.term(literal.left, self.types(right))
            self.compare(literal, left, right)
        else:
            left = self.term(literal.left)
            right = self.term(literal.right, self.types(left))
            self.compare(literal, left, right)

    def compare(self, literal: ast.Comparison, left: object, right: object) -> None:
        left_types, right_types = self.types(left), self.types(right)
        if not self.unify(left, right):
            self.error(
                literal.span,
                f"cannot compare {self.describe(left_types)} with {self.describe(right_types)}: "
                f"`{self.text(literal.left.span)}` and `{self.text(literal.right.span)}` differ in type",
                [self.why(left), self.why(right)],
            )

    def atom(self, atom: ast.Atom) -> None:
        sig = self.symbols.functors.get(atom.name)
        if sig is not None:
            if not sig.is_predicate and sig.returns is not None:
                self.error(
                    atom.span,
                    f"`{atom.name}` returns {self.describe(self.sets.of(sig.returns))}, so it cannot be a condition",
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
            declared = relation.types[i] if relation.declared else None
            expected = self.sets.of(declared) if declared is not None else None
            key = self.term(arg, expected)
            if declared is not None and expected is not None:
                what = f"argument {i + 1} of `{atom.name}`"
                self.expect(
                    arg,
                    key,
                    expected,
                    what,
                    Related(relation.span, f"`{atom.name}` is declared here"),
                )
            elif not relation.declared:
                slot = ("rel", atom.name, i)
                before_types, before_origin = self.types(slot), self.why(slot)
                if not self.unify(key, slot):
                    self.error(
                        arg.span,
                        f"argument {i + 1} of `{atom.name}` is {self.describe(before_types)} elsewhere, "
                        f"but `{self.text(arg.span)}` is {self.describe(self.types(key))}",
                        [self.why(key), before_origin],
                    )
                else:
                    self.note_local(
                        arg,
                        key,
                        f"`{{}}` is {self.describe(self.types(key))} as argument {i + 1} of `{atom.name}`",
                    )

    def arguments(self, name: str, args: tuple[ast.Term, ...], sig) -> None:
        if len(args) != len(sig.params):
            for arg in args:
                self.term(arg)
            return
        for i, (arg, param) in enumerate(zip(args, sig.params, strict=True)):
            typed = param is not None and param != "any"
            key = self.term(arg, self.sets.of(param) if typed else None)
            if typed:
                label = f"`{sig.param_names[i]}`" if sig.param_names[i] else f"{i + 1}"
                self.expect(
                    arg,
                    key,
                    self.sets.of(param),
                    f"parameter {label} of `{name}`",
                    Related(sig.span, f"`{name}` is declared here"),
                )

    def term(self, term: ast.Term, expected: frozenset[str] | None = None) -> object:
        """The slot of a term, after checking the terms inside it; ``expected`` is the type
        its place has, if known (a record takes its record type from it)."""
        if isinstance(term, ast.Record):
            return self.record(term, expected)
        if isinstance(term, ast.Nil):
            return self.new_slot(self.sets.records, (term.span, "`nil` is a record"))
        if isinstance(term, ast.Constructor):
            return self.constructor(term)
        if isinstance(term, ast.Var):
            return self.find(("var", self.rule_index, term.name))
        if isinstance(term, ast.String):
            return self.new_slot(self.SYMBOL, (term.span, "a string constant"))
        if isinstance(term, ast.Integer) and term.unsigned:
            return self.new_slot(self.sets.of("unsigned"), (term.span, "an unsigned constant"))
        if isinstance(term, ast.Integer):
            slot = self.new_slot(self.NUMERIC)
            self.integers.append((self.rule_index, id(term), slot))
            return slot
        if isinstance(term, ast.Float):
            return self.new_slot(self.FLOAT, (term.span, "a float constant"))
        if isinstance(term, ast.Wildcard):
            return self.new_slot()
        if isinstance(term, ast.Call):
            return self.call(term)
        if isinstance(term, ast.BinOp) and term.op in ast.EXTREMA:
            left, right = self.term(term.left), self.term(term.right)
            if not self.unify(left, right):
                self.error(
                    term.span,
                    f"`{term.op}` compares {self.sets.describe(self.types(left))} with {self.sets.describe(self.types(right))}",
                    [self.why(left), self.why(right)],
                )
            return left
        if isinstance(term, ast.BinOp) and term.op in ast.BITWISE + ast.LOGICAL:
            left, right = self.term(term.left), self.term(term.right)
            self.integer(term.left, left, term.op)
            self.integer(term.right, right, term.op)
            return self.new_slot(self.sets.number)
        if isinstance(term, ast.UnaryOp):
            self.integer(term.operand, self.term(term.operand), term.op)
            return self.new_slot(self.sets.number)
        if isinstance(term, ast.BinOp) and term.op in TEXT_OPERATORS:
            untyped = [t for t in (term.left, term.right) if self.is_any(t)]
            if untyped:
                self.term(term.left), self.term(term.right)
                for untyped_term in untyped:
                    self.any_operand(term.op, untyped_term)
                return self.new_slot(self.NUMERIC)  # reported; do not spread the error further
        if isinstance(term, ast.BinOp):
            left, right = self.term(term.left), self.term(term.right)
            if (
                term.op == "+"
                and (self.textual(left) or self.textual(right))
                and not (self.numbers(left) or self.numbers(right))
            ):
                self.joins.add((self.rule_index, id(term)))
                return self.concatenation(term, left, right)
            if not (self.numeric(term.left, left) and self.numeric(term.right, right)):
                return self.new_slot(self.NUMERIC)  # reported; do not spread the error further
            if not self.unify(left, right):
                self.error(
                    term.span,
                    f"arithmetic mixes {self.describe(self.types(left))} and {self.describe(self.types(right))}",
                    [self.why(left), self.why(right)],
                )
            return left
        if isinstance(term, ast.Negate):
            operand = self.term(term.operand)
            return operand if self.numeric(term.operand, operand) else self.new_slot(self.NUMERIC)
        if isinstance(term, ast.Aggregate):
            return self.aggregate(term)
        if isinstance(term, ast.Cast):
            return self.cast(term)
        raise AssertionError(f"unknown term {term!r}")

    def cast(self, term: ast.Cast) -> object:
        """``as(x, T)``: ``x`` is a value kept as ``T``'s are (a symbol as a symbol type's, a
        record as the same record type's), and the result is a ``T``. A number does not become
        a float or a text by a cast (Soufflé reinterprets its bits): the conversions do that."""
        operand = self.term(term.operand)
        name = term.type.name
        kept = self.table.representation(name)
        if kept is None:
            self.error(term.type.span, f"unknown type `{name}`", [])
            return self.new_slot()
        same = self.sets.of(name) if kept == "record" else self.sets.of(kept)
        clash = self.restrict(operand, same, (term.span, f"converted to `{name}` here"))
        if clash is not None:
            conversion = {
                "float": "to_float",
                "number": "to_number",
                "unsigned": "to_unsigned",
                "symbol": "to_string",
            }
            operand_text = self.text(term.operand.span)
            self.error(
                term.span,
                f"`as` cannot make {self.sets.describe(clash)} a `{name}`: it only gives another type's name "
                "to a value kept alike"
                + (
                    f"; `{conversion[kept]}({operand_text})` converts the value" if kept in conversion else ""
                ),
                [self.why(operand)],
            )
        return self.new_slot(self.sets.of(name), (term.span, f"`as(..., {name})`"))

    def record(self, term: ast.Record, expected: frozenset[str] | None) -> object:
        n = len(term.args)
        fits = [r for r in sorted(self.sets.records) if len(self.table.field_types(r) or ()) == n]
        candidates = [r for r in fits if expected is None or r in expected]
        if len(candidates) != 1:
            for arg in term.args:
                self.term(arg)
            if not candidates and expected is not None and expected & self.sets.records:
                shown = ", ".join(
                    f"`{r}` has {len(self.table.field_types(r) or ())}"
                    for r in sorted(expected & self.sets.records)
                )
                self.error(term.span, f"`{self.text(term.span)}` has {n} fields, but {shown}", [])
                return self.new_slot(expected)
            if not candidates and expected is None:
                self.error(
                    term.span,
                    f"no record type has {n} fields: declare one with `.type R = [...]`",
                    [],
                )
            return self.new_slot(frozenset(candidates) or frozenset({"[record]"}))
        (name,) = candidates
        field_types = self.table.field_types(name) or ()
        for i, (arg, field_type) in enumerate(zip(term.args, field_types, strict=True)):
            wanted = self.sets.of(field_type)
            self.expect(
                arg,
                self.term(arg, wanted),
                wanted,
                f"field {i + 1} of record type `{name}`",
                Related(self.table.types[name].span, f"`{name}` is declared here"),
            )
        return self.new_slot(frozenset({name}), (term.span, f"`{{}}` is a `{name}`"))

    def constructor(self, term: ast.Constructor) -> object:
        branch = self.table.constructors.get(term.name)
        if branch is None:
            for arg in term.args:
                self.term(arg)
            if self.report:
                self.diagnostics.append(
                    codes.UNDEFINED_FUNCTION(
                        term.name_span,
                        f"`${term.name}` is not a branch of any ADT",
                        help="declare it in a `.type`, e.g. `.type T = "
                        + term.name
                        + " {x: number} | Other {}`",
                    )
                )
            return self.new_slot()
        related = Related(branch.span, f"`{term.name}` is declared here")
        if len(term.args) != len(branch.fields):
            for arg in term.args:
                self.term(arg)
            if self.report:
                self.diagnostics.append(
                    codes.ARITY_MISMATCH(
                        term.span,
                        f"`${term.name}` has {len(branch.fields)} fields, but is given {len(term.args)}",
                        related=[related],
                    )
                )
        else:
            for (field_name, field_type), arg in zip(branch.fields, term.args, strict=True):
                wanted = self.sets.of(field_type)
                self.expect(
                    arg, self.term(arg, wanted), wanted, f"field `{field_name}` of `${term.name}`", related
                )
        return self.new_slot(self.sets.of(branch.adt), (term.span, f"`{{}}` is a `{branch.adt}`"))

    def textual(self, key: object) -> bool:
        """Whether a slot holds texts only (a string constant, a `symbol` attribute)."""
        types = self.types(key)
        return types != self.ANY and types <= self.SYMBOL

    def numbers(self, key: object) -> bool:
        """Whether a slot holds numbers only."""
        types = self.types(key)
        return types != self.ANY and types <= self.NUMERIC

    def concatenation(self, term: ast.BinOp, left: object, right: object) -> object:
        """``a + b`` of texts: Soufflé's concatenation (the same as ``cat(a, b)``). Both sides
        are texts; a value of type ``any`` was refused before (it may be an agent's number)."""
        for side, key in ((term.left, left), (term.right, right)):
            clash = self.restrict(key, self.SYMBOL, (side.span, "joined as text with `+` here"))
            if clash is not None:
                self.error(
                    side.span,
                    f"`+` joins texts here, but `{self.text(side.span)}` is {self.describe(clash)}",
                    [self.why(key)],
                )
                return self.new_slot(self.SYMBOL)
        self.unify(left, right)
        return left

    def numeric(self, term: ast.Term, key: object) -> bool:
        clash = self.restrict(key, self.NUMERIC, (term.span, "used in arithmetic here"))
        if clash is not None:
            self.error(
                term.span,
                f"arithmetic needs numbers, but `{self.text(term.span)}` is {self.describe(clash)}",
                [self.why(key)],
            )
        return clash is None

    def is_any(self, term: ast.Term) -> bool:
        """Whether a term is of type ``any`` (:func:`is_any`)."""
        return is_any(term, self.any_values, self.symbols, self.declared)

    def declared(self, call: ast.Call) -> bool:
        """Whether ``call`` reads an argument the policy declares (``.arg``), here of its type."""
        return declared_for(call, self.tools, self.symbols.arguments) is not None

    def any_operand(self, op: str, term: ast.Term) -> None:
        """Report an operand of type ``any`` of ``+`` or ``*``."""
        if not self.report:
            return
        text = self.text(term.span)
        related = []
        for inner in ast.walk_term(term, into_aggregates=False):
            if isinstance(inner, ast.Var) and inner.name in self.any_values:
                note = f"`{self.text(inner.span)}` is of type `any` because of this"
                related.append(Related(self.any_values[inner.name], note))
            elif isinstance(inner, ast.Call) and is_any(inner, {}, self.symbols):
                related.append(
                    Related(self.symbols.functors[inner.name].span, f"`{inner.name}` returns `any`")
                )
                break  # one declaration says it
        joins = "join" if op == "+" else "repeat"
        self.diagnostics.append(
            codes.TYPE_MISMATCH(
                term.span,
                f"`{op}` needs numbers, but `{text}` is of type `any` (a text or a number, as it was written)",
                related=related,
                help=f"a text there would {joins} texts instead of computing a number: convert it with "
                f"`to_number({text})` or `to_float({text})`, or compare it as text",
                fix=Fix(
                    f"convert `{text}` with `to_number`", (Edit(term.span, f"to_number({text})"),), safe=False
                ),
            )
        )

    def integer(self, term: ast.Term, key: object, op: str) -> bool:
        clash = self.restrict(key, self.sets.number, (term.span, f"used with `{op}` here"))
        if clash is not None:
            self.error(
                term.span,
                f"`{op}` needs integers (`number`), but `{self.text(term.span)}` is {self.sets.describe(clash)}",
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
            declared = declared_for(call, self.tools, self.symbols.arguments) if sig.library else None
            if declared is not None and declared.value_type is not None:
                # `tool_arg(a, "amount")` of a call the rule fixes to a tool that declares `amount`
                note = f"`{{}}` is declared `{declared.type}`"
                return self.new_slot(self.sets.of(declared.value_type), (declared.path_span, note))
            return self.new_slot()
        return self.new_slot(self.sets.of(sig.returns), (call.span, f"`{call.name}` returns `{sig.returns}`"))

    def range(self, call: ast.Call) -> object:
        """``range(a, b[, step])``: numbers of one type, and its values are of that type."""
        slots = [(arg, self.term(arg)) for arg in call.args]
        if not all(self.numeric(arg, key) for arg, key in slots):
            return self.new_slot(self.NUMERIC)
        if not slots:
            return self.new_slot(self.NUMERIC)
        first = slots[0][1]
        for arg, key in slots[1:]:
            if not self.unify(first, key):
                self.error(
                    arg.span,
                    f"`range` mixes {self.sets.describe(self.types(first))} and {self.sets.describe(self.types(key))}",
                    [self.why(first), self.why(key)],
                )
        return first

    def aggregate(self, aggregate: ast.Aggregate) -> object:
        outer = self.tools
        inner = fixed_tools(aggregate.body)
        if inner:
            self.tools = {v: outer.get(v, frozenset()) | inner.get(v, frozenset()) for v in {*outer, *inner}}
        try:
            for literal in aggregate.body:
                self.literal(literal)
        finally:
            self.tools = outer
        if aggregate.op == "count":
            return self.new_slot(self.sets.number, (aggregate.span, "a count is a `number`"))
        if aggregate.target is None:
            return self.new_slot()
        target = self.term(aggregate.target)
        if not self.numeric(aggregate.target, target):
            return self.new_slot(self.NUMERIC)
        if aggregate.op == "mean":
            return self.new_slot(self.FLOAT, (aggregate.span, "a mean is a `float`"))
        return target

    # -------------------------------------------------------------------- results

    def relation_types(self) -> dict[str, tuple[str | None, ...]]:
        """Per relation, the primitive type of each attribute's values (None: any)."""
        result: dict[str, tuple[str | None, ...]] = {}
        for name, relation in self.symbols.relations.items():
            if relation.declared or relation.arity is None:
                result[name] = tuple(self.table.representation(t) for t in relation.types)
                continue
            types: list[str | None] = []
            for i in range(relation.arity):
                slot = ("rel", name, i)
                allowed = self.types(slot) if slot in self.parent else self.ANY
                types.append(self.pick(allowed))
            result[name] = tuple(types)
        return result

    def rewritten(self) -> Program:
        """The program with the integer constants typed `float` written as floats, and each
        `+` of texts as the `cat` it is (so the planner and the analyzer see a concatenation)."""
        floats: dict[int, set[int]] = {}
        for index, term, slot in self.integers:
            if self.pick(self.types(slot)) == "float":
                floats.setdefault(index, set()).add(term)
        joins: dict[int, set[int]] = {}
        for index, term in self.joins:
            joins.setdefault(index, set()).add(term)
        if not floats and not joins:
            return self.program

        def rewrite(index: int, rule: ast.Rule) -> ast.Rule:
            wanted = floats.get(index, set())
            joined = joins.get(index, set())
            if not wanted and not joined:
                return rule

            def as_float(t: ast.Term) -> ast.Term:
                if isinstance(t, ast.Integer) and id(t) in wanted and abs(t.value) < 2**1000:
                    return ast.Float(float(t.value), span=t.span)
                return t

            def deep(t: ast.Term) -> ast.Term:
                if joined:
                    t = _joins_as_cat(t, joined)
                return ast.map_deep(t, as_float)

            def matched(t: ast.Term) -> ast.Term:
                # a constant matched or compared as it is (`a(42)`, `x > 3`) compares equal
                # either way: only a value that is stored or computed with changes
                return t if isinstance(t, ast.Integer) else deep(t)

            def literal(lit: ast.Literal) -> ast.Literal:
                if isinstance(lit, ast.Comparison) and lit.op == "=":
                    return ast.map_literal(lit, deep)
                return ast.map_literal(lit, matched)

            head = ast.map_literal(rule.head, deep)
            assert isinstance(head, ast.Atom)
            return ast.map_rule_literals(
                replace(rule, head=head), lambda lit: lit if lit is head else literal(lit)
            )

        numbers = count()
        modules = []
        for module in self.program.modules:
            statements = tuple(
                rewrite(next(numbers), s) if isinstance(s, ast.Rule) else s for s in module.statements
            )
            modules.append(replace(module, statements=statements))
        return replace(self.program, modules=tuple(modules))

    def pick(self, allowed: frozenset[str]) -> str | None:
        if allowed == self.ANY:
            return None
        kinds = {self.table.representation(t) for t in allowed}
        if len(kinds) == 1:
            return kinds.pop()
        if allowed == self.NUMERIC or "number" in kinds:
            return "number"
        return None


def _joins_as_cat(term: ast.Term, joins: set[int]) -> ast.Term:
    """The term with each `+` whose id is in ``joins`` (found before the term is rebuilt)
    written as ``cat``."""
    if isinstance(term, ast.BinOp) and id(term) in joins:
        left, right = _joins_as_cat(term.left, joins), _joins_as_cat(term.right, joins)
        return ast.Call("cat", (left, right), span=term.span)
    if isinstance(term, ast.Aggregate):
        target = None if term.target is None else _joins_as_cat(term.target, joins)
        body = tuple(ast.map_literal(lit, lambda t: _joins_as_cat(t, joins)) for lit in term.body)
        return replace(term, target=target, body=body)
    return ast.map_children(term, lambda t: _joins_as_cat(t, joins))


# the operators Python also applies to texts (joining, repeating): an operand of type `any`
# is refused
TEXT_OPERATORS = ("+", "*")


def is_any(
    term: ast.Term,
    variables: Mapping[str, Span],
    symbols: Symbols,
    declared: Callable[[ast.Call], bool] = lambda call: False,
) -> bool:
    """Whether a term is of type ``any``: a call of a functor declared to return ``any``
    (``tool_arg``, unless it reads an argument the policy ``declared``), one of ``variables``,
    or the ``max`` or ``min`` of two such terms."""
    if isinstance(term, ast.Var):
        return term.name in variables
    if isinstance(term, ast.Call):
        sig = symbols.functors.get(term.name)
        return sig is not None and not sig.is_predicate and sig.returns == "any" and not declared(term)
    if isinstance(term, ast.BinOp) and term.op in ast.EXTREMA:
        return is_any(term.left, variables, symbols, declared) and is_any(
            term.right, variables, symbols, declared
        )
    return False


def any_variables(
    rule: ast.Rule, symbols: Symbols, declared: Callable[[ast.Call], bool] = lambda call: False
) -> dict[str, Span]:
    """The variables of a rule of type ``any``, each with the comparison that makes it so:
    those equal (``=``) to a term of type ``any`` (:func:`is_any`), but for those
    an atom binds through an attribute of a declared type (a value of a relation of that
    type). Aggregates' bodies are read too (their variables are the rule's after
    :func:`~..scopes.localized`)."""
    literals = list(_deep_literals(rule.body))
    typed: set[str] = set()  # the variables an atom binds through a typed attribute
    for lit in literals:
        relation = symbols.relations.get(lit.name) if isinstance(lit, ast.Atom) else None
        if isinstance(lit, ast.Atom) and relation is not None and relation.declared:
            typed.update(
                arg.name
                for arg, declared in zip(lit.args, relation.types, strict=False)
                if isinstance(arg, ast.Var) and declared is not None
            )
    found: dict[str, Span] = {}
    equalities = [lit for lit in literals if isinstance(lit, ast.Comparison) and lit.op == "="]
    changed = True
    while changed:
        changed = False
        for lit in equalities:
            for var, value in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(var, ast.Var) and var.name not in found and var.name not in typed:
                    if is_any(value, found, symbols, declared):
                        found[var.name] = lit.span
                        changed = True
    return found


def _deep_literals(literals: tuple[ast.Literal, ...]) -> Iterator[ast.Literal]:
    """The literals and those of the aggregates inside them, at any depth."""
    for literal in literals:
        yield literal
        for term in ast.literal_terms(literal):
            for inner in ast.walk_term(term, into_aggregates=False):
                if isinstance(inner, ast.Aggregate):
                    yield from _deep_literals(inner.body)
