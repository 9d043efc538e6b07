"""Forecasting's chains: reachability against Storm, smoothing over valid transitions only, and
the PAC bound's parts."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyc.forecast import ForecastError
from policyc.forecast.learn import learn
from policyc.forecast.pac import conditioning, pac, required_visits, row_error, undecided_states
from policyc.forecast.reach import eventually, within
from policyc.forecast.traces import Step, Trace
from policyc.forecast.validity import Validity

from .conftest import EXAMPLES

FOLDER = EXAMPLES / "forecast"
POLICY = FOLDER / "copilot_forecast.dl"
PREDICATES = "Edit,Unscanned,Unchecked,Tested,Committed,OpenFinding"

# ------------------------------------------------------------------ reachability against Storm


@st.composite
def chains(draw):
    """A DTMC as a dense row-stochastic matrix (some rows absorbing) and a non-empty target set."""
    n = draw(st.integers(2, 9))
    rows = []
    for i in range(n):
        if draw(st.booleans()) and draw(st.booleans()):
            row = [0.0] * n
            row[i] = 1.0  # absorbing
        else:
            weights = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
            if draw(st.integers(0, 3)) == 0:  # a sticky state, as sessions that idle have
                weights[i] += 200
            if sum(weights) == 0:
                weights[draw(st.integers(0, n - 1))] = 1
            total = sum(weights)
            row = [w / total for w in weights]
        rows.append(row)
    targets = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    targets[draw(st.integers(0, n - 1))] = True
    return np.array(rows), np.array(targets)


def storm(matrix: np.ndarray, targets: np.ndarray, formula: str) -> np.ndarray:
    """Storm's answer for ``P=? [<formula> "unsafe"]`` in every state (state elimination: exact
    up to rounding)."""
    import stormpy
    from stormpy import datastructures, environments, models

    n = len(matrix)
    builder = datastructures.SparseMatrixBuilder(
        rows=n,
        columns=n,
        entries=int((matrix > 0).sum()),
        force_dimensions=True,
        has_custom_row_grouping=False,
    )
    for i in range(n):
        for j in np.flatnonzero(matrix[i]):
            builder.add_next_value(i, int(j), float(matrix[i, j]))
    labels = models.StateLabeling(n)
    labels.add_label("unsafe")
    for i in np.flatnonzero(targets):
        labels.add_label_to_state("unsafe", int(i))
    dtmc = models.SparseDtmc(
        models.SparseModelComponents(transition_matrix=builder.build(), state_labeling=labels)
    )
    environment = environments.Environment()
    environment.solver().set_linear_equation_solver_type(environments.EquationSolverType.ELIMINATION)
    prop = stormpy.parse_properties(f'P=? [{formula} "unsafe"]')[0]
    result = stormpy.model_checking(dtmc, prop, only_initial_states=False, environment=environment)
    return np.array(result.get_value_vector())


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains(), st.integers(0, 7))
def test_reachability_agrees_with_storm(chain, k) -> None:
    matrix, targets = chain
    sparse = sp.csr_matrix(matrix)
    assert np.abs(eventually(sparse, targets) - storm(matrix, targets, "F")).max() <= 1e-9
    assert np.abs(within(sparse, targets, [k])[k] - storm(matrix, targets, f"F<={k}")).max() <= 1e-9


def test_reachability_of_a_learned_chain_agrees_with_storm(forecast_model) -> None:
    model, _ = forecast_model
    from policyc.forecast.build import matrix_of

    matrix, ids = matrix_of(model)
    dense = matrix.toarray()
    targets = np.array([i == "unsafe" for i in ids])
    cached = np.array([s.unsafe for s in model.states])
    assert np.abs(cached - storm(dense, targets, "F")[: len(model.states)]).max() <= 1e-9
    for position, k in enumerate(model.horizons):
        cached = np.array([s.within[position] for s in model.states])
        assert np.abs(cached - storm(dense, targets, f"F<={k}")[: len(model.states)]).max() <= 1e-9


# ---------------------------------------------------------------- smoothing over valid transitions


@st.composite
def histories(draw):
    """Predicate names with a monotone mask and an optional transition invariant, and traces
    that respect them (a monotone predicate never turns false)."""
    width = draw(st.integers(1, 4))
    names = tuple(f"p{i}" for i in range(width))
    monotone = tuple(draw(st.lists(st.booleans(), min_size=width, max_size=width)))
    invariants = ["p0 -> p0'"] if draw(st.booleans()) else []
    if invariants:
        monotone = (True, *monotone[1:])  # the invariant says what monotonicity of p0 says
    traces = []
    for t in range(draw(st.integers(1, 8))):
        state = tuple(draw(st.lists(st.booleans(), min_size=width, max_size=width)))
        steps = [Step(None, None, state, False)]
        for _ in range(draw(st.integers(0, 6))):
            flips = draw(st.lists(st.booleans(), min_size=width, max_size=width))
            state = tuple((v or f) if m else (v != f) for v, f, m in zip(state, flips, monotone, strict=True))
            steps.append(Step(f"e{len(steps)}", None, state, False))
        if draw(st.booleans()):
            steps.append(Step("bad", None, state, True))
        traces.append(Trace(f"t{t}", f"traces.jsonl:{t + 1}", tuple(steps)))
    return names, monotone, invariants, traces


@settings(max_examples=120, deadline=None)
@given(histories(), st.sampled_from([0.1, 1.0, 3.0]))
def test_laplace_puts_mass_on_valid_transitions_only(history, alpha) -> None:
    names, monotone, invariants, traces = history
    validity = Validity.build(names, monotone, invariants)
    chain = learn(traces, validity, "laplace", alpha)
    frequency = learn(traces, validity, "frequency")
    n = len(chain.states)
    for s in range(n):
        row = {t: p for (a, t), p in chain.probabilities.items() if a == s}
        assert math.isclose(sum(row.values()), 1.0, abs_tol=1e-12)
        for t in range(n):
            valid = validity.valid(chain.states[s], chain.states[t])
            assert (row.get(t, 0.0) > 0) == valid, (chain.states[s], chain.states[t])
            if not valid:
                # a monotone predicate turning false, or the invariant broken
                assert any(
                    m and a and not b
                    for m, a, b in zip(monotone, chain.states[s], chain.states[t], strict=True)
                )
        assert row[chain.unsafe] > 0 and row[chain.end] > 0  # always possible
        # the frequency estimator: exactly the observed transitions, in proportion
        observed = {t: c for (a, t), c in chain.counts.items() if a == s}
        total = sum(observed.values())
        freq = {t: p for (a, t), p in frequency.probabilities.items() if a == s}
        assert freq == pytest.approx({t: c / total for t, c in observed.items()})
        # Laplace: (N(s, t) + α) / (N(s) + α |V(s)|)
        size = len(chain.successors[s])
        for t in chain.successors[s]:
            assert row[t] == pytest.approx((observed.get(t, 0) + alpha) / (total + alpha * size))


def test_a_trace_breaking_monotonicity_or_an_invariant_is_an_error() -> None:
    validity = Validity.build(("a", "b"), (True, False), ["b -> a"])
    broken = Trace(
        "t",
        "traces.jsonl:3",
        (Step(None, None, (True, False), False), Step("e1", None, (False, False), False)),
    )
    with pytest.raises(
        ForecastError, match=r"traces.jsonl:3: after event `e1`.*`a` is monotone and cannot turn false"
    ):
        learn([broken], validity)
    bad_state = Trace("t", "traces.jsonl:4", (Step(None, None, (False, True), False),))
    with pytest.raises(
        ForecastError, match=r"traces.jsonl:4: at the start.*the invariant `b -> a` does not hold"
    ):
        learn([bad_state], validity)
    with pytest.raises(ForecastError, match="`c` is not a predicate"):
        Validity.build(("a", "b"), (False, False), ["a -> c'"])


# ------------------------------------------------------------------------------ the PAC bound


def test_row_error_is_the_seeds_concentration_plus_the_laplace_term() -> None:
    n, k, sources, delta, alpha = 400, 5, 7, 0.05, 1.0
    hoeffding = math.sqrt(math.log(2 * sources / delta) / (2 * n))  # union bound over |S?| states
    assert row_error(n, k, sources, delta, alpha, laplace=False) == pytest.approx(hoeffding)
    assert row_error(n, k, sources, delta, alpha, laplace=True) == pytest.approx(
        hoeffding + alpha * k / (n + alpha * k)
    )


@given(
    st.integers(1, 30),
    st.integers(1, 60),
    st.floats(0.01, 0.3),
    st.floats(0.005, 0.5),
    st.floats(0.1, 2.0),
    st.booleans(),
)
def test_required_visits_is_the_least_that_meets_the_accuracy(
    k, sources, delta, accuracy, alpha, laplace
) -> None:
    n = required_visits(k, sources, delta, accuracy, alpha, laplace)
    assert row_error(n, k, sources, delta, alpha, laplace) <= accuracy
    assert n == 1 or row_error(n - 1, k, sources, delta, alpha, laplace) > accuracy
    # frequency estimation removes the smoothing term, so it never needs more
    assert required_visits(k, sources, delta, accuracy, alpha, False) <= n
    # more states to bound together, or more confidence, never needs fewer
    assert required_visits(k, sources * 2, delta, accuracy, alpha, laplace) >= n
    assert required_visits(k, sources, delta / 2, accuracy, alpha, laplace) >= n


@st.composite
def perturbed(draw):
    """A chain with states 0..n-1, unsafe n and end n+1, and a second chain with the same
    transitions and different probabilities."""
    n = draw(st.integers(1, 6))
    size = n + 2
    base = np.zeros((size, size))
    other = np.zeros((size, size))
    for s in range(n):
        support = [t for t in range(size) if draw(st.booleans())] or [n]
        support = sorted(set(support) | {n + 1})  # every state can end
        for matrix in (base, other):
            weights = [draw(st.integers(1, 20)) for _ in support]
            for t, w in zip(support, weights, strict=True):
                matrix[s, t] = w / sum(weights)
    for matrix in (base, other):
        matrix[n, n] = matrix[n + 1, n + 1] = 1.0
    return base, other, n


@settings(max_examples=150, deadline=None)
@given(perturbed())
def test_sensitivity_the_error_is_at_most_conditioning_times_the_row_errors(pair) -> None:
    """Theorem 5 as used by the bound: |x̂ - x| <= κ(Â) · max_s |(Â_s - A_s) · x| on S?."""
    true, learned, n = pair
    target = np.zeros(n + 2, dtype=bool)
    target[n] = True
    x = eventually(sp.csr_matrix(true), target)
    x_hat = eventually(sp.csr_matrix(learned), target)
    undecided = undecided_states(sp.csr_matrix(learned), n)
    assert np.array_equal(undecided, undecided_states(sp.csr_matrix(true), n))  # same transitions
    _, kappa = conditioning(sp.csr_matrix(learned), undecided)
    if not undecided.any():
        assert np.abs(x_hat - x).max() <= 1e-12
        return
    rows = np.abs((learned - true)[undecided] @ x).max()
    assert np.abs(x_hat - x).max() <= kappa * rows + 1e-9


def test_the_bound_holds_for_chains_learned_from_samples() -> None:
    """Sessions sampled from a known chain: the error of the learned P(F unsafe) stays within the
    bound the data gives, in every seeded run (the bound holds with probability 1 - δ)."""
    true = np.array(
        [
            [0.5, 0.3, 0.0, 0.1, 0.1],  # s0
            [0.1, 0.6, 0.2, 0.0, 0.1],  # s1
            [0.0, 0.0, 0.7, 0.2, 0.1],  # s2 (a monotone predicate holds)
            [0.0, 0.0, 0.0, 1.0, 0.0],  # unsafe
            [0.0, 0.0, 0.0, 0.0, 1.0],  # end
        ]
    )
    states = [(False, False), (True, False), (True, True)]
    validity = Validity.build(("a", "b"), (False, True), [])
    target = np.array([False, False, False, True, False])
    x = eventually(sp.csr_matrix(true), target)
    for seed in range(5):
        rng = random.Random(seed)
        traces = []
        for t in range(400):
            s, steps = 0, [Step(None, None, states[0], False)]
            while True:
                s = rng.choices(range(5), weights=true[s])[0]
                if s == 4:
                    break
                steps.append(Step(f"e{len(steps)}", None, states[s] if s < 3 else states[0], s == 3))
                if s == 3:
                    break
            traces.append(Trace(f"t{t}", f"sampled:{t}", tuple(steps)))
        chain = learn(traces, validity, "frequency")
        bound = pac(chain, 0.05, 0.05, len(traces), "frequency", 1.0)
        learned = eventually(chain.matrix(), np.array([False] * len(chain.states) + [True, False]))
        by_state = {values: learned[i] for i, values in enumerate(chain.states)}
        error = max(abs(by_state[states[i]] - x[i]) for i in range(3) if states[i] in by_state)
        assert error <= bound.achieved, (seed, error, bound.achieved)
        assert bound.achieved < 1  # 400 sessions give a bound that says something here
