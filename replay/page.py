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

For a screen reader: each plot is one image named by what it shows (every bar's label and
values, :func:`described`) under a caption, each table has a caption and column headers, and
each summary card reads as its number and its label. With ``--compare``, each example of a
difference links to its session's drill-down: the session's events, and both policies'
decisions of each call, the differing ones marked (:func:`~.tally.detail`).
"""

from __future__ import annotations

import html
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
    environment.filters["decision"] = decision_text
    made = {"rules": rules_chart(report["rules"])}
    differences = report.get("differences")
    if differences is not None:
        made["tools"] = differing_chart(differences["tools"])
    else:
        made["tools"] = tools_chart(report["tools"])
    charts = {key: svg(chart) for key, chart in made.items()}
    captions = {key: f"{chart.title} (the table below lists every row)" for key, chart in made.items()}
    anchors = _anchors(differences) if differences is not None else {}
    environment.filters["anchor"] = lambda example: anchors.get(
        (example.get("detail"), str(example.get("event")))
    )
    return environment.get_template("report.html.j2").render(report=report, charts=charts, captions=captions)


def decision_text(decision: dict[str, Any] | None) -> str:
    """A policy's decision of a call as a drill-down shows it: ``deny by no-shell: c1 runs a
    shell command`` (the rules and their messages), ``allow``, ``no decision``."""
    if decision is None:
        return "no decision"
    verdict = str(decision["verdict"]) + (" (error)" if decision.get("errored") else "")
    reasons = [
        str(r["rule"]) + (f": {r['message']}" if r.get("message") else "")
        for r in decision.get("reasons", ())
    ]
    return verdict + (" by " + "; ".join(reasons) if reasons else "")


def _anchors(differences: dict[str, Any]) -> dict[tuple[str, Any], str]:
    """Where each example's call is on the page: the row of its first event of that id in its
    session's drill-down (its section when the drill-down left that event out)."""
    found: dict[tuple[str, Any], str] = {}
    for detail in differences.get("details", ()):
        for n, event in enumerate(detail["events"], 1):
            found.setdefault((detail["id"], event["id"]), f"{detail['id']}-e{n}")
    for group in differences["groups"]:
        for example in group["examples"]:
            if example.get("detail"):
                found.setdefault((example["detail"], str(example["event"])), example["detail"])
    return {(d, str(e)): anchor for (d, e), anchor in found.items()}


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
    text = text[text.index("<svg") :]
    # one image to a screen reader, named by what it shows (its labels are the table's rows)
    return text.replace(
        "<svg ", f'<svg role="img" aria-label="{html.escape(described(chart), quote=True)}" ', 1
    )


def described(chart: Chart) -> str:
    """What a chart shows, in words: its title and each bar's label and values."""
    rows = []
    for row, label in enumerate(chart.labels):
        values = ", ".join(f"{series.values[row]:,} {series.name}" for series in chart.series)
        rows.append(f"{label}: {values}")
    unit = chart.unit + (f"; {chart.note}" if chart.note else "")
    return f"Bar chart, {chart.title.lower()} ({unit}). " + "; ".join(rows) + "."


def _short(label: str) -> str:
    return label if len(label) <= LABEL else label[: LABEL - 1] + "\u2026"
