"""The tables bench_serve.py prints: each service's figures over the rounds, and each service's
figures over the baseline's in the same round."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Turn:
    """One service's figures in one round, by load (``"sync, 8 clients"``: ``{"decisions_per_s": ...}``)."""

    service: str
    round: int
    loads: dict[str, dict[str, float]] = field(default_factory=dict)


# the figures each load reports: key, heading, scale, format (a column nothing measured is left out)
COLUMNS = (
    ("decisions_per_s", "decisions/s", 1.0, "{:,.0f}"),
    ("client_p50", "client p50 ms", 1e3, "{:.3f}"),
    ("client_p99", "client p99 ms", 1e3, "{:.2f}"),
    ("service_p50", "service p50 ms", 1e3, "{:.3f}"),
    ("service_cpu", "service CPU ms", 1e3, "{:.3f}"),
    ("client_cpu", "client CPU ms", 1e3, "{:.3f}"),
    ("database_cpu", "PostgreSQL CPU ms", 1e3, "{:.3f}"),
)
WIDTH = 21
NAN = float("nan")
# the figures compared with the baseline's
RATIOS = ("decisions_per_s", "client_p50", "service_p50", "service_cpu")


def spread(values: list[float], form: str) -> str:
    """The median and, over several rounds, the range: ``1,020 (990-1,040)``."""
    values = [v for v in values if v == v]  # NaN: not measured
    if not values:
        return "-"
    middle = form.format(statistics.median(values))
    if len(values) == 1:
        return middle
    return f"{middle} ({form.format(min(values))}-{form.format(max(values))})"


def _figure(turns: list[Turn], service: str, number: int, load: str, key: str) -> float:
    found = [t for t in turns if t.service == service and t.round == number]
    return found[0].loads.get(load, {}).get(key, NAN) if found else NAN


def ratios(turns: list[Turn], service: str, reference: str, load: str, key: str) -> list[float]:
    """``service``'s figure over ``reference``'s, in each round where both were measured."""
    out = []
    for number in sorted({t.round for t in turns}):
        mine, theirs = (_figure(turns, s, number, load, key) for s in (service, reference))
        if theirs and theirs == theirs and mine == mine:  # measured (not NaN), not zero
            out.append(mine / theirs)
    return out


def report(services: list[str], turns: list[Turn], reference: str | None) -> str:
    """The tables of ``turns``, for ``services`` in that order; their figures over
    ``reference``'s (a service's name) unless it is None."""
    loads = list(dict.fromkeys(load for t in turns for load in t.loads))
    width = max(len(s) for s in services)
    measured = {key for t in turns for figures in t.loads.values() for key, v in figures.items() if v == v}
    columns = [column for column in COLUMNS if column[0] in measured or column[0] in RATIOS]
    head = " ".join(f"{title:>{WIDTH}}" for _, title, _, _ in columns)
    lines = [f"{'service':{width}} {'load':20} {head}"]
    for service in services:
        for load in loads:
            cells = []
            for key, _, scale, form in columns:
                values = [t.loads[load].get(key, NAN) * scale for t in turns if t.service == service]
                cells.append(f"{spread(values, form):>{WIDTH}}")
            lines.append(f"{service:{width}} {load:20} {' '.join(cells)}")
    lines.append("(CPU: milliseconds per decision; median over rounds, and their range)")
    if reference is None:
        return "\n".join(lines)
    others = [s for s in services if s != reference]
    lines += ["", f"over {reference}, round by round (median, and range over rounds):"]
    lines.append(f"{'figure':46} " + " ".join(f"{s:>{WIDTH}}" for s in others))
    for load in loads:
        for key, title, _, _ in COLUMNS:
            if key in RATIOS:
                cells = [
                    f"{spread(ratios(turns, s, reference, load, key), '{:.2f}'):>{WIDTH}}" for s in others
                ]
                lines.append(f"{title + ', ' + load:46} " + " ".join(cells))
    return "\n".join(lines)


def over(turns: list[Turn], services: list[str], reference: str) -> str:
    """Each of ``services``' decisions per second over ``reference``'s (the working tree's, for
    its variants), round by round, for every load."""
    loads = list(dict.fromkeys(load for t in turns for load in t.loads))
    lines = [f"decisions/s over {reference}, round by round (median, and range over rounds):"]
    lines.append(f"{'load':46} " + " ".join(f"{s:>{WIDTH}}" for s in services))
    for load in loads:
        cells = [
            f"{spread(ratios(turns, s, reference, load, 'decisions_per_s'), '{:.2f}'):>{WIDTH}}"
            for s in services
        ]
        lines.append(f"{load:46} " + " ".join(cells))
    return "\n".join(lines)
