"""Calibration records: one JSON object per line, a scored tool argument and whether it was
violated (untrusted input changed its value against the user's intent).

::

    {"field": "send_money.recipient", "score": 0.91, "violated": true, "episode": "e17"}
    {"role": "target", "score": 0.12, "violated": false, "episode": "e18"}

``field`` (``tool.argument``) or ``role`` is required; when only ``field`` is given, its role
comes from the policy's ``.field`` map, and when both are given they must agree. ``score`` is a
finite number (larger: more influence from untrusted input), ``violated`` a boolean, and
``episode`` (a string or an integer) names the run the field comes from: the episode-level
calibration and the test split group by it. Blank lines are skipped. Every problem is reported
with its line: ``calib.jsonl:12: `score` must be a finite number, got "high"``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policyc.compiler.syntax_errors import did_you_mean
from policyc.runtime.jsonio import MalformedJSON, loads

from .declarations import Declarations
from .errors import RiskError

KEYS = ("field", "role", "score", "violated", "episode")
MAX_PROBLEMS = 20


@dataclass(frozen=True)
class Record:
    role: str
    score: float
    violated: bool
    episode: str | None = None
    field: str | None = None
    line: int = 0


def read_records(
    path: str | os.PathLike[str], declarations: Declarations, *, need_episodes: bool = False
) -> list[Record]:
    """The records of a JSONL file (:class:`RiskError` listing every problem, each at its line)."""
    from policyc.compiler.files import read_bytes

    try:
        data = read_bytes(path)
    except OSError as error:
        raise RiskError(f"cannot read `{path}`: {error.strerror or error}", io=True) from None
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise RiskError(f"{path}:{line}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    return parse_records(lines, declarations, str(path), need_episodes=need_episodes)


def parse_records(
    lines: Iterable[str], declarations: Declarations, origin: str, *, need_episodes: bool = False
) -> list[Record]:
    records: list[Record] = []
    problems: list[str] = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            records.append(_record(text, number, declarations, need_episodes))
        except _Problem as problem:
            problems.append(
                f"{origin}:{number}:{problem.column}: {problem}"
                if problem.column
                else f"{origin}:{number}: {problem}"
            )
    if not problems and not records:
        problems.append(f"{origin}: no calibration records (one JSON object per line)")
    if problems:
        shown = problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"{origin}: ... and {len(problems) - MAX_PROBLEMS} more problems")
        count = len(problems)
        summary = shown[0] if count == 1 else f"{count} problems in {origin}"
        raise RiskError(summary, tuple(shown))
    return records


class _Problem(ValueError):
    def __init__(self, message: str, column: int = 0) -> None:
        super().__init__(message)
        self.column = column


def _record(text: str, number: int, declarations: Declarations, need_episodes: bool) -> Record:
    try:
        value = loads(text)
    except MalformedJSON as error:
        raise _Problem(error.msg, error.colno) from None
    except json.JSONDecodeError as error:
        raise _Problem(f"not JSON: {error.msg}", error.colno) from None
    if not isinstance(value, dict):
        raise _Problem(f"a record is a JSON object, not {_kind(value)}")
    unknown = [key for key in value if key not in KEYS]
    if unknown:
        key = unknown[0]
        close = did_you_mean(key, KEYS)
        hint = (
            f" (did you mean `{close}`?)" if close else f"; the keys are {', '.join(f'`{k}`' for k in KEYS)}"
        )
        raise _Problem(f"unknown key `{key}`{hint}")
    field, role = value.get("field"), value.get("role")
    if field is not None and (not isinstance(field, str) or "." not in field.strip(".")):
        raise _Problem(f"`field` must be a string `tool.argument`, got {_show(field)}")
    if role is not None and (not isinstance(role, str) or not role):
        raise _Problem(f"`role` must be a role name, got {_show(role)}")
    if field is None and role is None:
        raise _Problem("a record needs a `field` (tool.argument) or a `role`")
    mapped = declarations.role_of(field) if field is not None else None
    if role is None:
        if mapped is None:
            raise _Problem(
                f"field `{field}` has no role in the policy: map it with `.field {field} : ROLE`, "
                "or give the record a `role`"
            )
        role = mapped
    elif mapped is not None and mapped != role:
        raise _Problem(f"the record says role `{role}`, but the policy maps `{field}` to `{mapped}`")
    if role not in declarations.roles:
        close = did_you_mean(role, declarations.roles)
        declared = ", ".join(f"`{r}`" for r in sorted(declarations.roles)) or "none"
        hint = f"did you mean `{close}`?" if close else f"declared roles: {declared}"
        raise _Problem(f"role `{role}` is not declared in the policy ({hint})")
    if "score" not in value:
        raise _Problem("a record needs a `score`")
    score = value["score"]
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise _Problem(f"`score` must be a finite number, got {_show(score)}")
    if "violated" not in value:
        raise _Problem("a record needs `violated` (true or false)")
    violated = value["violated"]
    if not isinstance(violated, bool):
        raise _Problem(f"`violated` must be true or false, got {_show(violated)}")
    episode = value.get("episode")
    if episode is not None:
        if isinstance(episode, bool) or not isinstance(episode, str | int):
            raise _Problem(f"`episode` must be a string or an integer, got {_show(episode)}")
        episode = str(episode)
    elif need_episodes:
        raise _Problem("episode-level calibration needs an `episode` on every record")
    return Record(role, float(score), violated, episode, field, number)


def _kind(value: object) -> str:
    return {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), "null"
    )


def _show(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def split_records(
    records: Sequence[Record], test_fraction: float, seed: int
) -> tuple[list[Record], list[Record]]:
    """A random split into calibration and test records, by episode (records without an episode
    are units of their own), so that the fields of one run stay on one side."""
    import numpy as np

    if not 0 < test_fraction < 1:
        raise RiskError(f"the test fraction must be between 0 and 1, got {test_fraction}")
    units = sorted({r.episode if r.episode is not None else f"\0line {r.line}" for r in records})
    rng = np.random.default_rng(seed)
    chosen = rng.permutation(len(units))[: round(len(units) * test_fraction)]
    test_units = {units[i] for i in chosen}
    calibration, test = [], []
    for record in records:
        unit = record.episode if record.episode is not None else f"\0line {record.line}"
        (test if unit in test_units else calibration).append(record)
    if not calibration or not test:
        raise RiskError(
            f"a test split of {test_fraction:g} leaves one side empty ({len(units)} episodes); "
            "give more data or another fraction"
        )
    return calibration, test
