"""How fast `policyc replay` replays an archive, by engine and number of workers.

It generates an archive of AgentDojo-like sessions (10-60 events each: user messages, tool
results of which some are untrusted, tool calls of mail, payment, file and web tools, each event
depending on the one before) as several plain JSON Lines files, then runs the installed
`policyc replay` on it with the local engine and 1 and 2 workers, and on a local Ray cluster
with 2 workers, and prints sessions per second and the ratios. Every run writes its report;
they must be byte-identical (the benchmark says so, or stops).

Where the time goes is measured in this process on the first file: reading and parsing its
lines alone, against replaying them. Memory: the largest resident size of a one-worker replay of
a quarter of the archive against the whole (flat means about 1.0).

Targets: two local workers at least 1.7x one; Ray on the same cores within 1.5x of the local
engine (local 2 workers / Ray 2 workers at most 1.5); memory flat in the archive's size.

    python benchmarks/bench_replay.py [--sessions 100000] [--files 8]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLICY = """
.import events
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, d), Tainted(d).
@id("no-tainted-mail")
@message("{a} sends mail after untrusted content")
Deny(a) :- ToolCall(a, "send_email"), Tainted(a).
@id("no-tainted-payment")
@message("{a} pays after untrusted content")
Deny(a) :- ToolCall(a, "send_money"), Tainted(a).
@id("ask-uploads")
Escalate(a) :- ToolCall(a, "post_webpage"), Tainted(a).
"""
TOOLS = ("send_email", "send_money", "read_file", "get_webpage", "post_webpage", "search_emails")


def session(rng: random.Random, n: int) -> str:
    events = [{"id": "u", "kind": "user_message", "text": "please pay my rent and mail the receipt"}]
    for i in range(rng.randint(10, 60) - 1):
        roll = rng.random()
        if roll < 0.45:
            event = {"id": f"r{i}", "kind": "tool_result", "tool": rng.choice(TOOLS), "text": "result " * 8}
            if rng.random() < 0.2:
                event["labels"] = ["untrusted"]
        else:
            tool = rng.choice(TOOLS)
            event = {
                "id": f"c{i}",
                "kind": "tool_call",
                "tool": tool,
                "args": {"to": f"x{i}@example.com", "amount": i},
            }
        event["deps"] = [events[-1]["id"]]
        events.append(event)
    return json.dumps({"session": f"s{n}", "events": events})


def generate(folder: Path, sessions: int, files: int, seed: int = 1) -> list[Path]:
    rng = random.Random(seed)
    paths = [folder / f"part-{k:03d}.jsonl" for k in range(files)]
    outs = [p.open("w", encoding="utf-8") for p in paths]
    for n in range(sessions):
        outs[n % files].write(session(rng, n) + "\n")
    for out in outs:
        out.close()
    return paths


def policyc() -> str:
    found = shutil.which("policyc", path=str(Path(sys.executable).parent)) or shutil.which("policyc")
    if found is None:
        sys.exit("policyc is not installed (pip install -e '.[ray]')")
    return found


def run(policy: Path, traces: list[Path], report: Path, *options: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [
            policyc(),
            "replay",
            str(policy),
            *map(str, traces),
            "--report",
            str(report),
            "--no-progress",
            *options,
        ],
        capture_output=True,
        text=True,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"policyc replay {' '.join(options)} failed:\n{done.stderr[-2000:]}")
    return took


def peak_rss_kib(policy: Path, traces: list[Path], report: Path) -> int:
    """The largest resident size of a one-worker replay (in this process's children)."""
    code = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    argv = [policyc(), "replay", str(policy), *map(str, traces), "--report", str(report), "--workers", "1"]
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def where_time_goes(policy: Path, path: Path) -> tuple[float, float]:
    """Seconds to read and parse the lines of one file, and to replay them, in this process."""
    import policyc as pc
    from policyc.replay.archive import lines, shards
    from policyc.runtime.replay import replay_session, session_line

    (found, _) = shards([str(path)], 1 << 40)
    started = time.perf_counter()
    records = [session_line(text, str(path), n) for shard in found for n, text in lines(shard)]
    read = time.perf_counter() - started
    monitor = pc.Monitor(pc.load(policy))
    started = time.perf_counter()
    for name, record in records:
        replay_session(monitor, record, name)
    return read, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--no-ray", action="store_true", help="Leave the Ray engine out.")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    try:
        policy = folder / "policy.dl"
        policy.write_text(POLICY, "utf-8")
        traces = generate(folder, args.sessions, args.files)
        size = sum(p.stat().st_size for p in traces)
        print(f"archive: {args.sessions:,} sessions in {args.files} files, {size / 2**20:,.0f} MiB")
        runs = {
            "local, 1 worker": ("--workers", "1"),
            "local, 2 workers": ("--workers", "2"),
        }
        if not args.no_ray:
            runs["ray, 2 workers"] = ("--engine", "ray", "--workers", "2")
        took = {}
        reports = {}
        for name, options in runs.items():
            report = folder / f"{name.replace(' ', '').replace(',', '-')}.json"
            took[name] = run(policy, traces, report, *options)
            reports[name] = report.read_bytes()
            print(f"{name:>18}: {took[name]:7.1f} s  {args.sessions / took[name]:9,.0f} sessions/s")
        if len(set(reports.values())) != 1:
            sys.exit("the reports differ between engines")
        print("reports: byte-identical across engines and worker counts")
        one, two = took["local, 1 worker"], took["local, 2 workers"]
        print(f"2 local workers / 1: {one / two:.2f}x (target at least 1.7x)")
        if "ray, 2 workers" in took:
            print(f"ray 2 workers / local 2 workers: {took['ray, 2 workers'] / two:.2f} (target at most 1.5)")
        read, decided = where_time_goes(policy, traces[0])
        print(f"one file in this process: reading and parsing {read:.2f} s, replaying {decided:.2f} s")
        quarter = traces[: max(1, len(traces) // 4)]
        small, large = (peak_rss_kib(policy, t, folder / "m.json") for t in (quarter, traces))
        print(
            f"peak memory of a one-worker replay: {small / 1024:,.0f} MiB for a quarter of the archive, "
            f"{large / 1024:,.0f} MiB for all of it ({large / small:.2f}x; flat is about 1.0)"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
