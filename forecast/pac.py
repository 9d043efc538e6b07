"""How many recorded sessions the forecast needs: the PAC stopping rule of ProbGuard's Algorithm 1.

ProbGuard (seed 003, §3.2.3 and Appendix A) learns the chain until a stopping rule holds, which
makes the learned probability of reaching the unsafe state ``ε``-close to the true one, in every
state at once, with probability at least ``1 - δ``. The proof has three parts, each computed here:

1. **Sensitivity** (Bazille et al., Theorem 5): an error in the transitions becomes an error in
   reachability probabilities amplified by the chain's *conditioning*. Let ``S?`` be the states
   whose probability ``x`` of reaching ``unsafe`` is neither 0 nor 1 (found on the graph),
   ``m = |S?|`` and ``Cond_m`` the least probability, over the states of ``S?``, of leaving ``S?``
   within ``m`` steps. For chains with the same transitions, the learned ``x̂`` and the true ``x``
   satisfy, on ``S?``, ``x̂ - x = Â (x̂ - x) + d`` with ``d_s = (Â_s - A_s) · x``; so
   ``|x̂ - x| ≤ κ · max |d_s|`` where ``κ = m / Cond_m`` bounds the expected number of steps
   spent in ``S?`` (``‖(I - Â)^-1‖∞``). ``κ`` is the *conditioning number* reported, computed on
   the learned chain, as the seed does.
2. **Concentration** on transition counts (Hoeffding), combined across the ``|S?|`` source states
   by a union bound: ``Â_s · x`` is the mean of ``x`` over the ``n`` successors observed from
   ``s``, a mean of values in [0, 1], so ``|d_s| ≤ sqrt(ln(2|S?|/δ) / (2n))`` for all states at
   once with probability ``1 - δ`` (each visit's successor is an independent draw from the
   state's row, as in the seed's proof).
3. **Smoothing**: Laplace's row is the frequency row mixed with the uniform distribution over
   the ``k`` valid successors with weight ``αk / (n + αk)``, which adds at most that much to
   ``|d_s|``. The frequency estimator adds nothing — the seed's remark that frequency estimation
   "removes the error factor tied to Laplace smoothing" — but its guarantee is narrower: it
   needs every transition never observed to be truly impossible (the same transitions in both
   chains), where Laplace smoothing needs only the valid transitions to be the possible ones.

So ``row_error(n) = sqrt(ln(2|S?|/δ)/(2n)) + αk/(n + αk)`` (without the last term for
frequencies), and the data bounds the error by ``ε_data = κ · max_s row_error(n(s))``. The
stopping rule of Algorithm 1: every state of ``S?`` has been visited ``N(s)`` times, the least
``n`` with ``row_error(n) ≤ ε / κ``. The number of sessions that takes is estimated at the rate
the recorded ones visit each state: ``max_s ⌈N(s) · T / n(s)⌉`` for ``T`` sessions.

>>> required_visits(k=3, sources=4, delta=0.05, accuracy=0.1, alpha=1.0, laplace=False)
254
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .learn import Chain
from .reach import can_reach, within


@dataclass(frozen=True)
class Pac:
    epsilon: float
    delta: float
    undecided: tuple[int, ...]  # S?: the states whose probability is neither 0 nor 1
    cond: float  # Cond_m: the least probability of leaving S? within m steps
    conditioning: float  # κ = m / Cond_m (0 when S? is empty)
    accuracy: float  # ε / κ: how close each row of S? must be
    required: tuple[int, ...]  # per predicate state: N(s), 0 outside S?
    visits: tuple[int, ...]  # per predicate state: n(s)
    traces: int
    traces_needed: int
    achieved: float  # the error bound the data gives, with confidence 1 - δ

    @property
    def met(self) -> bool:
        return all(v >= r for v, r in zip(self.visits, self.required, strict=True))


def row_error(n: int, k: int, sources: int, delta: float, alpha: float, laplace: bool) -> float:
    """How far ``Â_s · x`` may be from ``A_s · x`` for a state visited ``n`` times with ``k``
    valid successors, one of ``sources`` states bounded together with confidence ``1 - δ``."""
    if n <= 0:
        return math.inf
    hoeffding = math.sqrt(math.log(2 * sources / delta) / (2 * n))
    bias = alpha * k / (n + alpha * k) if laplace else 0.0
    return hoeffding + bias


def required_visits(k: int, sources: int, delta: float, accuracy: float, alpha: float, laplace: bool) -> int:
    """The least ``n`` with ``row_error(n) <= accuracy``."""
    if not accuracy > 0:
        raise ValueError("the accuracy must be positive")
    low, high = 1, 1
    while row_error(high, k, sources, delta, alpha, laplace) > accuracy:
        low, high = high + 1, high * 2
    while low < high:
        middle = (low + high) // 2
        if row_error(middle, k, sources, delta, alpha, laplace) <= accuracy:
            high = middle
        else:
            low = middle + 1
    return low


def undecided_states(matrix: object, unsafe: int) -> np.ndarray:
    """S?: the states that can reach ``unsafe`` and from which unsafe is not certain."""
    n = matrix.shape[0]  # type: ignore[attr-defined]
    target = np.zeros(n, dtype=bool)
    target[unsafe] = True
    yes = can_reach(matrix, target)
    no = ~yes
    certain = ~can_reach(matrix, no) if no.any() else np.ones(n, dtype=bool)
    return yes & ~certain & ~target


def conditioning(matrix: object, undecided: np.ndarray) -> tuple[float, float]:
    """``Cond_m`` and ``κ = m / Cond_m`` for the states ``undecided``."""
    m = int(undecided.sum())
    if m == 0:
        return 1.0, 0.0
    leave = within(matrix, ~undecided, [m])[m]
    cond = float(leave[undecided].min())
    return cond, (m / cond if cond > 0 else math.inf)


def pac(chain: Chain, epsilon: float, delta: float, traces: int, estimator: str, alpha: float) -> Pac:
    matrix = chain.matrix()
    undecided = undecided_states(matrix, chain.unsafe)
    cond, kappa = conditioning(matrix, undecided)
    laplace = estimator == "laplace"
    members = [int(s) for s in np.flatnonzero(undecided)]
    sources = max(len(members), 1)
    accuracy = epsilon / kappa if kappa > 0 else math.inf
    n = len(chain.states)
    visits = tuple(chain.visits(s) for s in range(n))
    required = [0] * n
    worst = 0.0
    needed = 0
    for s in members:
        k = len(chain.successors[s])
        required[s] = (
            required_visits(k, sources, delta, accuracy, alpha, laplace) if accuracy != math.inf else 0
        )
        worst = max(worst, row_error(visits[s], k, sources, delta, alpha, laplace))
        if visits[s]:
            needed = max(needed, math.ceil(required[s] * traces / visits[s]))
    achieved = kappa * worst if members else 0.0
    return Pac(
        epsilon,
        delta,
        tuple(members),
        cond,
        kappa,
        accuracy,
        tuple(required),
        visits,
        traces,
        needed,
        achieved,
    )
