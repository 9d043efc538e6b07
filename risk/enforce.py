"""Per-field enforcement in a monitor session (Algorithm 1, lines 12-19).

When a session records a call, each argument with a role (``.field tool.arg : role``) is scored
by the detector against the call's trusted and untrusted context (:mod:`.context`) and compared
with the threshold of its role's stratum. The outcome becomes facts of ``stdlib/risk.dl``:
``FieldScore`` for every scored argument, ``FieldFlagged`` when the score is above the
threshold, and ``FieldUnscored`` with the reason when no threshold can decide it (no thresholds,
none for the role, a budget tightened since calibration, another detector, a detector that
failed): the library denies such a call, so enforcement fails closed.

The host reads what the policy's rules decided from the decision:
:func:`interventions` gives the reverts and escalations the ``risk-revert`` and
``risk-escalate`` rules reported.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policyc.runtime.extensions import Attachment
from policyc.stdlib.events import value_text

from .context import call_context
from .declarations import Declarations
from .detectors import Detector, LexicalProvenance, detector_named
from .errors import RiskError
from .thresholds import Thresholds, thresholds_of

FACTS = ("FieldScore", "FieldFlagged", "FieldUnscored")
RELATIONS = (*FACTS, "RoleStratum")
REVERT_RULE = "risk-revert"
ESCALATE_RULE = "risk-escalate"


def field_values(value: Any) -> list[str]:
    """The texts an argument's value is scored as: a list's elements one by one (the field
    scores as its most suspicious element), other values as text."""
    if value is None:
        return []
    if isinstance(value, list):
        return [text for item in value for text in field_values(item)]
    return [value_text(value)]


@dataclass(frozen=True)
class FieldScore:
    call: str
    tool: str
    field: str
    role: str
    score: float | None  # None when the detector failed
    error: str | None = None


def score_call(
    call: Mapping[str, Any],
    events: Mapping[str, Mapping[str, Any]],
    order: Sequence[str],
    declarations: Declarations,
    detector: Detector,
) -> list[FieldScore]:
    """The score of each argument of ``call`` that has a role, against the context of the events
    in ``order`` (those recorded before it). A detector that raises or returns something other
    than a finite number gives a score of None and the error."""
    tool = call.get("tool") or ""
    roles = declarations.fields_of(tool)
    args = call.get("args") or {}
    present = [(name, role) for name, role in sorted(roles.items()) if field_values(args.get(name))]
    if not present:
        return []
    trusted, untrusted = call_context(events, order, call)
    scored = []
    for name, role in present:
        score, error = _score(detector, field_values(args[name]), trusted, untrusted)
        scored.append(FieldScore(str(call.get("id")), tool, name, role, score, error))
    return scored


def _score(
    detector: Detector, values: list[str], trusted: list[str], untrusted: list[str]
) -> tuple[float | None, str | None]:
    best = -math.inf
    for value in values:
        try:
            score = detector.score(value, trusted, untrusted)
        except Exception as error:
            return None, f"detector `{_name(detector)}` failed: {type(error).__name__}: {error}"
        # any real number counts (numpy's float32 is no Python float); booleans do not
        if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
            return None, f"detector `{_name(detector)}` returned {score!r}, not a finite number"
        best = max(best, float(score))
    return best, None


def _name(detector: Any) -> str:
    try:
        return str(detector.name)
    except Exception:
        return type(detector).__name__


class Enforcement(Attachment):
    """What a monitor adds to its sessions for a policy that imports ``risk``: the
    ``RoleStratum`` facts every session starts with, and the facts of each recorded call."""

    def __init__(
        self, declarations: Declarations, thresholds: Thresholds | None, detector: Detector | None
    ) -> None:
        self.declarations = declarations
        self.thresholds = thresholds
        problem: str | None = None
        if detector is None:
            if thresholds is None:
                detector = LexicalProvenance()
            else:
                try:
                    detector = detector_named(thresholds.detector)
                except RiskError as error:
                    detector, problem = LexicalProvenance(), str(error)
        self.detector = detector
        if thresholds is None:
            problem = (
                "no calibrated thresholds were loaded (`policyc calibrate`, then "
                "`policyc compile --thresholds` or `Monitor(policy, thresholds=...)`)"
            )
        elif problem is None and _name(detector) != thresholds.detector:
            problem = (
                f"the thresholds were calibrated for detector `{thresholds.detector}`, "
                f"but the monitor scores with `{_name(detector)}`"
            )
        self.problems: dict[str, str] = {}
        for role, spec in declarations.roles.items():
            if not spec.controlled:
                continue  # a budget of 1 tolerates anything: never flagged, needs no threshold
            if problem is not None:
                self.problems[role] = problem
            elif thresholds is not None and (reason := thresholds.problem_with(role, spec.budget)):
                self.problems[role] = reason

    def start_facts(self, session: Any = None) -> dict[str, list[list[Any]]]:
        """``RoleStratum`` facts: which stratum decides each role, and how it is certified."""
        if self.thresholds is None:
            return {}
        rows = []
        for role in sorted(self.declarations.roles):
            stratum = self.thresholds.role_to_stratum.get(role)
            result = self.thresholds.roles.get(role)
            if stratum is not None and role not in self.problems:
                rows.append([role, stratum, result.certified if result else "individually"])
        return {"RoleStratum": rows} if rows else {}

    def recorded(self, session: Any, event: Mapping[str, Any], position: int) -> dict[str, list[list[Any]]]:
        """The facts of a recorded call, scored against the events before it."""
        if event.get("kind") != "tool_call":
            return {}
        return self.facts(event, session.events, session.order[:position])

    def facts(
        self, call: Mapping[str, Any], events: Mapping[str, Mapping[str, Any]], order: Sequence[str]
    ) -> dict[str, list[list[Any]]]:
        """The facts for a recorded call (``order``: the events recorded before it)."""
        try:
            scored = score_call(call, events, order, self.declarations, self.detector)
        except Exception as error:  # never let a bug here allow a call: every roled field fails closed
            reason = f"scoring failed: {type(error).__name__}: {error}"
            tool = call.get("tool") or ""
            scored = [
                FieldScore(str(call.get("id")), tool, name, role, None, reason)
                for name, role in sorted(self.declarations.fields_of(tool).items())
            ]
        if not scored:  # a call without arguments that have a role
            return {}
        out: dict[str, list[list[Any]]] = {name: [] for name in FACTS}
        for s in scored:
            if s.score is not None:
                out["FieldScore"].append([s.call, s.field, s.role, s.score])
            spec = self.declarations.roles.get(s.role)
            if spec is not None and not spec.controlled:
                continue
            stratum = None if self.thresholds is None else self.thresholds.stratum_of(s.role)
            reason = s.error or self.problems.get(s.role)
            if reason is None and (spec is None or stratum is None):
                reason = f"role `{s.role}` has no threshold"
            if reason is not None or stratum is None or s.score is None:
                out["FieldUnscored"].append([s.call, s.field, s.role, reason or "no score"])
            elif stratum.flags(s.score):
                out["FieldFlagged"].append([s.call, s.field, s.role])
        return {name: rows for name, rows in out.items() if rows}


def imports_risk(plan: Any) -> bool:
    """Whether a plan reads the facts of the `risk` library (its input relations)."""
    return set(RELATIONS) <= {spec.name for spec in plan.relations if spec.input}


def enforcement(
    plan: Any,
    declarations: Declarations | None,
    loaded: Thresholds | None,
    thresholds: Any = None,
    detector: Detector | None = None,
) -> Enforcement | None:
    """The enforcement a monitor of a policy needs (``declarations`` and ``loaded``: the roles
    and the thresholds the policy carries; ``thresholds`` and ``detector``: the monitor's
    options): None when the policy does not import ``risk`` (:class:`RiskError` if thresholds
    or a detector were given for such a policy, or the thresholds cannot be read)."""
    if not imports_risk(plan):
        if thresholds is not None or detector is not None:
            raise RiskError(
                "thresholds or a detector were given, but the policy does not `.import risk`: "
                "nothing would read the fields' scores"
            )
        return None
    if detector is not None and not isinstance(detector, Detector):
        raise RiskError("a detector needs a `name` and a `score(value, trusted, untrusted)` method")
    given = thresholds_of(thresholds) if thresholds is not None else loaded
    return Enforcement(declarations or Declarations(), given, detector)


@dataclass(frozen=True)
class Interventions:
    """What the risk rules of the library decided for a denied call."""

    reverts: dict[str, str] = field(default_factory=dict)  # argument -> trusted value
    escalations: tuple[str, ...] = ()  # why the user must confirm
    other: tuple[Any, ...] = ()  # every other deny reason

    @property
    def revertible(self) -> bool:
        """Whether running the call again with the reverted arguments may be allowed: it was
        denied only for arguments with a trusted value."""
        return bool(self.reverts) and not self.escalations and not self.other

    def revised(self, call: Mapping[str, Any], new_id: str) -> dict[str, Any]:
        """The call with every reverted argument set to its trusted value, as a new event."""
        if not self.revertible:
            raise RiskError("the call was denied for other reasons than arguments with a trusted value")
        args = dict(call.get("args") or {})
        for name, text in self.reverts.items():
            args[name] = _typed(text, args.get(name))
        return {**call, "id": new_id, "args": args}


def _typed(text: str, original: Any) -> Any:
    """A trusted value, given as text as ``ToolArg`` holds it, with the type of the argument it
    replaces: a list or a number is parsed back when the text is exactly its ``ToolArg`` form
    (so the revised call's argument is the trusted value again); otherwise the text."""
    if original is None or isinstance(original, str):
        return text
    from policyc.runtime.jsonio import loads

    try:
        parsed = loads(text)
    except ValueError:
        return text
    return parsed if not isinstance(parsed, str) and value_text(parsed) == text else text


def interventions(decision: Any) -> Interventions:
    """The reverts and escalations behind a decision (empty when it was allowed)."""
    reverts: dict[str, str] = {}
    escalations: list[str] = []
    other = []
    for reason in decision.reasons:
        bindings = reason.bindings
        if reason.rule == REVERT_RULE and "f" in bindings and "v" in bindings:
            field_name, value = str(bindings["f"]), str(bindings["v"])
            if reverts.get(field_name, value) != value:  # two trusted values: the user must choose
                escalations.append(f"argument `{field_name}` has more than one trusted value")
            reverts[field_name] = value
        elif reason.rule == ESCALATE_RULE:
            escalations.append(str(bindings.get("why", reason.message or "")))
        else:
            other.append(reason)
    return Interventions(reverts, tuple(dict.fromkeys(escalations)), tuple(other))
