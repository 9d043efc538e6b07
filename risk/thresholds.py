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
``thresholds.json:14: strata.target.threshold: expected a number, "inf" or "-inf", got "high"``
(see ``docs/formats.md``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policyc.compiler.reading import Cursor, show

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
    from policyc.compiler.reading import FormatError
    from policyc.runtime.documents import decode, document

    try:
        data = read_bytes(path)
    except OSError as error:
        raise RiskError(f"cannot read `{path}`: {error.strerror or error}", io=True) from None
    try:
        return read(document(decode(data, str(path)), str(path)))
    except FormatError as error:
        raise RiskError(str(error)) from None


def from_json(data: Any, origin: str) -> Thresholds:
    """Thresholds from their JSON form, validated (:class:`RiskError` naming the wrong part)."""
    from policyc.compiler.reading import Cursor, FormatError, Source

    try:
        return read(Cursor.root(data, Source(origin)))
    except FormatError as error:
        raise RiskError(str(error)) from None


def read(top: Cursor) -> Thresholds:
    """Thresholds from the cursor of their JSON form (:class:`FormatError` at the wrong part)."""
    if not isinstance(top.value, dict):
        raise top.fail("expected a JSON object of thresholds (as `policyc calibrate` writes)")
    if top.has("format") and top["format"].value != FORMAT:
        raise top["format"].expected(repr(FORMAT))
    version = top.optional("version", Cursor.positive, VERSION)
    if version > VERSION:
        raise top["version"].fail(
            f"version {version} is newer than this policyc reads (up to {VERSION}); upgrade"
        )
    method = top["method"].choice(METHODS)
    strata_at = top["strata"]
    role_to_stratum = top["role_to_stratum"]
    delta = top.optional("delta", Cursor.probability, None)
    episode_level = top.optional("episode_level", Cursor.boolean, False)
    detector = top.optional("detector", _detector, "lexical-provenance")
    if not isinstance(strata_at.value, dict):
        raise strata_at.expected("an object mapping stratum names to their thresholds")
    strata = {name: _stratum(name, entry) for name, entry in strata_at.entries()}
    if not isinstance(role_to_stratum.value, dict):
        raise role_to_stratum.expected("an object mapping role names to stratum names")
    mapping = {role: _stratum_name(c, strata) for role, c in role_to_stratum.entries()}
    roles_at = top.get("roles")
    roles = {}
    if roles_at is not None:
        if not isinstance(roles_at.value, dict):
            raise roles_at.expected("an object mapping role names to their calibration")
        roles = {role: _role(role, entry, mapping) for role, entry in roles_at.entries()}
    return Thresholds(method, delta, episode_level, detector, strata, mapping, roles)


def _detector(at: Cursor) -> str:
    if not isinstance(at.value, str) or not at.value:
        raise at.expected("a detector name")
    return at.value


def _stratum(name: str, at: Cursor) -> Stratum:
    if not isinstance(at.value, dict):
        raise at.expected("an object with `threshold`, `n`, `budget` and `members`")
    members = at["members"]
    if not isinstance(members.value, list) or not all(isinstance(m, str) and m for m in members.value):
        raise members.expected("a list of role names")
    return Stratum(
        name,
        _threshold(at["threshold"]),
        at["n"].count(),
        at["budget"].probability(),
        tuple(members.value),
        at.optional("delta", Cursor.probability, None),
    )


def _stratum_name(at: Cursor, strata: dict[str, Stratum]) -> str:
    if not isinstance(at.value, str) or at.value not in strata:
        known = ", ".join(f"`{s}`" for s in sorted(strata)) or "none"
        raise at.fail(f"names no stratum ({show(at.value)}; the strata are {known})")
    return at.value


def _role(role: str, at: Cursor, mapping: dict[str, str]) -> RoleResult:
    at.object()
    budget = at.child("budget").probability()
    n = at.child("n").count()
    stratum = at.child("stratum")
    if stratum.value != mapping.get(role):
        raise stratum.fail(f"{show(stratum.value)} is not the stratum `role_to_stratum` gives")
    certified = at.child("certified").choice(CERTIFIED)
    return RoleResult(role, budget, n, stratum.value, certified)


def _threshold(at: Cursor) -> float:
    if at.value == "inf":
        return math.inf
    if at.value == "-inf":
        return -math.inf
    value = at.value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise at.expected('a number, "inf" or "-inf"')
    return float(value)


def thresholds_of(value: Any) -> Thresholds:
    """Thresholds given to a monitor: a :class:`Thresholds`, their JSON form, or a path."""
    if isinstance(value, Thresholds):
        return value
    if isinstance(value, Mapping):
        return from_json(dict(value), "thresholds")
    if isinstance(value, str | os.PathLike):
        return read_thresholds(value)
    raise RiskError(f"thresholds must be a path, a mapping or Thresholds, not {type(value).__name__}")
