"""`policyc replay` over archives: plain, gzip and zstd files and folders, cut into shards and
replayed in this process or by a local pool, give byte-identical reports; `--compare` lists
exactly the decisions two policies disagree on (checked against replaying each session by
itself); unreadable lines and files are counted and located, never dropped; shards cover every
line once at its number (a property)."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import policyc
from policyc.replay.archive import Shard, Unreadable, lines, shards
from policyc.replay.tally import Tally
from policyc.runtime.replay import replay_session

from .support.commands import policyc_path

POLICY = """
.import events
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, d), Tainted(d).
@id("no-tainted-mail")
@message("{a} sends mail after untrusted content")
Deny(a) :- ToolCall(a, "send_email"), Tainted(a).
@id("no-shell")
Deny(a) :- ToolCall(a, "run_shell").
@id("ask-payments")
Escalate(a) :- ToolCall(a, "pay"), Tainted(a).
"""
# the same policy less one rule: it allows tainted mail
OLDER = POLICY.replace(
    '@id("no-tainted-mail")\n@message("{a} sends mail after untrusted content")\n'
    'Deny(a) :- ToolCall(a, "send_email"), Tainted(a).\n',
    "",
)
assert OLDER != POLICY
TOOLS = ("send_email", "run_shell", "pay", "search", "read_file")


def session(rng: random.Random, name: str) -> dict:
    """A recorded session: a user message, then tool results (some untrusted) and calls, each
    depending on the event before it."""
    events = [{"id": "u", "kind": "user_message", "text": "help"}]
    for i in range(rng.randint(3, 14)):
        if rng.random() < 0.5:
            event = {"id": f"r{i}", "kind": "tool_result", "tool": "search", "text": "page"}
            if rng.random() < 0.3:
                event["labels"] = ["untrusted"]
        else:
            event = {"id": f"c{i}", "kind": "tool_call", "tool": rng.choice(TOOLS), "args": {"n": i}}
        event["deps"] = [events[-1]["id"]]
        events.append(event)
    return {"session": name, "events": events}


def write_archive(folder: Path, sessions: int = 240, seed: int = 7) -> list[dict]:
    """An archive: a large plain file, a gzip and a zstd file, and one in a subfolder."""
    rng = random.Random(seed)
    records = [session(rng, f"s{n}") for n in range(sessions)]
    parts = [
        records[: sessions // 2],
        records[sessions // 2 : 3 * sessions // 4],
        records[3 * sessions // 4 :],
    ]
    text = ["\n".join(json.dumps(r) for r in part) + "\n" for part in parts]
    (folder / "a.jsonl").write_text(text[0] + "\n", "utf-8")  # a blank line too
    (folder / "b.jsonl.gz").write_bytes(gzip.compress(text[1].encode()))
    (folder / "deeper").mkdir()
    (folder / "deeper" / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(text[2].encode()))
    (folder / "notes.txt").write_text("not a trace", "utf-8")  # not a trace file's name: not read
    return records


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [policyc_path(), "replay", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    folder = tmp_path_factory.mktemp("archive")
    (folder / "policy.dl").write_text(POLICY, "utf-8")
    (folder / "older.dl").write_text(OLDER, "utf-8")
    (folder / "traces").mkdir()
    return folder, write_archive(folder / "traces")


def test_every_engine_gives_the_same_report(archive) -> None:
    folder, records = archive
    reports = []
    for options in (
        ["--workers", "1"],
        ["--workers", "2", "--shard-bytes", "2000"],
        ["--workers", "1", "--shard-bytes", "700"],
    ):
        done = run("policy.dl", "traces", "--report", "r.json", *options, cwd=folder)
        assert done.returncode == 0, done.stderr
        reports.append((folder / "r.json").read_bytes())
    assert reports[0] == reports[1] == reports[2]
    report = json.loads(reports[0])
    assert report["sessions"] == len(records)
    assert [Path(f).name for f in report["files"]] == ["a.jsonl", "b.jsonl.gz", "c.jsonl.zst"]
    # the counts are those of replaying every session by itself
    monitor = policyc.Monitor(policyc.load_source(POLICY))
    verdicts = {"allow": 0, "deny": 0, "escalate": 0}
    per_tool: dict[str, dict[str, int]] = {}
    for record in records:
        for decision in replay_session(monitor, record, record["session"])["decisions"]:
            verdicts[decision["verdict"]] += 1
            counts = per_tool.setdefault(decision["tool"], {"allow": 0, "deny": 0, "escalate": 0})
            counts[decision["verdict"]] += 1
    assert report["verdicts"] == verdicts
    assert {t.pop("tool"): t for t in report["tools"]} == per_tool
    assert verdicts["deny"] and verdicts["escalate"] and verdicts["allow"], (
        "the archive exercises every verdict"
    )


def test_compare_lists_exactly_the_decisions_one_rule_changes(archive) -> None:
    folder, records = archive
    same = json.loads(
        run("policy.dl", "traces", "--compare", "policy.dl", "--format", "json", cwd=folder).stdout
    )
    assert same["differences"] == {"sessions": 0, "decisions": 0, "tools": [], "groups": [], "details": []}
    done = run(
        "policy.dl",
        "traces",
        "--compare",
        "older.dl",
        "--format",
        "json",
        "--workers",
        "2",
        "--shard-bytes",
        "3000",
        "--differing",
        "differing.jsonl",
        cwd=folder,
    )
    assert done.returncode == 0, done.stderr
    differences = json.loads(done.stdout)["differences"]
    listed = (folder / "differing.jsonl").read_bytes()
    assert f"wrote differing.jsonl: {differences['sessions']} differing sessions" in done.stderr
    new, old = (policyc.Monitor(policyc.load_source(text)) for text in (POLICY, OLDER))
    expected: dict[str, list[str]] = {}
    tools: Counter[str] = Counter()  # tool -> sessions with a changed decision of it
    for record in records:
        name = record["session"]
        pairs = zip(
            replay_session(old, record, name)["decisions"],
            replay_session(new, record, name)["decisions"],
            strict=True,
        )
        changed = [
            n["event"] for o, n in pairs if (o["verdict"], o["reasons"]) != (n["verdict"], n["reasons"])
        ]
        if changed:
            expected[name] = changed
            tools.update(
                {
                    n["tool"]
                    for o, n in zip(
                        replay_session(old, record, name)["decisions"],
                        replay_session(new, record, name)["decisions"],
                        strict=True,
                    )
                    if (o["verdict"], o["reasons"]) != (n["verdict"], n["reasons"])
                }
            )
    assert expected, "the two policies differ on this archive"
    assert differences["sessions"] == len(expected)
    assert differences["decisions"] == sum(map(len, expected.values()))
    (group,) = differences["groups"]
    assert (group["rule"], group["tool"], group["old"], group["new"]) == (
        "no-tainted-mail",
        "send_email",
        "allow",
        "deny",
    )
    assert group["sessions"] == len(expected)
    assert differences["tools"] == [{"tool": t, "sessions": n} for t, n in sorted(tools.items())]
    for example in group["examples"]:
        assert example["event"] in expected[example["session"]]
    # --differing lists every session that differs, in the archive's order, at its first
    # differing call, with both decisions of it: the same whatever the workers
    sessions = [json.loads(line) for line in listed.decode("utf-8").splitlines()]
    order = [r["session"] for r in records]
    assert [s["session"] for s in sessions] == sorted(expected, key=order.index)
    for entry in sessions:
        assert entry["event"] == expected[entry["session"]][0] and entry["tool"] == "send_email"
        assert entry["decisions"] == len(expected[entry["session"]])
        assert (entry["old"]["verdict"], entry["old"]["reasons"]) == ("allow", [])
        assert entry["new"]["verdict"] == "deny" and entry["new"]["reasons"][0]["rule"] == "no-tainted-mail"
        assert Path(entry["source"]).name in ("a.jsonl", "b.jsonl.gz", "c.jsonl.zst") and entry["line"] >= 1
    again = run("policy.dl", "traces", "--compare", "older.dl", "--differing", "again.jsonl", cwd=folder)
    assert again.returncode == 0 and (folder / "again.jsonl").read_bytes() == listed
    text = run("policy.dl", "traces", "--compare", "older.dl", cwd=folder).stdout
    assert f"{len(expected)} sessions" in text and "no-tainted-mail  send_email  allow -> deny" in text


def test_unreadable_lines_and_files_are_counted_and_located(tmp_path: Path) -> None:
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    traces = tmp_path / "traces"
    traces.mkdir()
    good = json.dumps(session(random.Random(1), "fine"))
    (traces / "a.jsonl").write_bytes(
        "\n".join([good, "{not json", '{"no": "events"}', good]).encode()
        + b"\n\xff\xfe\n"
        + good.encode()
        + b"\n"
    )
    whole = gzip.compress(((good + "\n") * 50).encode())
    (traces / "b.jsonl.gz").write_bytes(whole[: len(whole) // 2])  # truncated
    (traces / "c.jsonl").symlink_to(tmp_path / "gone.jsonl")  # a file that cannot be opened
    done = run("policy.dl", "traces", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    located = {(Path(e["source"]).name, e["line"]) for e in report["unreadable"]["lines"]}
    assert {("a.jsonl", 2), ("a.jsonl", 3), ("a.jsonl", 5)} <= located
    assert any(name == "b.jsonl.gz" for name, _ in located), "the truncated file is reported"
    assert any(name == "c.jsonl" for name, _ in located), "the file that cannot be opened is reported"
    assert report["unreadable"]["count"] == len(report["unreadable"]["lines"]) == 5
    # the good lines of a.jsonl, and the truncated file's sessions before its end
    assert 3 <= report["sessions"] < 3 + 50
    messages = " ".join(e["message"] for e in report["unreadable"]["lines"])
    assert "not UTF-8" in messages and "events" in messages
    text = run("policy.dl", "traces", cwd=tmp_path)
    assert "unreadable lines: 5" in text.stdout and "Traceback" not in text.stderr


def test_no_such_trace_and_no_sessions_are_errors(tmp_path: Path) -> None:
    (tmp_path / "policy.dl").write_text(POLICY, "utf-8")
    missing = run("policy.dl", "nowhere.jsonl", cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere.jsonl" in missing.stderr
    (tmp_path / "empty.jsonl").write_text("\n", "utf-8")
    empty = run("policy.dl", "empty.jsonl", cwd=tmp_path)
    assert empty.returncode == 1 and "no sessions" in empty.stderr


def test_the_progress_bar_counts_sessions(archive) -> None:
    folder, records = archive
    done = run("policy.dl", "traces", "--progress", "--workers", "1", cwd=folder)
    assert done.returncode == 0 and f"{len(records):,} sessions" in done.stderr


# ------------------------------------------------------------------------------ properties


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text("ab\n", min_size=0, max_size=30), min_size=1, max_size=30),
    st.integers(1, 120),
)
def test_shards_hold_every_line_once_at_its_number(tmp_path_factory, rows, size) -> None:
    path = tmp_path_factory.mktemp("cut") / "t.jsonl"
    data = "\n".join(rows)
    path.write_text(data, "utf-8")
    found, unreadable = shards([str(path)], size)
    assert not unreadable and all(isinstance(s, Shard) for s in found)
    got = [
        (number, text) for shard in found for number, text in lines(shard) if not isinstance(text, Unreadable)
    ]
    expected = [(n, line) for n, line in enumerate(data.split("\n"), 1) if line.strip()]
    assert got == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2**31), min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_tallies_merge_to_the_same_report_in_any_order(seeds, rng) -> None:
    from policyc.replay.report import differing_lines, report_json

    new, old = (policyc.Monitor(policyc.load_source(text)) for text in (POLICY, OLDER))
    entries = []
    for n, seed in enumerate(seeds):
        record = session(random.Random(seed), f"s{n}")
        entries.append(((0, n + 1, 0), {"source": "t", "line": n + 1, "session": f"s{n}"}, record))

    def tally_of(part) -> Tally:
        tally = Tally()
        for place, where, record in part:
            tally.session(
                place,
                where,
                replay_session(new, record, where["session"]),
                replay_session(old, record, where["session"]),
                events=record["events"],
                differing=True,
            )
        return tally

    whole = tally_of(entries)
    cut = sorted(rng.sample(range(len(entries) + 1), min(3, len(entries) + 1)))
    parts = [entries[a:b] for a, b in zip([0, *cut], [*cut, len(entries)], strict=True)]
    rng.shuffle(parts)
    merged = Tally()
    for part in parts:
        merged.merge(tally_of(part))
    named = ("p.dl", "sha256:p"), ("q.dl", "sha256:q")
    assert report_json(merged, *named, ["t"]) == report_json(whole, *named, ["t"])
    assert differing_lines(merged) == differing_lines(whole)


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
def test_a_local_ray_cluster_gives_the_local_engines_report(archive) -> None:
    folder, _ = archive
    options = ["--shard-bytes", "4000", "--compare", "older.dl"]
    local = run("policy.dl", "traces", "--report", "local.json", "--workers", "2", *options, cwd=folder)
    on_ray = run(
        "policy.dl",
        "traces",
        "--report",
        "ray.json",
        "--engine",
        "ray",
        "--workers",
        "2",
        *options,
        cwd=folder,
    )
    assert local.returncode == 0 and on_ray.returncode == 0, on_ray.stderr
    assert (folder / "ray.json").read_bytes() == (folder / "local.json").read_bytes()
    assert on_ray.stdout == local.stdout
    assert json.loads((folder / "ray.json").read_bytes())["differences"]["sessions"] > 0
