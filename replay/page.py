"""The report of a replay as one self-contained HTML page (``policyc replay --html``): the
summary, the tables of the text report and two plots — denials per rule and, with
``--compare``, the sessions that differ per tool (without it, the decisions per tool) — drawn
by matplotlib as inline SVG. Nothing is loaded from anywhere: no scripts, no style sheets, no
fonts, no images; the page opens from a file, an e-mail or an artifact store alike.

Every name on the page (rules, tools, sessions, files, messages) comes from the archive and
may come from an attacker; the template escapes them all, and the plots' labels are plain
text (no mathtext), escaped by matplotlib's SVG writer. The page is a function of the report
alone: the same report gives the same bytes.

Each bar of a plot carries an ``id`` (``rules-deny-0``: the plot, the series, the row of the
table beside it), so the page can be checked against its tables.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PLOTTED = 30  # bars per plot at most (the largest; the table beside it lists every row)
LABEL = 48  # characters of a label in a plot (the table has the whole name)
COLORS = {"allow": "#3b8a4a", "deny": "#c0392b", "escalate": "#d68910", "sessions": "#2e6da4"}


@dataclass(frozen=True)
class Series:
    """One colour of a horizontal bar chart: its name and a value per bar."""

    name: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class Chart:
    """A stacked horizontal bar chart: ``key`` names it in the bars' ids."""

    key: str
    title: str
    labels: tuple[str, ...]
    series: tuple[Series, ...]
    unit: str
    note: str = ""


def report_html(report: dict[str, Any]) -> str:
    """The page of a replay's report (:func:`~.report.report_json`'s object)."""
    import jinja2

    from .report import location

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("policyc.replay", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.filters["location"] = location
    environment.filters["number"] = lambda n: f"{n:,}"
    charts = {"rules": svg(rules_chart(report["rules"]))}
    differences = report.get("differences")
    if differences is not None:
        charts["tools"] = svg(differing_chart(differences["tools"]))
    else:
        charts["tools"] = svg(tools_chart(report["tools"]))
    return environment.get_template("report.html.j2").render(report=report, charts=charts)


def rules_chart(rules: Sequence[dict[str, Any]]) -> Chart:
    """Denied and escalated decisions per rule, the rules with most first."""
    shown, note = _largest(rules, lambda r: r["deny"] + r["escalate"], "rules")
    return Chart(
        "rules",
        "Denials per rule",
        tuple(r["rule"] for r in shown),
        (
            Series("deny", tuple(r["deny"] for r in shown)),
            Series("escalate", tuple(r["escalate"] for r in shown)),
        ),
        "decisions",
        note,
    )


def tools_chart(tools: Sequence[dict[str, Any]]) -> Chart:
    """Decisions per tool by verdict, the tools with most first."""
    shown, note = _largest(tools, lambda t: t["allow"] + t["deny"] + t["escalate"], "tools")
    return Chart(
        "tools",
        "Decisions per tool",
        tuple(t["tool"] for t in shown),
        tuple(Series(v, tuple(t[v] for t in shown)) for v in ("allow", "deny", "escalate")),
        "decisions",
        note,
    )


def differing_chart(tools: Sequence[dict[str, Any]]) -> Chart:
    """Sessions whose decisions differ, per tool, the tools with most first."""
    shown, note = _largest(tools, lambda t: t["sessions"], "tools")
    return Chart(
        "tools",
        "Differing sessions per tool",
        tuple(t["tool"] for t in shown),
        (Series("sessions", tuple(t["sessions"] for t in shown)),),
        "sessions",
        note,
    )


def _largest(rows: Sequence[dict[str, Any]], size: Any, what: str) -> tuple[list[dict[str, Any]], str]:
    ordered = sorted(rows, key=lambda row: -size(row))  # stable: ties keep the report's order
    shown = ordered[:PLOTTED]
    note = (
        f"the {PLOTTED} largest of {len(rows):,} {what}; the table lists all" if len(rows) > PLOTTED else ""
    )
    return shown, note


def svg(chart: Chart) -> str:
    """The chart as an ``<svg>`` element (no XML prolog), or ``""`` when it has no bars."""
    if not chart.labels:
        return ""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    settings = {
        "svg.hashsalt": f"policyc-replay-{chart.key}",  # the same report, the same bytes
        "svg.fonttype": "none",  # labels as text: selectable, searchable, readable by a test
        "text.parse_math": False,  # a `$` in a tool's name is a dollar
        "font.size": 9,
    }
    with matplotlib.rc_context(settings):
        rows = len(chart.labels)
        figure = Figure(figsize=(7.5, 0.8 + 0.28 * rows))
        axes = figure.add_subplot()
        positions = list(range(rows))
        left = [0] * rows
        for series in chart.series:
            bars = axes.barh(
                positions, series.values, left=left, color=COLORS[series.name], label=series.name, height=0.7
            )
            for row, bar in enumerate(bars):
                bar.set_gid(f"{chart.key}-{series.name}-{row}")
            left = [a + b for a, b in zip(left, series.values, strict=True)]
        axes.set_yticks(positions, [_short(label) for label in chart.labels])
        axes.invert_yaxis()  # the largest on top
        axes.set_title(chart.title, loc="left")
        axes.set_xlabel(chart.unit + (f" ({chart.note})" if chart.note else ""))
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.spines[["top", "right"]].set_visible(False)
        if len(chart.series) > 1:
            axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        figure.tight_layout()
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _short(label: str) -> str:
    return label if len(label) <= LABEL else label[: LABEL - 1] + "\u2026"
