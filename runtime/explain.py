"""Explanations: why a fact holds (a derivation tree), and why one does not.

**Why.** A derived fact was produced by some rule whose body matched other facts; each of those
is explained the same way, down to input facts. Recursive relations need care: a derivation
must not lean on the fact it explains, so the evaluation is repeated recording the round at
which each recursive fact first appeared, and a rule instance is used only if the facts it
matched from the same stratum appeared in earlier rounds. Trees deeper than ``MAX_DEPTH`` are
cut, and say so.

**Why not.** For each rule that could derive the fact, the rule is evaluated with the fact's
values in its head, one step more at a time, to find the first literal that no binding gets
past: "`not UserConfirmed()` fails for the 1 binding that reached it". Steps are taken in the
order the evaluator runs them, not necessarily the order of the source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import codegen
from .errors import INVALID_ARGUMENT
from .values import render_fact, render_value

if TYPE_CHECKING:
    from .evaluator import Evaluation
    from .verdict import Decision

MAX_DEPTH = 40
SAMPLES = 3


@dataclass(frozen=True)
class Derivation:
    fact: str
    kind: str  # input | rule | truncated
    rule: str | None = None
    location: str | None = None
    text: str | None = None
    bindings: dict[str, Any] = field(default_factory=dict)
    children: tuple[Derivation, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "fact": self.fact,
            "kind": self.kind,
            "rule": self.rule,
            "location": self.location,
            "text": self.text,
            "bindings": self.bindings,
            "children": [c.to_json() for c in self.children],
        }

    @classmethod
    def from_json(cls, data: Any) -> Derivation:
        """A derivation from its JSON form (``ValueError`` if it is not one), however deep."""
        fields = _object(data, "a derivation", ("fact", "kind", "children"))
        children = fields["children"]
        if not isinstance(children, list):
            raise ValueError("a derivation's `children` are not an array")
        return cls(
            _text(fields, "fact"),
            _text(fields, "kind"),
            _text(fields, "rule", True),
            _text(fields, "location", True),
            _text(fields, "text", True),
            _bindings(fields.get("bindings")),
            tuple(cls.from_json(child) for child in children),
        )

    def render(self, prefix: str = "", last: bool = True, top: bool = True) -> list[str]:
        branch = "" if top else ("└─ " if last else "├─ ")
        if self.kind == "input":
            head = f"{self.fact}  (input fact)"
        elif self.kind == "truncated":
            head = f"{self.fact}  (derivation cut at depth {MAX_DEPTH})"
        else:
            where = (
                f" [{self.location}]" if self.location and not str(self.rule).endswith(self.location) else ""
            )
            head = f"{self.fact}  by rule {self.rule}{where}"
        lines = [prefix + branch + head]
        inner = prefix + ("" if top else ("   " if last else "│  "))
        if self.kind == "rule":
            if self.text:
                lines.extend(inner + "   " + line.strip() for line in self.text.splitlines())
            if self.bindings:
                shown = ", ".join(f"{k} = {render_value(v)}" for k, v in self.bindings.items())
                lines.append(inner + "   with " + shown)
        for i, child in enumerate(self.children):
            lines.extend(child.render(inner, i == len(self.children) - 1, top=False))
        return lines


@dataclass(frozen=True)
class Blocked:
    """Why one rule does not derive the fact."""

    rule: str
    location: str
    text: str
    literal: str | None  # the literal no binding gets past (None: the head does not match)
    reached: int  # bindings that reached it (at most SAMPLES * 100 counted)
    samples: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "location": self.location,
            "text": self.text,
            "failing_literal": self.literal,
            "bindings_reaching_it": self.reached,
            "sample_bindings": list(self.samples),
        }

    @classmethod
    def from_json(cls, data: Any) -> Blocked:
        fields = _object(data, "a blocked rule", ("rule", "location", "text", "bindings_reaching_it"))
        reached, samples = fields["bindings_reaching_it"], fields.get("sample_bindings") or []
        if not isinstance(reached, int) or isinstance(reached, bool) or not isinstance(samples, list):
            raise ValueError(
                "a blocked rule's `bindings_reaching_it` or `sample_bindings` is not what it holds"
            )
        return cls(
            _text(fields, "rule"),
            _text(fields, "location"),
            _text(fields, "text"),
            _text(fields, "failing_literal", True),
            reached,
            tuple(_bindings(sample) for sample in samples),
        )


@dataclass(frozen=True)
class WhyNot:
    fact: str
    holds: bool
    note: str | None
    rules: tuple[Blocked, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "fact": self.fact,
            "holds": self.holds,
            "note": self.note,
            "rules": [r.to_json() for r in self.rules],
        }

    @classmethod
    def from_json(cls, data: Any) -> WhyNot:
        fields = _object(data, "a why-not", ("fact", "holds"))
        rules = fields.get("rules") or []
        if not isinstance(fields["holds"], bool) or not isinstance(rules, list):
            raise ValueError("a why-not's `holds` or `rules` is not what it holds")
        return cls(
            _text(fields, "fact"),
            fields["holds"],
            _text(fields, "note", True),
            tuple(Blocked.from_json(rule) for rule in rules),
        )

    def render(self) -> list[str]:
        if self.holds:
            return [f"{self.fact} holds."]
        lines = [f"{self.fact} does not hold."]
        if self.note:
            lines.append(self.note)
        for blocked in self.rules:
            where = "" if blocked.rule.endswith(blocked.location) else f" [{blocked.location}]"
            lines.append(f"- rule {blocked.rule}{where}")
            lines.extend("    " + line.strip() for line in blocked.text.splitlines())
            if blocked.literal is None:
                lines.append("  its head does not match the fact")
            else:
                many = "binding" if blocked.reached == 1 else "bindings"
                lines.append(
                    f"  fails at `{blocked.literal}`, for the {blocked.reached} {many} that reached it"
                )
                for sample in blocked.samples:
                    if sample:
                        lines.append(
                            "    e.g. " + ", ".join(f"{k} = {render_value(v)}" for k, v in sample.items())
                        )
        return lines


# ----------------------------------------------------------------------------------- why


def why(evaluation: Evaluation, name: str, values: tuple) -> Derivation | None:
    """A derivation of the fact, or None when it does not hold."""
    plan = evaluation.plan
    index = plan.relation_index()
    if name not in index:
        raise KeyError(f"the policy has no relation `{name}`")
    ranked = _ranked(evaluation)
    return _derive(ranked, index[name], tuple(values), 0)


def _ranked(evaluation: Evaluation) -> Evaluation:
    """The same evaluation, recording the round each recursive fact first appeared in."""
    again = evaluation.fresh()
    again.inputs = evaluation.inputs
    again.load(evaluation.inputs)
    again.run(track_ranks=True)
    return again


def _stratum_of(evaluation: Evaluation) -> dict[int, int]:
    return {r: n for n, s in enumerate(evaluation.plan.strata) for r in s.relations}


def _derive(evaluation: Evaluation, relation: int, values: tuple, depth: int) -> Derivation | None:
    plan = evaluation.plan
    spec = plan.relations[relation]
    fact = render_fact(spec.name, values)
    if spec.inline:
        holds = evaluation.I[relation](*values) is True
    else:
        holds = evaluation.relations[relation].contains(values)
    if not holds:
        return None
    if values in evaluation.inputs.get(relation, ()):
        return Derivation(fact, "input")
    if depth >= MAX_DEPTH:
        return Derivation(fact, "truncated")
    ranks = evaluation.ranks or {}
    strata = _stratum_of(evaluation)
    own_rank = ranks.get(relation, {}).get(values)
    for bound, match in evaluation.compiled.bound[relation]:
        info = plan.rules[bound.rule]
        for slots, matched in match(
            evaluation.relations, evaluation.F, evaluation.I, evaluation.E, None, *values
        ):
            if own_rank is not None and any(
                strata.get(r) == strata.get(relation) and ranks.get(r, {}).get(t, own_rank) >= own_rank
                for r, t in matched
            ):
                continue  # leans on facts that appeared no earlier than this one
            children = []
            for r, t in matched:
                child = _derive(evaluation, r, t, depth + 1)
                if child is not None:
                    children.append(child)
            bindings = {n: v for n, v in zip(info.variables, slots, strict=False) if n and v is not None}
            return Derivation(
                fact, "rule", info.id, f"{info.file}:{info.line}", info.text, bindings, tuple(children)
            )
    return Derivation(fact, "input")


# ------------------------------------------------------------------------------- why not


def why_not(evaluation: Evaluation, name: str, values: tuple) -> WhyNot:
    plan = evaluation.plan
    index = plan.relation_index()
    if name not in index:
        raise KeyError(f"the policy has no relation `{name}`")
    relation = index[name]
    spec = plan.relations[relation]
    fact = render_fact(name, values)
    if len(values) != spec.arity:
        return WhyNot(fact, False, f"`{name}` has {spec.arity} arguments, not {len(values)}")
    holds = (
        evaluation.I[relation](*values) is True
        if spec.inline
        else evaluation.relations[relation].contains(values)
    )
    if holds:
        return WhyNot(fact, True, None)
    rules = evaluation.compiled.bound[relation]
    note = None
    if spec.input:
        note = "it is not among the input facts" + ("" if rules else ", and no rule derives it")
    elif not rules:
        note = f"no rule derives `{name}`"
    dominators = evaluation.dominators(relation, values)
    if dominators:
        rule, by = dominators[0]
        note = (
            f"it is dropped when derived: {render_fact(name, by)} dominates it "
            f"(subsumption rule {plan.rules[rule.rule].id})"
        )
    blocked = tuple(_blocked(evaluation, bound, values) for bound, _ in rules)
    return WhyNot(fact, False, note, blocked)


def _blocked(evaluation: Evaluation, bound: Any, values: tuple) -> Blocked:
    plan = evaluation.plan
    info = plan.rules[bound.rule]
    location = f"{info.file}:{info.line}"
    previous: list[tuple] = []
    for upto in range(len(bound.steps) + 1):
        _, prefix = codegen.compile_bound_rule(plan, bound, "prefix", upto=upto)
        found = []
        for slots, _ in prefix(evaluation.relations, evaluation.F, evaluation.I, evaluation.E, None, *values):
            found.append(slots)
            if len(found) >= SAMPLES * 100:
                break
        if not found:
            if upto == 0:
                return Blocked(info.id, location, info.text, None, 0, ())
            literal_index = bound.literals[upto - 1]
            literal = (
                info.literals[literal_index] if 0 <= literal_index < len(info.literals) else "(an aggregate)"
            )
            samples = tuple(
                {n: v for n, v in zip(info.variables, s, strict=False) if n and v is not None}
                for s in previous[:SAMPLES]
            )
            return Blocked(info.id, location, info.text, literal, len(previous), samples)
        previous = found
    # every step has bindings: only a head value computed by the body can still differ
    return Blocked(info.id, location, info.text, "(the head's computed values)", len(previous), ())


# ------------------------------------------------------------------------------ JSON


def _object(data: Any, what: str, required: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"{what} is not an object")
    missing = [name for name in required if name not in data]
    if missing:
        raise ValueError(f"{what} has no `{missing[0]}`")
    return data


def _text(fields: dict[str, Any], name: str, optional: bool = False) -> Any:
    value = fields.get(name)
    if not isinstance(value, str) and not (optional and value is None):
        raise ValueError(f"`{name}` is not a text")
    return value


def _bindings(data: Any) -> dict[str, Any]:
    """Bindings from JSON: each value as the policy's value it stands for (a record for an
    array, an ADT value for an object of one key)."""
    from .values import from_json

    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("bindings are not an object")
    return {str(name): from_json(value) for name, value in data.items()}


# ------------------------------------------------------------------------------ decisions


@dataclass(frozen=True)
class Explanation:
    action: Any
    allowed: bool
    summary: str
    derivations: tuple[Derivation, ...] = ()
    why_not: WhyNot | None = None
    errors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "allowed": self.allowed,
            "summary": self.summary,
            "derivations": [d.to_json() for d in self.derivations],
            "why_not": self.why_not.to_json() if self.why_not else None,
            "errors": list(self.errors),
        }

    @classmethod
    def from_json(cls, data: Any) -> Explanation:
        """An explanation from its JSON form (the service's), the same object as the one made
        in process (``ValueError`` if it is not one)."""
        fields = _object(data, "an explanation", ("action", "allowed", "summary"))
        derivations, why_not, errors = (fields.get(k) for k in ("derivations", "why_not", "errors"))
        if not isinstance(fields["allowed"], bool):
            raise ValueError("an explanation's `allowed` is not a boolean")
        if not isinstance(derivations or [], list) or not isinstance(errors or [], list):
            raise ValueError("an explanation's `derivations` or `errors` is not an array")
        if not all(isinstance(error, str) for error in errors or []):
            raise ValueError("an explanation's `errors` are not texts")
        return cls(
            fields["action"],
            fields["allowed"],
            _text(fields, "summary"),
            tuple(Derivation.from_json(d) for d in derivations or []),
            None if why_not is None else WhyNot.from_json(why_not),
            tuple(errors or []),
        )

    def text(self) -> str:
        lines = [self.summary]
        for error in self.errors:
            lines.append(f"- {error}")
        for derivation in self.derivations:
            lines.extend(derivation.render())
        if self.why_not is not None:
            lines.extend(self.why_not.render())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def explain_decision(decision: Decision) -> Explanation:
    action = decision.action
    refused = tuple(r.message or "" for r in decision.reasons if r.rule == INVALID_ARGUMENT)
    if refused:  # no rule ran on the call (runtime/arguments.py)
        summary = "refused before any rule ran: its arguments do not match the policy's declarations"
        return Explanation(action, False, summary, errors=refused)
    if decision.evaluation is None:
        return Explanation(action, decision.allowed, "no evaluation to explain")
    if decision.errored:  # what the decision said (an evaluation from scratch would meet more)
        return Explanation(
            action,
            False,
            "denied: the policy could not decide this action",
            errors=tuple(r.message or r.rule for r in decision.reasons),
        )
    evaluation = decision.evaluation.explanation()
    deny = why(evaluation, "Deny", (action,))
    if deny is not None:
        return Explanation(action, False, f"denied: {render_fact('Deny', (action,))} holds", (deny,))
    if decision.verdict == "escalate" or decision.approval is not None:
        escalate = why(evaluation, "Escalate", (action,))
        if escalate is not None:
            fact = render_fact("Escalate", (action,))
            if decision.approval is not None:
                summary = f"allowed: {fact} holds and approval {decision.approval.id} approved the call"
                return Explanation(action, True, summary, (escalate,))
            return Explanation(action, False, f"needs approval: {fact} holds and no Deny", (escalate,))
    allow = why(evaluation, "Allow", (action,))
    if allow is not None:
        return Explanation(
            action, True, f"allowed: {render_fact('Allow', (action,))} holds and no Deny", (allow,)
        )
    if decision.allowed:
        return Explanation(
            action,
            True,
            "allowed by the default: no rule denies it",
            why_not=why_not(evaluation, "Deny", (action,)),
        )
    return Explanation(
        action,
        False,
        "denied by the default: no rule allows it",
        why_not=why_not(evaluation, "Allow", (action,)),
    )
