"""Running policy test cases: verdicts, deny reasons and facts, compared with what is expected.

A case with events runs as a monitor session: each ``tool_call`` event is decided where it
comes (``session.authorize``), every other event is recorded, and the facts expected at the end
are looked up in the session's facts evaluated from scratch. A case with facts only is one
evaluation, and its actions are decided on it. A decision that failed (a functor raised, an
event was malformed) is a failure of the case whatever was expected: the runtime denies it, but
not because of a rule.

With coverage, which rules fired is read from the same evaluations (every decision's, and the
final one): a rule fired when some fact of its relation has a binding of its body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .spec import Case, TestFile


@dataclass(frozen=True)
class Failure:
    check: str  # "deny", "allow", "escalate", "reasons", "derived", "not_derived", "decision", "input"
    subject: str  # the action or fact it is about
    expected: str
    actual: str

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "subject": self.subject,
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(frozen=True)
class CaseResult:
    case: Case
    failures: tuple[Failure, ...]

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class FileResult:
    file: TestFile | None
    path: Path
    error: str | None = None  # the file could not be run
    cases: tuple[CaseResult, ...] = ()
    fired: dict[tuple[str, int, int], bool | None] = field(default_factory=dict)  # rule -> fired
    rules: dict[tuple[str, int, int], Any] = field(default_factory=dict)  # rule -> its RuleInfo


def run_file(test: TestFile, coverage: bool = False) -> FileResult:
    """Every case of a test file against its policy; with ``coverage``, also which rules fired
    (each decision is evaluated again from scratch for that)."""
    from policyc.runtime.errors import PolicyError
    from policyc.runtime.functors import MissingFunctors, load_module
    from policyc.runtime.opener import load

    try:
        functors = load_module(test.functors) if test.functors else None
    except ImportError as error:
        return FileResult(test, test.path, f"cannot load functors from `{test.functors}`: {error}")
    try:
        policy = load(test.policy, functors, magic=_observed(test))
    except PolicyError as error:
        if not error.diagnostics:
            return FileResult(test, test.path, str(error))
        details = "".join(
            f"\n    {d.span.file}:{d.span.line}:{d.span.column}: {d.message}" for d in error.diagnostics
        )
        return FileResult(test, test.path, f"the policy `{test.policy}` has errors:{details}")
    except MissingFunctors as error:
        return FileResult(test, test.path, str(error))
    plan = policy.plan
    rules = _user_rules(plan, test.policy.parent)
    fired_ids: set[int] | None = set() if coverage else None
    heads = _rule_heads(plan)
    results = [_run_case(policy, case, fired_ids, heads) for case in test.cases]
    if fired_ids is None:
        return FileResult(test, test.path, None, tuple(results))
    fired = {
        key: (None if plan.relations[plan.relation_index()[info.head]].inline else i in fired_ids)
        for key, (i, info) in rules.items()
    }
    return FileResult(
        test, test.path, None, tuple(results), fired, {k: info for k, (_, info) in rules.items()}
    )


def _user_rules(plan: Any, root: Path) -> dict[tuple[str, int, int], tuple[int, Any]]:
    """The rules (not facts) of the policy's own files, by position (a plan names files
    relative to the policy's folder, ``root``)."""
    from policyc.compiler.loader import LIBRARY_PREFIX
    from policyc.compiler.magic import is_magic

    found = {}
    for i, info in enumerate(plan.rules):
        if not info.literals or info.file.startswith(LIBRARY_PREFIX) or is_magic(info.head):
            continue  # a magic rule is where its rule is, and no rule of the policy's own
        found[(str((root / info.file).resolve()), info.line, info.column)] = (i, info)
    return found


def _rule_heads(plan: Any) -> dict[str, set[str]]:
    """The rule ids of a plan, each with the relations its rules derive."""
    heads: dict[str, set[str]] = {}
    for info in plan.rules:
        heads.setdefault(info.id, set()).add(info.head)
    return heads


# the relations whose rules give a decision's reasons (a rule in shadow mode derives another)
REASON_HEADS = frozenset({"Deny", "Escalate"})
RUNTIME_PREFIX = "policyc:"  # the monitor's own reasons (a refused call, the default denial, ...)


def _unknown_rule(rule: str, heads: dict[str, set[str]]) -> str | None:
    """Why a decision can never give ``rule`` as a reason (None: it can)."""
    from policyc.compiler.syntax_errors import did_you_mean

    if rule.startswith(RUNTIME_PREFIX):
        return None
    derived = heads.get(rule)
    if derived is None:
        reasons = [r for r, found in heads.items() if found & REASON_HEADS]
        close = did_you_mean(rule, reasons)
        return f"`{rule}`: no rule has it" + (f" (did you mean `{close}`?)" if close else "")
    if derived & REASON_HEADS:
        return None
    names = ", ".join(f"`{name}`" for name in sorted(derived))
    if any(name.endswith("@shadow") for name in derived):
        return f"`{rule}`, a rule in shadow mode: its denials are would-deny, never a decision's reasons"
    return f"`{rule}`, the id of a {names} rule"


def _run_case(policy: Any, case: Case, fired: set[int] | None, heads: dict[str, set[str]]) -> CaseResult:
    from policyc.runtime.facts import FactsError, read

    failures: list[Failure] = []
    facts = case.facts
    if isinstance(facts, str):
        try:
            facts = read(facts, policy.plan)
        except (FactsError, OSError) as error:
            message = str(error) if isinstance(error, FactsError) else f"cannot read `{facts}`: {error}"
            return CaseResult(case, (Failure("input", "facts", "readable facts", message),))
    try:
        if case.events is not None:
            decisions, final = _session(policy, case, facts)
        else:
            decisions, final = _evaluation(policy, case, facts)
    except FactsError as error:
        return CaseResult(case, (Failure("input", "facts", "valid facts", str(error)),))
    if fired is not None:
        evaluations = {id(final): final}
        for decision in decisions.values():
            if decision.evaluation is not None:
                evaluation = decision.evaluation.explanation()
                evaluations.setdefault(id(evaluation), evaluation)
        for evaluation in evaluations.values():
            _fired(evaluation, fired)
    if getattr(final, "errors", None):
        failures.append(
            Failure("input", "evaluation", "no evaluation error", "; ".join(e.message for e in final.errors))
        )
    for verdict, actions in (("deny", case.deny), ("allow", case.allow), ("escalate", case.escalate)):
        for action in actions:
            failures.extend(_verdict(decisions, action, verdict))
    for action, ids in case.reasons.items():
        unknown = [(i, _unknown_rule(i, heads)) for i in ids]
        for rule, problem in unknown:
            if problem is not None:
                expected = (
                    "a rule id of the policy"
                    if rule not in heads
                    else "the id of a `Deny` or `Escalate` rule"
                )
                failures.append(Failure("reasons", action, expected, problem))
        ids = tuple(i for i, problem in unknown if problem is None)
        if not ids:
            continue
        decision = _find(decisions, action)
        if decision is None:
            failures.append(Failure("reasons", action, f"denied by {', '.join(ids)}", "never decided"))
            continue
        given = [r.rule for r in decision.reasons]
        missing = [i for i in ids if i not in given]
        if missing:
            failures.append(Failure("reasons", action, f"denied by {', '.join(ids)}", _describe(decision)))
    for check, facts_expected, wanted in (
        ("derived", case.derived, True),
        ("not_derived", case.not_derived, False),
    ):
        for text in facts_expected:
            failures.extend(_fact(final, check, text, wanted))
    return CaseResult(case, tuple(failures))


def _session(policy: Any, case: Case, facts: Any) -> tuple[dict[Any, Any], Any]:
    from policyc.runtime.policy import CONTAINED
    from policyc.runtime.replay import steps
    from policyc.runtime.session import Monitor

    record = {"principal": case.principal, "roles": case.roles, "facts": facts, "events": case.events or []}
    decisions: dict[Any, Any] = {}
    played = steps(Monitor(policy), record, case.session or case.name)
    session, _, _ = next(played)  # as it starts
    for _, event, decision in played:
        if decision is not None:
            decisions[event.get("id")] = decision
    final = session.explanation()
    # the problems of the case's input: what the session refused or failed on; an error of a
    # rule refuses the calls whose verdict needs what it touched (decisions show it)
    final.errors = [e for e in final.errors if e.kind not in CONTAINED] + [*session.sticky, *session.refusals]
    return decisions, final


def _evaluation(policy: Any, case: Case, facts: Any) -> tuple[dict[Any, Any], Any]:
    result = policy.evaluate(facts or {})
    actions = [*case.deny, *case.allow, *case.escalate, *case.reasons]
    return {a: result.decide(a) for a in actions}, result.evaluation


def _find(decisions: dict[Any, Any], action: Any) -> Any:
    if action in decisions:
        return decisions[action]
    for key, decision in decisions.items():
        if str(key) == str(action):
            return decision
    return None


WANTED = {"allow": "allowed", "deny": "denied", "escalate": "escalated"}


def _verdict(decisions: dict[Any, Any], action: Any, check: str) -> list[Failure]:
    """What is wrong with the decision of ``action``, expected to have verdict ``check``."""
    decision = _find(decisions, action)
    wanted = WANTED[check]
    if decision is None:
        return [Failure(check, str(action), wanted, "never decided (no tool call with this id)")]
    if decision.errored:
        return [Failure("decision", str(action), wanted, _describe(decision))]
    if decision.verdict != check:
        return [Failure(check, str(action), wanted, _describe(decision))]
    return []


def _describe(decision: Any) -> str:
    if decision.errored:
        return "the decision failed: " + "; ".join(r.message or "" for r in decision.reasons)
    if decision.allowed:
        return "allowed" if decision.approval is None else f"allowed by approval {decision.approval.id}"
    rules = ", ".join(dict.fromkeys(r.rule for r in decision.reasons))
    return f"escalated by {rules}" if decision.verdict == "escalate" else f"denied by {rules}"


def _observed(test: TestFile) -> Any:
    """The relations the cases check facts of: computed in full, not on demand (the planner
    evaluates some recursive relations demand-driven: see policyc.compiler.magic)."""
    from policyc.compiler.magic import Options
    from policyc.runtime.facts import parse_fact

    names = set()
    for case in test.cases:
        for text in (*case.derived, *case.not_derived):
            try:
                names.add(parse_fact(text)[0])
            except ValueError:
                continue  # reported with the case
    return Options(observed=frozenset(names))


def _fact(evaluation: Any, check: str, text: str, wanted: bool) -> list[Failure]:
    from policyc.runtime.facts import parse_fact

    try:
        name, values = parse_fact(text)
    except ValueError as error:
        return [Failure(check, text, 'a fact like Deny("c1")', str(error))]
    index = evaluation.plan.relation_index()
    if name not in index:
        return [Failure(check, text, "a relation of the policy", f"the policy has no relation `{name}`")]
    if evaluation.plan.relations[index[name]].magic is not None:  # a bundle's plan
        return [
            Failure(
                check, text, "a relation computed in full", f"the bundle computes `{name}` on demand only"
            )
        ]
    holds = evaluation.holds(index[name], values)
    if holds != wanted:
        return [
            Failure(
                check, text, "holds" if wanted else "does not hold", "holds" if holds else "does not hold"
            )
        ]
    return []


def _fired(evaluation: Any, fired: set[int]) -> None:
    """Add the rules that have a binding in the evaluation to ``fired``."""
    for r, spec in enumerate(evaluation.plan.relations):
        if spec.inline:
            continue
        for values in evaluation.relations[r].as_tuples():
            for bound, _, _ in evaluation.matches(r, values):
                fired.add(bound.rule)
