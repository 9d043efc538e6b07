"""A loaded policy, ready to evaluate facts and decide actions.

>>> import policyc
>>> policy = policyc.load('''
... .input Send, Untrusted
... @id("no-untrusted-send") @message("{a} depends on untrusted input")
... Deny(a) :- Send(a), Untrusted(a).
... ''')
>>> result = policy.evaluate({"Send": [["e1"], ["e2"]], "Untrusted": [["e2"]]})
>>> result.relation("Deny")
{('e2',)}
>>> decision = result.decide("e2")
>>> decision.allowed, decision.reasons[0].message
(False, '`e2` depends on untrusted input')
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policyc.compiler.plan import Plan

from .evaluator import CompiledPlan, EvalError, Evaluation, LimitExceeded, Limits
from .facts import FactsError, FactsInput, validate
from .functors import Functors, bind
from .verdict import Decision, decide

if TYPE_CHECKING:
    from .extensions import Extension


class Policy:
    """A compiled policy with its functors bound, and what its extensions read of it."""

    def __init__(
        self,
        plan: Plan,
        functors: Functors = None,
        limits: Limits | None = None,
        manifest: dict[str, Any] | None = None,
        *,
        extensions: Iterable[Extension] | None = None,
        sections: Mapping[str, Any] | None = None,
        fields: Mapping[tuple[str, str], str] | None = None,
    ) -> None:
        from .extensions import resolve

        self.plan = plan
        self.compiled = CompiledPlan(plan)
        self.functors = bind(plan, functors)
        self.limits = limits or Limits()
        self.manifest = manifest
        # the extensions its monitors run, and what each kept of the policy (by name)
        self.extensions = resolve(extensions)
        self.sections = dict(sections or {})
        # each declared field's role, `(tool, argument) -> role` (`.field`; a bundle's manifest)
        self.fields = dict(fields) if fields is not None else field_roles(manifest)

    def __getattr__(self, name: str) -> Any:
        """An attribute an extension shows for what it read (``policy.thresholds``)."""
        if not name.startswith("_"):
            for extension in self.__dict__.get("extensions", ()):
                shown = extension.attributes(self.__dict__["sections"].get(extension.name))
                if name in shown:
                    return shown[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def relations(self) -> list[str]:
        return [r.name for r in self.plan.relations]

    def evaluation(
        self, facts: FactsInput | None = None, *, strict: bool = False, origin: str = "facts"
    ) -> Evaluation:
        evaluation = Evaluation(self.compiled, self.functors, self.limits)
        try:
            checked = validate(self.plan, facts or {}, origin, ordered=True, as_rows=self.compiled.index_only)
        except FactsError as error:
            if strict:
                raise
            evaluation.errors.append(EvalError("facts", str(error)))
            return evaluation
        evaluation.load(checked)
        evaluation.run()
        if strict and evaluation.errored:
            raise EvaluationError(evaluation.errors)
        return evaluation

    def evaluate(
        self, facts: FactsInput | None = None, *, strict: bool = False, origin: str = "facts"
    ) -> Result:
        """Every relation the policy derives from the facts. Problems (malformed facts, a
        failing functor, a limit) mark the result errored; with ``strict`` they raise.
        ``origin`` names the facts in messages (a file name, say)."""
        return Result(self.evaluation(facts, strict=strict, origin=origin))

    def decide(self, facts: FactsInput | None, action: Any) -> Decision:
        """The verdict on one action given the facts (an errored evaluation denies)."""
        return self.evaluate(facts).decide(action)


def field_roles(manifest: Mapping[str, Any] | None) -> dict[tuple[str, str], str]:
    """The roles of the fields a bundle's manifest declares, by ``(tool, argument)``."""
    roles: dict[tuple[str, str], str] = {}
    for entry in (manifest or {}).get("fields") or ():
        if isinstance(entry, Mapping):
            roles[(str(entry.get("tool")), str(entry.get("argument")))] = str(entry.get("role"))
    return roles


# the errors whose reach is the facts they touch (the others, malformed facts and limits, make
# the whole evaluation unusable)
CONTAINED = frozenset({"rule", "functor", "arithmetic"})


class _Errored:
    """An evaluation seen with other errors (a limit met when it was evaluated again)."""

    def __init__(self, evaluation: Evaluation, error: EvalError) -> None:
        self.evaluation = evaluation
        self.plan = evaluation.plan
        self.index = evaluation.index
        self.errors = [error]

    def explanation(self) -> Evaluation:
        return self.evaluation

    def holds(self, relation: int, values: tuple) -> bool:
        return self.evaluation.holds(relation, values)

    def matches(self, relation: int, values: tuple) -> Iterator[tuple[Any, tuple, tuple]]:
        return self.evaluation.matches(relation, values)


class EvaluationError(Exception):
    def __init__(self, errors: list[EvalError]) -> None:
        super().__init__("; ".join(e.message for e in errors))
        self.errors = errors


@dataclass(frozen=True)
class Result:
    evaluation: Evaluation

    @property
    def errored(self) -> bool:
        return self.evaluation.errored

    @property
    def errors(self) -> tuple[EvalError, ...]:
        return tuple(self.evaluation.errors)

    def relation(self, name: str) -> set[tuple]:
        index = self.evaluation.plan.relation_index()
        if name not in index:
            raise KeyError(f"the policy has no relation `{name}`")
        return self.evaluation.relations[index[name]].as_tuples()

    @property
    def relations(self) -> dict[str, set[tuple]]:
        plan = self.evaluation.plan
        return {
            spec.name: rel.as_tuples()
            for spec, rel in zip(plan.relations, self.evaluation.relations, strict=True)
            if not spec.inline
        }

    def decide(self, action: Any) -> Decision:
        """The verdict on an action. When the evaluation met errors of its rules (a comparison of
        values of different types, a functor that raised), only what they touch is unknown: the
        action is decided as usual unless its verdict needs an unknown fact, and then refused
        saying why (docs/runtime.md, "Errors")."""
        evaluation = self.evaluation
        if evaluation.errors and all(e.kind in CONTAINED for e in evaluation.errors):
            from .session_unknown import verdict

            try:
                solver = self.three_valued
            except LimitExceeded as limit:
                return decide(_Errored(evaluation, EvalError("limit", str(limit))), action)
            return verdict(solver, action, evaluation)
        return decide(evaluation, action)

    @functools.cached_property
    def three_valued(self) -> Any:
        """The evaluation again, three-valued (:mod:`.unknown`): known and unknown facts."""
        from .unknown import from_scratch

        evaluation = self.evaluation
        inputs = {**evaluation.inputs, **{r: evaluation.relations[r] for r in evaluation.kept}}
        return from_scratch(evaluation.compiled, evaluation.functors, evaluation.limits, inputs)

    def why(self, name: str, values: tuple) -> Any:
        from .explain import why

        return why(self.evaluation, name, tuple(values))

    def why_not(self, name: str, values: tuple) -> Any:
        from .explain import why_not

        return why_not(self.evaluation, name, tuple(values))
