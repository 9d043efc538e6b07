"""What the rules deciding a call read of its arguments, and how they test what they read.

A verdict rule (`Deny`, `Escalate`) is read with the relations it reads positively unfolded
into it (:func:`unfolded`): ``Deny(a) :- Mail(a), Outside(a)`` with ``Outside(a) :- to =
tool_arg(a, "to"), !contains("@corp.example", to)`` is read as one body, each literal with the
rule it was written in, so that an argument read in a helper relation is seen where it decides.
In such a body, for the rule's action ``a`` and each argument key ``k`` it reads
(:func:`reads`): the literals that read it (``ToolArg(a, "k", v)``, anything calling
``tool_arg(a, "k")``), the variables holding its value or what is computed from it (``v``,
``n = to_number(v)``), and each other literal about them, as a :class:`Test`:

* ``exclusive`` — holds for all but some values: a negation (``!R(v)``, ``!contains(c, v)``,
  ``!match(p, v)``), ``!=``;
* ``bound`` — an upper or lower bound: ``<``, ``<=``, ``>``, ``>=``;
* ``inclusive`` — holds for some values only: ``=`` (``tool_arg(a, "force") = "true"``), a
  positive atom (``Blocked(v)``, ``contains(c, v)``), a value given as a constant
  (``ToolArg(a, "k", "yes")``) or only read (``ToolArg(a, "k", _)``);
* ``other`` — inside an aggregate.

>>> from policyc.compiler.pipeline import compile_source
>>> compilation = compile_source('''.import events
... Outside(a) :- to = tool_arg(a, "to"), !contains("@corp.example", to).
... Deny(a) :- ToolCall(a, "send_email"), Outside(a).''')
>>> [(r.key, sorted(b.tools), [t.kind for t in r.tests]) for b in verdict_bodies(compilation) for r in reads(b)]
[('to', ['send_email'], ['exclusive'])]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import count

from policyc.compiler import ast
from policyc.compiler.arguments import TOOL_ARG, fixed_tools
from policyc.compiler.checks.rule_annotations import rule_mode
from policyc.compiler.stages import Stratified
from policyc.compiler.symbols import ESCALATE, is_verdict

from .bounded import PlacedRule

TOOL_ARG_RELATION = "ToolArg"
DEPTH = 3  # helper relations unfolded into a verdict rule, nested
BODIES = 32  # unfolded bodies of one verdict rule at most
DENYING = ("Deny", ESCALATE)


@dataclass(frozen=True)
class Lit:
    """A literal of an unfolded body and the rule it is written in."""

    literal: ast.Literal
    origin: PlacedRule


@dataclass(frozen=True)
class Body:
    """A verdict rule with the relations it reads positively unfolded into it; ``action`` is
    the variable of its head."""

    verdict: PlacedRule
    action: str
    literals: tuple[Lit, ...]

    @property
    def tools(self) -> frozenset[str]:
        """The tools the body says its action calls (none: any tool)."""
        return fixed_tools(lit.literal for lit in self.literals).get(self.action, frozenset())


@dataclass(frozen=True)
class Test:
    """A literal about an argument's value, and its kind (see the module)."""

    lit: Lit
    kind: str


@dataclass(frozen=True)
class Read:
    """An argument ``key`` of the body's action: the literals reading it, the variables
    holding its value (or values computed from it), and the tests of them."""

    body: Body
    key: str
    readers: tuple[Lit, ...]
    values: frozenset[str]
    tests: tuple[Test, ...]

    @property
    def escapes_by_absence(self) -> bool:
        """Whether the tests hold for all but some values (exclusive tests and bounds, and
        nothing else): a call without the argument fails what it should have passed."""
        return bool(self.tests) and all(t.kind in ("exclusive", "bound") for t in self.tests)

    def origin(self, compilation: Stratified) -> PlacedRule:
        """The rule a finding about it belongs at: the user's rule that reads the argument
        (the verdict rule, when that is a library rule)."""
        for lit in (*self.readers, *(t.lit for t in self.tests)):
            if not compilation.program.is_library(lit.origin.module.path):
                return lit.origin
        return self.body.verdict


def denying_rules(compilation: Stratified, heads: tuple[str, ...] = DENYING) -> list[PlacedRule]:
    """The user's `Deny` and `Escalate` rules (or those of the verdicts ``heads``), not in
    shadow mode."""
    program = compilation.program
    relations = compilation.symbols.relations
    found = []
    for module, rule in program.rules():
        name = rule.head.name
        if name not in heads or program.is_library(module.path) or rule_mode(rule) == "shadow":
            continue
        relation = relations.get(name)
        if relation is not None and is_verdict(name, relation.arity) and not rule.is_fact:
            found.append(PlacedRule(rule, module))
    return found


def verdict_bodies(compilation: Stratified, heads: tuple[str, ...] = DENYING) -> list[Body]:
    """Every unfolded body of every `Deny` and `Escalate` rule (or rule of the verdicts
    ``heads``) of the user's files."""
    places = rule_places(compilation)
    return [
        body for rule in denying_rules(compilation, heads) for body in unfolded(compilation, rule, places)
    ]


def rule_places(compilation: Stratified) -> dict[int, PlacedRule]:
    """Every rule of the program with its module, by the rule's ``id``."""
    return {id(rule): PlacedRule(rule, module) for module, rule in compilation.program.rules()}


def unfolded(
    compilation: Stratified, verdict: PlacedRule, places: dict[int, PlacedRule] | None = None
) -> list[Body]:
    """The bodies ``verdict`` unfolds into: each positive atom of a relation with rules (not
    an input, not holding facts of its own) replaced by the body of each of its rules, renamed
    apart, :data:`DEPTH` levels deep, at most :data:`BODIES` bodies (``places``: the rules'
    modules, :func:`rule_places`, when the caller has them)."""
    head = verdict.rule.head
    if not head.args or not isinstance(head.args[0], ast.Var):
        return []
    if places is None:
        places = rule_places(compilation)
    fresh = count(1)
    start = tuple(Lit(lit, verdict) for lit in verdict.rule.body)
    done: list[tuple[Lit, ...]] = []
    todo: list[tuple[tuple[Lit, ...], dict[str, int]]] = [(start, {})]
    while todo and len(done) + len(todo) <= BODIES:
        body, depth = todo.pop(0)
        at = _unfoldable(compilation, body, depth)
        if at is None:
            done.append(body)
            continue
        lit = body[at]
        assert isinstance(lit.literal, ast.Atom)
        name = lit.literal.name
        for rule in compilation.program.rules_of(name):
            replaced = _replace(rule, lit.literal, next(fresh))
            if replaced is None:
                continue
            inner = tuple(Lit(x, places[id(rule)]) for x in replaced)
            todo.append((body[:at] + inner + body[at + 1 :], {**depth, name: depth.get(name, 0) + 1}))
    done.extend(body for body, _ in todo)
    return [Body(verdict, head.args[0].name, body) for body in done[:BODIES]]


def _unfoldable(compilation: Stratified, body: tuple[Lit, ...], depth: dict[str, int]) -> int | None:
    symbols = compilation.symbols
    for i, lit in enumerate(body):
        literal = lit.literal
        if not isinstance(literal, ast.Atom) or literal.name in symbols.functors:
            continue
        name = literal.name
        rules = compilation.program.rules_of(name)
        if (
            rules
            and name not in symbols.inputs
            and not is_verdict(name, len(literal.args))
            and not any(rule.is_fact or rule.is_subsumption for rule in rules)
            and depth.get(name, 0) < 1
            and sum(depth.values()) < DEPTH
        ):
            return i
    return None


def _replace(rule: ast.Rule, use: ast.Atom, tag: int) -> list[ast.Literal] | None:
    """``rule``'s body with its head matched to ``use`` (its other variables renamed apart)."""
    mapping: dict[str, ast.Term] = {}
    extra: list[ast.Literal] = []
    for head_arg, given in zip(rule.head.args, use.args, strict=True):
        if isinstance(head_arg, ast.Var) and head_arg.name not in mapping:
            mapping[head_arg.name] = given
        elif isinstance(head_arg, ast.Wildcard):
            continue
        else:
            extra.append(ast.Comparison("=", given, head_arg, span=use.span))

    def rename(term: ast.Term) -> ast.Term:
        if isinstance(term, ast.Var):
            if term.name in mapping:
                return mapping[term.name]
            return replace(term, name=f"{term.name}__{tag}")
        return term

    body = [ast.map_literal(lit, lambda t: ast.map_deep(t, rename)) for lit in rule.body]
    extra = [ast.map_literal(lit, lambda t: ast.map_deep(t, rename)) for lit in extra]
    return extra + body


# --------------------------------------------------------------------------- reads


def argument_calls(term: ast.Term, action: str) -> Iterator[tuple[ast.Call, str]]:
    """The ``tool_arg(action, "key")`` calls in ``term`` (outside aggregates), with their keys."""
    for t in ast.walk_term(term, into_aggregates=False):
        if isinstance(t, ast.Call) and t.name == TOOL_ARG and len(t.args) == 2:
            call, key = t.args
            if isinstance(call, ast.Var) and call.name == action and isinstance(key, ast.String):
                yield t, key.value


def reads(body: Body) -> list[Read]:
    """The arguments of the body's action that it reads, each with its tests."""
    keys: dict[str, list[Lit]] = {}
    atoms: dict[str, list[Lit]] = {}
    for lit in body.literals:
        literal = lit.literal
        if isinstance(literal, ast.Atom) and literal.name == TOOL_ARG_RELATION and len(literal.args) == 3:
            call, key, _ = literal.args
            if isinstance(call, ast.Var) and call.name == body.action and isinstance(key, ast.String):
                keys.setdefault(key.value, []).append(lit)
                atoms.setdefault(key.value, []).append(lit)
            continue
        for term in ast.literal_terms(literal):
            for _, name in argument_calls(term, body.action):
                if lit not in keys.setdefault(name, []):
                    keys[name].append(lit)
    return [_read(body, key, readers, atoms.get(key, [])) for key, readers in keys.items()]


def _read(body: Body, key: str, readers: list[Lit], atoms: list[Lit]) -> Read:
    held: set[str] = set()
    tests: list[Test] = []
    for lit in atoms:
        value = lit.literal.args[2]  # type: ignore[union-attr]
        if isinstance(value, ast.Var):
            held.add(value.name)
        else:  # a value given (`"yes"`), or only read (`_`)
            tests.append(Test(lit, "inclusive"))
    bound_by_atoms = {
        v.name
        for lit in body.literals
        if isinstance(lit.literal, ast.Atom) and lit not in atoms
        for term in lit.literal.args
        for v in ast.term_vars(term)
    }

    def involves(term: ast.Term, deep: bool = False) -> bool:
        for t in ast.walk_term(term, into_aggregates=deep):
            if isinstance(t, ast.Var) and t.name in held:
                return True
            if isinstance(t, ast.Call) and any(k == key for _, k in argument_calls(t, body.action)):
                return True
        return False

    assignments: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i, lit in enumerate(body.literals):
            literal = lit.literal
            if i in assignments or not isinstance(literal, ast.Comparison) or literal.op != "=":
                continue
            for target, source in ((literal.left, literal.right), (literal.right, literal.left)):
                if (
                    isinstance(target, ast.Var)
                    and target.name not in held
                    and target.name not in bound_by_atoms
                    and involves(source)
                    and not _assigned_elsewhere(body, i, target.name)
                ):
                    held.add(target.name)
                    assignments.add(i)
                    changed = True
                    break
    for i, lit in enumerate(body.literals):
        if i in assignments or lit in atoms:
            continue
        terms = ast.literal_terms(lit.literal)
        if any(involves(term) for term in terms):
            tests.append(Test(lit, _kind(lit.literal)))
        elif any(involves(term, deep=True) for term in terms):
            tests.append(Test(lit, "other"))  # inside an aggregate
    return Read(body, key, tuple(readers), frozenset(held), tuple(tests))


def _assigned_elsewhere(body: Body, index: int, name: str) -> bool:
    for i, lit in enumerate(body.literals):
        literal = lit.literal
        if i != index and isinstance(literal, ast.Comparison) and literal.op == "=":
            for side in (literal.left, literal.right):
                if isinstance(side, ast.Var) and side.name == name:
                    return True
    return False


def _kind(literal: ast.Literal) -> str:
    if isinstance(literal, ast.Negation):
        return "exclusive"
    if isinstance(literal, ast.Atom):
        return "inclusive"
    if literal.op == "=":
        return "inclusive"
    if literal.op == "!=":
        return "exclusive"
    return "bound"
