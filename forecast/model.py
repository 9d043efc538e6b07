"""The forecast model file (``model.json``): the learned chain with its cached probabilities.

Reading a model needs neither numpy nor scipy, so a monitor loads one cheaply; the file is
validated as it is read and anything malformed is refused with the JSON path of the problem
(``model.json: states[3].unsafe: ...``). :func:`verify` (in :mod:`.build`) recomputes the cached
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


class _Reader:
    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, where: str, problem: str) -> ForecastError:
        return ForecastError(f"{self.name}: {where}: {problem}")

    def get(self, obj: Any, key: str, where: str) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(where or "the file", "expected an object")
        if key not in obj:
            raise self.fail(f"{where}.{key}" if where else key, "missing")
        return obj[key]

    def string(self, obj: Any, key: str, where: str) -> str:
        value = self.get(obj, key, where)
        if not isinstance(value, str):
            raise self.fail(_at(where, key), f"expected a string, got {_kind(value)}")
        return value

    def boolean(self, obj: Any, key: str, where: str) -> bool:
        value = self.get(obj, key, where)
        if not isinstance(value, bool):
            raise self.fail(_at(where, key), f"expected true or false, got {_kind(value)}")
        return value

    def count(self, obj: Any, key: str, where: str) -> int:
        value = self.get(obj, key, where)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.fail(_at(where, key), f"expected a non-negative integer, got {_kind(value)}")
        return value

    def number(self, obj: Any, key: str, where: str, low: float = -math.inf, high: float = math.inf) -> float:
        return self.value(self.get(obj, key, where), _at(where, key), low, high)

    def value(self, value: Any, where: str, low: float = -math.inf, high: float = math.inf) -> float:
        """A number in [low, high]; ``null`` stands for infinity where there is no upper bound."""
        if value is None and high == math.inf:
            return math.inf
        if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
            span = (
                f" in [{low:g}, {high:g}]" if high != math.inf else f" >= {low:g}" if low != -math.inf else ""
            )
            raise self.fail(where, f"expected a number{span}, got {_kind(value)}")
        return float(value)

    def probability(self, obj: Any, key: str, where: str) -> float:
        return self.number(obj, key, where, 0.0, 1.0)

    def items(self, obj: Any, key: str, where: str) -> list[Any]:
        value = self.get(obj, key, where)
        if not isinstance(value, list):
            raise self.fail(_at(where, key), f"expected a list, got {_kind(value)}")
        return value

    def predicate(self, obj: Any, where: str) -> PredicateInfo:
        pattern = self.string(obj, "pattern", where)
        try:
            parse_predicate(pattern)
        except ForecastError as error:
            raise self.fail(f"{where}.pattern", str(error)) from None
        return PredicateInfo(
            self.string(obj, "name", where),
            pattern,
            self.boolean(obj, "monotone", where),
            self.string(obj, "why", where),
        )


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"{value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def parse(data: Any, name: str = "model.json") -> Model:
    """A model from its JSON data (:class:`ForecastError` naming the first problem)."""
    r = _Reader(name)
    if not isinstance(data, dict):
        raise r.fail("the file", "a forecast model is a JSON object")
    if data.get("format") != FORMAT:
        raise r.fail("format", f'not a forecast model (expected "{FORMAT}")')
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise r.fail("version", f"unsupported version {data.get('version')!r} (this policyc reads {VERSION})")
    policy = r.get(data, "policy", "")
    fingerprint = r.string(policy, "fingerprint", "policy")
    path = r.string(policy, "path", "policy")
    predicates = tuple(
        r.predicate(p, f"predicates[{i}]") for i, p in enumerate(r.items(data, "predicates", ""))
    )
    if not predicates:
        raise r.fail("predicates", "a model has at least one predicate")
    names = [p.name for p in predicates]
    if len(set(names)) != len(names):
        raise r.fail("predicates", "two predicates have the same name")
    unsafe_data = r.get(data, "unsafe", "")
    unsafe = r.predicate(unsafe_data, "unsafe")
    rules = []
    for i, rule in enumerate(r.items(unsafe_data, "rules", "unsafe")):
        message = r.get(rule, "message", f"unsafe.rules[{i}]")
        if message is not None and not isinstance(message, str):
            raise r.fail(f"unsafe.rules[{i}].message", f"expected a string or null, got {_kind(message)}")
        rules.append((r.string(rule, "id", f"unsafe.rules[{i}]"), message))
    invariants = []
    for i, text in enumerate(r.items(data, "invariants", "")):
        if not isinstance(text, str):
            raise r.fail(f"invariants[{i}]", f"expected a string, got {_kind(text)}")
        try:
            unknown = sorted(parse_formula(text).names() - set(names))
        except ForecastError as error:
            raise r.fail(f"invariants[{i}]", str(error)) from None
        if unknown:
            raise r.fail(f"invariants[{i}]", f"`{unknown[0]}` is not a predicate of the model")
        invariants.append(text)
    estimator = r.string(data, "estimator", "")
    if estimator not in ("laplace", "frequency"):
        raise r.fail("estimator", f'expected "laplace" or "frequency", got "{estimator}"')
    alpha = r.number(data, "alpha", "", 0.0)
    horizons = []
    for i, k in enumerate(r.items(data, "horizons", "")):
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise r.fail(f"horizons[{i}]", f"expected a positive integer, got {_kind(k)}")
        if k > MAX_HORIZON:
            raise r.fail(f"horizons[{i}]", f"horizon {k} is longer than {MAX_HORIZON:,} steps")
        if k in horizons:
            raise r.fail(f"horizons[{i}]", f"horizon {k} is given twice")
        horizons.append(k)
    stats = r.get(data, "data", "")
    traces = r.count(stats, "traces", "data")
    unsafe_traces = r.count(stats, "unsafe_traces", "data")
    steps = r.count(stats, "steps", "data")

    states = []
    seen_values: set[tuple[bool, ...]] = set()
    for i, s in enumerate(r.items(data, "states", "")):
        where = f"states[{i}]"
        identifier = r.string(s, "id", where)
        if identifier in (UNSAFE, END) or identifier in {x.id for x in states}:
            raise r.fail(f"{where}.id", f"`{identifier}` is used twice (or is `unsafe`/`end`)")
        raw = r.items(s, "values", where)
        if len(raw) != len(predicates) or not all(isinstance(v, bool) for v in raw):
            raise r.fail(f"{where}.values", f"expected {len(predicates)} booleans, one per predicate")
        values = tuple(raw)
        if values in seen_values:
            raise r.fail(f"{where}.values", "two states have the same values")
        seen_values.add(values)
        within_raw = r.items(s, "within", where)
        if len(within_raw) != len(horizons):
            raise r.fail(f"{where}.within", f"expected {len(horizons)} probabilities, one per horizon")
        within = [r.value(p, f"{where}.within[{j}]", 0.0, 1.0) for j, p in enumerate(within_raw)]
        states.append(
            StateInfo(
                identifier,
                values,
                r.count(s, "visits", where),
                r.count(s, "initial", where),
                r.count(s, "traces", where),
                r.count(s, "unsafe_traces", where),
                r.count(s, "successors", where),
                r.probability(s, "unsafe", where),
                tuple(within),
            )
        )
    initial_unsafe = r.count(data, "initial_unsafe", "")
    known = {s.id for s in states} | {UNSAFE, END}
    transitions = []
    totals: dict[str, float] = {}
    for i, t in enumerate(r.items(data, "transitions", "")):
        where = f"transitions[{i}]"
        source = r.string(t, "from", where)
        target = r.string(t, "to", where)
        for key, value in (("from", source), ("to", target)):
            if value not in known:
                raise r.fail(f"{where}.{key}", f"no state `{value}`")
        if source in (UNSAFE, END) and target != source:
            raise r.fail(where, f"`{source}` is absorbing: it has no transition to `{target}`")
        probability = r.probability(t, "probability", where)
        transitions.append(Transition(source, target, r.count(t, "count", where), probability))
        totals[source] = totals.get(source, 0.0) + probability
    for s in states:
        if abs(totals.get(s.id, 0.0) - 1.0) > TOLERANCE:
            raise r.fail(
                "transitions", f"the probabilities out of `{s.id}` sum to {totals.get(s.id, 0.0):.9g}, not 1"
            )
    by_id = {s.id: s for s in states}
    validity = Validity.build(tuple(names), tuple(p.monotone for p in predicates), invariants)
    for i, state in enumerate(states):
        problem = validity.state_problem(state.values)
        if problem:
            raise r.fail(f"states[{i}]", f"`{state.id}` is not a valid state: {problem}")
    for i, t in enumerate(transitions):
        if t.probability > 0 and t.source in by_id and t.target in by_id:
            problem = validity.problem(by_id[t.source].values, by_id[t.target].values)
            if problem:
                raise r.fail(
                    f"transitions[{i}]",
                    f"gives probability to `{t.source}` -> `{t.target}`, which is impossible: {problem}",
                )
    pac_data = r.get(data, "pac", "")
    required_raw = r.get(pac_data, "required", "pac")
    if not isinstance(required_raw, dict):
        raise r.fail("pac.required", "expected an object")
    required = {}
    for key in required_raw:
        if key not in by_id:
            raise r.fail(f"pac.required.{key}", "no such state")
        required[key] = r.count(required_raw, key, "pac.required")
    pac = PacInfo(
        r.number(pac_data, "epsilon", "pac", 0.0, 1.0),
        r.number(pac_data, "delta", "pac", 0.0, 1.0),
        r.count(pac_data, "undecided", "pac"),
        r.probability(pac_data, "cond", "pac"),
        r.number(pac_data, "conditioning", "pac", 0.0),
        r.number(pac_data, "accuracy", "pac", 0.0),
        r.boolean(pac_data, "met", "pac"),
        r.count(pac_data, "traces_needed", "pac"),
        r.number(pac_data, "achieved_epsilon", "pac", 0.0),
        required,
    )
    return Model(
        fingerprint,
        path,
        predicates,
        unsafe,
        tuple(rules),
        tuple(invariants),
        estimator,
        alpha,
        tuple(horizons),
        traces,
        unsafe_traces,
        steps,
        tuple(states),
        initial_unsafe,
        tuple(transitions),
        pac,
    )


def load(path: str | Path) -> Model:
    """A model file (:class:`ForecastError` if it is not a valid model, ``OSError`` if unreadable)."""
    from policyc.compiler.files import read_bytes
    from policyc.runtime.jsonio import loads, problem

    name = str(path)
    try:
        text = read_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        raise ForecastError(f"{name}: not UTF-8 text") from None
    try:
        data = loads(text)
    except json.JSONDecodeError as error:
        raise ForecastError(f"{name}:{error.lineno}:{error.colno}: {problem(error)}") from None
    return parse(data, name)
