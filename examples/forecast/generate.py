"""Generate the recorded Copilot sessions of this example (seeded: the output is committed).

Each session is a coding task of a simulated agent under the push gate of ``copilot.dl``: it
reads and edits files, may run the tests, may run the scanners (a static analysis finds
something a quarter of the time, and the agent fixes it and may scan again), may commit, and
pushes — or stops without pushing. Two kinds of agent share the sessions: a *careful* one that
usually scans before it commits and pushes, and a *hasty* one that usually runs the tests,
commits and pushes. Which kind an agent is never appears in a session: the forecast only sees
the policy's predicates.

Every tool call goes through the real monitor as it is generated; a denied call does not run
(no result is recorded) and the agent reacts as Copilot does to the feedback: it runs the scans
the push lacked and pushes again.

    python examples/forecast/generate.py            # writes train.jsonl and test.jsonl here
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import policyc

HERE = Path(__file__).resolve().parent
POLICY = HERE / "copilot_forecast.dl"


@dataclass(frozen=True)
class Style:
    name: str
    tests: float  # runs the tests after editing
    sast: float  # runs sast_scan before committing
    gitleaks: float  # runs gitleaks_scan before committing
    osv: float  # runs osv_scan after editing a dependency manifest
    rescan: float  # scans again after fixing a finding
    commit: float  # commits before pushing
    wander: float  # looks around (status, diff, files) before pushing
    stop: float  # stops without pushing


CAREFUL = Style(
    "careful", tests=0.55, sast=0.97, gitleaks=0.95, osv=0.95, rescan=0.95, commit=0.5, wander=0.3, stop=0.1
)
HASTY = Style(
    "hasty", tests=0.85, sast=0.2, gitleaks=0.25, osv=0.3, rescan=0.5, commit=0.85, wander=0.7, stop=0.1
)

FILES = ["app.py", "search.py", "models.py", "report.py", "cli.py", "utils/dates.py", "api/routes.py"]
MANIFESTS = ["requirements.txt", "pyproject.toml"]
EDIT_TOOLS = ["replace_string_in_file", "insert_edit_into_file", "create_file", "apply_patch"]
TASKS = [
    "Add a /search endpoint and push it",
    "Fix the date parsing bug in the report and push the fix",
    "Port the CLI to the new API and push",
    "Bump flask and push",
    "Add pagination to the items listing and push",
]


class Recorder:
    """A session as it is generated: every event recorded, every tool call decided."""

    def __init__(self, monitor: policyc.Monitor, name: str) -> None:
        self.session = monitor.session(name, principal="dev")
        self.name = name
        self.events: list[dict] = []
        self.count = 0

    def record(self, event: dict) -> None:
        self.events.append(event)
        self.session.record(event)

    def call(self, tool: str, args: dict, result: str) -> bool:
        """A tool call, and its result when the monitor allows it (the call is denied otherwise)."""
        self.count += 1
        call = {"id": f"c{self.count}", "kind": "tool_call", "tool": tool, "args": args}
        self.events.append(call)
        decision = self.session.authorize(call)
        if not decision.allowed:
            return False
        self.record({"id": f"r{self.count}", "kind": "tool_result", "of": call["id"], "text": result})
        return True


def scan(rec: Recorder, rng: random.Random, tool: str, style: Style, finding: float, fix: str) -> bool:
    """A scan; on a finding, the agent fixes it and (maybe) scans again. Whether it fixed something."""
    if rng.random() < finding:
        rec.call(tool, {"path": "/repo"}, f"FAIL: 1 finding in {fix}")
        rec.call(
            "replace_string_in_file",
            {"filePath": f"/repo/{fix}", "oldString": "...", "newString": "..."},
            "Edited",
        )
        if rng.random() < style.rescan:
            rec.call(tool, {"path": "/repo"}, "PASS: no findings")
        return True
    rec.call(tool, {"path": "/repo"}, "PASS: no findings")
    return False


def work(rec: Recorder, rng: random.Random, style: Style, manifest: bool) -> None:
    """One round of edits, tests and scans."""
    target = rng.choice(FILES)
    if rng.random() < 0.6:
        rec.call("read_file", {"filePath": f"/repo/{target}"}, "def handler(): ...")
    for _ in range(rng.choice([1, 1, 2, 3])):
        tool = rng.choice(EDIT_TOOLS)
        path = rng.choice(MANIFESTS) if manifest and rng.random() < 0.5 else rng.choice(FILES)
        args = (
            {"input": f"*** Update File: /repo/{path}"}
            if tool == "apply_patch"
            else {"filePath": f"/repo/{path}"}
        )
        rec.call(tool, args, "Edited")
    if rng.random() < style.tests:
        failed = rng.random() < 0.2
        rec.call(
            "run_in_terminal", {"command": "pytest -q"}, "1 failed, 11 passed" if failed else "12 passed"
        )
        if failed:
            rec.call("replace_string_in_file", {"filePath": f"/repo/{target}"}, "Edited")
            rec.call("run_in_terminal", {"command": "pytest -q"}, "12 passed")
    sast = rng.random() < style.sast
    if sast:
        scan(rec, rng, "sast_scan", style, 0.25, target)
    fixed = rng.random() < style.gitleaks and scan(rec, rng, "gitleaks_scan", style, 0.08, target)
    if manifest and rng.random() < style.osv:
        fixed = scan(rec, rng, "osv_scan", style, 0.1, "requirements.txt") or fixed
    if fixed and sast and rng.random() < style.rescan:  # a late fix: the earlier scans again
        rec.call("sast_scan", {"path": "/repo"}, "PASS: no findings")
        rec.call("gitleaks_scan", {"path": "/repo"}, "PASS: no findings")


def generate(monitor: policyc.Monitor, rng: random.Random, name: str) -> dict:
    style = CAREFUL if rng.random() < 0.65 else HASTY
    rec = Recorder(monitor, name)
    task = rng.choice(TASKS)
    rec.record({"id": "u1", "kind": "user_message", "text": task})
    manifest = "Bump" in task
    for _ in range(1 + (rng.random() < 0.3) + (rng.random() < 0.1)):
        work(rec, rng, style, manifest)
    if rng.random() < style.commit:
        rec.call("run_in_terminal", {"command": "git add -A && git commit -m 'wip'"}, "[main 3f2a1c] wip")
    while rng.random() < style.wander:
        command = rng.choice(["git status", "git diff --stat", "git log -1"])
        rec.call("run_in_terminal", {"command": command}, "ok")
    if rng.random() < style.stop:
        return {"session": name, "principal": "dev", "events": rec.events}
    if not rec.call("run_in_terminal", {"command": "git push origin main"}, "pushed to origin/main"):
        # denied: the feedback names the missing scans; the agent runs them and pushes again
        for tool in ("sast_scan", "gitleaks_scan", *(["osv_scan"] if manifest else [])):
            rec.call(tool, {"path": "/repo"}, "PASS: no findings")
        rec.call("run_in_terminal", {"command": "git push origin main"}, "pushed to origin/main")
    return {"session": name, "principal": "dev", "events": rec.events}


def write(path: Path, prefix: str, count: int, seed: int) -> None:
    monitor = policyc.Monitor(policyc.load(POLICY))
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for i in range(1, count + 1):
            out.write(json.dumps(generate(monitor, rng, f"{prefix}-{i:03d}"), separators=(",", ":")) + "\n")


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    write(folder / "train.jsonl", "train", 200, seed=1)
    write(folder / "test.jsonl", "test", 60, seed=2)


if __name__ == "__main__":
    main()
