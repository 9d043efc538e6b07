"""The forecast model file (``model.json``): the learned chain with its cached probabilities.

Reading a model needs neither numpy nor scipy, so a monitor loads one cheaply; the file is
validated as it is read and anything malformed is refused with the JSON path of the problem
(``model.json:41: states[3].unsafe: ...``, see ``docs/formats.md``). :func:`verify` (in :mod:`.build`) recomputes the cached
probabilities from the transitions.

The layout (version 1)::

    {"format": "policyc-forecast", "version": 1,
     "policy": {"fingerprint": "sha256 of the plan", "path": "copilot.dl"},
     "predicates": [{"name": "pending", "pattern": "PendingEdit", "monotone": false, "why": "..."}],
     "unsafe": {"name": "Deny", "pattern": "Deny", "monotone": false, "why": "...",
                "rules": [{"id": "push-needs-scan", "message": "..."}]},
     "invariants": ["Pushed -> Edited"],
     "estimator": "laplace", "alpha": 1.0, "horizons": [5, 10],
     "data": {"traces": 120, "unsafe_traces": 31, "steps": 2210},
     "states": [{"id": "s0", "values": [false, true], "visits": 52, "initial": 120, "traces": 120,
                 "unsafe_traces": 31, "successors": 4, "unsafe": 0.26, "within": [0.1, 0.2]}],
     "initial_unsafe": 0,
     "transitions": [{"from": "s0", "to": "unsafe", "count": 3, "probability": 0.07}],
     "pac": {"epsilon": 0.05, "delta": 0.05, "undecided": 4, "cond": 0.2, "conditioning": 20.0,
             "accuracy": 0.0017, "met": false, "traces_needed": 5000, "achieved_epsilon": 0.4,
             "required": {"s0": 12000}}}

``unsafe`` and ``end`` are the ids of the two absorbing states; the ``within`` list follows
``horizons``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyc.compiler.reading import Cursor

from .errors import MAX_HORIZON, ForecastError
from .learn import label
from .patterns import parse_formula, parse_predicate
from .validity import Validity

FORMAT = "policyc-forecast"
VERSION = 1
UNSAFE = "unsafe"
END = "end"
TOLERANCE = 1e-6  # how far a row of the file may sum from 1


@dataclass(frozen=True)
class PredicateInfo:
    name: str
    pattern: str
    monotone: bool
    why: str


@dataclass(frozen=True)
class StateInfo:
    id: str
    values: tuple[bool, ...]
    visits: int  # transitions observed out of it
    initial: int  # traces starting in it
    traces: int  # traces visiting it
    unsafe_traces: int  # of those, the ones reaching the unsafe state
    successors: int  # its valid successors (unsafe and end included)
    unsafe: float  # P(F unsafe)
    within: tuple[float, ...]  # P(F<=k unsafe) for each horizon

    @property
    def safe(self) -> float:
        return 1.0 - self.unsafe


@dataclass(frozen=True)
class Transition:
    source: str
    target: str
    count: int
    probability: float


@dataclass(frozen=True)
class PacInfo:
    epsilon: float
    delta: float
    undecided: int
    cond: float
    conditioning: float
    accuracy: float
    met: bool
    traces_needed: int
    achieved_epsilon: float
    required: dict[str, int]


@dataclass(frozen=True)
class Model:
    fingerprint: str
    policy_path: str
    predicates: tuple[PredicateInfo, ...]
    unsafe: PredicateInfo
    rules: tuple[tuple[str, str | None], ...]  # the rules deriving the unsafe relation: id, message
    invariants: tuple[str, ...]
    estimator: str
    alpha: float
    horizons: tuple[int, ...]
    traces: int
    unsafe_traces: int
    steps: int
    states: tuple[StateInfo, ...]
    initial_unsafe: int
    transitions: tuple[Transition, ...]
    pac: PacInfo
    by_values: dict[tuple[bool, ...], StateInfo] = field(init=False, compare=False, repr=False)
    by_id: dict[str, StateInfo] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_values", {s.values: s for s in self.states})
        object.__setattr__(self, "by_id", {s.id: s for s in self.states})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.predicates)

    def label(self, values: tuple[bool, ...]) -> str:
        return label(self.names, values)

    def lookup(self, values: tuple[bool, ...]) -> StateInfo | None:
        """The state with these predicate values (a dictionary lookup), or None if unseen."""
        return self.by_values.get(values)

    def to_json(self) -> dict[str, Any]:
        def info(p: PredicateInfo) -> dict[str, Any]:
            return {"name": p.name, "pattern": p.pattern, "monotone": p.monotone, "why": p.why}

        return {
            "format": FORMAT,
            "version": VERSION,
            "policy": {"fingerprint": self.fingerprint, "path": self.policy_path},
            "predicates": [info(p) for p in self.predicates],
            "unsafe": {**info(self.unsafe), "rules": [{"id": i, "message": m} for i, m in self.rules]},
            "invariants": list(self.invariants),
            "estimator": self.estimator,
            "alpha": self.alpha,
            "horizons": list(self.horizons),
            "data": {"traces": self.traces, "unsafe_traces": self.unsafe_traces, "steps": self.steps},
            "states": [
                {
                    "id": s.id,
                    "label": self.label(s.values),
                    "values": list(s.values),
                    "visits": s.visits,
                    "initial": s.initial,
                    "traces": s.traces,
                    "unsafe_traces": s.unsafe_traces,
                    "successors": s.successors,
                    "unsafe": s.unsafe,
                    "within": list(s.within),
                }
                for s in self.states
            ],
            "initial_unsafe": self.initial_unsafe,
            "transitions": [
                {"from": t.source, "to": t.target, "count": t.count, "probability": t.probability}
                for t in self.transitions
            ],
            "pac": {
                "epsilon": self.pac.epsilon,
                "delta": self.pac.delta,
                "undecided": self.pac.undecided,
                "cond": self.pac.cond,
                "conditioning": _finite(self.pac.conditioning),
                "accuracy": _finite(self.pac.accuracy),
                "met": self.pac.met,
                "traces_needed": self.pac.traces_needed,
                "achieved_epsilon": _finite(self.pac.achieved_epsilon),
                "required": dict(self.pac.required),
            },
        }

    def dumps(self) -> str:
        """The model as JSON text: one line per field, and one per predicate, state and transition."""
        lines = []
        for key, value in self.to_json().items():
            if isinstance(value, list) and value and key in ("predicates", "states", "transitions"):
                items = ",\n".join(f"  {json.dumps(item, ensure_ascii=False)}" for item in value)
                lines.append(f" {json.dumps(key)}: [\n{items}\n ]")
            else:
                lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
        return "{\n" + ",\n".join(lines) + "\n}\n"


def _finite(value: float) -> float | None:
    """JSON has no infinity: ``null`` stands for it."""
    return None if math.isinf(value) else value


# --------------------------------------------------------------------------------- reading


def parse(data: Any, name: str = "model.json") -> Model:
    """A model from its JSON data (:class:`ForecastError` naming the first problem)."""
    from policyc.compiler.reading import Cursor, FormatError, Source

    try:
        return read(Cursor.root(data, Source(name)))
    except FormatError as error:
        raise ForecastError(str(error)) from None


def load(path: str | Path) -> Model:
    """A model file (:class:`ForecastError` if it is not a valid model, at the line of the
    problem; ``OSError`` if unreadable)."""
    from policyc.compiler.files import read_bytes
    from policyc.compiler.reading import FormatError
    from policyc.runtime.documents import decode, document

    name = str(path)
    data = read_bytes(path)
    try:
        return read(document(decode(data, name), name))
    except FormatError as error:
        raise ForecastError(str(error)) from None


def read(top: Cursor) -> Model:
    """A model from the cursor of its JSON data (:class:`FormatError` at the first problem)."""
    if not isinstance(top.value, dict):
        raise top.fail("a forecast model is a JSON object")
    if top.value.get("format") != FORMAT:
        raise top.child("format").fail(f'not a forecast model (expected "{FORMAT}")')
    version = top.child("version")
    if version.value != VERSION or isinstance(version.value, bool):
        raise version.fail(f"unsupported version {version.value!r} (this policyc reads {VERSION})")
    policy = top["policy"]
    predicates = top["predicates"].items(_predicate)
    if not predicates:
        raise top["predicates"].fail("a model has at least one predicate")
    names = [p.name for p in predicates]
    if len(set(names)) != len(names):
        raise top["predicates"].fail("two predicates have the same name")
    unsafe_at = top["unsafe"]
    horizons = _horizons(top["horizons"])
    states = _states(top["states"], len(predicates), len(horizons))
    by_id = {s.id: s for s in states}
    invariants = top["invariants"].items(lambda at: _invariant(at, names))
    transitions = _transitions(top["transitions"], states)
    validity = Validity.build(tuple(names), tuple(p.monotone for p in predicates), invariants)
    for at, state in zip(top["states"].list(), states, strict=True):
        problem = validity.state_problem(state.values)
        if problem:
            raise at.fail(f"`{state.id}` is not a valid state: {problem}")
    for at, t in zip(top["transitions"].list(), transitions, strict=True):
        if t.probability > 0 and t.source in by_id and t.target in by_id:
            problem = validity.problem(by_id[t.source].values, by_id[t.target].values)
            if problem:
                raise at.fail(
                    f"gives probability to `{t.source}` -> `{t.target}`, which is impossible: {problem}"
                )
    stats = top["data"]
    return Model(
        fingerprint=policy["fingerprint"].string(),
        policy_path=policy["path"].string(),
        predicates=predicates,
        unsafe=_predicate(unsafe_at),
        rules=unsafe_at["rules"].items(_rule),
        invariants=invariants,
        estimator=top["estimator"].choice(("laplace", "frequency")),
        alpha=top["alpha"].number(0.0, null_infinite=True),
        horizons=horizons,
        traces=stats["traces"].count(),
        unsafe_traces=stats["unsafe_traces"].count(),
        steps=stats["steps"].count(),
        states=states,
        initial_unsafe=top["initial_unsafe"].count(),
        transitions=transitions,
        pac=_pac(top["pac"], by_id),
    )


def _predicate(at: Cursor) -> PredicateInfo:
    pattern = at["pattern"]
    try:
        parse_predicate(pattern.string())
    except ForecastError as error:
        raise pattern.fail(str(error)) from None
    return PredicateInfo(at["name"].string(), pattern.value, at["monotone"].boolean(), at["why"].string())


def _rule(at: Cursor) -> tuple[str, str | None]:
    message = at["message"]
    if message.value is not None and not isinstance(message.value, str):
        raise message.expected("a string or null")
    return at["id"].string(), message.value


def _invariant(at: Cursor, names: list[str]) -> str:
    text = at.string()
    try:
        unknown = sorted(parse_formula(text).names() - set(names))
    except ForecastError as error:
        raise at.fail(str(error)) from None
    if unknown:
        raise at.fail(f"`{unknown[0]}` is not a predicate of the model")
    return text


def _horizons(at: Cursor) -> tuple[int, ...]:
    horizons: list[int] = []
    for k_at in at.list():
        k = k_at.positive()
        if k > MAX_HORIZON:
            raise k_at.fail(f"horizon {k} is longer than {MAX_HORIZON:,} steps")
        if k in horizons:
            raise k_at.fail(f"horizon {k} is given twice")
        horizons.append(k)
    return tuple(horizons)


def _states(at: Cursor, predicates: int, horizons: int) -> tuple[StateInfo, ...]:
    states: list[StateInfo] = []
    seen: set[str] = set()
    seen_values: set[tuple[bool, ...]] = set()
    for s in at.list():
        identifier = s["id"].string()
        if identifier in (UNSAFE, END) or identifier in seen:
            raise s["id"].fail(f"`{identifier}` is used twice (or is `unsafe`/`end`)")
        seen.add(identifier)
        raw = s["values"].list()
        if len(raw) != predicates or not all(isinstance(v.value, bool) for v in raw):
            raise s["values"].fail(f"expected {predicates} booleans, one per predicate")
        values = tuple(v.value for v in raw)
        if values in seen_values:
            raise s["values"].fail("two states have the same values")
        seen_values.add(values)
        within = s["within"].list()
        if len(within) != horizons:
            raise s["within"].fail(f"expected {horizons} probabilities, one per horizon")
        states.append(
            StateInfo(
                identifier,
                values,
                s["visits"].count(),
                s["initial"].count(),
                s["traces"].count(),
                s["unsafe_traces"].count(),
                s["successors"].count(),
                s["unsafe"].number(0.0, 1.0),
                tuple(p.number(0.0, 1.0) for p in within),
            )
        )
    return tuple(states)


def _transitions(at: Cursor, states: tuple[StateInfo, ...]) -> tuple[Transition, ...]:
    known = {s.id for s in states} | {UNSAFE, END}
    transitions = []
    totals: dict[str, float] = {}
    for t in at.list():
        source, target = t["from"].string(), t["to"].string()
        for key, value in (("from", source), ("to", target)):
            if value not in known:
                raise t[key].fail(f"no state `{value}`")
        if source in (UNSAFE, END) and target != source:
            raise t.fail(f"`{source}` is absorbing: it has no transition to `{target}`")
        probability = t["probability"].number(0.0, 1.0)
        transitions.append(Transition(source, target, t["count"].count(), probability))
        totals[source] = totals.get(source, 0.0) + probability
    for s in states:
        if abs(totals.get(s.id, 0.0) - 1.0) > TOLERANCE:
            raise at.fail(f"the probabilities out of `{s.id}` sum to {totals.get(s.id, 0.0):.9g}, not 1")
    return tuple(transitions)


def _pac(at: Cursor, by_id: dict[str, StateInfo]) -> PacInfo:
    required = at["required"].object()
    for key, entry in required.entries():
        if key not in by_id:
            raise entry.fail("no such state")
    return PacInfo(
        at["epsilon"].number(0.0, 1.0),
        at["delta"].number(0.0, 1.0),
        at["undecided"].count(),
        at["cond"].number(0.0, 1.0),
        at["conditioning"].number(0.0, null_infinite=True),
        at["accuracy"].number(0.0, null_infinite=True),
        at["met"].boolean(),
        at["traces_needed"].count(),
        at["achieved_epsilon"].number(0.0, null_infinite=True),
        required.mapping(Cursor.count),
    )
