"""``verdict-not-action``: a verdict rule whose argument is never an action.

A `Deny`, `Allow` or `Escalate` rule decides the action its head names: ``Deny(a)`` denies the
call ``a``. ``Deny(to) :- ToolCall(a, "send_email"), to = tool_arg(a, "to"), Blocked(to).``
denies an address: no call is ever the address, so the rule denies nothing and every mail to a
blocked address is allowed. This module finds such rules.

**What can be an event id.** The event vocabulary declares the attributes that hold event ids
with the type ``EventId`` (``ToolCall(a: EventId, tool: symbol)``): a relation that types some
of its attributes so says which hold ids, and its others never do (a tool's name, an argument's
value, a text, a label, a role, a kind). Attributes of a numeric type never do either. The
functors of the event vocabulary (``tool_arg``, ``text_of``, ``tool_name``) give values of an
event's payload, never ids; constants, arithmetic, aggregates, records and numbers are never
ids. Anything else (a relation of the policy's own without ``EventId`` attributes, a functor of
its own returning a symbol) may hold an id. A relation with rules holds an id at a position when
one of its rules puts one there, never when none of them can (a least fixpoint over the rules).

A variable of a rule can be an event id when it occurs at a position that holds ids; it is never
one when it does not and some occurrence or equality binds it to what never is one. A verdict
rule whose head argument is never an id gets the finding; one whose argument can be an id (or
may be, as far as the declarations say) gets none.

**The witness.** The rule's body, with the call it was meant to decide allowed (for an
`Allow` rule under ``.default deny``: denied), is asked of the bounded search
(:func:`~policyc.analyzer.witness.find_witness`); the session it finds is replayed through a
monitor (:func:`~policyc.analyzer.sessions.replayed`) and shown only when the monitor decides
the call so while the rule fires.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from policyc.compiler import ast, codes
from policyc.compiler.diagnostics import Diagnostic, Edit, Fix, Scenario
from policyc.compiler.stages import Stratified
from policyc.compiler.symbols import ESCALATE, is_verdict
from policyc.stdlib.events import EVENT_ID

from .deadline import Deadline

if TYPE_CHECKING:
    from policyc.runtime.evaluator import Evaluation
from .search import from_events
from .unsat import render_term

NEVER, MAYBE, ID = 0, 1, 2  # whether a value is an event id: never, maybe, or declared to be one
NUMERIC = ("number", "unsigned", "float")
# the relations whose first attribute is the call itself: the call a rule is about, first
CALLS = ("ToolCall", "Action", "Candidate", "ToolArg")
VERBS = {"Deny": ("denies", "no call is ever denied by it"), "Allow": ("allows", "it allows no call")}
VERBS[ESCALATE] = ("escalates", "no call is ever escalated by it")
WITNESS_SHARE = 0.25  # of the time left, what one witness may take


@dataclass(frozen=True)
class NotAction:
    """A verdict rule whose argument is never an action: the rule, the literal that makes its
    argument a value (None: the head's own term), and the variable of the call it was meant to
    decide (None when the body names none)."""

    rule: ast.Rule
    binding: ast.Literal | None
    call: str | None


class Kinds:
    """Whether each position of each relation holds event ids (:data:`ID`), never does
    (:data:`NEVER`) or may (:data:`MAYBE`); see the module's doc."""

    def __init__(self, compilation: Stratified) -> None:
        self.compilation = compilation
        self.symbols = compilation.symbols
        self.positions: dict[tuple[str, int], int] = {}
        defined = self.symbols.defined
        for name, relation in self.symbols.relations.items():
            typed = EVENT_ID in relation.types
            for i, declared in enumerate(relation.types):
                if declared == EVENT_ID:
                    kind = ID
                elif declared in NUMERIC or (typed and relation.is_input):
                    kind = NEVER
                elif relation.is_input or name not in defined:
                    kind = MAYBE
                else:
                    kind = NEVER  # derived: raised by its rules below
                self.positions[name, i] = kind
        rules = [rule for _, rule in compilation.program.rules()]
        changed = True
        while changed:  # the least fixpoint: each position as high as one of its rules puts it
            changed = False
            for rule in rules:
                variables = self.variables(rule)
                for i, arg in enumerate(rule.head.args):
                    key = (rule.head.name, i)
                    kind = self.term(arg, variables)
                    if kind > self.positions.get(key, NEVER):
                        self.positions[key] = kind
                        changed = True

    def variables(self, rule: ast.Rule) -> dict[str, tuple[int, ast.Literal | None]]:
        """Whether each variable of a rule's body can be an event id (variables equated with
        ``=`` are one), with the literal that makes it never one (for one that never is)."""
        groups = _equalities(rule)
        occurs: dict[str, int] = {}  # the highest kind of the positions a variable occurs at
        never: dict[str, ast.Literal] = {}  # the first literal that binds it to what never is an id
        for lit in rule.body:
            if isinstance(lit, ast.Atom) and lit.name not in self.symbols.functors:
                for i, arg in enumerate(lit.args):
                    if isinstance(arg, ast.Var):
                        root = groups.get(arg.name, arg.name)
                        kind = self.positions.get((lit.name, i), MAYBE)
                        occurs[root] = max(occurs.get(root, NEVER), kind)
                        if kind == NEVER:
                            never.setdefault(root, lit)
            elif isinstance(lit, ast.Comparison) and lit.op == "=":
                for side, other in ((lit.left, lit.right), (lit.right, lit.left)):
                    if (
                        isinstance(side, ast.Var)
                        and not isinstance(other, ast.Var)
                        and self.term(other, {}) == NEVER
                    ):
                        never.setdefault(groups.get(side.name, side.name), lit)
        found: dict[str, tuple[int, ast.Literal | None]] = {}
        for name in {*occurs, *never, *groups}:
            root = groups.get(name, name)
            if occurs.get(root) == ID:
                found[name] = (ID, None)
            elif root in never:
                found[name] = (NEVER, never[root])
            else:
                found[name] = (MAYBE, None)
        return found

    def term(self, term: ast.Term, variables: dict[str, tuple[int, ast.Literal | None]]) -> int:
        """Whether a term's value can be an event id."""
        if isinstance(term, ast.Var):
            return variables.get(term.name, (MAYBE, None))[0]
        if isinstance(term, ast.Call):
            sig = self.symbols.functors.get(term.name)
            if sig is None:
                return MAYBE
            if sig.returns in NUMERIC or from_events(self.compilation, sig.span.file):
                return NEVER  # a number, or a value from an event's payload
            return MAYBE
        if isinstance(term, ast.Wildcard | ast.Cast):
            return MAYBE
        return NEVER  # constants, arithmetic, aggregates, records, constructors


def _equalities(rule: ast.Rule) -> dict[str, str]:
    """The variables of a rule equated with each other (``x = y``), each to one of its class."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    for lit in rule.body:
        if isinstance(lit, ast.Comparison) and lit.op == "=":
            if isinstance(lit.left, ast.Var) and isinstance(lit.right, ast.Var):
                a, b = root(lit.left.name), root(lit.right.name)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return {name: root(name) for name in parent}


def not_actions(compilation: Stratified, rules: list[ast.Rule]) -> Iterator[NotAction]:
    """The verdict rules of ``rules`` whose argument is never an event id."""
    relations = compilation.symbols.relations
    kinds: Kinds | None = None
    for rule in rules:
        head = rule.head
        relation = relations.get(head.name)
        if (
            rule.is_fact
            or relation is None
            or not is_verdict(head.name, relation.arity)
            or len(head.args) != 1
        ):
            continue
        kinds = kinds or Kinds(compilation)
        variables = kinds.variables(rule)
        arg = head.args[0]
        if kinds.term(arg, variables) != NEVER:
            continue
        binding = variables[arg.name][1] if isinstance(arg, ast.Var) else None
        yield NotAction(rule, binding, _call(kinds, rule, variables))


def _call(kinds: Kinds, rule: ast.Rule, variables: dict[str, tuple[int, ast.Literal | None]]) -> str | None:
    """The variable of the call a verdict rule was meant to decide: the call of `ToolCall`,
    `Action`, `Candidate` or `ToolArg` in its body, else another variable that is an event id,
    else one that may be (a value of the policy's own relations, which given facts name)."""
    head = {v.name for v in ast.term_vars(rule.head.args[0])}
    atoms = [lit for lit in rule.body if isinstance(lit, ast.Atom) and lit.args]
    for name in CALLS:
        for atom in atoms:
            first = atom.args[0]
            if atom.name == name and isinstance(first, ast.Var) and first.name not in head:
                if from_events(kinds.compilation, kinds.symbols.relations[name].home):
                    return first.name
    for wanted in (ID, MAYBE):
        found = sorted(v for v, (kind, _) in variables.items() if kind == wanted and v not in head)
        if found:
            return found[0]
    return None


# ---------------------------------------------------------------------- the finding


def finding(
    compilation: Stratified, found: NotAction, deadline: Deadline | None, bound: int = 2
) -> Diagnostic:
    """The ``verdict-not-action`` diagnostic of a rule, with its witness when one is found."""
    rule = found.rule
    verdict = rule.head.name
    verb, outcome = VERBS[verdict]
    arg = rule.head.args[0]
    shown = render_term(arg)
    if found.binding is not None:
        why = f"`{_text(compilation, found.binding)}` makes it a value, not an event id"
    else:
        why = "it is a value, not an event id"
    message = f"this rule {verb} `{shown}`, which is never an action: {why}, so {outcome}"
    call = found.call
    fix = None
    if call is not None:
        help = f"a verdict's argument is the action it decides: write `{verdict}({call}) :- ...`, the call `{call}` of its body"
        fix = Fix(f"decide the call `{call}`", (Edit(arg.span, call),), safe=False)
    else:
        help = f"a verdict's argument is the action it decides (`{verdict}(a) :- ToolCall(a, ...), ...`)"
    return codes.VERDICT_NOT_ACTION(
        rule.head.span,
        message,
        help=help,
        fix=fix,
        strength="syntactic",
        witness=witness(compilation, found, deadline, bound) if call is not None else None,
    )


def _text(compilation: Stratified, literal: ast.Literal) -> str:
    source = compilation.program.source(literal.span.file)
    return source.text[literal.span.start : literal.span.end] if source is not None else "?"


def witness(
    compilation: Stratified, found: NotAction, deadline: Deadline | None, bound: int = 2
) -> Scenario | None:
    """A session in which the rule fires and the monitor decides the call it was meant to
    decide the other way (a `Deny` or `Escalate`: allowed; an `Allow` under ``.default deny``:
    denied), replayed through a monitor; None when none is found in the time given."""
    from policyc.runtime.opener import from_compilation

    from .query import AnalysisError, Loaded
    from .sessions import replayed, session_tables, to_session
    from .witness import find_witness, render

    rule, call = found.rule, found.call
    symbols = compilation.symbols
    verdict = rule.head.name
    allow = verdict == "Allow"
    if allow and symbols.default != "deny":
        return None  # under `.default allow` an `Allow` rule decides nothing either way
    body = [_text(compilation, lit) for lit in rule.body]
    conditions = []
    if allow:
        conditions.append(f"not Allow({call})")
    else:
        conditions.append(f"not Deny({call})")
        escalate = symbols.relations.get(ESCALATE)
        if escalate is not None and is_verdict(ESCALATE, escalate.arity):
            conditions.append(f"not {ESCALATE}({call})")
        if symbols.default == "deny":
            conditions.append(f"Allow({call})")
    left = deadline.left() if deadline is not None else 10.0
    if left <= 0:
        return None
    loaded = Loaded(compilation.program, (), min(compilation.program.roots, default="policy.dl"))
    model = None
    # the call decided as wanted; or, when the verdicts hold values of another type than the
    # call (`Deny(n)` of numbers), which they then never decide, the body alone
    for query in (body + conditions, body):
        try:
            model = find_witness(loaded, ", ".join(query), bound, timeout=max(0.5, left * WITNESS_SHARE))
            break
        except AnalysisError:
            continue
    if model is None:
        return None
    if model.status != "found" or call not in model.bindings:
        return None
    action = model.bindings[call]
    relations = symbols.relations
    uses_events = "ToolCall" in relations and from_events(compilation, relations["ToolCall"].home)
    record = to_session(model.facts, action, "witness", uses_events, model.numbers)
    predicates = {name: sig.is_predicate for name, sig in symbols.functors.items()}
    tables = {name: [list(row) for row in rows] for name, rows in model.functors.items()}
    policy = from_compilation(compilation, session_tables(predicates.items(), tables))
    decision = replayed(policy, record, action, uses_events)
    if decision.errored or decision.allowed != (not allow) or decision.evaluation is None:
        return None
    held = _held(decision.evaluation.explanation(), verdict, record)
    if not held:
        return None
    facts = tuple(
        f"{name}({', '.join(render(v) for v in row)})"
        for name, rows in record["facts"].items()
        for row in rows
    )
    if record.get("principal") is not None:
        facts = (f"principal {render(record['principal'])}", *facts)
    return Scenario(
        facts,
        tuple(json.dumps(event, ensure_ascii=False) for event in record["events"]),
        str(action),
        "allow" if decision.allowed else "deny",
        tuple(f"{verdict}({render(value)})" for value in held),
    )


def _held(evaluation: Evaluation, verdict: str, record: dict) -> list:
    """The values the verdict relation holds in the replayed session that are no event of it:
    what the rule decided instead of a call."""
    from policyc.runtime.policy import Result

    events = {str(event["id"]) for event in record["events"]}
    try:
        facts = Result(evaluation).relation(verdict)
    except KeyError:
        return []
    return sorted((row[0] for row in facts if str(row[0]) not in events), key=repr)
