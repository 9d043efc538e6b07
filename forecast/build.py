"""From recorded sessions to a forecast model: abstract, learn, solve, bound.

``learn_model`` is what ``policyc forecast learn`` runs: every session of the trace files is
replayed and abstracted (:mod:`.traces`), a chain is learned (:mod:`.learn`), the probability
of reaching the unsafe state — eventually and within each horizon — is computed for every state
(:mod:`.reach`) and cached in the model, with the PAC sample bound (:mod:`.pac`).
:func:`verify` recomputes a model's cached probabilities from its transitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .abstraction import Abstraction, fingerprint
from .errors import MAX_HORIZON, ForecastError
from .learn import Chain, check_estimator, learn
from .model import END, UNSAFE, Model, PacInfo, PredicateInfo, StateInfo, Transition
from .patterns import Predicate
from .traces import Trace, read
from .validity import Validity


@dataclass(frozen=True)
class Settings:
    predicates: tuple[Predicate, ...]
    unsafe: Predicate
    invariants: tuple[str, ...] = ()
    estimator: str = "laplace"
    alpha: float = 1.0
    horizons: tuple[int, ...] = (5, 10)
    epsilon: float = 0.05
    delta: float = 0.05

    def check(self) -> None:
        check_estimator(self.estimator, self.alpha)
        for name, value in (("ε", self.epsilon), ("δ", self.delta)):
            if not 0 < value < 1:
                raise ForecastError(f"{name} must lie strictly between 0 and 1, not {value}")
        for k in self.horizons:
            if not 1 <= k <= MAX_HORIZON:
                raise ForecastError(f"a horizon is a number of steps from 1 to {MAX_HORIZON:,}, not {k}")


def learn_model(
    monitor: Any, paths: list[str], settings: Settings, policy_path: str = ""
) -> tuple[Model, list[Trace]]:
    """The model the recorded sessions give, and the abstracted sessions."""
    settings.check()
    abstraction = Abstraction(monitor, list(settings.predicates), settings.unsafe)
    validity = Validity.build(abstraction.names, abstraction.monotone, list(settings.invariants))
    traces = read(abstraction, paths)
    chain = learn(traces, validity, settings.estimator, settings.alpha)
    return assemble(abstraction, chain, traces, settings, policy_path), traces


def assemble(
    abstraction: Abstraction, chain: Chain, traces: list[Trace], settings: Settings, policy_path: str
) -> Model:
    import numpy as np

    from .pac import pac
    from .reach import eventually, within

    matrix = chain.matrix()
    target = np.zeros(chain.size, dtype=bool)
    target[chain.unsafe] = True
    horizons = tuple(sorted(set(settings.horizons)))
    reach = eventually(matrix, target)
    bounded = within(matrix, target, list(horizons))
    bound = pac(chain, settings.epsilon, settings.delta, len(traces), settings.estimator, settings.alpha)
    ids = [f"s{i}" for i in range(len(chain.states))] + [UNSAFE, END]
    states = tuple(
        StateInfo(
            ids[i],
            values,
            chain.visits(i),
            chain.initial[i],
            chain.traces_through[i],
            chain.unsafe_through[i],
            len(chain.successors[i]),
            float(reach[i]),
            tuple(float(bounded[k][i]) for k in horizons),
        )
        for i, values in enumerate(chain.states)
    )
    transitions = tuple(
        Transition(ids[s], ids[t], chain.counts.get((s, t), 0), float(p))
        for (s, t), p in sorted(chain.probabilities.items())
    )
    plan = abstraction.plan
    unsafe = abstraction.unsafe
    rules = tuple(
        (info.id, info.message) for info in plan.rules if info.head == plan.relations[unsafe.relation].name
    )

    def info(resolved: Any) -> PredicateInfo:
        return PredicateInfo(
            resolved.predicate.name, resolved.predicate.pattern, resolved.monotone, resolved.why
        )

    return Model(
        fingerprint(plan),
        policy_path,
        tuple(info(r) for r in abstraction.predicates),
        info(unsafe),
        rules,
        tuple(settings.invariants),
        settings.estimator,
        settings.alpha,
        horizons,
        len(traces),
        sum(1 for t in traces if t.violation is not None),
        sum(len(t.steps) for t in traces),
        states,
        chain.initial[chain.unsafe],
        transitions,
        PacInfo(
            settings.epsilon,
            settings.delta,
            len(bound.undecided),
            bound.cond,
            bound.conditioning,
            bound.accuracy,
            bound.met,
            bound.traces_needed,
            bound.achieved,
            {ids[s]: bound.required[s] for s in bound.undecided},
        ),
    )


def matrix_of(model: Model) -> tuple[Any, list[str]]:
    """The model's transition matrix (its states, then ``unsafe`` and ``end``) and the state ids."""
    import scipy.sparse as sp

    ids = [s.id for s in model.states] + [UNSAFE, END]
    position = {identifier: i for i, identifier in enumerate(ids)}
    rows, cols, data = [], [], []
    for t in model.transitions:
        rows.append(position[t.source])
        cols.append(position[t.target])
        data.append(t.probability)
    for absorbing in (UNSAFE, END):
        if not any(t.source == absorbing for t in model.transitions):
            rows.append(position[absorbing])
            cols.append(position[absorbing])
            data.append(1.0)
    return sp.csr_matrix((data, (rows, cols)), shape=(len(ids), len(ids))), ids


def verify(model: Model, tolerance: float = 1e-9) -> list[str]:
    """Where the cached probabilities disagree with the ones the transitions give (none: [])."""
    import numpy as np

    from .reach import eventually, within

    matrix, ids = matrix_of(model)
    target = np.array([i == UNSAFE for i in ids])
    reach = eventually(matrix, target)
    bounded = within(matrix, target, list(model.horizons))
    problems = []
    for i, state in enumerate(model.states):
        if abs(reach[i] - state.unsafe) > tolerance:
            problems.append(
                f"`{state.id}`: cached P(F unsafe) = {state.unsafe:.12g}, the chain gives {reach[i]:.12g}"
            )
        for k, cached in zip(model.horizons, state.within, strict=True):
            if abs(bounded[k][i] - cached) > tolerance:
                problems.append(
                    f"`{state.id}`: cached P(F<={k} unsafe) = {cached:.12g}, the chain gives {bounded[k][i]:.12g}"
                )
    return problems
