"""The server's settings, from ``initializationOptions`` and ``workspace/didChangeConfiguration``.

Both may give the settings directly or under a ``policyc`` key::

    {"policyc": {"deep": true, "deepBound": 2, "deepTimeout": 6, "debounceMs": 300}}

A value of the wrong type or out of range is reported (the server logs a warning) and the
setting keeps its value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Settings:
    deep: bool = True  # run the deep checks on save
    deep_bound: int = 2  # fresh values per type of their bounded searches (`--bound`)
    deep_timeout: float = 6.0  # seconds their searches may take together (`--deep-timeout`)
    debounce: float = 0.3  # seconds of quiet after a change before the document is checked


# setting name: (field, type, lowest, highest, scale)
_FIELDS: dict[str, tuple[str, type, float, float, float]] = {
    "deep": ("deep", bool, 0, 1, 1),
    "deepBound": ("deep_bound", int, 1, 8, 1),
    "deepTimeout": ("deep_timeout", float, 0.1, 600, 1),
    "debounceMs": ("debounce", float, 0, 10_000, 0.001),
}


def update(settings: Settings, raw: Any) -> tuple[Settings, list[str]]:
    """``settings`` with what ``raw`` sets, and the problems with what it sets."""
    if isinstance(raw, dict) and isinstance(raw.get("policyc"), dict):
        raw = raw["policyc"]
    if not isinstance(raw, dict):
        return settings, [] if raw is None else ["the policyc settings are not an object; they are ignored"]
    changes: dict[str, Any] = {}
    problems = []
    for name, value in raw.items():
        if name not in _FIELDS:
            problems.append(
                f"unknown setting `{name}`; the settings are {', '.join(f'`{n}`' for n in _FIELDS)}"
            )
            continue
        field, kind, low, high, scale = _FIELDS[name]
        if kind is bool:
            ok = isinstance(value, bool)
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high
            ok = ok and (kind is not int or float(value).is_integer())
        if not ok:
            wanted = "true or false" if kind is bool else f"a number from {low:g} to {high:g}"
            problems.append(f"setting `{name}` is {value!r}; it must be {wanted}, so it stays as it was")
            continue
        changes[field] = kind(value) * scale if kind is not bool else value
    return dataclasses.replace(settings, **changes), problems
