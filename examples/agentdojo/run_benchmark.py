"""Run AgentDojo's own benchmark on a pipeline guarded by this folder's policy, beside the same
pipeline undefended, and print AgentDojo's utility and attack success figures for both.

    python examples/agentdojo/run_benchmark.py [--suite banking --suite slack]
        [--attack important_instructions] [--model scripted | --model NAME [--base-url URL]]
        [--user-task ID ...] [--json]

The default model, ``scripted``, needs no network: it makes the ground-truth calls of each
task, and follows every injection it reads (policyc.integrations.agentdojo_scripted). Any other
``--model`` is an OpenAI-compatible chat model (``OPENAI_API_KEY``; ``--base-url`` or
``OPENAI_BASE_URL`` for another endpoint).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent


def _monitor(policy: Path, functors: Path) -> Any:
    """The monitor of the policy, or the reason it cannot be opened (status 2)."""
    import policyc
    from policyc.runtime import PolicyError

    spec = importlib.util.spec_from_file_location("agentdojo_functors", functors)
    if spec is None or spec.loader is None or not functors.is_file():
        _refuse(f"{functors}: cannot load functors from it")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        _refuse(f"{functors}: loading the functors failed: {type(error).__name__}: {error}")
    try:
        return policyc.Monitor(policyc.load(policy, functors=module))
    except PolicyError as error:
        _refuse(str(error))


def _refuse(message: str) -> NoReturn:
    print(f"run_benchmark.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _llm(model: str, base_url: str | None) -> Any:
    """The pipeline's LLM element for a suite: the scripted one, or an OpenAI-compatible model."""
    from policyc.integrations.agentdojo_scripted import ScriptedLLM

    if model == "scripted":
        return ScriptedLLM
    import openai
    from agentdojo.agent_pipeline.llms.openai_llm import OpenAILLM

    client = openai.OpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"))
    return lambda suite: OpenAILLM(client, model)


def _share(n: int, d: int) -> str:
    return f"{n / d:6.1%} ({n}/{d})" if d else "     -"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--suite", action="append", help="an AgentDojo suite (repeatable; default banking, slack)"
    )
    parser.add_argument("--attack", default="important_instructions", help="an AgentDojo attack")
    parser.add_argument("--model", default="scripted", help="scripted, or an OpenAI-compatible model name")
    parser.add_argument("--base-url", default=None, help="the endpoint of an OpenAI-compatible model")
    parser.add_argument("--user-task", action="append", help="run only these user tasks (repeatable)")
    parser.add_argument("--policy", type=Path, default=HERE / "policy.dl")
    parser.add_argument("--functors", type=Path, default=HERE / "functors.py")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args(argv)
    try:
        from agentdojo.attacks.attack_registry import ATTACKS
        from agentdojo.task_suite.load_suites import get_suites

        from policyc.integrations.agentdojo_benchmark import VERSION, pipeline, score_suite
    except ImportError:
        sys.exit("this script needs the agentdojo package: pip install 'policyc[agentdojo]'")

    suites = get_suites(VERSION)
    names = options.suite or ["banking", "slack"]
    unknown = [name for name in names if name not in suites]
    if unknown:
        parser.error(f"unknown suite {unknown[0]!r}; the suites are {', '.join(sorted(suites))}")
    if options.attack not in ATTACKS:
        parser.error(f"unknown attack {options.attack!r}; the attacks are {', '.join(sorted(ATTACKS))}")
    for name in names:
        missing = sorted(set(options.user_task or ()) - set(suites[name].user_tasks))
        if missing:
            parser.error(f"suite {name!r} has no user task {missing[0]!r}")
    monitor = _monitor(options.policy, options.functors)
    llm = _llm(options.model, options.base_url)
    addressed = options.model if options.model != "scripted" else "gpt-4o-2024-05-13"
    rows = []
    for name in names:
        suite = suites[name]
        for label, guard in (("undefended", None), ("policy", monitor)):
            score = score_suite(
                lambda s, guard=guard: pipeline(llm(s), guard),
                suite,
                options.attack,
                user_tasks=options.user_task,
                model=addressed,
            )
            rows.append((label, score))
    if options.json:
        print(json.dumps([{"pipeline": label, **vars(score)} for label, score in rows], indent=2))
        return 0
    print(f"AgentDojo {VERSION}, attack {options.attack}, model {options.model}")
    print(f"{'suite':<10} {'pipeline':<11} {'utility':>16} {'under attack':>18} {'attack success':>18}")
    for label in ("undefended", "policy"):
        mine = [score for other, score in rows if other == label]
        for score in mine:
            print(
                f"{score.suite:<10} {label:<11} {_share(score.solved, score.user_tasks):>16} "
                f"{_share(score.solved_under_attack, score.pairs):>18} "
                f"{_share(score.attacks_succeeded, score.pairs):>18}"
            )
        if len(mine) > 1:
            total = {k: sum(getattr(s, k) for s in mine) for k in vars(mine[0]) if k != "suite"}
            print(
                f"{'all':<10} {label:<11} {_share(total['solved'], total['user_tasks']):>16} "
                f"{_share(total['solved_under_attack'], total['pairs']):>18} "
                f"{_share(total['attacks_succeeded'], total['pairs']):>18}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
