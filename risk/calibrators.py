"""Thresholds for one calibration stratum: conformal risk control (Eq. 5) and the
Clopper-Pearson certificate (Eq. 6, Theorem 2).

A field is allowed when its score is at most the threshold τ; its loss at τ is
``L(τ) = 1{score ≤ τ and violated}``, nondecreasing and right-continuous in τ. The empirical
count ``k(τ)`` of violated-and-allowed calibration units only changes at calibration scores,
so the threshold is chosen among them, with the sentinels ``-inf`` (flag every field) and
``+inf`` (flag none): the largest candidate whose count passes the method's test. As ``k`` is
nondecreasing in τ and both tests are monotone in ``k``, the candidates that pass form a
prefix. Ties and discrete scores need no special care: ``k`` counts ``score ≤ τ``.

A *unit* is a field, or for episode-level calibration (Supplement A) an episode, whose loss is
the largest loss of its fields: the episode is violated-and-allowed at τ once its smallest
violated score is at most τ. Callers pass, per unit, that *violation score* (``inf`` for a unit
with no violated field).

>>> import numpy as np
>>> scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
>>> violated = np.array([0.8, 0.9])       # the violation scores of the violated units
>>> crc_threshold(scores, violated, n=9, budget=0.2)   # (k + 1) / 10 <= 0.2 allows k = 1
0.8
>>> crc_threshold(scores, violated, n=9, budget=0.1)   # only k = 0: below 0.8
0.7
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

INF = math.inf


def budget_fraction(budget: float) -> Fraction:
    """A budget as the exact fraction it was written as (0.01 is 1/100, not the float near it)."""
    return Fraction(budget).limit_denominator(10**9)


def certifiable(n: int, budget: float) -> bool:
    """Whether ``1/(n+1) <= budget``, exactly (Algorithm 1 pools a role when it is not)."""
    return Fraction(1, n + 1) <= budget_fraction(budget)


def counts(candidates: np.ndarray, violation_scores: np.ndarray) -> np.ndarray:
    """``k(τ)`` at each candidate: the units whose violation score is at most τ."""
    finite = np.sort(violation_scores[np.isfinite(violation_scores)])
    return np.searchsorted(finite, candidates, side="right")


def select(candidates: np.ndarray, passes: np.ndarray, passes_all: bool, passes_none: bool) -> float:
    """The largest candidate that passes: ``+inf`` when the count of every unit passes (no
    calibration unit is flagged), ``-inf`` when no candidate does but ``k = 0`` would."""
    if passes_all:
        return INF
    if not passes_none:
        return -INF
    passing = np.flatnonzero(passes)
    if passing.size == 0:
        return -INF
    return float(candidates[passing[-1]])


def crc_threshold(scores: np.ndarray, violation_scores: np.ndarray, n: int, budget: float) -> float:
    """Eq. 5: the largest τ with ``(Σ L(τ) + 1) / (n + 1) <= α`` (``-inf`` when even ``k = 0``
    fails, that is when ``1/(n+1) > α``)."""
    candidates = np.unique(np.asarray(scores, dtype=float))
    k = counts(candidates, np.asarray(violation_scores, dtype=float))
    allowed = math.floor(budget_fraction(budget) * (n + 1)) - 1  # the largest k that passes
    total = int(np.isfinite(violation_scores).sum())
    return select(candidates, k <= allowed, total <= allowed, allowed >= 0)


def clopper_pearson_upper(k: np.ndarray | int, n: int, delta: float) -> np.ndarray:
    """The exact one-sided upper confidence bound at level ``1 - delta`` on a binomial rate,
    having seen ``k`` successes in ``n`` trials (1 when ``k = n``)."""
    from scipy.special import betaincinv  # the Beta(k + 1, n - k) quantile at 1 - delta

    k = np.asarray(k, dtype=float)
    if n == 0:
        return np.ones_like(k)
    safe = np.minimum(k, n - 1)
    upper = betaincinv(safe + 1, n - safe, 1 - delta)
    return np.where(k >= n, 1.0, upper)


def cp_threshold(
    scores: np.ndarray, violation_scores: np.ndarray, n: int, budget: float, delta: float
) -> float:
    """Eq. 6: the largest τ whose Clopper-Pearson upper bound ``U(k(τ), n; δ)`` is at most α.
    With probability at least ``1 - δ`` over the calibration sample, the stratum's violation
    rate at the chosen threshold is at most α (Theorem 2)."""
    candidates = np.unique(np.asarray(scores, dtype=float))
    violation_scores = np.asarray(violation_scores, dtype=float)
    k = counts(candidates, violation_scores)
    total = int(np.isfinite(violation_scores).sum())
    bounds = clopper_pearson_upper(np.concatenate([k, [total, 0]]), n, delta)
    return select(candidates, bounds[:-2] <= budget, bool(bounds[-2] <= budget), bool(bounds[-1] <= budget))


def needed_for_certificate(budget: float, delta: float) -> int:
    """The fewest units with which a Clopper-Pearson certificate at α can allow anything: the
    smallest n with ``1 - δ^(1/n) <= α``, that is ``n >= ln δ / ln(1 - α)``."""
    if budget >= 1:
        return 0
    return math.ceil(math.log(delta) / math.log1p(-budget) - 1e-12)
