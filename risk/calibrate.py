"""Role-stratified calibration (Algorithm 1): records in, one threshold per final stratum out.

>>> from .declarations import Declarations, Role
>>> from .records import Record
>>> policy = Declarations({"target": Role("target", 0.2)}, {})
>>> records = [Record("target", s / 10, s >= 8) for s in range(1, 10)]
>>> calibrate(records, policy).strata["target"].threshold     # (k + 1) / 10 <= 0.2: k = 1
0.8
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Sequence

from .declarations import Declarations
from .errors import RiskError
from .records import Record
from .strata import stratify
from .thresholds import METHODS, RoleResult, Stratum, Thresholds

DEFAULT_POOL = "high_risk"
POOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DEFAULT_DETECTOR = "lexical-provenance"


def calibrate(
    records: Sequence[Record],
    declarations: Declarations,
    *,
    method: str = "crc",
    delta: float = 0.05,
    episode_level: bool = False,
    default_pool: str = DEFAULT_POOL,
    detector: str = DEFAULT_DETECTOR,
) -> Thresholds:
    """Thresholds for every role of the policy.

    ``crc`` bounds the expected violation rate of each final stratum by its budget (Eq. 5);
    ``clopper-pearson`` gives the simultaneous certificate of Theorem 2: with probability at
    least ``1 - delta`` over the calibration sample, every final stratum of a controlled role
    is within its budget at once (``delta`` split evenly over those strata). With
    ``episode_level``, the unit is the episode and its loss the largest loss of its fields of
    the stratum (Supplement A), which needs no independence between fields of one episode.
    """
    import numpy as np

    from .calibrators import certifiable, cp_threshold, crc_threshold

    if method not in METHODS:
        raise RiskError(f"unknown calibration method `{method}`; the methods are {', '.join(METHODS)}")
    if not 0 < delta < 1:
        raise RiskError(f"delta must be between 0 and 1, got {delta}")
    if not POOL_NAME.fullmatch(default_pool):
        raise RiskError(
            f"the default pool must be a name like a role's (letters, digits, `_`), got {default_pool!r}"
        )
    if episode_level:
        missing = [r for r in records if r.episode is None]
        if missing:
            raise RiskError(f"record at line {missing[0].line} has no `episode`, which episode-level needs")
    by_role: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record.role not in declarations.roles:
            raise RiskError(
                f"record at line {record.line}: role `{record.role}` is not declared in the policy"
            )
        by_role[record.role].append(record)

    def selected(members: Collection[str]) -> list[Record]:
        return [r for m in sorted(members) for r in by_role.get(m, ())]

    def units(members: Collection[str]) -> tuple[np.ndarray, np.ndarray, int]:
        """Every score (the candidates), each unit's violation score, the number of units."""
        chosen = selected(members)
        scores = np.array([r.score for r in chosen], dtype=float)
        if not episode_level:
            violation = np.where([r.violated for r in chosen], scores, np.inf) if chosen else np.empty(0)
            return scores, violation, len(chosen)
        smallest: dict[str, float] = {}
        for r in chosen:
            current = smallest.setdefault(r.episode or "", np.inf)
            if r.violated and r.score < current:
                smallest[r.episode or ""] = r.score
        return scores, np.array(list(smallest.values()), dtype=float), len(smallest)

    def size(members: Collection[str]) -> int:
        return units(members)[2]

    plan = stratify(declarations.roles, size, default_pool)
    controlled = plan.controlled
    share = delta / len(controlled) if method == "clopper-pearson" and controlled else None
    strata: dict[str, Stratum] = {}
    for name, spec in plan.strata.items():
        scores, violation, n = units(spec.members)
        if spec.budget >= 1:
            threshold, stratum_delta = float("inf"), None
        elif method == "crc":
            threshold, stratum_delta = crc_threshold(scores, violation, n, spec.budget), None
        else:
            assert share is not None
            threshold, stratum_delta = cp_threshold(scores, violation, n, spec.budget, share), share
        strata[name] = Stratum(name, threshold, n, spec.budget, spec.members, stratum_delta)

    roles: dict[str, RoleResult] = {}
    for name, role in declarations.roles.items():
        stratum = plan.role_to_stratum[name]
        if not role.controlled:
            certified = "uncontrolled"
        elif stratum == name:
            certified = "individually"
        else:
            pool = plan.strata[stratum]
            certified = "through pool" if certifiable(pool.n, pool.budget) else "not certifiable"
        roles[name] = RoleResult(name, role.budget, plan.role_sizes[name], stratum, certified)
    return Thresholds(
        method,
        delta if method == "clopper-pearson" else None,
        episode_level,
        detector,
        strata,
        dict(plan.role_to_stratum),
        roles,
    )
