"""``thresholds.json``: the calibrated threshold of every final stratum, and which stratum each
role uses. A field is allowed when its score is at most its stratum's threshold.

::

    {"format": "policyc-thresholds", "version": 1,
     "method": "crc" | "clopper-pearson", "delta": 0.05 | null, "episode_level": false,
     "detector": "lexical-provenance",
     "strata": {"target": {"threshold": 0.62, "n": 412, "budget": 0.01, "floor": 0.0024,
                           "members": ["target"], "delta": null}, ...},
     "role_to_stratum": {"target": "target", "credential": "high_risk", ...},
     "roles": {"credential": {"budget": 0.01, "n": 9, "stratum": "high_risk",
                              "certified": "through pool"}, ...}}

A threshold is a number, or ``"-inf"`` (every field of the stratum is flagged) or ``"inf"``
(none is). Reading checks every part and names the first that is wrong:
``thresholds.json: strata.target.threshold: expected a number, "inf" or "-inf", got "high"``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .declarations import Declarations
from .errors import RiskError

FORMAT = "policyc-thresholds"
VERSION = 1
METHODS = ("crc", "clopper-pearson")
CERTIFIED = ("individually", "through pool", "not certifiable", "uncontrolled")


@dataclass(frozen=True)
class Stratum:
    name: str
    threshold: float  # may be -inf (flag every field) or inf (flag none)
    n: int  # calibration units: fields, or episodes for episode-level calibration
    budget: float
    members: tuple[str, ...]  # the roles whose fields calibrated it
    delta: float | None = None  # its share of δ (Clopper-Pearson)

    @property
    def floor(self) -> float:
        return 1 / (self.n + 1)

    def flags(self, score: float) -> bool:
        return not score <= self.threshold


@dataclass(frozen=True)
class RoleResult:
    name: str
    budget: float
    n: int
    stratum: str
    certified: str  # one of CERTIFIED


@dataclass(frozen=True)
class Thresholds:
    method: str
    delta: float | None
    episode_level: bool
    detector: str
    strata: dict[str, Stratum]
    role_to_stratum: dict[str, str]
    roles: dict[str, RoleResult] = field(default_factory=dict)

    def stratum_of(self, role: str) -> Stratum | None:
        name = self.role_to_stratum.get(role)
        return None if name is None else self.strata.get(name)

    def problem_with(self, role: str, budget: float) -> str | None:
        """Why these thresholds cannot decide fields of ``role`` under the policy's ``budget``
        (None when they can): no stratum for it, or a stratum calibrated for a looser budget."""
        stratum = self.stratum_of(role)
        if stratum is None:
            return f"the thresholds have no stratum for role `{role}`; calibrate again with this policy"
        if stratum.budget > budget * (1 + 1e-9):
            return (
                f"role `{role}` has budget {budget:g}, but its threshold was calibrated for {stratum.budget:g}; "
                "calibrate again"
            )
        return None

    def problems(self, declarations: Declarations) -> list[str]:
        """Every way these thresholds do not fit a policy: roles it does not declare, roles its
        fields use that have no usable threshold."""
        found = [
            f"the thresholds calibrate role `{role}`, which the policy does not declare"
            for role in sorted(self.role_to_stratum)
            if role not in declarations.roles
        ]
        used = sorted(set(declarations.fields.values()))
        for role in used:
            spec = declarations.roles.get(role)
            if spec is not None and (problem := self.problem_with(role, spec.budget)):
                found.append(problem)
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "method": self.method,
            "delta": self.delta,
            "episode_level": self.episode_level,
            "detector": self.detector,
            "strata": {
                name: {
                    "threshold": _number(s.threshold),
                    "n": s.n,
                    "budget": s.budget,
                    "floor": s.floor,
                    "members": list(s.members),
                    "delta": s.delta,
                }
                for name, s in sorted(self.strata.items())
            },
            "role_to_stratum": dict(sorted(self.role_to_stratum.items())),
            "roles": {
                name: {"budget": r.budget, "n": r.n, "stratum": r.stratum, "certified": r.certified}
                for name, r in sorted(self.roles.items())
            },
        }

    def write(self, path: str | os.PathLike[str]) -> None:
        text = json.dumps(self.to_json(), indent=2) + "\n"
        try:
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
        except OSError as error:
            raise RiskError(f"cannot write `{path}`: {error.strerror or error}", io=True) from None


def _number(value: float) -> float | str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def read_thresholds(path: str | os.PathLike[str]) -> Thresholds:
    """Thresholds from a file (:class:`RiskError` saying what is wrong, and where)."""
    from policyc.compiler.files import read_bytes
    from policyc.runtime.jsonio import MalformedJSON, loads

    try:
        text = read_bytes(path).decode("utf-8")
    except OSError as error:
        raise RiskError(f"cannot read `{path}`: {error.strerror or error}", io=True) from None
    except UnicodeDecodeError:
        raise RiskError(f"{path}: not UTF-8 text") from None
    try:
        data = loads(text)
    except MalformedJSON as error:
        raise RiskError(f"{path}:{error.lineno}:{error.colno}: {error.msg}") from None
    except json.JSONDecodeError as error:
        raise RiskError(f"{path}:{error.lineno}:{error.colno}: not JSON: {error.msg}") from None
    return from_json(data, str(path))


def from_json(data: Any, origin: str) -> Thresholds:
    """Thresholds from their JSON form, validated (:class:`RiskError` naming the wrong part)."""

    def wrong(where: str, message: str) -> RiskError:
        return RiskError(f"{origin}: {where}: {message}" if where else f"{origin}: {message}")

    if not isinstance(data, dict):
        raise wrong("", "expected a JSON object of thresholds (as `policyc calibrate` writes)")
    if "format" in data and data["format"] != FORMAT:
        raise wrong("format", f"expected {FORMAT!r}, got {_show(data['format'])}")
    version = data.get("version", VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise wrong("version", f"expected a positive integer, got {_show(version)}")
    if version > VERSION:
        raise wrong(
            "version", f"version {version} is newer than this policyc reads (up to {VERSION}); upgrade"
        )
    for key in ("method", "strata", "role_to_stratum"):
        if key not in data:
            raise wrong("", f"missing `{key}`")
    method = data["method"]
    if method not in METHODS:
        raise wrong("method", f"expected one of {', '.join(METHODS)}, got {_show(method)}")
    delta = data.get("delta")
    if delta is not None:
        delta = _probability(delta, "delta", wrong)
    episode_level = data.get("episode_level", False)
    if not isinstance(episode_level, bool):
        raise wrong("episode_level", f"expected true or false, got {_show(episode_level)}")
    detector = data.get("detector", "lexical-provenance")
    if not isinstance(detector, str) or not detector:
        raise wrong("detector", f"expected a detector name, got {_show(detector)}")

    strata_data = data["strata"]
    if not isinstance(strata_data, dict):
        raise wrong("strata", "expected an object mapping stratum names to their thresholds")
    strata: dict[str, Stratum] = {}
    for name, entry in strata_data.items():
        at = f"strata.{name}"
        if not isinstance(entry, dict):
            raise wrong(at, "expected an object with `threshold`, `n`, `budget` and `members`")
        for key in ("threshold", "n", "budget", "members"):
            if key not in entry:
                raise wrong(at, f"missing `{key}`")
        threshold = _threshold(entry["threshold"], f"{at}.threshold", wrong)
        n = entry["n"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise wrong(f"{at}.n", f"expected a count (an integer, 0 or more), got {_show(n)}")
        budget = _probability(entry["budget"], f"{at}.budget", wrong)
        members = entry["members"]
        if not isinstance(members, list) or not all(isinstance(m, str) and m for m in members):
            raise wrong(f"{at}.members", f"expected a list of role names, got {_show(members)}")
        share = entry.get("delta")
        if share is not None:
            share = _probability(share, f"{at}.delta", wrong)
        strata[name] = Stratum(name, threshold, n, budget, tuple(members), share)

    mapping = data["role_to_stratum"]
    if not isinstance(mapping, dict):
        raise wrong("role_to_stratum", "expected an object mapping role names to stratum names")
    for role, stratum in mapping.items():
        if not isinstance(stratum, str) or stratum not in strata:
            known = ", ".join(f"`{s}`" for s in sorted(strata)) or "none"
            raise wrong(
                f"role_to_stratum.{role}", f"names no stratum ({_show(stratum)}; the strata are {known})"
            )

    roles: dict[str, RoleResult] = {}
    roles_data = data.get("roles", {})
    if not isinstance(roles_data, dict):
        raise wrong("roles", "expected an object mapping role names to their calibration")
    for role, entry in roles_data.items():
        at = f"roles.{role}"
        if not isinstance(entry, dict):
            raise wrong(at, "expected an object")
        budget = _probability(entry.get("budget"), f"{at}.budget", wrong)
        n = entry.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise wrong(f"{at}.n", f"expected a count (an integer, 0 or more), got {_show(n)}")
        stratum = entry.get("stratum")
        if stratum != mapping.get(role):
            raise wrong(f"{at}.stratum", f"{_show(stratum)} is not the stratum `role_to_stratum` gives")
        certified = entry.get("certified")
        if certified not in CERTIFIED:
            raise wrong(f"{at}.certified", f"expected one of {', '.join(CERTIFIED)}, got {_show(certified)}")
        roles[role] = RoleResult(role, budget, n, stratum, certified)
    return Thresholds(method, delta, episode_level, detector, strata, dict(mapping), roles)


def _threshold(value: Any, where: str, wrong: Any) -> float:
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise wrong(where, f'expected a number, "inf" or "-inf", got {_show(value)}')
    return float(value)


def _probability(value: Any, where: str, wrong: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise wrong(where, f"expected a number in (0, 1], got {_show(value)}")
    return float(value)


def _show(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def thresholds_of(value: Any) -> Thresholds:
    """Thresholds given to a monitor: a :class:`Thresholds`, their JSON form, or a path."""
    if isinstance(value, Thresholds):
        return value
    if isinstance(value, Mapping):
        return from_json(dict(value), "thresholds")
    if isinstance(value, str | os.PathLike):
        return read_thresholds(value)
    raise RiskError(f"thresholds must be a path, a mapping or Thresholds, not {type(value).__name__}")
