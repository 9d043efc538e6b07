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
with its line and field: ``calib.jsonl:12: score: expected a finite number, got "high"`` (see
``docs/formats.md``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policyc.compiler.reading import Cursor, FormatError
from policyc.compiler.syntax_errors import did_you_mean

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
    from policyc.runtime.documents import decode

    try:
        data = read_bytes(path)
    except OSError as error:
        raise RiskError(f"cannot read `{path}`: {error.strerror or error}", io=True) from None
    try:
        text = decode(data, str(path))
    except FormatError as error:
        raise RiskError(str(error)) from None
    return parse_records(text.splitlines(), declarations, str(path), need_episodes=need_episodes)


def parse_records(
    lines: Iterable[str], declarations: Declarations, origin: str, *, need_episodes: bool = False
) -> list[Record]:
    """The records of the lines of a JSONL file (:class:`RiskError` listing every problem)."""
    from policyc.runtime.documents import record

    records: list[Record] = []
    problems: list[str] = []
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            records.append(_record(record(text, origin, number), number, declarations, need_episodes))
        except FormatError as error:
            problems.append(str(error))
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


def _record(at: Cursor, number: int, declarations: Declarations, need_episodes: bool) -> Record:
    if not isinstance(at.value, dict):
        raise at.fail(f"a record is a JSON object, not {_kind(at.value)}")
    at.object(KEYS)
    field_at, role_at = _present(at, "field"), _present(at, "role")
    field = None if field_at is None else field_at.value
    role = None if role_at is None else role_at.value
    if field_at is not None and (not isinstance(field, str) or "." not in field.strip(".")):
        raise field_at.expected("a string `tool.argument`")
    if role_at is not None and (not isinstance(role, str) or not role):
        raise role_at.expected("a role name")
    if field_at is None and role_at is None:
        raise at.fail("a record needs a `field` (tool.argument) or a `role`")
    mapped = declarations.role_of(field) if field is not None else None
    if role_at is None:
        if mapped is None:
            raise field_at.fail(  # type: ignore[union-attr]
                f"`{field}` has no role in the policy: map it with `.field {field} : ROLE`, "
                "or give the record a `role`"
            )
        role = mapped
    elif mapped is not None and mapped != role:
        raise role_at.fail(f"the record says `{role}`, but the policy maps `{field}` to `{mapped}`")
    if role not in declarations.roles:
        close = did_you_mean(role, declarations.roles)
        declared = ", ".join(f"`{r}`" for r in sorted(declarations.roles)) or "none"
        hint = f"did you mean `{close}`?" if close else f"declared roles: {declared}"
        raise (role_at or field_at).fail(f"`{role}` is not declared in the policy ({hint})")  # type: ignore[union-attr]
    score = at["score"].number()
    violated = at["violated"].boolean()
    episode_at = _present(at, "episode")
    episode = None
    if episode_at is not None:
        episode = episode_at.value
        if isinstance(episode, bool) or not isinstance(episode, str | int):
            raise episode_at.expected("a string or an integer")
        episode = str(episode)
    elif need_episodes:
        raise at.child("episode").fail("missing (episode-level calibration needs one on every record)")
    return Record(role, score, violated, episode, field, number)


def _present(at: Cursor, key: str) -> Cursor | None:
    """A field that is there and not null."""
    found = at.get(key)
    return None if found is None or found.value is None else found


def _kind(value: object) -> str:
    return {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), "null"
    )


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
