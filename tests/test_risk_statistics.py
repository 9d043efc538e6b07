"""The statistics of role-stratified calibration, checked on synthetic data whose score
distributions are known, so that the true violation rate of any threshold is exact:

(a) CRC's expected violation stays at or under the budget over many calibration samples (also
    with discrete, tied scores, and per episode);
(b) the Clopper-Pearson certificate holds with frequency at least 1 - delta (simultaneously over
    strata, with the Bonferroni split), where the expectation-only CRC threshold does not;
(c) a single aggregate threshold lets a rare role exceed its budget by about 1/p_r (Proposition 1),
    while per-role calibration holds it;
(d) a role is pooled exactly when 1/(n+1) > its budget.

Plus the threshold selection against a brute-force oracle (hypothesis).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from policyc.risk.calibrate import calibrate
from policyc.risk.calibrators import clopper_pearson_upper, cp_threshold, crc_threshold
from policyc.risk.declarations import Declarations, Role
from policyc.risk.records import Record

VIOLATED = stats.beta(4, 2)  # scores of violated fields: mostly high
CLEAN = stats.beta(2, 4)  # scores of benign fields: mostly low
PI = 0.3  # the share of violated fields


def sample(rng: np.random.Generator, n: int, pi: float = PI) -> tuple[np.ndarray, np.ndarray]:
    violated = rng.random(n) < pi
    scores = np.where(violated, VIOLATED.rvs(n, random_state=rng), CLEAN.rvs(n, random_state=rng))
    return scores, violated


def true_violation(threshold: float, pi: float = PI, rounding: float | None = None) -> float:
    """V(τ) = Pr[violated and score <= τ] under the known population."""
    if threshold == math.inf:
        return pi
    if threshold == -math.inf:
        return 0.0
    if rounding is not None:  # round(s) <= τ (τ on the grid) iff s < τ + half a step
        threshold = threshold + rounding / 2
    return pi * float(VIOLATED.cdf(threshold))


def crc(scores: np.ndarray, violated: np.ndarray, budget: float) -> float:
    return crc_threshold(scores, np.where(violated, scores, np.inf), len(scores), budget)


def mean_and_error(values: list[float]) -> tuple[float, float]:
    array = np.asarray(values)
    return float(array.mean()), float(array.std(ddof=1) / math.sqrt(len(array)))


# ---------------------------------------------------------------------------- (a) CRC


def samples(rng: np.random.Generator, trials: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``trials`` calibration samples of ``n`` fields at once (rows)."""
    violated = rng.random((trials, n)) < PI
    clean = CLEAN.rvs((trials, n), random_state=rng)
    return np.where(violated, VIOLATED.rvs((trials, n), random_state=rng), clean), violated


def true_violations(thresholds: np.ndarray) -> np.ndarray:
    inner = PI * VIOLATED.cdf(np.clip(thresholds, -1.0, 2.0))
    return np.where(np.isposinf(thresholds), PI, np.where(np.isneginf(thresholds), 0.0, inner))


def plug_in(scores: np.ndarray, violated: np.ndarray, budget: float) -> float:
    """The uncorrected threshold: the largest τ whose empirical risk k/n is within budget (just
    below the next violated score). Its expected violation exceeds the budget."""
    allowed = math.floor(budget * len(scores) + 1e-9)
    ordered = np.sort(scores[violated])
    return math.inf if allowed >= ordered.size else float(np.nextafter(ordered[allowed], -np.inf))


@pytest.mark.parametrize("n", [50, 200])
def test_crc_expected_violation_is_within_budget(n: int) -> None:
    rng = np.random.default_rng(7)
    budget, trials = 0.1, 5000
    scores, violated = samples(rng, trials, n)
    chosen = np.array([crc(scores[i], violated[i], budget) for i in range(trials)])
    mean, error = mean_and_error(list(true_violations(chosen)))
    assert mean <= budget + 3 * error
    # and not by blocking everything: CRC is tight to within 2/(n+1) (Angelopoulos et al., 2024)
    assert mean >= budget - 2 / (n + 1) - 3 * error
    # the test tells a valid threshold from an invalid one: without the correction it fails
    naive = np.array([plug_in(scores[i], violated[i], budget) for i in range(trials)])
    naive_mean, naive_error = mean_and_error(list(true_violations(naive)))
    assert naive_mean > budget + 3 * naive_error


def test_crc_holds_with_discrete_tied_scores() -> None:
    rng = np.random.default_rng(11)
    budget = 0.1
    risks = []
    for _ in range(3000):
        scores, violated = sample(rng, 150)
        threshold = crc(np.round(scores, 1), violated, budget)
        risks.append(true_violation(threshold, rounding=0.1))
    mean, error = mean_and_error(risks)
    assert mean <= budget + 3 * error
    assert mean > budget / 3  # ties do not force it to block everything


def test_crc_per_episode_bounds_the_episode_rate_under_correlated_fields() -> None:
    """Supplement A: several same-role fields per episode share an episode effect, so they are
    correlated; the episode-level loss (the worst field) keeps E[episode loss] within budget."""
    rng = np.random.default_rng(3)
    budget = 0.1

    def episodes(count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        fields = 3
        attacked = rng.random(count) < 0.25
        shift = rng.normal(0, 0.15, count)[:, None]  # shared within an episode
        violated = attacked[:, None] & (rng.random((count, fields)) < 0.5)
        base = np.where(violated, 0.65, 0.35)
        scores = np.clip(base + shift + rng.normal(0, 0.1, (count, fields)), 0, 1)
        return scores, violated, np.where(violated, scores, np.inf).min(axis=1)

    _, _, population = episodes(200_000)
    population = np.sort(population[np.isfinite(population)])
    total = 200_000
    risks = []
    for _ in range(1500):
        scores, _, worst = episodes(120)
        threshold = crc_threshold(scores.ravel(), worst, len(worst), budget)
        risks.append(np.searchsorted(population, threshold, side="right") / total)
    mean, error = mean_and_error(risks)
    assert mean <= budget + 3 * error
    assert mean >= budget - 2 / 121 - 3 * error


def test_crc_over_random_splits_of_one_data_set() -> None:
    """Splitting a fixed data set at random into calibration and test parts (exchangeable),
    the test violation averaged over splits stays within budget."""
    rng = np.random.default_rng(5)
    scores, violated = sample(rng, 2000)
    budget = 0.05
    rates = []
    for _ in range(2000):
        order = rng.permutation(2000)
        cal, test = order[:300], order[300:]
        threshold = crc(scores[cal], violated[cal], budget)
        rates.append(float(np.mean(violated[test] & (scores[test] <= threshold))))
    mean, error = mean_and_error(rates)
    assert mean <= budget + 3 * error


# --------------------------------------------------------------- (b) Clopper-Pearson


def test_clopper_pearson_certificate_holds_with_probability_one_minus_delta() -> None:
    rng = np.random.default_rng(13)
    budget, delta, trials = 0.1, 0.1, 2000
    failures = crc_failures = utility = 0
    for _ in range(trials):
        scores, violated = sample(rng, 400)
        threshold = cp_threshold(scores, np.where(violated, scores, np.inf), 400, budget, delta)
        failures += true_violation(threshold) > budget
        crc_failures += true_violation(crc(scores, violated, budget)) > budget
        utility += threshold > -math.inf
    margin = 3 * math.sqrt(delta * (1 - delta) / trials)
    assert failures / trials <= delta + margin
    # the expectation-only threshold fails the high-probability event far more often: this test
    # tells the two apart
    assert crc_failures / trials > delta + margin
    assert utility == trials  # never vacuous here: n = 400 is enough to allow fields


def test_certificate_is_simultaneous_over_strata_with_bonferroni() -> None:
    rng = np.random.default_rng(17)
    roles = {"a": Role("a", 0.1), "b": Role("b", 0.08), "c": Role("c", 0.12)}
    declarations = Declarations(roles, {})
    delta, trials = 0.15, 400
    any_failure = 0
    for _ in range(trials):
        records = []
        for name, n in (("a", 300), ("b", 400), ("c", 250)):
            scores, violated = sample(rng, n)
            records += [Record(name, float(s), bool(v)) for s, v in zip(scores, violated, strict=True)]
        thresholds = calibrate(records, declarations, method="clopper-pearson", delta=delta)
        assert all(s.delta == pytest.approx(delta / 3) for s in thresholds.strata.values())
        any_failure += any(
            true_violation(thresholds.strata[name].threshold) > roles[name].budget for name in roles
        )
    assert any_failure / trials <= delta + 3 * math.sqrt(delta * (1 - delta) / trials)


def test_clopper_pearson_upper_bound_is_exact() -> None:
    """U(k, n; δ) is the p at which Pr[Binomial(n, p) <= k] = δ."""
    for n, k, delta in ((50, 0, 0.05), (50, 3, 0.05), (300, 10, 0.01), (7, 6, 0.1)):
        upper = float(clopper_pearson_upper(k, n, delta))
        assert stats.binom.cdf(k, n, upper) == pytest.approx(delta, rel=1e-6)
    assert float(clopper_pearson_upper(5, 5, 0.05)) == 1.0
    assert float(clopper_pearson_upper(0, 10, 0.05)) == pytest.approx(1 - 0.05 ** (1 / 10))


# ------------------------------------------------------------- (c) aggregate dilution


def test_a_single_aggregate_threshold_dilutes_a_rare_role_by_one_over_its_prevalence() -> None:
    """Proposition 1: every violation is in the rare `target` role (prevalence p = 0.1); the
    detector does not separate violated fields (uniform scores), so the aggregate rate at τ is
    p·π·τ. One aggregate threshold at α puts target's own rate near α/p; per-role calibration
    keeps it within α."""
    rng = np.random.default_rng(19)
    p, pi, alpha = 0.1, 0.5, 0.02
    per_role = Declarations({"target": Role("target", alpha), "content": Role("content", alpha)}, {})
    aggregate = Declarations({"all": Role("all", alpha)}, {})
    diluted, stratified = [], []
    for _ in range(100):
        n = 3000
        target = rng.random(n) < p
        violated = target & (rng.random(n) < pi)
        scores = rng.random(n)
        records = [
            Record("target" if t else "content", float(s), bool(v))
            for t, s, v in zip(target, scores, violated, strict=True)
        ]
        one = calibrate([Record("all", r.score, r.violated) for r in records], aggregate)
        each = calibrate(records, per_role)
        # target's true rate V(target)(τ) = π·τ for τ in [0, 1]
        diluted.append(pi * min(max(one.strata["all"].threshold, 0.0), 1.0))
        stratified.append(pi * min(max(each.strata["target"].threshold, 0.0), 1.0))
    agg, agg_error = mean_and_error(diluted)
    own, own_error = mean_and_error(stratified)
    assert own <= alpha + 3 * own_error
    assert agg <= alpha / p + 3 * agg_error  # Proposition 1's bound
    assert 0.85 * alpha / p <= agg  # and the aggregate threshold comes close to it
    assert agg / alpha > 8  # about 1/p = 10 times the budget


# ------------------------------------------------------------------------ (d) pooling


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 400), thousandths=st.integers(1, 999))
def test_a_role_is_pooled_exactly_when_its_floor_exceeds_its_budget(n: int, thousandths: int) -> None:
    budget = thousandths / 1000
    roles = {"rare": Role("rare", budget, "pool"), "big": Role("big", 0.5, "pool")}
    records = [Record("rare", i / (n + 1), i % 7 == 0) for i in range(n)]
    records += [Record("big", i / 600, i % 5 == 0) for i in range(600)]
    thresholds = calibrate(records, Declarations(roles, {}))
    pooled = Fraction(1, n + 1) > Fraction(thousandths, 1000)
    assert (thresholds.role_to_stratum["rare"] == "pool") is pooled
    assert thresholds.role_to_stratum["big"] == "big"
    if pooled:
        pool = thresholds.strata["pool"]
        assert pool.members == ("big", "rare") and pool.n == n + 600
        assert thresholds.roles["rare"].certified == (
            "through pool" if Fraction(1, n + 601) <= Fraction(thousandths, 1000) else "not certifiable"
        )
    else:
        assert thresholds.roles["rare"].certified == "individually"
        assert "pool" not in thresholds.strata


def test_pooling_at_the_boundary() -> None:
    declarations = Declarations({"r": Role("r", 0.01)}, {})
    exactly = calibrate([Record("r", 0.5, False)] * 99, declarations)  # 1/100 = 0.01: certifiable
    assert exactly.role_to_stratum == {"r": "r"} and exactly.roles["r"].certified == "individually"
    below = calibrate([Record("r", 0.5, False)] * 98, declarations)  # 1/99 > 0.01: pooled
    assert below.role_to_stratum == {"r": "high_risk"}
    assert below.roles["r"].certified == "not certifiable"  # a pool of 98 fields is still too small
    assert below.strata["high_risk"].threshold == -math.inf  # so every field is flagged


# ------------------------------------------------------------------ against an oracle


def brute_force(scores, violated, budget, delta=None) -> float:
    """The largest candidate in {-inf} ∪ scores ∪ {inf} passing the method's test, by definition."""
    n = len(scores)
    best = -math.inf
    for t in [-math.inf, *scores, math.inf]:
        k = sum(1 for s, v in zip(scores, violated, strict=True) if v and s <= t)
        if delta is None:
            ok = Fraction(k + 1, n + 1) <= Fraction(budget).limit_denominator(10**9)
        else:
            ok = float(clopper_pearson_upper(k, n, delta)) <= budget
        if ok:
            best = max(best, t)
    return best


FIELDS = st.lists(
    st.tuples(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0]), st.booleans()), max_size=40
)


@settings(max_examples=300, deadline=None)
@given(fields=FIELDS, budget=st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0]))
def test_crc_threshold_matches_the_definition(fields, budget) -> None:
    scores = [s for s, _ in fields]
    violated = [v for _, v in fields]
    chosen = crc(np.array(scores, dtype=float), np.array(violated, dtype=bool), budget)
    assert chosen == brute_force(scores, violated, budget)


@settings(max_examples=200, deadline=None)
@given(fields=FIELDS, budget=st.sampled_from([0.05, 0.1, 0.3, 0.6]), delta=st.sampled_from([0.05, 0.2]))
def test_clopper_pearson_threshold_matches_the_definition(fields, budget, delta) -> None:
    scores = np.array([s for s, _ in fields], dtype=float)
    violated = np.array([v for _, v in fields], dtype=bool)
    chosen = cp_threshold(scores, np.where(violated, scores, np.inf), len(scores), budget, delta)
    assert chosen == brute_force(list(scores), list(violated), budget, delta)


@settings(max_examples=200, deadline=None)
@given(
    fields=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([0.1, 0.4, 0.6, 0.9]), st.booleans()),
        min_size=1,
        max_size=30,
    ),
    budget=st.sampled_from([0.1, 0.2, 0.34, 0.5]),
)
def test_episode_level_threshold_matches_the_definition(fields, budget) -> None:
    """The episode's loss is the largest loss of its fields: brute force over episodes."""
    records = [Record("r", s, v, f"e{e}") for e, s, v in fields]
    thresholds = calibrate(records, Declarations({"r": Role("r", budget)}, {}), episode_level=True)
    if thresholds.role_to_stratum["r"] != "r":
        assert Fraction(1, len({r.episode for r in records}) + 1) > Fraction(budget).limit_denominator(100)
        return
    episodes = sorted({r.episode for r in records})
    best = -math.inf
    for t in [-math.inf, *(r.score for r in records), math.inf]:
        k = sum(any(r.violated and r.score <= t for r in records if r.episode == e) for e in episodes)
        if Fraction(k + 1, len(episodes) + 1) <= Fraction(budget).limit_denominator(100):
            best = max(best, t)
    assert thresholds.strata["r"].threshold == best
    assert thresholds.strata["r"].n == len(episodes)
