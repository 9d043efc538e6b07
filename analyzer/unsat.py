"""Rule bodies that can never hold, on any database: syntactic contradictions, then z3.

* **Syntactic**: ``P(t), not P(t)`` with the same arguments; a variable equal to two different
  constants (``x = "a", x = "b"``).
* **z3**: the body's comparisons and arithmetic, with every variable typed by what the rule
  says of it (an integer, a string, a number), functors as uninterpreted functions with their
  declared types (so a contradiction proved this way holds whatever the functors compute), a
  ``count`` at least 0. Integer division and remainder, string ordering, floats mixed with
  integers and aggregates other than ``count`` are left unconstrained, so z3 never reports a
  contradiction that is not one.
* **Keys** (``.key``): two atoms of a relation whose facts keep a key agree on the rest of
  their arguments when they agree on the key's (``ToolCall(a, "send_email"), ToolCall(a,
  "upload")``: a call has one tool). Each such pair adds that implication to z3's formulas; a
  body that holds only without one can never hold on a database that keeps the keys, which
  the runtime sees to (docs/runtime.md, "Keys"). The reason names the key.

``contradiction(rule)`` returns ``None`` when the body may hold, or a :class:`Contradiction`:
strength ``"syntactic"`` or ``"proved"``, the reason, and the key it needed (or ``""``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from policyc.compiler import ast
from policyc.compiler.stages import Stratified

from .deadline import Deadline

SOLVER_TIMEOUT = 2.0  # seconds z3 may take over one body (or one implication)
SHARED_TIMEOUT = 0.5  # of them, for the shared solver's first try


def shape(term: ast.Term) -> Any:
    """A term without its source positions, for comparing terms."""
    if isinstance(term, ast.Var):
        return ("var", term.name)
    if isinstance(term, ast.Wildcard):
        return ("_", id(term))  # every `_` is its own variable
    if isinstance(term, ast.String | ast.Integer | ast.Float):
        return ("const", type(term).__name__, term.value)
    if isinstance(term, ast.Call):
        return ("call", term.name, tuple(shape(a) for a in term.args))
    if isinstance(term, ast.BinOp):
        return ("op", term.op, shape(term.left), shape(term.right))
    if isinstance(term, ast.Negate):
        return ("neg", shape(term.operand))
    if isinstance(term, ast.UnaryOp):
        return ("unary", term.op, shape(term.operand))
    if isinstance(term, ast.Aggregate):
        return ("agg", id(term))
    return ("?", id(term))


def atom_shape(atom: ast.Atom) -> Any:
    return (atom.name, tuple(shape(a) for a in atom.args))


def render_atom(atom: ast.Atom) -> str:
    return f"{atom.name}({', '.join(render_term(a) for a in atom.args)})"


def render_term(term: ast.Term) -> str:
    if isinstance(term, ast.Var):
        return term.name
    if isinstance(term, ast.Wildcard):
        return "_"
    if isinstance(term, ast.String):
        return '"' + term.value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(term, ast.Integer | ast.Float):
        return repr(term.value)
    if isinstance(term, ast.Call):
        return f"{term.name}({', '.join(render_term(a) for a in term.args)})"
    if isinstance(term, ast.BinOp) and term.op in ast.EXTREMA:
        return f"{term.op}({render_term(term.left)}, {render_term(term.right)})"
    if isinstance(term, ast.BinOp):
        return f"{render_term(term.left)} {term.op} {render_term(term.right)}"
    if isinstance(term, ast.Negate):
        return f"-{render_term(term.operand)}"
    if isinstance(term, ast.UnaryOp):
        return f"{term.op} {render_term(term.operand)}"
    if isinstance(term, ast.Aggregate):
        return f"{term.op} : {{ ... }}"
    return "?"


def syntactic(rule: ast.Rule) -> str | None:
    positive = {atom_shape(lit): lit for lit in rule.body if isinstance(lit, ast.Atom)}
    for lit in rule.body:
        if isinstance(lit, ast.Negation) and atom_shape(lit.atom) in positive:
            return f"it requires both `{render_atom(lit.atom)}` and `not {render_atom(lit.atom)}`"
    constants: dict[str, Any] = {}
    for lit in rule.body:
        if isinstance(lit, ast.Comparison) and lit.op == "=":
            for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(a, ast.Var) and isinstance(b, ast.String | ast.Integer):
                    if a.name in constants and constants[a.name] != b.value:
                        first = render_term(
                            ast.String(constants[a.name])
                            if isinstance(constants[a.name], str)
                            else ast.Integer(constants[a.name])
                        )
                        return f"it requires `{a.name}` to be both {first} and {render_term(b)}"
                    constants[a.name] = b.value
    return None


class Encoder:
    """The body's constraints as z3 formulas."""

    def __init__(self, compilation: Stratified, rule: ast.Rule) -> None:
        import z3

        self.z3 = z3
        self.compilation = compilation
        self.symbols = compilation.symbols
        self.types = var_types(compilation, rule)
        self.vars: dict[str, Any] = {}
        self.functions: dict[tuple[str, str], Any] = {}
        self.fresh = 0
        self.formulas: list[Any] = []

    def sort(self, kind: str | None) -> Any:
        z3 = self.z3
        return {"number": z3.IntSort(), "symbol": z3.StringSort(), "float": z3.RealSort()}.get(
            kind or "", None
        )

    def variable(self, name: str) -> Any:
        if name not in self.vars:
            sort = self.sort(self.types.get(name))
            self.vars[name] = None if sort is None else self.z3.Const(f"v_{name}", sort)
        return self.vars[name]

    def unknown(self, sort: Any) -> Any:
        self.fresh += 1
        return self.z3.Const(f"u{self.fresh}", sort) if sort is not None else None

    def term(self, t: ast.Term) -> Any:
        z3 = self.z3
        if isinstance(t, ast.Var):
            return self.variable(t.name)
        if isinstance(t, ast.Integer):
            return z3.IntVal(t.value)
        if isinstance(t, ast.String):
            return z3.StringVal(t.value)
        if isinstance(t, ast.Float):
            return z3.RealVal(t.value)
        if isinstance(t, ast.Negate):
            inner = self.term(t.operand)
            return -inner if inner is not None and not z3.is_string(inner) else None
        if isinstance(t, ast.BinOp):
            left, right = self.term(t.left), self.term(t.right)
            if left is None or right is None or z3.is_string(left) or z3.is_string(right):
                return None
            if left.sort() != right.sort():
                return None
            if t.op == "+":
                return left + right
            if t.op == "-":
                return left - right
            if t.op == "*":
                return left * right
            if t.op == "max":
                return z3.If(left >= right, left, right)
            if t.op == "min":
                return z3.If(left <= right, left, right)
            return self.unknown(left.sort())  # division, remainder, bitwise, power: unconstrained
        if isinstance(t, ast.UnaryOp):
            inner = self.term(t.operand)
            if inner is None or z3.is_string(inner):
                return None
            return -inner - 1 if t.op == "bnot" else z3.If(inner == 0, z3.IntVal(1), z3.IntVal(0))
        if isinstance(t, ast.Call):
            sig = self.symbols.functors.get(t.name)
            if sig is None:
                return None
            args = [self.term(a) for a in t.args]
            result = self.sort(sig.returns if sig.returns != "any" else None)
            if result is None or any(a is None for a in args):
                return None
            key = (t.name, ",".join(str(a.sort()) for a in args))
            if key not in self.functions:
                self.functions[key] = z3.Function(
                    f"f_{t.name}_{len(self.functions)}", *[a.sort() for a in args], result
                )
            return self.functions[key](*args)
        return None

    def same(self, pair: tuple[ast.Atom, ast.Atom, tuple[int, ...]]) -> Any:
        """That two atoms of a relation with a key agree on the rest when they agree on the key
        (a z3 formula), or None when an argument cannot be expressed."""
        first, second, key = pair
        z3 = self.z3
        types = (self.compilation.types or {}).get(first.name) or ()
        equal = []
        for a, b, kind in zip(first.args, second.args, types, strict=False):
            left, right = self.argument(a, kind), self.argument(b, kind)
            if left is None or right is None or left.sort() != right.sort():
                return None
            equal.append(left == right)
        if len(equal) != len(first.args):
            return None
        rest = [e for j, e in enumerate(equal) if j not in key]
        return z3.Implies(z3.And(*(equal[k] for k in key)), z3.And(*rest))

    def argument(self, term: ast.Term, kind: str | None) -> Any:
        """An atom's argument: a term, or for `_` a value of its own."""
        if isinstance(term, ast.Wildcard):
            return self.unknown(self.sort(kind))
        return self.term(term)

    def literal(self, lit: ast.Literal) -> None:
        z3 = self.z3
        if isinstance(lit, ast.Comparison):
            agg = next((t for t in (lit.right, lit.left) if isinstance(t, ast.Aggregate)), None)
            if agg is not None:
                other = lit.left if agg is lit.right else lit.right
                if agg.op == "count" and lit.op == "=" and isinstance(other, ast.Var):
                    v = self.variable(other.name)
                    if v is not None and v.sort() == z3.IntSort():
                        self.formulas.append(v >= 0)
                return
            left, right = self.term(lit.left), self.term(lit.right)
            if left is None or right is None or left.sort() != right.sort():
                return
            if lit.op == "=":
                self.formulas.append(left == right)
            elif lit.op == "!=":
                self.formulas.append(left != right)
            elif z3.is_string(left):
                return  # string order: not modelled
            else:
                ops = {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}
                self.formulas.append(ops[lit.op])
        elif isinstance(lit, ast.Atom | ast.Negation):
            atom = lit.atom if isinstance(lit, ast.Negation) else lit
            sig = self.symbols.functors.get(atom.name)
            if sig is None or not sig.is_predicate:
                return
            args = [self.term(a) for a in atom.args]
            if any(a is None for a in args):
                return
            key = (atom.name, ",".join(str(a.sort()) for a in args))
            if key not in self.functions:
                self.functions[key] = z3.Function(
                    f"p_{atom.name}_{len(self.functions)}", *[a.sort() for a in args], z3.BoolSort()
                )
            holds = self.functions[key](*args) if args else self.functions[key]()
            self.formulas.append(z3.Not(holds) if isinstance(lit, ast.Negation) else holds)


def var_types(compilation: Stratified, rule: ast.Rule) -> dict[str, str]:
    """The type of each variable of a rule, where its uses agree on one."""
    found: dict[str, set[str]] = {}
    types = compilation.types or {}
    functors = compilation.symbols.functors

    def note(term: ast.Term, kind: str | None) -> None:
        if isinstance(term, ast.Var) and kind in ("number", "symbol", "float"):
            found.setdefault(term.name, set()).add(kind)

    def visit(lit: ast.Literal) -> None:
        atom = lit.atom if isinstance(lit, ast.Negation) else lit
        if isinstance(atom, ast.Atom):
            sig = functors.get(atom.name)
            declared = sig.params if sig is not None else (types.get(atom.name) or ())
            for i, arg in enumerate(atom.args):
                note(arg, declared[i] if i < len(declared) else None)
                calls(arg)
        elif isinstance(lit, ast.Comparison):
            for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                if isinstance(b, ast.String):
                    note(a, "symbol")
                elif isinstance(b, ast.Integer):
                    note(a, "number")
                elif isinstance(b, ast.Call) and b.name in functors:
                    note(a, functors[b.name].returns)
                elif isinstance(b, ast.Aggregate) and b.op == "count":
                    note(a, "number")
                elif isinstance(b, ast.BinOp | ast.Negate | ast.UnaryOp) and not (
                    isinstance(b, ast.BinOp) and b.op in ast.EXTREMA
                ):
                    note(a, "number")  # arithmetic is on numbers
                calls(a)

    def calls(term: ast.Term) -> None:
        for inner in ast.walk_term(term, into_aggregates=False):
            if isinstance(inner, ast.Call) and inner.name in functors:
                sig = functors[inner.name]
                for i, arg in enumerate(inner.args):
                    if i < len(sig.params):
                        note(arg, sig.params[i])

    visit(rule.head)
    for lit in rule.body:
        visit(lit)
    # a variable compared with a typed one has its type
    for _ in range(2):
        for lit in rule.body:
            if (
                isinstance(lit, ast.Comparison)
                and isinstance(lit.left, ast.Var)
                and isinstance(lit.right, ast.Var)
            ):
                for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                    if len(found.get(b.name, ())) == 1 and a.name not in found:
                        found[a.name] = set(found[b.name])
    return {name: next(iter(kinds)) for name, kinds in found.items() if len(kinds) == 1}


class Contradiction(NamedTuple):
    """Why a rule's body can never hold: how sure (``"syntactic"``, ``"proved"``), the reason,
    and the key it needed (``.key ToolCall(a)``; ``""`` for none) with what to do then."""

    strength: str
    reason: str
    key: str = ""
    help: str = ""


def contradiction(
    compilation: Stratified, rule: ast.Rule, deadline: Deadline | None = None
) -> Contradiction | None:
    """Why the rule's body can never hold, or ``None`` (also when z3 has not decided it within
    :data:`SOLVER_TIMEOUT`, or the time left before ``deadline``)."""
    reason = syntactic(rule)
    if reason is not None:
        return Contradiction("syntactic", reason)

    encoder = Encoder(compilation, rule)
    for lit in rule.body:
        encoder.literal(lit)
    if encoder.formulas and unsatisfiable(encoder.formulas, deadline):
        return Contradiction("proved", "its comparisons contradict each other")
    pairs = [
        (pair, found) for pair in key_pairs(compilation, rule) if (found := encoder.same(pair)) is not None
    ]
    if not pairs or not unsatisfiable([*encoder.formulas, *(f for _, f in pairs)], deadline):
        return None
    # the pair that alone makes it so, when one does (else the first of them)
    alone = next(
        (
            pair
            for pair, found in pairs
            if len(pairs) == 1 or unsatisfiable([*encoder.formulas, found], deadline)
        ),
        pairs[0][0],
    )
    return _through_key(compilation, alone)


KeyPair = tuple[ast.Atom, ast.Atom, tuple[int, ...]]


def key_pairs(compilation: Stratified, rule: ast.Rule) -> list[KeyPair]:
    """The pairs of positive atoms of a relation with a key, with the key, that may agree on it
    and differ elsewhere (not when a position of the key holds two different constants, nor
    when the other positions are written alike)."""
    symbols = compilation.symbols
    atoms = [lit for lit in rule.body if isinstance(lit, ast.Atom) and lit.name not in symbols.functors]
    found = []
    for i, first in enumerate(atoms):
        for key in symbols.keys_of(first.name):
            for second in atoms[i + 1 :]:
                if second.name != first.name or len(second.args) != len(first.args):
                    continue
                if any(_constants_differ(first.args[k], second.args[k]) for k in key):
                    continue
                rest = [j for j in range(len(first.args)) if j not in key]
                if all(_alike(first.args[j], second.args[j]) for j in rest):
                    continue
                found.append((first, second, key))
    return found


def _constants_differ(a: ast.Term, b: ast.Term) -> bool:
    constants = ast.String | ast.Integer | ast.Float
    return isinstance(a, constants) and isinstance(b, constants) and shape(a) != shape(b)


def _alike(a: ast.Term, b: ast.Term) -> bool:
    return not isinstance(a, ast.Wildcard) and shape(a) == shape(b)


def _through_key(compilation: Stratified, pair: KeyPair) -> Contradiction:
    first, second, key = pair
    relation = compilation.symbols.relations[first.name]
    names = relation.attributes
    declared = f"`{relation.key_text(key)}` ({Path(relation.home).name})"
    atoms = f"`{render_atom(first)}` and `{render_atom(second)}`"
    if not key:
        reason = f"{atoms} are two facts of `{relation.name}`, and {declared} allows one"
    else:
        rest = [f"`{names[j]}`" for j in range(len(names)) if j not in key]
        per = [f"`{names[k]}`" for k in key]
        values = rest[0] if len(rest) == 1 else f"({', '.join(rest)})"
        one = per[0] if len(per) == 1 else f"({', '.join(per)})"
        reason = f"{atoms} need two values of {values} for one {one}, and {declared} allows one"
    help = (
        f"`{relation.name}` has {relation.key_meaning(key)}: to mean any of several, write a rule for "
        "each; else fix the conditions"
    )
    return Contradiction("proved", reason, relation.key_text(key), help)


def implies(
    compilation: Stratified,
    rule: ast.Rule,
    premises: Sequence[ast.Literal],
    conclusions: Sequence[ast.Literal],
    deadline: Deadline | None = None,
) -> bool:
    """Whether the comparisons ``premises`` (in ``rule``'s variables) imply ``conclusions``
    (not shown when z3 has not decided it in time, as for :func:`contradiction`)."""
    import z3

    given = {comparison_shape(p) for p in premises if isinstance(p, ast.Comparison)}
    conclusions = [
        c for c in conclusions if not (isinstance(c, ast.Comparison) and comparison_shape(c) in given)
    ]
    if not conclusions:
        return True
    encoder = Encoder(compilation, rule)
    for lit in premises:
        encoder.literal(lit)
    base = list(encoder.formulas)
    encoder.formulas = []
    for lit in conclusions:
        before = len(encoder.formulas)
        encoder.literal(lit)
        if len(encoder.formulas) == before:
            return False  # a conclusion z3 cannot express: not shown
    return unsatisfiable([*base, z3.Not(z3.And(*encoder.formulas))], deadline)


def unsatisfiable(formulas: list[Any], deadline: Deadline | None = None) -> bool:
    """Whether z3 shows that ``formulas`` cannot hold together: first with the incremental
    solver this process shares for such questions (asking it costs a fraction of making a new
    solver), then, when it does not decide, with a new solver and z3's choice of tactics, which
    decides some that it does not. Each within :data:`SOLVER_TIMEOUT` and the time left."""
    import z3

    solver = _shared_solver()
    solver.set("timeout", _timeout(deadline, SHARED_TIMEOUT))
    solver.push()
    try:
        solver.add(*formulas)
        answer = solver.check()
    finally:
        solver.pop()
    if answer != z3.unknown:
        return bool(answer == z3.unsat)
    if deadline is not None and deadline.passed():
        return False
    fresh = z3.Solver()
    fresh.set("timeout", _timeout(deadline))
    fresh.add(*formulas)
    return bool(fresh.check() == z3.unsat)


@functools.cache
def _shared_solver() -> Any:
    import z3

    return z3.Solver()


def _timeout(deadline: Deadline | None, most: float = 0.0) -> int:
    most = most or SOLVER_TIMEOUT
    return deadline.solver_timeout(most) if deadline is not None else int(most * 1000)


def comparison_shape(c: ast.Comparison) -> Any:
    """A comparison without positions; ``a = b`` and ``b = a`` alike."""
    left, right = shape(c.left), shape(c.right)
    if c.op in ("=", "!=") and repr(right) < repr(left):
        left, right = right, left
    flipped = {">": "<", ">=": "<="}
    if c.op in flipped:
        return (flipped[c.op], right, left)
    return (c.op, left, right)
