"""Forecasts in a monitor session: the probability of staying safe, and interventions.

``Monitor(policy, forecast=Forecaster("model.json", threshold=0.7, intervention="warn"))``
binds a model to a monitor; then ``session.forecast()`` abstracts the session's current step
into the model's predicates and looks the state up: a dictionary lookup in the probabilities
the model cached when it was learned, whatever the length of the session or the size of the
chain. Abstracting the step costs a lookup for a predicate over a relation the session
maintains, and what the step changed for one over a relation kept step by step
(:mod:`policyc.runtime.volatile`).

* The **probability of staying safe** is ``1 - P(F unsafe)`` from the current state, or
  ``1 - P(F<=k unsafe)`` with ``horizon=k``.
* When the unsafe predicate already holds, it is 0.
* An **unseen state** (no recorded session ever was in it) has no estimate. With
  ``unseen="worst"`` (the default) the forecast assumes the worst — staying safe has
  probability 0, so the threshold is crossed — because the model has no evidence that the
  session is safe; with ``unseen="max"`` it takes the highest probability of reaching the unsafe
  state of any state of the model. Either way ``Forecast.known`` is false.
* A session that failed (a malformed event, a failing functor) has unknown predicates: the
  forecast is 0 too, with the error.

Below the threshold ``θ`` the forecast carries an **intervention**:

* ``"warn"``: the decision is not changed; ``Forecast.feedback`` is a risk alert for the agent's
  context with the safety rule, the current state and the evidence (the facts behind the
  predicates that hold, and how many recorded sessions in this state went on to reach the
  unsafe state) — ProbGuard's *reflect* prompt;
* ``"stop"``: the monitor halts the session: this decision and every later one are denials
  with the rule ``policyc:forecast``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from policyc.runtime.extensions import Attachment
from policyc.runtime.verdict import Decision, Reason

from .abstraction import Abstraction, fingerprint
from .errors import ForecastError
from .model import Model, load
from .patterns import parse_predicate

INTERVENTIONS = ("warn", "stop")
UNSEEN = ("worst", "max")
RULE = "policyc:forecast"


@dataclass(frozen=True)
class Forecaster:
    """What a monitor forecasts with: a model (a :class:`Model` or the path of a model file), the
    threshold θ on the probability of staying safe, the intervention below it, an optional
    horizon (staying safe for the next ``horizon`` steps; it must be one the model was learned
    with), and how to treat unseen states."""

    model: Model | str | Path
    threshold: float | None = None
    intervention: str = "warn"
    horizon: int | None = None
    unseen: str = "worst"

    def bind(self, monitor: Any) -> BoundForecaster:
        return BoundForecaster(self, monitor)


@dataclass(frozen=True)
class Forecast:
    """The forecast at one step of a session."""

    step: int  # events recorded so far
    state: str | None  # the model's state id (None when unseen, unsafe or unknown)
    values: tuple[tuple[str, bool], ...]  # each predicate's value (empty when unknown)
    known: bool  # the state is in the model (or the unsafe predicate holds)
    unsafe_now: bool  # the unsafe predicate holds
    unsafe: float  # P(F unsafe) from here
    within: dict[int, float]  # P(F<=k unsafe) for the model's horizons
    safe: float  # the probability of staying safe the threshold is compared with
    threshold: float | None = None
    intervention: str | None = None  # "warn" or "stop" when below the threshold
    rule: str = ""  # the safety rule, in words
    evidence: tuple[str, ...] = ()
    facts: tuple[str, ...] = field(default=(), repr=False)  # the facts behind the predicates that hold
    error: str | None = None

    @property
    def below(self) -> bool:
        return self.threshold is not None and self.safe < self.threshold

    @property
    def feedback(self) -> str:
        """The risk alert for the agent's context (empty when there is no intervention)."""
        if self.intervention is None:
            return ""
        verb = "The session is stopped" if self.intervention == "stop" else "Risk alert"
        lines = [
            f"{verb}: the probability of staying safe has dropped to {self.safe:.2f} "
            f"(threshold {self.threshold:.2f}).",
            f"Safety rule: {self.rule}.",
            f"Current state: {self.describe()}.",
        ]
        lines.extend(f"Evidence: {item}." for item in self.evidence)
        return "\n".join(lines)

    def describe(self) -> str:
        if self.error is not None:
            return f"unknown ({self.error})"
        if self.unsafe_now:
            return "unsafe"
        held = [name for name, value in self.values if value]
        return ", ".join(held) if held else "no predicate holds"

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "state": self.state,
            "values": dict(self.values),
            "known": self.known,
            "unsafe_now": self.unsafe_now,
            "unsafe": self.unsafe,
            "within": {str(k): v for k, v in self.within.items()},
            "safe": self.safe,
            "threshold": self.threshold,
            "intervention": self.intervention,
            "rule": self.rule,
            "evidence": list(self.evidence),
            "facts": list(self.facts),
            "error": self.error,
        }


class BoundForecaster(Attachment):
    """A forecaster bound to a monitor's policy (the model must have been learned with it):
    what the forecast extension attaches to the monitor (``monitor.forecaster``)."""

    def __init__(self, config: Forecaster, monitor: Any) -> None:
        if config.intervention not in INTERVENTIONS:
            raise ForecastError(
                f"unknown intervention `{config.intervention}`; use {' or '.join(INTERVENTIONS)}"
            )
        if config.unseen not in UNSEEN:
            raise ForecastError(
                f"unknown treatment of unseen states `{config.unseen}`; use {' or '.join(UNSEEN)}"
            )
        if config.threshold is not None and not 0 <= config.threshold <= 1:
            raise ForecastError(f"the threshold is a probability, not {config.threshold}")
        if config.intervention == "stop" and config.threshold is None:
            raise ForecastError("the intervention `stop` needs a threshold: `Forecaster(..., threshold=θ)`")
        model = config.model if isinstance(config.model, Model) else load(config.model)
        if config.horizon is not None and config.horizon not in model.horizons:
            learned = ", ".join(str(k) for k in model.horizons) or "none"
            raise ForecastError(f"the model has no horizon {config.horizon} (it was learned with: {learned})")
        plan = monitor.prepared.plan
        if model.fingerprint != fingerprint(plan):
            raise ForecastError(
                f"the model was learned with another policy ({model.policy_path or 'unnamed'}); "
                "learn it again with this one (`policyc forecast learn`)"
            )
        predicates = [replace(parse_predicate(p.pattern), name=p.name) for p in model.predicates]
        unsafe = replace(parse_predicate(model.unsafe.pattern), name=model.unsafe.name)
        self.abstraction = Abstraction(monitor, predicates, unsafe)
        self.config = config
        self.model = model
        self.names = model.names
        self.rule = _rule(model)
        position = None if config.horizon is None else model.horizons.index(config.horizon)
        self.position = position
        states = model.states
        # the model's worst state, for unseen states with unseen="max"
        self.worst = max((s.unsafe for s in states), default=1.0)
        self.worst_within = {
            k: max((s.within[i] for s in states), default=1.0) for i, k in enumerate(model.horizons)
        }
        self._cache: weakref.WeakKeyDictionary[Any, tuple[tuple, Forecast]] = weakref.WeakKeyDictionary()
        self._stopped: weakref.WeakKeyDictionary[Any, Forecast] = weakref.WeakKeyDictionary()

    # ----------------------------------------------------------------------------- forecasting

    def forecast(self, session: Any) -> Forecast:
        """The forecast at the session's current step (remembered until the session changes)."""
        key = (len(session.order), len(session.given), len(session.sticky))
        cached = self._cache.get(session)
        if cached is not None and cached[0] == key:
            return cached[1]
        found = self._forecast(session)
        self._cache[session] = (key, found)
        return found

    def _forecast(self, session: Any) -> Forecast:
        model = self.model
        step = len(session.order)
        horizons = model.horizons
        try:
            facts = self.abstraction.facts(session)
            observed = self.abstraction.evaluate(facts)
        except Exception as error:  # the predicates are unknown: fail closed, staying safe is 0
            message = str(error) if isinstance(error, ForecastError) else f"{type(error).__name__}: {error}"
            return self._judge(
                Forecast(step, None, (), False, False, 1.0, dict.fromkeys(horizons, 1.0), 0.0, error=message),
                None,
            )
        values = tuple(zip(self.names, observed.values, strict=True))
        if observed.unsafe:
            return self._judge(
                Forecast(step, None, values, True, True, 1.0, dict.fromkeys(horizons, 1.0), 0.0), session
            )
        state = model.lookup(observed.values)
        if state is None:
            if self.config.unseen == "worst":
                unsafe, within = 1.0, dict.fromkeys(horizons, 1.0)
            else:
                unsafe, within = self.worst, dict(self.worst_within)
            safe = 1.0 - (unsafe if self.position is None else within[horizons[self.position]])
            return self._judge(Forecast(step, None, values, False, False, unsafe, within, safe), session)
        within = dict(zip(horizons, state.within, strict=True))
        risk = state.unsafe if self.position is None else state.within[self.position]
        return self._judge(
            Forecast(step, state.id, values, True, False, state.unsafe, within, 1.0 - risk), session
        )

    def _judge(self, forecast: Forecast, session: Any) -> Forecast:
        """The forecast with the threshold, and the intervention with its evidence when below it
        (``session``: None when its predicates are unknown)."""
        config = self.config
        forecast = replace(forecast, threshold=config.threshold, rule=self.rule)
        if not forecast.below:
            return forecast
        evidence: list[str] = []
        shown: list[str] = []
        if session is not None and forecast.values:
            for rows in self.abstraction.witnesses(session).values():
                shown.extend(rows)
            if shown:
                evidence.append(", ".join(shown))
        if forecast.error is None and not forecast.unsafe_now:
            state = self.model.by_id.get(forecast.state or "")
            unsafe_name = f"`{self.model.unsafe.name}`"
            if state is None:
                evidence.append(
                    "no recorded session was ever in this state, so the forecast assumes the worst"
                    if config.unseen == "worst"
                    else "no recorded session was ever in this state; the forecast is the model's worst"
                )
            else:
                evidence.append(
                    f"{state.unsafe_traces} of the {state.traces} recorded sessions in this state "
                    f"went on to reach {unsafe_name}"
                )
        return replace(
            forecast, intervention=config.intervention, evidence=tuple(evidence), facts=tuple(shown)
        )

    # ----------------------------------------------------------------------------- intervening

    def intervene(self, session: Any, decision: Any) -> Any:
        """The decision, or a denial when the forecaster stops the session."""
        config = self.config
        if config.intervention != "stop" or config.threshold is None:
            return decision
        forecast = self._stopped.get(session)
        if forecast is None:
            forecast = self.forecast(session)
            if not forecast.below:
                return decision
            self._stopped[session] = forecast  # the session stays stopped
        message = (
            f"the probability of staying safe dropped to {forecast.safe:.2f}, below {config.threshold:.2f}, "
            f"at step {forecast.step}: the session is stopped before it reaches {self.model.unsafe.name}"
        )
        reason = Reason(
            RULE,
            message,
            "Stop here and ask the user how to proceed.",
            "high",
            forecast.facts,
        )
        return Stopped(
            decision.action,
            False,
            (reason, *decision.reasons),
            decision.errored,
            decision.evaluation,
            decision,
        )


@dataclass(frozen=True)
class Stopped(Decision):
    """A denial by the forecast's ``stop``: ``policy`` is the decision of the policy alone."""

    policy: Decision | None = field(default=None, compare=False, repr=False)

    def explain(self) -> Any:
        """The forecast's reason, then why the policy alone decided as it did."""
        from policyc.runtime.explain import Explanation

        inner = self.policy.explain() if self.policy is not None else None
        summary = f"denied: the forecast stopped the session ({self.reasons[0].message})"
        if inner is None:
            return Explanation(self.action, False, summary)
        summary += f"; the policy alone: {inner.summary}"
        return Explanation(self.action, False, summary, inner.derivations, inner.why_not, inner.errors)


def _rule(model: Model) -> str:
    rules = ", ".join(rule_id for rule_id, _ in model.rules)
    never = f"`{model.unsafe.pattern}` must never hold"
    return f"{never} (rules {rules})" if rules else never


def attach(forecast: Any, monitor: Any) -> BoundForecaster:
    """What ``Monitor(policy, forecast=...)`` takes: a :class:`Forecaster`, a model, or a path."""
    if isinstance(forecast, Forecaster):
        return forecast.bind(monitor)
    if isinstance(forecast, Model | str | Path):
        return Forecaster(forecast).bind(monitor)
    raise ForecastError(f"`forecast` is a Forecaster, a model or a model file, not {type(forecast).__name__}")


def session_forecast(session: Any) -> Forecast:
    """The forecast at the session's current step (``session.forecast()``)."""
    forecaster = session.monitor.attached.get("forecast")
    if forecaster is None:
        raise ForecastError(
            "the monitor has no forecast model: create it with `Monitor(policy, forecast=...)`"
        )
    return forecaster.forecast(session)
