"""What thresholds do on labelled fields: per role and per stratum, the violation rate
``V(r) = Pr[violated and allowed | role r]`` against the budget, the attack-conditional rate
``V_att(r)`` (among violated fields), the certifiability floor ``1/(n+1)`` and the
over-intervention (the share of benign fields flagged; utility is its complement), for the
calibration data and for held-out test data. Text for people, JSON for programs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .records import Record
from .thresholds import Stratum, Thresholds


@dataclass(frozen=True)
class Counts:
    """Violations and interventions among a set of fields under a threshold."""

    fields: int = 0
    violated: int = 0
    leaked: int = 0  # violated and allowed
    clean: int = 0
    flagged_clean: int = 0  # benign and flagged: over-intervention
    episodes: int = 0  # episodes with a field of the set (0 when records have no episodes)
    episode_leaks: int = 0  # episodes with a violated-and-allowed field

    @property
    def violation(self) -> float:
        return self.leaked / self.fields if self.fields else 0.0

    @property
    def attack_violation(self) -> float | None:
        return self.leaked / self.violated if self.violated else None

    @property
    def over_intervention(self) -> float | None:
        return self.flagged_clean / self.clean if self.clean else None

    @property
    def episode_violation(self) -> float | None:
        return self.episode_leaks / self.episodes if self.episodes else None

    def rate(self, episode_level: bool) -> float:
        """The rate the method controls: per field, or per episode."""
        if episode_level and self.episodes:
            return self.episode_leaks / self.episodes
        return self.violation

    def units(self, episode_level: bool) -> tuple[int, int]:
        return (
            (self.episode_leaks, self.episodes)
            if episode_level and self.episodes
            else (self.leaked, self.fields)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "fields": self.fields,
            "violated": self.violated,
            "violated_and_allowed": self.leaked,
            "violation": self.violation,
            "attack_violation": self.attack_violation,
            "benign": self.clean,
            "benign_flagged": self.flagged_clean,
            "over_intervention": self.over_intervention,
            "utility": None if self.over_intervention is None else 1 - self.over_intervention,
            "episodes": self.episodes or None,
            "episode_violation": self.episode_violation,
        }


def count(records: Iterable[Record], threshold_of: Any) -> Counts:
    """Counts for records, each judged by ``threshold_of(record)``."""
    fields = violated = leaked = clean = flagged_clean = 0
    episodes: dict[str, bool] = {}
    for r in records:
        allowed = r.score <= threshold_of(r)
        fields += 1
        if r.violated:
            violated += 1
            leaked += allowed
        else:
            clean += 1
            flagged_clean += not allowed
        if r.episode is not None:
            episodes[r.episode] = episodes.get(r.episode, False) or (r.violated and allowed)
    return Counts(fields, violated, leaked, clean, flagged_clean, len(episodes), sum(episodes.values()))


@dataclass(frozen=True)
class Evaluation:
    """Thresholds applied to one data set."""

    roles: dict[str, Counts]
    strata: dict[str, Counts]  # the members' fields under the stratum's threshold
    overall: Counts  # every field of a controlled role, under its own stratum's threshold


def evaluate(records: Sequence[Record], thresholds: Thresholds) -> Evaluation:
    by_role: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        by_role[record.role].append(record)

    def own(record: Record) -> float:
        stratum = thresholds.stratum_of(record.role)
        return -math.inf if stratum is None else stratum.threshold

    roles = {role: count(by_role.get(role, ()), own) for role in sorted(thresholds.role_to_stratum)}
    strata = {}
    for name, stratum in sorted(thresholds.strata.items()):
        members = [r for m in stratum.members for r in by_role.get(m, ())]
        strata[name] = count(members, lambda _, t=stratum.threshold: t)
    controlled = [r for r in records if (s := thresholds.stratum_of(r.role)) is None or s.budget < 1]
    return Evaluation(roles, strata, count(controlled, own))


@dataclass(frozen=True)
class Report:
    thresholds: Thresholds
    calibration: Evaluation | None  # None when only judging frozen thresholds on new data
    test: Evaluation | None = None
    source: str = ""
    split: str | None = None  # how the test data was chosen
    confidence: float = 0.05  # the δ of the Clopper-Pearson bounds on test violation

    def upper(self, counts: Counts) -> float | None:
        """The Clopper-Pearson upper bound at ``1 - confidence`` on a test violation rate."""
        from .calibrators import clopper_pearson_upper

        leaked, units = counts.units(self.thresholds.episode_level)
        if units == 0:
            return None
        return float(clopper_pearson_upper(leaked, units, self.confidence))

    def to_json(self) -> dict[str, Any]:
        t = self.thresholds
        roles = {}
        for name in sorted(t.role_to_stratum):
            stratum = t.strata[t.role_to_stratum[name]]
            result = t.roles.get(name)
            budget = self.budget_of(name)
            entry: dict[str, Any] = {
                "budget": budget,
                "n": result.n if result else None,
                "floor": 1 / (result.n + 1) if result else None,
                "stratum": stratum.name,
                "certified": result.certified if result else None,
                "threshold": _finite(stratum.threshold),
            }
            if self.calibration is not None:
                entry["calibration"] = self.calibration.roles[name].to_json()
            if self.test is not None:
                counts = self.test.roles.get(name)
                if counts is not None:
                    entry["test"] = {
                        **counts.to_json(),
                        "upper": self.upper(counts),
                        "within_budget": _within(counts, t.episode_level, budget),
                    }
            roles[name] = entry
        strata = {}
        for name, stratum in sorted(t.strata.items()):
            entry = {
                "threshold": _finite(stratum.threshold),
                "n": stratum.n,
                "budget": stratum.budget,
                "floor": stratum.floor,
                "members": list(stratum.members),
                "delta": stratum.delta,
            }
            if self.calibration is not None:
                entry["calibration"] = self.calibration.strata[name].to_json()
            if self.test is not None:
                counts = self.test.strata[name]
                entry["test"] = {
                    **counts.to_json(),
                    "upper": self.upper(counts),
                    "within_budget": _within(counts, t.episode_level, stratum.budget),
                }
            strata[name] = entry
        out: dict[str, Any] = {
            "source": self.source,
            "method": t.method,
            "delta": t.delta,
            "episode_level": t.episode_level,
            "detector": t.detector,
            "roles": roles,
            "strata": strata,
            "calibration": None if self.calibration is None else self.calibration.overall.to_json(),
            "test": None,
        }
        if self.test is not None:
            out["test"] = {
                "split": self.split,
                **self.test.overall.to_json(),
                "over_budget": self.over_budget(),
            }
        return out

    def budget_of(self, role: str) -> float:
        result = self.thresholds.roles.get(role)
        return (
            result.budget if result else self.thresholds.strata[self.thresholds.role_to_stratum[role]].budget
        )

    def over_budget(self) -> list[str]:
        """The roles whose test violation rate exceeds their budget."""
        if self.test is None:
            return []
        level = self.thresholds.episode_level
        return [
            role
            for role, counts in sorted(self.test.roles.items())
            if counts.units(level)[1] and counts.rate(level) > self.budget_of(role)
        ]

    def text(self) -> str:
        t = self.thresholds
        level = "episode level" if t.episode_level else "field level"
        method = t.method if t.delta is None else f"{t.method}, delta {t.delta:g}"
        lines = []
        if self.calibration is not None:
            lines += [
                f"calibrated on {self.calibration.overall.fields:,} fields of controlled roles from "
                f"{self.source} ({method}, {level}, detector {t.detector})",
                "",
                *self._calibration_lines(),
            ]
        else:
            lines.append(f"thresholds calibrated with {method}, {level}, detector {t.detector}")
        if self.test is not None:
            lines += ["", *self._test_lines()]
        return "\n".join(lines)

    def _calibration_lines(self) -> list[str]:
        t = self.thresholds
        assert self.calibration is not None
        header = [
            "role",
            "budget",
            "n",
            "floor",
            "stratum",
            "certified",
            "threshold",
            "violation",
            "over-int.",
        ]
        rows = []
        for name in sorted(t.role_to_stratum):
            stratum = t.strata[t.role_to_stratum[name]]
            result = t.roles.get(name)
            counts = self.calibration.roles[name]
            rows.append(
                [
                    name,
                    _g(self.budget_of(name)),
                    str(result.n) if result else "-",
                    _p(1 / (result.n + 1)) if result else "-",
                    stratum.name,
                    result.certified if result else "-",
                    _threshold(stratum.threshold),
                    _p(counts.rate(t.episode_level)),
                    _p(counts.over_intervention),
                ]
            )
        lines = _table(header, rows)
        for s in sorted(t.strata.values(), key=lambda s: s.name):
            if s.members == (s.name,):
                continue
            counts = self.calibration.strata[s.name]
            lines.append(
                f"pool {s.name} ({', '.join(s.members)}): n {s.n}, budget {_g(s.budget)}, floor {_p(s.floor)}, "
                f"threshold {_threshold(s.threshold)}, violation {_p(counts.rate(t.episode_level))}"
            )
        for s in sorted(t.strata.values(), key=lambda s: s.name):
            if s.budget < 1 and s.threshold == -math.inf:
                lines.append(f"{s.name}: threshold -inf flags every field: {_why_blocked(s)}")
        overall = self.calibration.overall
        lines.append(
            f"all controlled fields: violation {_p(overall.violation)}, "
            f"over-intervention {_p(overall.over_intervention)}"
        )
        return lines

    def _test_lines(self) -> list[str]:
        t = self.thresholds
        test = self.test
        assert test is not None
        what = f"held-out test ({self.split})" if self.calibration is not None else str(self.split)
        lines = [f"{what}: {test.overall.fields:,} fields of controlled roles"]
        unit = "episodes" if t.episode_level else "n"
        header = [
            "role",
            "budget",
            unit,
            "violation",
            f"upper {1 - self.confidence:.0%}",
            "within",
            "over-int.",
        ]
        rows = []
        for name in sorted(t.role_to_stratum):
            counts = test.roles[name]
            budget = self.budget_of(name)
            _, units = counts.units(t.episode_level)
            upper = self.upper(counts)
            rate = counts.rate(t.episode_level)
            rows.append(
                [
                    name,
                    _g(budget),
                    str(units),
                    _p(rate) if units else "-",
                    _p(upper),
                    ("yes" if rate <= budget else "NO") if units else "-",
                    _p(counts.over_intervention),
                ]
            )
        lines += _table(header, rows)
        lines.append(
            f"all controlled fields: violation {_p(test.overall.violation)}, "
            f"over-intervention {_p(test.overall.over_intervention)}"
        )
        return lines


def _within(counts: Counts, episode_level: bool, budget: float) -> bool | None:
    """Whether the rate is within the budget; None (unknown) when there is no unit to judge."""
    return counts.rate(episode_level) <= budget if counts.units(episode_level)[1] else None


def _why_blocked(stratum: Stratum) -> str:
    from .calibrators import certifiable, needed_for_certificate

    if not certifiable(stratum.n, stratum.budget):
        units = "1 unit is" if stratum.n == 1 else f"{stratum.n} units are"
        return f"{units} too few for budget {_g(stratum.budget)} (floor {_p(stratum.floor)})"
    if stratum.delta is not None and stratum.n < (
        needed := needed_for_certificate(stratum.budget, stratum.delta)
    ):
        return f"a Clopper-Pearson certificate at {_g(stratum.budget)} needs at least {needed} units, it has {stratum.n}"
    return "too many violated fields are among the lowest scores for any threshold to keep the budget"


def _finite(value: float) -> float | str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def _threshold(value: float) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.4f}"


def _g(value: float) -> str:
    return f"{value:g}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
