"""Learning a DTMC over predicate states from abstracted traces.

The states are the predicate states the traces visit, plus two absorbing states: **unsafe**
(the unsafe predicate holds; a trace is cut at its first unsafe step, since only reaching it
counts) and **end** (the session ended without reaching it). Each trace contributes its
transitions ``s_0 → s_1 → … → s_n → end`` (or ``… → unsafe``); ``N(s, t)`` counts them and
``N(s)`` is the number of transitions out of ``s``.

* **Laplace smoothing** restricted to valid transitions (:mod:`.validity`):
  ``P(s, t) = (N(s, t) + α) / (N(s) + α·|V(s)|)`` for ``t`` in ``V(s)``, the valid successors of
  ``s`` among the chain's states, and 0 for every other ``t``. Unseen but possible transitions
  get a little probability; impossible ones get none.
* **Frequency estimation**: ``P(s, t) = N(s, t) / N(s)``; unseen transitions get none.

Every state has at least one observed transition (to a later step, ``unsafe`` or ``end``), so
both estimators give distributions.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .errors import ForecastError
from .traces import Trace
from .validity import Validity

ESTIMATORS = ("laplace", "frequency")


@dataclass(frozen=True, eq=False)
class Chain:
    """A learned DTMC: predicate states ``0..n-1``, then ``unsafe`` (``n``) and ``end`` (``n+1``)."""

    states: tuple[tuple[bool, ...], ...]
    counts: dict[tuple[int, int], int]  # observed transitions
    successors: tuple[tuple[int, ...], ...]  # per predicate state: the valid successors
    probabilities: dict[tuple[int, int], float]  # every transition with positive probability
    initial: tuple[int, ...]  # per state (unsafe and end included): traces starting there
    traces_through: tuple[int, ...]  # per predicate state: traces visiting it
    unsafe_through: tuple[int, ...]  # per predicate state: those of them reaching unsafe

    @property
    def size(self) -> int:
        return len(self.states) + 2

    @property
    def unsafe(self) -> int:
        return len(self.states)

    @property
    def end(self) -> int:
        return len(self.states) + 1

    def visits(self, state: int) -> int:
        """N(s): the observed transitions out of a predicate state."""
        return sum(n for (s, _), n in self.counts.items() if s == state)

    def matrix(self) -> Any:
        import scipy.sparse as sp

        rows, cols, data = [], [], []
        for (s, t), probability in sorted(self.probabilities.items()):
            rows.append(s)
            cols.append(t)
            data.append(probability)
        return sp.csr_matrix((data, (rows, cols)), shape=(self.size, self.size))


def learn(traces: list[Trace], validity: Validity, estimator: str = "laplace", alpha: float = 1.0) -> Chain:
    """The chain the traces give (:class:`ForecastError` for a step or transition the policy or
    an invariant rules out, naming the trace and the event)."""
    check_estimator(estimator, alpha)
    if not traces:
        raise ForecastError("no recorded sessions to learn from")
    paths = []
    for trace in traces:
        steps = trace.learned()
        path: list[tuple[bool, ...] | str] = []
        for i, step in enumerate(steps):
            where = f"{trace.where}: " + (f"after event `{step.event}`" if step.event else "at the start")
            if step.unsafe:
                path.append("unsafe")
                break
            problem = validity.state_problem(step.values)
            if problem:
                raise ForecastError(f"{where}: the state {label(validity.names, step.values)}: {problem}")
            if i and isinstance(path[-1], tuple):
                problem = validity.problem(path[-1], step.values)
                if problem:
                    raise ForecastError(
                        f"{where}: the step from {label(validity.names, path[-1])} to "
                        f"{label(validity.names, step.values)} is impossible: {problem}"
                    )
            path.append(step.values)
        else:
            path.append("end")
        paths.append(path)

    states = tuple(sorted({s for path in paths for s in path if isinstance(s, tuple)}))
    number = {s: i for i, s in enumerate(states)}
    n = len(states)

    def index(state: tuple[bool, ...] | str) -> int:
        if state == "unsafe":
            return n
        if state == "end":
            return n + 1
        return number[state]  # type: ignore[index]

    counts: Counter[tuple[int, int]] = Counter()
    initial = [0] * (n + 2)
    through = [0] * n
    unsafe_through = [0] * n
    for path in paths:
        initial[index(path[0])] += 1
        for a, b in itertools.pairwise(path):
            counts[(index(a), index(b))] += 1
        visited = {index(s) for s in path if isinstance(s, tuple)}
        for i in visited:
            through[i] += 1
            if path[-1] == "unsafe":
                unsafe_through[i] += 1

    successors = tuple(
        tuple([t for t in range(n) if validity.valid(states[s], states[t])] + [n, n + 1]) for s in range(n)
    )
    probabilities: dict[tuple[int, int], float] = {(n, n): 1.0, (n + 1, n + 1): 1.0}
    for s in range(n):
        total = sum(counts[(s, t)] for t in successors[s])
        if estimator == "laplace":
            denominator = total + alpha * len(successors[s])
            for t in successors[s]:
                probabilities[(s, t)] = (counts[(s, t)] + alpha) / denominator
        else:
            for t in successors[s]:
                if counts[(s, t)]:
                    probabilities[(s, t)] = counts[(s, t)] / total
    return Chain(
        states,
        dict(counts),
        successors,
        probabilities,
        tuple(initial),
        tuple(through),
        tuple(unsafe_through),
    )


def check_estimator(estimator: str, alpha: float) -> None:
    """:class:`ForecastError` for an unknown estimator or a smoothing constant that is not a
    positive number."""
    if estimator not in ESTIMATORS:
        raise ForecastError(f"unknown estimator `{estimator}`; use {' or '.join(ESTIMATORS)}")
    if not (alpha > 0 and math.isfinite(alpha)):
        raise ForecastError(f"the smoothing constant α must be a positive number, not {alpha}")


def label(names: tuple[str, ...], values: tuple[bool, ...]) -> str:
    """A state in words: the predicates that hold, ``{}`` when none does."""
    held = [name for name, value in zip(names, values, strict=True) if value]
    return "{" + ", ".join(held) + "}"
