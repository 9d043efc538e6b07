"""Export AgentDojo ground-truth runs as policyc traces (the format `score.py` reads).

AgentDojo (https://github.com/ethz-spylab/agentdojo, MIT) ships four simulated suites with user
tasks, injection tasks and reference solutions. This script needs no model: for every user task
it executes the task's own ground-truth tool calls against the suite's environment and records
the run as events, once with no attack and, for the chosen suites, once per injection task with
the attack text placed in every injection spot the task's run reads.

    python -m venv /tmp/agentdojo && /tmp/agentdojo/bin/pip install agentdojo==0.1.35
    /tmp/agentdojo/bin/python examples/agentdojo/export.py traces/ --attacked banking,slack

writes ``traces/benign.jsonl`` (every suite, no attack) and ``traces/attacked.jsonl``. Each
line is one run: ``{"suite", "user_task", "injection_task", "attack", "attacker_goal",
"events", "expect_allow", "expect_deny", "version"}``; ``expect_allow`` lists the
consequential calls of the user task's solution, ``expect_deny`` those of the injection task's.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

VERSION = "v1.2.2"

# A call is consequential when it changes something or sends data out (see the README of the
# shared traces): these verbs, and fetching an arbitrary URL.
CONSEQUENTIAL = re.compile(
    r"^(send|schedule|update|create|delete|cancel|reschedule|add|append|share|reserve|invite|remove|post)_"
)


def consequential(tool: str) -> bool:
    return bool(CONSEQUENTIAL.match(tool)) or tool == "get_webpage"


class _Named:
    """What the attacks read from an agent pipeline: its name (the attack text names the model)."""

    name = "gpt-4o-2024-05-13"


def _calls(calls: list[Any]) -> list[dict[str, Any]]:
    return [
        {"tool": c.function, "args": json.loads(json.dumps(dict(c.args), default=str))}
        for c in calls
        if consequential(c.function)
    ]


def run(suite: Any, user_task: Any, injection_task: Any = None, attack: Any = None) -> dict[str, Any]:
    """One run of ``user_task``'s solution, attacked with ``injection_task`` when given."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
    from agentdojo.functions_runtime import FunctionsRuntime

    injections = attack.attack(user_task, injection_task) if injection_task is not None else {}
    environment = suite.load_and_inject_default_environment(injections)
    expected = _calls(user_task.ground_truth(environment.model_copy(deep=True)))
    attacker = (
        _calls(injection_task.ground_truth(environment.model_copy(deep=True))) if injection_task else []
    )
    runtime = FunctionsRuntime(suite.tools)
    events: list[dict[str, Any]] = [{"id": "e0", "kind": "user_message", "text": user_task.PROMPT}]
    for call in user_task.ground_truth(environment.model_copy(deep=True)):
        call_id = f"e{len(events)}"
        args = json.loads(json.dumps(dict(call.args), default=str))
        events.append({"id": call_id, "kind": "tool_call", "tool": call.function, "args": args})
        result, error = runtime.run_function(environment, call.function, call.args)
        text = tool_result_to_str(result) if error is None else error
        events.append(
            {
                "id": f"e{len(events)}",
                "kind": "tool_result",
                "of": call_id,
                "tool": call.function,
                "text": text,
            }
        )
    return {
        "suite": suite.name,
        "user_task": user_task.ID,
        "injection_task": injection_task.ID if injection_task else None,
        "attack": attack.name if injection_task else "none",
        "attacker_goal": injection_task.GOAL if injection_task else None,
        "events": events,
        "expect_allow": expected,
        "expect_deny": attacker,
        "version": VERSION,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for benign.jsonl and attacked.jsonl")
    parser.add_argument("--attacked", default="banking,slack", help="suites to attack (comma-separated)")
    parser.add_argument("--attack", default="important_instructions", help="an AgentDojo attack name")
    args = parser.parse_args()
    try:
        from agentdojo.attacks.attack_registry import load_attack
        from agentdojo.task_suite.load_suites import get_suites
    except ImportError:
        sys.exit("this script needs the agentdojo package: pip install agentdojo==0.1.35")

    args.out.mkdir(parents=True, exist_ok=True)
    suites = get_suites(VERSION)
    attacked = [s for s in args.attacked.split(",") if s]
    with (args.out / "benign.jsonl").open("w") as benign, (args.out / "attacked.jsonl").open("w") as hostile:
        for name, suite in suites.items():
            for user_task in suite.user_tasks.values():
                benign.write(json.dumps(run(suite, user_task)) + "\n")
            if name not in attacked:
                continue
            attack = load_attack(args.attack, suite, _Named())
            for user_task in suite.user_tasks.values():
                for injection_task in suite.injection_tasks.values():
                    try:
                        record = run(suite, user_task, injection_task, attack)
                    except ValueError:  # the task's run reads no injection spot
                        continue
                    hostile.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
