"""`policyc check --deep`: what a policy really does, as findings with a strength.

* ``unsatisfiable-rule`` — the body can never hold (:mod:`unsat`): syntactic or proved.
* ``unreachable-rule`` — the body needs a relation that can never hold although it has rules
  (:mod:`reach`): proved. (A relation with no rules at all is ``empty-relation``'s business.)
* ``redundant-rule`` — another rule of the same relation covers it (:mod:`contain`): proved;
  otherwise a bounded search for a database on which the rule derives a fact no other rule
  derives: none means bounded.
* ``shadowed-allow`` — a `Deny` rule covers an `Allow` rule (proved), or no database within the
  bound lets the `Allow` rule fire for an action without a `Deny` (bounded). An `Escalate`
  rule counts as a `Deny` here: an escalated call is not allowed without a person's approval.
* ``shadowed-escalate`` — a `Deny` rule covers an `Escalate` rule (proved): deny wins over
  escalate, so no one is ever asked.
* ``always-deny`` / ``always-allow`` — a tool the policy names (``is_tool(a, "t")``,
  ``ToolCall(a, "t")``, ``tool_name(a) = "t"``, ``Tool(a, "t")``...) whose every call is
  denied, or none of whose calls is, whichever rules name it (:mod:`verdicts`): proved when z3
  shows it of what the rules say of the call alone, else bounded (no database within the
  bound with a call of it allowed, or denied). The message names the rules that make it so: an
  unsat core of z3's formulas, or for a bounded finding, of the switches of one more
  translation (``r_``, built only then) in which each rule deciding verdicts can be removed. A
  verdict one rule gives whatever the call (``Deny(a) :- is_tool(a, "rm").``) is meant, and
  not reported. A call an `Escalate` rule escalates counts as denied (it cannot run as it is).
* ``verdict-not-action`` — a `Deny`, `Allow` or `Escalate` rule whose argument is never an
  event id (an argument's value, a text, a constant: :mod:`subjects`), so that it decides no
  call; with a session, replayed through a monitor, in which a call it was meant to stop is
  allowed.
* ``missing-argument``, ``untyped-argument-comparison``, ``lenient-conversion`` — rules an
  agent can slip past (:mod:`slips`): witnessed, each with a call replayed through a monitor
  of the policy.

The bounded questions share one grounding (:mod:`.bounded`, which asks them). Policies of
more than :data:`SEARCH_LIMIT` rules get the proofs only. Findings are only reported for the files the user wrote, never for the
shipped library.

**Time.** The time allowed bounds the whole analysis, proofs included: one
:class:`~policyc.analyzer.deadline.Deadline`, asked before each rule's body is proved, each
pair of rules compared, each tool, each bounded question, and giving z3 no more than what is
left. What it stops before gives no finding and is counted (:class:`Unchecked`): the rules not
checked for each finding, the tools, the bounded questions unanswered. The rules a rule may be
contained in are found through an index (:class:`~policyc.analyzer.contain.Candidates`), so
that redundancy and shadowing cost about one comparison per rule on policies whose rules read
different relations or constants, not one per pair.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from policyc.compiler import ast, codes
from policyc.compiler.checks.rule_annotations import rule_mode
from policyc.compiler.diagnostics import Diagnostic, Related
from policyc.compiler.source import Span
from policyc.compiler.stages import Stratified
from policyc.compiler.symbols import ESCALATE, is_verdict

from .bounded import Modelled, PlacedRule, Searches
from .calls import Replayer, rule_span
from .contain import Candidates, covers
from .deadline import Deadline
from .firing import unfired_call
from .reach import never_holds
from .subjects import finding as not_action
from .subjects import not_actions
from .unsat import Contradiction, contradiction
from .verdicts import Verdicts, finding

SEARCH_LIMIT = 200  # rules, facts not counted; above it, only the proofs
_NONE = Contradiction("", "")
SLIP_FINDINGS = ("missing-argument", "untyped-argument-comparison", "lenient-conversion")


@dataclass(frozen=True)
class Unchecked:
    """Checks the time allowed ran out before: ``count`` of ``what`` (rules, `Allow` rules,
    tools or bounded questions), which could have given the findings ``names``."""

    names: tuple[str, ...]
    count: int
    what: str

    def note(self) -> str:
        """``redundant-rule: 3,412 rules not checked within the time limit``."""
        verb = "answered" if self.what == "bounded questions" else "checked"
        names = ", ".join(f"`{name}`" for name in self.names)
        what = self.what if self.count != 1 else self.what[:-1]
        return f"{names}: {self.count:,} {what} not {verb} within the time limit"


@dataclass(frozen=True)
class DeepResult:
    findings: list[Diagnostic]
    questions: int  # bounded questions asked
    # the checks left undecided in the time allowed (they give no finding): bounded questions
    # unanswered, and the rules and tools of `unchecked`
    unanswered: int
    unchecked: tuple[Unchecked, ...] = ()  # what they are

    def notes(self) -> list[str]:
        """What was not decided in time, one line per kind of check."""
        return [u.note() for u in self.unchecked]


def _untranslatable(compilation: Stratified, rules: list[PlacedRule]) -> list[Diagnostic]:
    """``unsearched-rule`` for each rule clingo cannot express (an operator it does not have,
    at the operator; a float value or another construct, at the rule's head): the bounded
    search, which needs every rule translated, is not run."""
    from . import asp

    translator = asp.Translator(compilation)
    found = []
    for r in rules:
        try:
            translator.rule(r.rule)
        except asp.UntranslatableOperator as error:
            found.append(_unsearched(error.span, error.what))
        except asp.Untranslatable as error:
            found.append(_unsearched(r.rule.head.span, str(error)))
    return found


def _unsearched(span: Span, what: str) -> Diagnostic:
    return codes.UNSEARCHED_RULE(
        span,
        f"the bounded search cannot translate this rule: {what}",
        help="the proofs still run; the searches for redundant rules, shadowed `Allow` or "
        "`Escalate` rules and tools always denied or allowed are not run on this policy",
        strength="syntactic",
    )


def deep_findings(
    compilation: Stratified,
    bound: int = 2,
    timeout: float = 6.0,
    *,
    escalations_deny: bool = True,
    deliberate: bool = False,
) -> list[Diagnostic]:
    """The deep findings of a compiled policy without errors (see :func:`analyse`)."""
    return analyse(
        compilation, bound, timeout, escalations_deny=escalations_deny, deliberate=deliberate
    ).findings


def analyse(
    compilation: Stratified,
    bound: int = 2,
    timeout: float = 6.0,
    *,
    escalations_deny: bool = True,
    deliberate: bool = False,
) -> DeepResult:
    """The deep findings of a compiled policy without errors. ``timeout`` bounds the whole
    analysis: every phase stops when it has passed, and what it did not decide gives no
    finding and is counted in :attr:`DeepResult.unchecked`. With ``escalations_deny`` false
    the proofs of always-deny and always-allow count only `Deny` rules as denying (an escalated
    call may still run, once approved): what the MCP gateway asks to know which tools no call
    of can ever run. With ``deliberate`` a tool one `Deny` rule denies whatever the call is
    reported too (``check --deep`` leaves it out: the rule says so on purpose), so that the
    gateway hides it like every other tool always denied.

    The analyses run in this order, each a function of its own: :func:`_unsatisfiable`,
    :func:`_unreachable`, :func:`_contained`, :func:`_tool_verdicts`, the slips (before the
    bounded searches, which may take what is left of the time), :func:`_searched`, then the
    containment findings and the verdicts about values.

    >>> from policyc.compiler.pipeline import compile_source
    >>> found = analyse(compile_source('.import events\\nDeny(a) :- ToolCall(a, "rm"), a != a.'))
    >>> [d.name for d in found.findings]
    ['unsatisfiable-rule']
    """
    run = _Run(compilation, bound, timeout, Deadline(timeout))
    contradictions, unproved = _unsatisfiable(run)
    dead = _unreachable(run, contradictions, unproved)
    # a `Deny` rule in shadow mode decides nothing (the planner gives it a relation of its own):
    # checked above as a rule that may never fire, never counted as a verdict below
    run.every = [r for r in run.every if rule_mode(r.rule) != "shadow"]
    run.user = [r for r in run.user if rule_mode(r.rule) != "shadow"]
    # a subsumption rule derives no fact (it drops some): never a redundant or shadowing rule
    live = [
        r
        for r in run.user
        if id(r.rule) not in dead
        and not compilation.symbols.is_inline(r.rule.head.name)
        and not r.rule.is_subsumption
    ]
    searchable = _size(compilation) <= SEARCH_LIMIT and not _uses_structures(compilation, run.user)
    searches = Searches(compilation, bound, timeout) if searchable else None
    run.findings.extend(_unsearched_structures(run))
    redundant, shadowed, unasked = _contained(run, live)
    # verdicts about values that are never actions decide no call: not counted as deciding one
    subjects = list(not_actions(compilation, [r.rule for r in run.user if id(r.rule) not in dead]))
    verdicts, tools = _tool_verdicts(run, dead, contradictions, subjects, escalations_deny, deliberate)
    # without searches, a proof not decided in time leaves its tool unchecked
    expired = {q.tool for q in tools if q.expired and not q.strength} if searches is None else set()
    run.note(("always-deny", "always-allow"), len(verdicts.unasked) + len(expired), "tools")
    if searches is not None:
        subsumptions = [r for r in run.user if r.rule.is_subsumption and id(r.rule) not in dead]
        blocked = _untranslatable(compilation, [*live, *subsumptions])
        run.findings.extend(blocked)
        if blocked:
            searches = None  # no question could be asked of a translation without these rules
    # what an agent can slip past, each finding replayed through a monitor of the policy: before
    # the bounded searches, which may take what is left of the time
    from .slips import slip_findings

    slipped = slip_findings(compilation, run.deadline, run.replayer)
    run.findings.extend(slipped.findings)
    run.note(SLIP_FINDINGS, slipped.unchecked, "rules")
    if searches is not None:
        switched = [r for r in verdicts.side_rules() if not compilation.symbols.is_inline(r.head.name)]
        searches.plan(live, redundant, shadowed, [q for q in tools if not q.strength], switched)
        searches.fallback = verdicts.may_decide
        searches.run(run.deadline)
    run.findings.extend(_containment_findings(run, redundant, shadowed, unasked))
    # each verdict about a value that is never an action, with a session that shows it
    run.findings.extend(not_action(compilation, found, run.deadline, bound) for found in subjects)
    asked = 0 if searches is None else _searched(run, searches)
    return DeepResult(run.findings, asked, sum(u.count for u in run.unchecked), tuple(run.unchecked))


class _Run:
    """What the analyses of one policy share: the compilation, the bound and time allowed, the
    rules (``every`` of the program, ``user``: the user's own, facts left out), the findings so
    far and the checks the time ran out before."""

    def __init__(self, compilation: Stratified, bound: int, timeout: float, deadline: Deadline) -> None:
        program = compilation.program
        self.compilation = compilation
        self.bound = bound
        self.timeout = timeout
        self.deadline = deadline
        self.every = [PlacedRule(rule, module) for module, rule in program.rules()]
        self.user = [r for r in self.every if not program.is_library(r.module.path) and not r.rule.is_fact]
        self.findings: list[Diagnostic] = []
        self.unchecked: list[Unchecked] = []
        self.modelled = Modelled(compilation)

    def note(self, names: tuple[str, ...], count: int, what: str) -> None:
        """Count ``count`` checks of ``what`` not decided in time (findings ``names``)."""
        if count:
            self.unchecked.append(Unchecked(names, count, what))

    def replayer(self) -> Replayer | None:
        """The monitor of the policy that witnesses are replayed through, opened once for the
        run, when first asked (None when the monitor cannot open the policy)."""
        return self._opened

    @functools.cached_property
    def _opened(self) -> Replayer | None:
        try:
            return Replayer.of(self.compilation)
        except Exception:  # no witness, so no finding that needs one
            return None


def _unsatisfiable(run: _Run) -> tuple[dict[int, Contradiction], set[int]]:
    """The rules whose bodies can never hold (``unsatisfiable-rule`` for the user's), by the
    rule's ``id``, and the rules not checked in time."""
    compilation, deadline = run.compilation, run.deadline
    contradictions: dict[int, Contradiction] = {}
    unproved: set[int] = set()  # the rules whose bodies were not checked in time
    for r in run.every:
        if deadline.passed():
            unproved.add(id(r.rule))
            continue
        found = contradiction(compilation, r.rule, deadline)
        if found is not None:
            contradictions[id(r.rule)] = found
        elif deadline.passed():
            unproved.add(id(r.rule))  # z3 may have stopped for want of time
    for r in run.user:
        if id(r.rule) in contradictions:
            strength, reason, key, help = contradictions[id(r.rule)]
            run.findings.append(
                codes.UNSATISFIABLE_RULE(
                    rule_span(r.rule),
                    f"this rule can never fire: {reason}",
                    help=help or "fix the conditions, or remove the rule",
                    strength=strength,
                    uninterpreted=run.modelled.of((r.rule,)) if strength == "proved" else (),
                    witness=unfired_call(compilation, r.rule, run.replayer) if key else None,
                )
            )
    run.note(
        ("unsatisfiable-rule", "unreachable-rule"), sum(id(r.rule) in unproved for r in run.user), "rules"
    )
    return contradictions, unproved


def _unreachable(run: _Run, contradictions: dict[int, Contradiction], unproved: set[int]) -> set[int]:
    """The rules that can never fire (``unreachable-rule`` for the user's that need a relation
    that can never hold; with the unsatisfiable ones): the relations that can never hold, with
    the rules not checked as rules that may fire; and as rules that never do, for the rules
    whose answer depends on them."""
    compilation = run.compilation
    functors = compilation.symbols.functors
    never = never_holds(compilation, contradictions)
    perhaps = (
        never_holds(compilation, {**contradictions, **dict.fromkeys(unproved, ("", ""))})
        if unproved
        else never
    )
    defined = {r.rule.head.name for r in run.every}
    dead: set[int] = set(contradictions)
    undecided = 0
    for r in run.user:
        if id(r.rule) in dead or id(r.rule) in unproved:
            continue
        needs = [lit for lit in r.rule.body if isinstance(lit, ast.Atom) and lit.name not in functors]
        lit = next((lit for lit in needs if lit.name in never), None)
        if lit is None:
            undecided += any(lit.name in perhaps for lit in needs)
            continue
        dead.add(id(r.rule))
        if lit.name in defined:
            run.findings.append(
                codes.UNREACHABLE_RULE(
                    lit.span,
                    f"this rule can never fire: it needs `{lit.name}`, which can never hold "
                    f"({never[lit.name]})",
                    help="fix the rules it depends on, or remove this rule",
                    strength="proved",
                    uninterpreted=run.modelled.of(relations=(lit.name,)),
                )
            )
    run.note(("unreachable-rule",), undecided, "rules")
    return dead


def _unsearched_structures(run: _Run) -> list[Diagnostic]:
    """``unsearched-rule`` for each rule of the user's that builds or reads records or ADT values."""
    return [
        codes.UNSEARCHED_RULE(
            r.rule.head.span,
            "the bounded searches of `--deep` do not model records or ADT values, so this rule "
            "(and every rule of this policy) is not searched for a redundant, shadowed or "
            "tool-deciding database",
            help="the proofs still ran; the bounded findings need a policy without records and ADTs",
        )
        for r in run.user
        if _structured(run.compilation, r.rule)
    ]


Covers = dict[PlacedRule, PlacedRule]


def _contained(run: _Run, live: list[PlacedRule]) -> tuple[Covers, Covers, Covers]:
    """The rules proved redundant, the `Allow` rules proved shadowed and the `Escalate` rules
    proved never to ask anyone, each with the rule that covers it."""
    compilation, deadline = run.compilation, run.deadline
    redundant, unsure = _redundant_by_containment(compilation, live, deadline)
    run.note(("redundant-rule",), unsure, "rules")
    shadowed, unsure = _shadowed_by_containment(compilation, live, run.every, deadline)
    run.note(("shadowed-allow",), unsure, "`Allow` rules")
    unasked, unsure = _shadowed_by_containment(compilation, live, run.every, deadline, "Escalate")
    run.note(("shadowed-escalate",), unsure, "`Escalate` rules")
    return redundant, shadowed, unasked


def _tool_verdicts(
    run: _Run,
    dead: set[int],
    contradictions: dict[int, Contradiction],
    subjects: list[Any],
    escalations_deny: bool,
    deliberate: bool = False,
) -> tuple[Verdicts, list[Any]]:
    """The proofs of tools always denied or always allowed (``always-deny``, ``always-allow``):
    over the rules that can fire and decide calls, naming the tools of the rules the user
    wrote (a rule that never fires through a key still names its tools: no call of one of them
    is denied by it; a call has one tool, so a rule naming two denies neither)."""
    compilation = run.compilation
    deciding = {id(found.rule) for found in subjects}
    firing = [r.rule for r in run.every if id(r.rule) not in dead and id(r.rule) not in deciding]
    named = [r.rule for r in run.user if id(r.rule) not in dead or contradictions.get(id(r.rule), _NONE).key]
    verdicts = Verdicts(compilation, firing, named, escalations_deny=escalations_deny, deliberate=deliberate)
    tools = verdicts.questions(run.deadline)
    for q in tools:
        if q.strength == "proved":
            deny = ("Deny", *_escalate(compilation)) if q.kind == "always-allow" else ()
            run.findings.append(
                finding(q, compilation.symbols.default, None, run.modelled.of(tuple(q.core), deny))
            )
    return verdicts, tools


def _containment_findings(
    run: _Run, redundant: Covers, shadowed: Covers, unasked: Covers
) -> list[Diagnostic]:
    """``redundant-rule``, ``shadowed-allow`` and ``shadowed-escalate``, each naming the rule
    that covers the one reported."""
    of = run.modelled.of
    found = []
    for r, cover in redundant.items():
        found.append(
            codes.REDUNDANT_RULE(
                rule_span(r.rule),
                f"this rule is redundant: whenever it fires, the rule at line {cover.rule.head.span.line} derives the same fact",
                related=(Related(rule_span(cover.rule), "this rule covers it"),),
                help="remove it, or make it say something the other rule does not",
                strength="proved",
                uninterpreted=of((r.rule, cover.rule)),
            )
        )
    for r, cover in shadowed.items():
        head = cover.rule.head.name
        found.append(
            codes.SHADOWED_ALLOW(
                rule_span(r.rule),
                f"this `Allow` never takes effect: whenever it fires, the `{head}` rule at line {cover.rule.head.span.line} "
                "fires for the same action",
                related=(
                    Related(
                        rule_span(cover.rule),
                        "this rule denies every action it allows"
                        if head == "Deny"
                        else "this rule escalates every action it allows",
                    ),
                ),
                help="deny wins over allow: narrow the `Deny` rule or drop this one"
                if head == "Deny"
                else "escalate wins over allow: narrow the `Escalate` rule or drop this one",
                strength="proved",
                uninterpreted=of((r.rule, cover.rule)),
            )
        )
    for r, cover in unasked.items():
        found.append(
            codes.SHADOWED_ESCALATE(
                rule_span(r.rule),
                f"this `Escalate` never asks anyone: whenever it fires, the `Deny` rule at line "
                f"{cover.rule.head.span.line} fires for the same action",
                related=(Related(rule_span(cover.rule), "this rule denies every action it escalates"),),
                help="deny wins over escalate: narrow the `Deny` rule or drop this one",
                strength="proved",
                uninterpreted=of((r.rule, cover.rule)),
            )
        )
    return found


def _searched(run: _Run, searches: Searches) -> int:
    """The bounded searches' findings, with the questions left unanswered; how many were asked."""
    run.findings.extend(searches.findings(run.modelled))
    left = [q for q in searches.questions if q.found is None]
    kinds = tuple(name for kind, name in _FINDING.items() if any(q.kind == kind for q in left))
    run.note(kinds, len(left), "bounded questions")
    return len(searches.questions)


_FINDING = {
    "redundant": "redundant-rule",
    "shadowed": "shadowed-allow",
    "always-deny": "always-deny",
    "always-allow": "always-allow",
}


def _structured(compilation: Stratified, rule: ast.Rule) -> bool:
    """Whether a rule builds or takes apart records or ADT values, or reads or derives a
    relation that holds them."""
    types = compilation.types

    def holds(name: str) -> bool:
        return "record" in types.get(name, ())

    terms = [*rule.head.args, *(t for lit in rule.body for t in ast.literal_terms(lit))]
    return (
        holds(rule.head.name)
        or any(holds(atom.name) for atom, _, _ in compilation.program.summary(rule).atoms)
        or any(isinstance(t, ast.STRUCTURED) for term in terms for t in ast.walk_term(term))
    )


def _uses_structures(compilation: Stratified, user: list[PlacedRule]) -> bool:
    """Whether the user's rules, or the library rules they read (transitively), hold records
    or ADT values (a library relation of records nothing reads does not count)."""
    program = compilation.program
    seen: set[str] = set()
    stack = [r.rule for r in user]
    while stack:
        rule = stack.pop()
        if _structured(compilation, rule):
            return True
        for atom, _, _ in program.summary(rule).atoms:
            if atom.name not in seen:
                seen.add(atom.name)
                stack.extend(program.rules_of(atom.name))
    return False


def _size(compilation: Stratified) -> int:
    """The policy's rules, facts not counted."""
    return sum(1 for _, rule in compilation.program.rules() if not rule.is_fact)


def _redundant_by_containment(
    compilation: Stratified, rules: list[PlacedRule], deadline: Deadline
) -> tuple[dict[PlacedRule, PlacedRule], int]:
    """Rules another rule of the same relation covers (of two equivalent rules, the later), the
    rules that may cover each found through an index; and how many rules were not checked in
    time."""
    by_head: dict[str, list[PlacedRule]] = {}
    for r in rules:
        by_head.setdefault(r.rule.head.name, []).append(r)
    found: dict[PlacedRule, PlacedRule] = {}
    unchecked = 0
    for group in by_head.values():
        if len(group) < 2:
            continue
        if deadline.passed():
            unchecked += len(group)
            continue
        index = Candidates(compilation, [r.rule for r in group])
        for i, r in enumerate(group):
            if deadline.passed():
                unchecked += 1
                continue
            for j in index.of(r.rule):
                other = group[j]
                if i == j or other in found or other.signature == r.signature:
                    continue  # exact duplicates are `duplicate-rule`'s business
                if deadline.passed():
                    break
                if covers(compilation, other.rule, r.rule, deadline=deadline):
                    if j > i and covers(compilation, r.rule, other.rule, deadline=deadline):
                        continue  # equivalent rules: the later one is reported
                    if deadline.passed():
                        break  # whether they are equivalent may not have been decided
                    found[r] = other
                    break
            if r not in found and deadline.passed():
                unchecked += 1
    return found, unchecked


def _escalate(compilation: Stratified) -> tuple[str, ...]:
    """``("Escalate",)`` when the policy has the third verdict (a unary `Escalate`), else ()."""
    relation = compilation.symbols.relations.get(ESCALATE)
    return (ESCALATE,) if relation is not None and is_verdict(ESCALATE, relation.arity) else ()


def _shadowed_by_containment(
    compilation: Stratified,
    rules: list[PlacedRule],
    every: list[PlacedRule],
    deadline: Deadline,
    verdict: str = "Allow",
) -> tuple[dict[PlacedRule, PlacedRule], int]:
    """The rules of ``verdict`` (`Allow`, or `Escalate`) a rule of a stronger verdict covers
    (`Deny`, and for `Allow` also `Escalate`), with the first that does; and how many were not
    checked in time."""
    stronger = ("Deny", *_escalate(compilation)) if verdict == "Allow" else ("Deny",)
    if verdict not in ("Allow", *_escalate(compilation)):
        return {}, 0
    allows = [r for r in rules if r.rule.head.name == verdict]
    denies = [r for r in every if r.rule.head.name in stronger]
    if not allows or not denies:
        return {}, 0
    if deadline.passed():
        return {}, len(allows)
    index = Candidates(compilation, [d.rule for d in denies], heads=False)
    found = {}
    unchecked = 0
    for r in allows:
        for j in index.of(r.rule):
            if deadline.passed():
                break
            if covers(compilation, denies[j].rule, r.rule, heads=False, deadline=deadline):
                found[r] = denies[j]
                break
        if r not in found and deadline.passed():
            unchecked += 1
    return found, unchecked
