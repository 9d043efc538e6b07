"""`policyc replay --html`: the report as one self-contained page, opened in a real headless
Chromium (npm's `@sparticuz/chromium`, driven by `puppeteer-core`, both pinned in
tests/browser_npm and installed by the test run with the test extra's Node.js): its tables hold
the JSON report's rows, its plots' bars are as long as the counts they stand for, it loads
nothing, runs nothing and shows the archive's hostile names as text."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import markupsafe
import pytest

import policyc
from policyc.replay.page import report_html, rules_chart
from policyc.runtime.replay import replay_session

from .npm_servers import node, npm_ci
from .test_replay_archive import OLDER, POLICY, run, write_archive

BROWSER = Path(__file__).resolve().parent / "browser_npm"
# names an attacker controls: a tool, a session, a rule's message argument
HOSTILE_TOOL = '<img src=x onerror=alert("tool")>$x$'
HOSTILE_SESSION = "<script>alert('session')</script>"


def hostile_session() -> dict:
    events = [
        {"id": "u", "kind": "user_message", "text": "help"},
        {
            "id": "r",
            "kind": "tool_result",
            "tool": "search",
            "text": "page",
            "labels": ["untrusted"],
            "deps": ["u"],
        },
        {"id": "c1", "kind": "tool_call", "tool": HOSTILE_TOOL, "args": {}, "deps": ["r"]},
        {"id": "c2", "kind": "tool_call", "tool": "send_email", "args": {"to": "x"}, "deps": ["c1"]},
        {"id": "c3", "kind": "tool_call", "args": {}},  # no tool: the session fails closed here
    ]
    return {"session": HOSTILE_SESSION, "events": events}


@dataclass(frozen=True)
class Replayed:
    folder: Path  # the page (page.html) and the report (report.json) are there
    report: dict
    records: dict[str, dict]  # the archive's sessions, by name
    stderr: str


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Replayed:
    """An archive with a hostile session and a corrupted line, replayed with `--compare`
    against a policy less one rule: the page and the JSON report."""
    folder = tmp_path_factory.mktemp("html")
    (folder / "policy.dl").write_text(POLICY, "utf-8")
    (folder / "older.dl").write_text(OLDER, "utf-8")
    (folder / "traces").mkdir()
    records = write_archive(folder / "traces", sessions=120)
    (folder / "traces" / "d.jsonl").write_text(json.dumps(hostile_session()) + "\n{not json\n", "utf-8")
    done = run(
        "policy.dl",
        "traces",
        "--compare",
        "older.dl",
        "--html",
        "page.html",
        "--report",
        "report.json",
        cwd=folder,
    )
    assert done.returncode == 1 and "1 unreadable line" in done.stderr, done.stderr  # the corrupted line
    report = json.loads((folder / "report.json").read_text("utf-8"))
    return Replayed(folder, report, {r["session"]: r for r in records}, done.stderr)


def test_the_page_is_the_reports_alone_and_escapes_every_name(replayed) -> None:
    folder, report = replayed.folder, replayed.report
    page = (folder / "page.html").read_text("utf-8")
    assert page == report_html(report)  # the same report, the same bytes
    assert "<script" not in page and "<img" not in page
    assert "&lt;img src=x onerror=alert(&#34;tool&#34;)&gt;$x$" in page  # the tables
    assert "&lt;script&gt;alert(&#39;session&#39;)&lt;/script&gt;" in page  # the failed sessions
    # nothing loaded from anywhere: the only references are to the page's own SVG definitions
    references = re.findall(r'(?:src|href|xlink:href)\s*=\s*"([^"]*)"', page)
    assert references and all(ref.startswith("#") for ref in references), references
    assert "url(http" not in page and "@import" not in page and "<link" not in page


def test_each_example_opens_its_sessions_events_and_both_decisions(replayed) -> None:
    page = (replayed.folder / "page.html").read_text("utf-8")
    assert "wrote report.json\n" in replayed.stderr and "wrote page.html\n" in replayed.stderr
    differences = replayed.report["differences"]
    details = {d["id"]: d for d in differences["details"]}
    examples = [e for g in differences["groups"] for e in g["examples"]]
    assert examples and all(e["detail"] in details for e in examples)
    old, new = (policyc.Monitor(policyc.load_source(text)) for text in (OLDER, POLICY))
    for example in examples:
        detail = details[example["detail"]]
        assert (detail["source"], detail["line"], detail["session"]) == (
            example["source"],
            example["line"],
            example["session"],
        )
        record = replayed.records[example["session"]]
        assert [e["id"] for e in detail["events"]] == [e["id"] for e in record["events"]]
        # both decisions of every call, as each policy makes them replaying the session alone
        name = example["session"]
        pairs = zip(
            replay_session(old, record, name)["decisions"],
            replay_session(new, record, name)["decisions"],
            strict=True,
        )
        assert [
            (c["event"], c["old"]["verdict"], c["new"]["verdict"], c["differs"]) for c in detail["calls"]
        ] == [
            (
                n["event"],
                o["verdict"],
                n["verdict"],
                (o["verdict"], o["reasons"]) != (n["verdict"], n["reasons"]),
            )
            for o, n in pairs
        ]
        # the example links to its call's row in its session's section, marked as differing
        row = 1 + [e["id"] for e in detail["events"]].index(example["event"])
        anchor = f"{detail['id']}-e{row}"
        link = f'<a href="#{anchor}">{markupsafe.escape(example["source"])}:{example["line"]} {example["event"]}</a>'
        assert link in page
        start = page.index(f'<tr id="{anchor}" class="differs">')
        shown = page[start : page.index("</tr>", start)]
        assert "allow</td>" in shown and "deny by no-tainted-mail: " in shown and "(differs)" in shown
    assert set(re.findall(r'<section class="detail" id="([^"]+)"', page)) == set(details)
    # read aloud: each card is its number and its label, each plot an image named by its bars, each
    # table's columns have headers
    cards = re.findall(r'<li class="card[^"]*">(.*?)</li>', page)
    assert re.sub(r"<[^>]+>", "", cards[0]) == f"{replayed.report['sessions']:,} sessions"
    names = re.findall(r'<svg role="img" aria-label="([^"]*)"', page)
    assert len(names) == 2 and all(n.startswith("Bar chart, ") for n in names)
    assert all(
        f"{markupsafe.escape(r['rule'])}: {r['deny']:,} deny" in names[1] for r in replayed.report["rules"]
    )
    assert page.count('<th scope="col">') == len(re.findall(r"<th[ >]", page))


def test_differing_needs_compare(tmp_path: Path) -> None:
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    (tmp_path / "traces").mkdir()
    write_archive(tmp_path / "traces", sessions=3)
    done = run("policy.dl", "traces", "--differing", "d.jsonl", cwd=tmp_path)
    assert done.returncode == 2 and "--compare" in done.stderr and not (tmp_path / "d.jsonl").exists()


def test_without_compare_the_page_plots_decisions_per_tool(tmp_path: Path) -> None:
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    (tmp_path / "traces").mkdir()
    write_archive(tmp_path / "traces", sessions=30)
    (tmp_path / "traces" / "d.jsonl").write_text(json.dumps(hostile_session()) + "\n", "utf-8")
    done = run("policy.dl", "traces", "--html", "page.html", "--report", "report.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "page.html").read_text("utf-8")
    report = json.loads((tmp_path / "report.json").read_text("utf-8"))
    assert "Decisions per tool" in page and "What changes" not in page
    plot = page[
        page.index('<figure id="plot-tools"') : page.index("</figure>", page.index('id="plot-tools"'))
    ]
    # the hostile tool's name is a label of the plot, as text (no markup, no mathtext)
    assert '>&lt;img src=x onerror=alert("tool")&gt;$x$<' in plot and "<img" not in plot
    for tool in report["tools"]:
        for verdict in ("allow", "deny", "escalate"):
            assert f'id="tools-{verdict}-' in page
        assert f">{markupsafe.escape(tool['tool'])}<" in page
    unwritable = run("policy.dl", "traces", "--html", str(tmp_path / "no" / "page.html"), cwd=tmp_path)
    assert (
        unwritable.returncode == 2
        and "cannot write" in unwritable.stderr
        and "Traceback" not in unwritable.stderr
    )


@pytest.fixture(scope="session")
def browser(request, tmp_path_factory) -> Path:
    """tests/browser_npm installed (once per lock file, into pytest's cache)."""
    cache = getattr(request.config, "cache", None)
    home = cache.mkdir("browser_npm") if cache is not None else tmp_path_factory.getbasetemp() / "browser_npm"
    return npm_ci(BROWSER, Path(home))


def browse(installed: Path, page: Path, screenshot: Path, *prefixes: str) -> dict:
    """What headless Chromium shows of ``page`` (tests/browser_npm/check_page.cjs)."""
    home = installed.parent
    done = subprocess.run(
        [node(), str(BROWSER / "check_page.cjs"), str(page), str(screenshot), *prefixes],
        capture_output=True,
        text=True,
        timeout=180,
        env={
            "NODE_PATH": str(installed / "node_modules"),
            "PATH": str(Path(node()).parent),
            "HOME": str(home),
        },
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_page_in_a_headless_browser(replayed, browser) -> None:
    folder, report = replayed.folder, replayed.report
    seen = browse(browser, folder / "page.html", folder / "page.png", "rules-", "tools-")
    assert seen["browser"].startswith("HeadlessChrome/")
    # self-contained and inert: no request beside the page, no script, no dialog, no error
    assert seen["requests"] == [] and seen["dialogs"] == [] and seen["errors"] == [] and seen["scripts"] == 0
    tables = seen["tables"]
    assert tables["rules"] == [[r["rule"], f"{r['deny']:,}", f"{r['escalate']:,}"] for r in report["rules"]]
    assert tables["tools"] == [
        [t["tool"], f"{t['allow']:,}", f"{t['deny']:,}", f"{t['escalate']:,}"] for t in report["tools"]
    ]
    differences = report["differences"]
    assert differences["sessions"] > 0 and differences["groups"]
    assert [row[:5] for row in tables["differences"]] == [
        [g["rule"], g["tool"], f"{g['old']} → {g['new']}", f"{g['decisions']:,}", f"{g['sessions']:,}"]
        for g in differences["groups"]
    ]
    assert tables["differing-tools"] == [[t["tool"], f"{t['sessions']:,}"] for t in differences["tools"]]
    assert [row[0] for row in tables["unreadable-lines"]] == ["traces/d.jsonl:2:2"]
    assert HOSTILE_TOOL in [row[0] for row in tables["tools"]]  # shown as text, not markup
    assert HOSTILE_SESSION in [row[1] for row in tables["failed"]]
    for name, expected in (("sessions", report["sessions"]), ("verdict-deny", report["verdicts"]["deny"])):
        assert f"{expected:,}" in seen["text"], name
    # each bar is as long as its count: one scale for every bar of a plot
    chart = rules_chart(report["rules"])
    assert set(chart.labels) == {r["rule"] for r in report["rules"]}
    assert set(chart.labels) <= set(seen["labels"]["plot-rules"])
    bars = seen["bars"]
    scales = []
    for series in chart.series:
        for row, count in enumerate(series.values):
            width = bars[f"rules-{series.name}-{row}"]["width"]
            if count == 0:
                assert width == pytest.approx(0, abs=0.5)
            else:
                scales.append(width / count)
    assert scales and max(scales) == pytest.approx(min(scales), rel=0.01)
    sessions = {t["tool"]: t["sessions"] for t in differences["tools"]}
    tool_bars = [bars[f"tools-sessions-{row}"]["width"] for row in range(len(sessions))]
    assert sorted(tool_bars, reverse=True) == tool_bars  # the largest first
    assert max(tool_bars) / min(tool_bars) == pytest.approx(
        max(sessions.values()) / min(sessions.values()), rel=0.01
    )
    assert (folder / "page.png").stat().st_size > 20_000  # a full-page screenshot was taken
    # what a screen reader is given: a summary list whose cards read as number and label, each
    # plot one image named by its bars, under its caption
    assert seen["cards"][:2] == [f"{report['sessions']:,} sessions", f"{report['decisions']:,} decisions"]
    nodes = list(_nodes(seen["accessibility"]))
    assert ("list", "Summary") in [(n["role"], n.get("name")) for n in nodes]
    images = [n["name"] for n in nodes if n["role"] in ("image", "img")]
    assert len(images) == 2 and all(name.startswith("Bar chart, ") for name in images)
    assert all(f"{r['rule']}: " in " ".join(images) for r in report["rules"])
    figures = [n["name"] for n in nodes if n["role"] == "figure"]
    assert figures == [
        "Differing sessions per tool (the table below lists every row)",
        "Denials per rule (the table below lists every row)",
    ]


def _nodes(node: dict):
    """Every node of an accessibility tree."""
    yield node
    for child in node.get("children", ()):
        yield from _nodes(child)
