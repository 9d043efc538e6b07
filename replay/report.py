"""The report of a replay: a JSON object (``--report``, ``--format json``) and its text, both
made from a :class:`~.tally.Tally` alone, sorted throughout, so that the same archive and
policies give the same bytes whatever the engine and the number of workers.

The object: ``policy`` and ``compare`` (each policy's ``file`` and its bundle's ``digest``), ``files``, ``sessions``,
``decisions``, ``verdicts`` (allow, deny, escalate), ``rules`` (per rule, the decisions it
denied or escalated), ``tools`` (per tool, its decisions by verdict), ``failed`` (sessions that
failed closed: a malformed event or facts, an errored decision; counted, the first listed with
their reasons), ``unreadable`` (lines and files that are not sessions; counted, the first
listed at their file and line), ``shards_failed``, and with ``--compare`` ``differences``: the
sessions and decisions whose verdict or rules differ, grouped by (rule, tool, old verdict → new
verdict) with example decisions, and the sessions that differ per tool. With ``--each`` the sessions' decisions come before it
(:func:`listing`; in JSON ``{"sessions": [...], "report": {...}}``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .tally import Tally

FORMAT = 1
VERDICTS = ("allow", "deny", "escalate")


def report_json(
    tally: Tally, policy: tuple[str, str], compare: tuple[str, str] | None, files: list[str]
) -> dict[str, Any]:
    """The report of a tally (``policy``, ``compare``: each policy's file and digest; ``files``:
    the archive's)."""
    out: dict[str, Any] = {
        "format": FORMAT,
        "policy": {"file": policy[0], "digest": policy[1]},
        "compare": None if compare is None else {"file": compare[0], "digest": compare[1]},
        "files": files,
        "sessions": tally.sessions,
        "decisions": tally.decisions,
        "verdicts": {v: tally.verdicts.get(v, 0) for v in VERDICTS},
        "rules": [
            {"rule": rule, "deny": counts.get("deny", 0), "escalate": counts.get("escalate", 0)}
            for rule, counts in sorted(tally.rules.items())
        ],
        "tools": [
            {"tool": tool, **{v: counts.get(v, 0) for v in VERDICTS}}
            for tool, counts in sorted(tally.tools.items())
        ],
        "failed": {"count": tally.failed, "sessions": [entry for _, entry in tally.failures]},
        "unreadable": {"count": tally.unreadable, "lines": [entry for _, entry in tally.unreadables]},
        "shards_failed": [entry for _, entry in tally.shards_failed],
    }
    if compare is not None:
        shown = sorted(
            {(p[0], p[1]) for group in tally.groups.values() for p, _ in group.examples} & set(tally.details)
        )
        ids = {at: f"s{n}" for n, at in enumerate(shown, 1)}
        out["differences"] = {
            "sessions": tally.differing,
            "decisions": tally.differences,
            "tools": [
                {"tool": tool, "sessions": sessions}
                for tool, sessions in sorted(tally.differing_tools.items())
            ],
            "groups": [
                {
                    "rule": rule,
                    "tool": tool,
                    "old": old,
                    "new": new,
                    "decisions": group.decisions,
                    "sessions": group.sessions,
                    "examples": [
                        {**example, "detail": ids.get((place[0], place[1]))}
                        for place, example in group.examples
                    ],
                }
                for (rule, tool, old, new), group in sorted(
                    tally.groups.items(), key=lambda item: (-item[1].decisions, item[0])
                )
            ],
            "details": [{"id": ids[at], **tally.details[at]} for at in shown],
        }
    return out


def listing(tally: Tally) -> list[dict[str, Any]]:
    """Every session's decisions and problems (a replay with ``each``), in archive order."""
    return [entry for _, entry in tally.listing]


def differing_lines(tally: Tally) -> bytes:
    """Every session whose decisions differ (a replay with ``differing``), in archive order, as
    the JSON Lines ``--differing`` writes: its place and name, its first differing call and
    both policies' decisions of it, and how many of its decisions differ."""
    return b"".join(
        (json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        for _, entry in tally.differing_sessions
    )


def report_bytes(report: dict[str, Any]) -> bytes:
    """The report as the file ``--report`` writes."""
    return (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def report_text(report: dict[str, Any], sessions: Sequence[dict[str, Any]] = ()) -> str:
    """The report as ``policyc replay`` prints it, after ``sessions`` (with ``--each``)."""
    lines = []
    for session in sessions:
        lines.append(f"session {session['session']}")
        for d in session["decisions"]:
            lines.append(f"  {d['event']} {d['tool']}: {verdict_text(d)}")
            lines += [f"    [{r['rule']}] {r['message'] or ''}".rstrip() for r in d["reasons"]]
        lines += [f"  problem: {p} (every later decision is a denial)" for p in session["problems"]]
    if lines:
        lines.append("")
    verdicts = report["verdicts"]
    files = len(report["files"])
    lines.append(
        f"replayed {report['sessions']:,} sessions from {files:,} file{'s' * (files != 1)}: "
        f"{report['decisions']:,} decisions, {verdicts['allow']:,} allowed, {verdicts['deny']:,} denied, "
        f"{verdicts['escalate']:,} escalated"
    )
    if report["rules"]:
        lines.append("")
        lines += _table(
            ("rule", "denied", "escalated"), [(r["rule"], r["deny"], r["escalate"]) for r in report["rules"]]
        )
    if report["tools"]:
        lines.append("")
        lines += _table(
            ("tool", "allowed", "denied", "escalated"),
            [(t["tool"], t["allow"], t["deny"], t["escalate"]) for t in report["tools"]],
        )
    differences = report.get("differences")
    if differences is not None:
        lines.append("")
        lines.append(
            f"differences against {report['compare']['file']}: {differences['sessions']:,} sessions, "
            f"{differences['decisions']:,} decisions"
        )
        rows = [
            (
                g["rule"],
                g["tool"],
                f"{g['old']} -> {g['new']}",
                g["decisions"],
                g["sessions"],
                ", ".join(f"{e['source']}:{e['line']} {e['event']}" for e in g["examples"]),
            )
            for g in differences["groups"]
        ]
        if rows:
            lines += _table(("rule", "tool", "old -> new", "decisions", "sessions", "for example"), rows)
    _listed(lines, "failed sessions", report["failed"]["count"], report["failed"]["sessions"], _failure)
    _listed(
        lines, "unreadable lines", report["unreadable"]["count"], report["unreadable"]["lines"], _unreadable
    )
    _listed(lines, "shards that failed", len(report["shards_failed"]), report["shards_failed"], _unreadable)
    return "\n".join(lines) + "\n"


def verdict_text(decision: dict[str, Any]) -> str:
    """A replayed decision's verdict as the session listing shows it."""
    if decision["allowed"]:
        approval = decision.get("approval")
        return "allowed" if approval is None else f"allowed (approval {approval['id']})"
    if decision["errored"]:
        return "DENIED (error)"
    return "ESCALATED (needs approval)" if decision.get("verdict") == "escalate" else "DENIED"


def _failure(entry: dict[str, Any]) -> str:
    return f"{entry['source']}:{entry['line']} session {entry['session']}: {'; '.join(entry['problems'])}"


def _unreadable(entry: dict[str, Any]) -> str:
    return f"{location(entry)}: {entry['message']}"


def location(entry: dict[str, Any]) -> str:
    """``file:line`` or ``file:line:column`` of a report's entry."""
    column = entry.get("column")
    return f"{entry['source']}:{entry['line']}" + (f":{column}" if column else "")


def _listed(lines: list[str], title: str, count: int, entries: list[dict[str, Any]], shown: Any) -> None:
    if not count:
        return
    lines.append("")
    lines.append(f"{title}: {count:,}")
    lines += ["  " + shown(entry) for entry in entries]
    if count > len(entries):
        lines.append(f"  ... and {count - len(entries):,} more")


def _table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> list[str]:
    cells = [header, *[tuple(f"{v:,}" if isinstance(v, int) else str(v) for v in row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    out = []
    for row in cells:
        out.append(
            "  ".join(
                cell.rjust(width)
                if i and row is not cells[0] and cell.replace(",", "").isdigit()
                else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    return out
