"""Calibration records from the AgentDojo traces: one record per argument with a role of the
calls the traces expect, scored by the default detector exactly as a monitor scores it.

* the user's calls (`expect_allow`, in benign and attacked runs) are scored where they occur in
  the run, against the events before them: their arguments are not violated;
* the attacker's calls (`expect_deny`) are scored as a call after the last event of the attacked
  run (the agent has read everything, the injected text included): their arguments are violated.

Each run is an episode (`suite/user_task/injection_task`). Usage::

    python examples/risk_budgets/derive.py -o calib.jsonl [--traces DIR] [--policy policy.dl]

DIR defaults to ``traces``, where the AgentDojo exporter writes ``benign.jsonl`` and
``attacked.jsonl`` (``python examples/agentdojo/export.py traces``; see examples/agentdojo/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from policyc.risk.declarations import read_declarations
from policyc.risk.detectors import LexicalProvenance
from policyc.risk.enforce import score_call

HERE = Path(__file__).resolve().parent
FILES = ("benign.jsonl", "attacked.jsonl")


def episode_of(run: dict[str, Any]) -> str:
    return f"{run['suite']}/{run['user_task']}/{run.get('injection_task') or 'benign'}"


def records_of(run: dict[str, Any], declarations: Any, detector: Any) -> list[dict[str, Any]]:
    events = {e["id"]: e for e in run["events"]}
    order = [e["id"] for e in run["events"]]
    episode = episode_of(run)
    out = []

    def add(call: dict[str, Any], before: list[str], violated: bool) -> None:
        for scored in score_call(call, events, before, declarations, detector):
            out.append(
                {
                    "field": f"{scored.tool}.{scored.field}",
                    "score": round(scored.score, 6),
                    "violated": violated,
                    "episode": episode,
                }
            )

    used: set[str] = set()
    for expected in run["expect_allow"]:
        position = next(
            i
            for i, e in enumerate(run["events"])
            if e["kind"] == "tool_call"
            and e["id"] not in used
            and e["tool"] == expected["tool"]
            and (e.get("args") or {}) == expected["args"]
        )
        used.add(order[position])
        add(run["events"][position], order[:position], violated=False)
    for number, expected in enumerate(run["expect_deny"]):
        call = {
            "id": f"attack{number}",
            "kind": "tool_call",
            "tool": expected["tool"],
            "args": expected["args"],
        }
        add(call, order, violated=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", required=True, help="where to write the records (JSONL)")
    parser.add_argument("--traces", default="traces", help="folder of the exported AgentDojo traces")
    parser.add_argument("--policy", default=str(HERE / "policy.dl"), help="the policy giving the field roles")
    args = parser.parse_args(argv)
    declarations = read_declarations(args.policy)
    detector = LexicalProvenance()
    records: list[dict[str, Any]] = []
    for name in FILES:
        path = Path(args.traces) / name
        if not path.exists():
            print(
                f"derive.py: {path} not found: export the AgentDojo traces first "
                "(python examples/agentdojo/export.py traces) or give --traces",
                file=sys.stderr,
            )
            return 2
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    records.extend(records_of(json.loads(line), declarations, detector))
    with open(args.output, "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    roles = Counter((declarations.role_of(r["field"]), r["violated"]) for r in records)
    summary = ", ".join(
        f"{role} {roles[(role, True)]}/{roles[(role, True)] + roles[(role, False)]}"
        for role in sorted({role for role, _ in roles})
    )
    episodes = len({r["episode"] for r in records})
    print(f"wrote {len(records)} records from {episodes} runs to {args.output} (violated/all: {summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
