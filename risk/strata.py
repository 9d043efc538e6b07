"""The final calibration strata (Algorithm 1, lines 2-10): a role with enough calibration units
is its own stratum; a role whose floor ``1/(n+1)`` exceeds its budget is pooled.

* A rare role goes to the pool it declares (``.role credential budget 0.01 pool high_risk``), or
  to the default pool.
* A pool is calibrated on the fields of every controlled role that declares it (rare or not:
  ``target`` lends its fields to the ``high_risk`` pool of ``credential``) and of the rare roles
  sent to it; its budget is the smallest budget of the roles that use its threshold. By
  Proposition 1, its certificate covers the pooled population, not each rare role alone.
* A role with budget 1 is uncontrolled: its own stratum, never flagged, outside the Bonferroni
  split of δ.

>>> from .declarations import Role
>>> roles = {"target": Role("target", 0.01, "high_risk"), "credential": Role("credential", 0.01, "high_risk")}
>>> sizes = {"target": 300, "credential": 9}
>>> plan = stratify(roles, lambda members: sum(sizes[m] for m in members), "high_risk")
>>> plan.role_to_stratum
{'credential': 'high_risk', 'target': 'target'}
>>> plan.strata["high_risk"].members, plan.strata["high_risk"].n
(('credential', 'target'), 309)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from .calibrators import certifiable
from .declarations import Role
from .errors import RiskError


@dataclass(frozen=True)
class StratumPlan:
    name: str
    members: tuple[str, ...]  # roles whose fields calibrate it
    users: tuple[str, ...]  # roles whose fields it decides
    budget: float
    n: int
    pool: bool


@dataclass(frozen=True)
class Plan:
    role_to_stratum: dict[str, str]
    strata: dict[str, StratumPlan]
    role_sizes: dict[str, int]

    @property
    def controlled(self) -> list[str]:
        """The strata of controlled roles: those the Bonferroni split of δ covers."""
        return sorted(name for name, s in self.strata.items() if s.budget < 1)


def stratify(roles: Mapping[str, Role], size: Callable[[Collection[str]], int], default_pool: str) -> Plan:
    """The final strata. ``size(roles)`` counts the calibration units of a set of roles (fields,
    or episodes having a field of one of them)."""
    role_sizes = {name: size((name,)) for name in roles}
    role_to_stratum: dict[str, str] = {}
    pooled: dict[str, list[str]] = {}
    for name, role in sorted(roles.items()):
        if role.controlled and not certifiable(role_sizes[name], role.budget):
            pool = role.pool or default_pool
            role_to_stratum[name] = pool
            pooled.setdefault(pool, []).append(name)
        else:
            role_to_stratum[name] = name
    strata: dict[str, StratumPlan] = {}
    for name, stratum in sorted(role_to_stratum.items()):
        if stratum == name:
            strata[name] = StratumPlan(name, (name,), (name,), roles[name].budget, role_sizes[name], False)
    for pool, users in sorted(pooled.items()):
        if pool in strata:
            raise RiskError(
                f"pool `{pool}` has the name of a role calibrated on its own; give the pool another name"
            )
        members = tuple(sorted({*users, *(n for n, r in roles.items() if r.pool == pool and r.controlled)}))
        budget = min(roles[u].budget for u in users)
        strata[pool] = StratumPlan(pool, members, tuple(users), budget, size(members), True)
    return Plan(role_to_stratum, strata, role_sizes)
