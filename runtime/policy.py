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
(False, 'e2 depends on untrusted input')
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.plan import Plan
from policyc.compiler.stages import Parsed, Stratified

from .evaluator import CompiledPlan, EvalError, Evaluation, Limits
from .facts import FactsError, FactsInput, validate
from .functors import Functors, bind
from .verdict import Decision, decide


class PolicyError(Exception):
    """A policy that cannot be loaded: compile errors, an unreadable or invalid bundle."""

    def __init__(self, message: str, diagnostics: tuple[Diagnostic, ...] = ()) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


class Policy:
    """A compiled policy with its functors bound."""

    def __init__(
        self,
        plan: Plan,
        functors: Functors = None,
        limits: Limits | None = None,
        manifest: dict[str, Any] | None = None,
        risk: Any = None,
        thresholds: Any = None,
    ) -> None:
        self.plan = plan
        self.compiled = CompiledPlan(plan)
        self.functors = bind(plan, functors)
        self.limits = limits or Limits()
        self.manifest = manifest
        self.risk = risk  # the roles and field roles (policyc.risk.declarations.Declarations)
        self.thresholds = thresholds  # calibrated thresholds the bundle carries, if any

    @property
    def relations(self) -> list[str]:
        return [r.name for r in self.plan.relations]

    def evaluation(
        self, facts: FactsInput | None = None, *, strict: bool = False, origin: str = "facts"
    ) -> Evaluation:
        evaluation = Evaluation(self.compiled, self.functors, self.limits)
        try:
            checked = validate(self.plan, facts or {}, origin)
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
        return decide(self.evaluation, action)

    def why(self, name: str, values: tuple) -> Any:
        from .explain import why

        return why(self.evaluation, name, tuple(values))

    def why_not(self, name: str, values: tuple) -> Any:
        from .explain import why_not

        return why_not(self.evaluation, name, tuple(values))


PATH_SUFFIXES = (".dl", ".bundle", ".json")


def is_path(policy: str | os.PathLike[str]) -> bool:
    """Whether :func:`load` reads ``policy`` as a path rather than source text: a
    ``PathLike`` always is one; a string is one when it names an existing file, or when it is
    one line ending in ``.dl``, ``.bundle`` or ``.json`` (a missing file is then "cannot
    read", never compiled as text)."""
    if isinstance(policy, os.PathLike):
        return True
    if os.path.exists(policy):
        return True
    return "\n" not in policy and policy.strip().endswith(PATH_SUFFIXES)


def load(
    policy: str | os.PathLike[str] | None = None,
    functors: Functors = None,
    *,
    source: str | None = None,
    verify_key: str | os.PathLike[str] | bytes | None = None,
    limits: Limits | None = None,
) -> Policy:
    """A policy from a source file, a bundle file or source text (:class:`PolicyError` if it
    has errors or cannot be read; ``MissingFunctors`` if a functor has no implementation).

    ``policy`` is a path when :func:`is_path` says so, else source text; ``source=`` gives
    source text explicitly (never looked up as a file). Source text carries no signature, so
    a ``verify_key`` with it is refused."""
    if (policy is None) == (source is None):
        raise TypeError("policyc.load takes a policy path or text, or source=TEXT (exactly one)")
    if source is None:
        assert policy is not None
        if not isinstance(policy, str | os.PathLike):
            raise TypeError(f"policyc.load takes a path or source text, not {type(policy).__name__}")
        if is_path(policy):
            return _load_file(Path(policy), functors, verify_key, limits)
        source = policy
    elif not isinstance(source, str):
        raise TypeError(f"source= takes policy text (a str), not {type(source).__name__}")
    if verify_key is not None:
        raise PolicyError(
            "a verification key was given, but the policy is source text, which carries no signature "
            "to verify (load a signed bundle by its path)"
        )
    return load_source(source, functors, limits=limits)


def load_source(
    text: str, functors: Functors = None, *, limits: Limits | None = None, name: str = "<source>"
) -> Policy:
    """A policy from source text (reported as ``name``; includes are relative to the current
    folder)."""
    from policyc.compiler.pipeline import compile_source
    from policyc.risk.declarations import declarations_of

    compilation = compile_source(text, name, upto="plan")
    return Policy(plan_of(compilation), functors, limits, risk=declarations_of(compilation))


def _load_file(path: Path, functors: Functors, verify_key: Any, limits: Limits | None) -> Policy:
    from policyc.compiler.files import read_bytes

    from .bundle import is_bundle, read_bundle

    try:
        data = read_bytes(path)  # a policy or a bundle
    except OSError as error:
        raise PolicyError(f"cannot read `{path}`: {error.strerror or error}") from None
    if is_bundle(data):
        plan, manifest = read_bundle(data, str(path), verify_key)
        from policyc.risk.enforce import bundle_risk

        return Policy(plan, functors, limits, manifest, *bundle_risk(manifest, str(path)))
    if verify_key is not None:
        raise PolicyError(f"`{path}` is not a bundle, so it carries no signature to verify")
    from policyc.compiler.loader import load_data
    from policyc.compiler.pipeline import compile_program
    from policyc.risk.declarations import declarations_of

    program, found = load_data(data, str(path))
    compilation = compile_program(program, found, upto="plan")
    return Policy(plan_of(compilation), functors, limits, risk=declarations_of(compilation))


def plan_of(compilation: Parsed) -> Plan:
    """The plan of a compiled policy (the pipeline's ``plan`` stage, run if the compilation
    stopped before it), or :class:`PolicyError` with its error diagnostics."""
    from policyc.compiler.pipeline import plan
    from policyc.compiler.planner import PlanningError

    errors = tuple(d for d in compilation.diagnostics if d.is_error)
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        where = f"{first.span.file}:{first.span.line}:{first.span.column}"
        raise PolicyError(f"{where}: {first.message} [{first.name}]{more}", errors)
    if not isinstance(compilation, Stratified):
        raise PolicyError(f"the policy was compiled only up to its {compilation.stage} stage")
    try:
        return plan(compilation).plan
    except PlanningError as error:
        raise PolicyError(str(error)) from None
