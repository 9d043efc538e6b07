"""Calibration records from the AgentDojo traces: one record per argument with a role of the
calls the traces expect, scored by the default detector exactly as a monitor scores it (what
`policyc calibrate --from-traces traces` does without writing the records down).

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
from policyc.risk.from_traces import records_of as records_from_session

HERE = Path(__file__).resolve().parent
FILES = ("benign.jsonl", "attacked.jsonl")


def episode_of(run: dict[str, Any]) -> str:
    return f"{run['suite']}/{run['user_task']}/{run.get('injection_task') or 'benign'}"


def records_of(run: dict[str, Any], declarations: Any, detector: Any, where: str) -> list[dict[str, Any]]:
    """The records of one run, as `policyc calibrate --from-traces` makes them."""
    return [
        {"field": r.field, "score": r.score, "violated": r.violated, "episode": r.episode}
        for r in records_from_session(run, episode_of(run), declarations, detector, where)
    ]


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
            for number, line in enumerate(lines, 1):
                if line.strip():
                    records.extend(records_of(json.loads(line), declarations, detector, f"{path}:{number}"))
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
