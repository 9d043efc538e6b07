"""AgentDojo's own benchmark, run on a pipeline with and without a policy guard.

:func:`pipeline` builds AgentDojo's usual tool-calling pipeline around an LLM element (the
system message, the user's query, the model, then the tool loop), with a
:class:`~.agentdojo.PolicyElement` before ``ToolsExecutor`` when given a monitor.
:func:`score_suite` runs AgentDojo's ``benchmark_suite_without_injections`` and
``benchmark_suite_with_injections`` on it and keeps AgentDojo's own figures: the share of user
tasks solved (utility), the share solved under attack, and the share of (user task, injection
task) pairs where the injection task succeeded (the attack success rate, AgentDojo's
"security" results).
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, load_system_message
from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor
from agentdojo.attacks.attack_registry import load_attack
from agentdojo.benchmark import benchmark_suite_with_injections, benchmark_suite_without_injections
from agentdojo.logging import Logger

from .agentdojo import CallsMade, PolicyElement

VERSION = "v1.2.2"  # the benchmark version the example's policy is written for
ADDRESSED_AS = "gpt-4o-2024-05-13"  # the model an attack's text addresses when the pipeline's is unknown


def pipeline(llm: BasePipelineElement, monitor: Any | None = None, max_iters: int = 40) -> AgentPipeline:
    """AgentDojo's tool-calling pipeline around ``llm``; with ``monitor``, guarded by a
    :class:`~.agentdojo.PolicyElement` before ``ToolsExecutor`` and closed by
    :class:`~.agentdojo.CallsMade`."""
    loop: list[BasePipelineElement] = [ToolsExecutor(), llm]
    if monitor is not None:
        loop.insert(0, PolicyElement(monitor))
    elements = [
        SystemMessage(load_system_message(None)),
        InitQuery(),
        llm,
        ToolsExecutionLoop(loop, max_iters),
    ]
    if monitor is not None:
        elements.append(CallsMade())
    built = AgentPipeline(elements)
    built.name = None  # AgentDojo writes no run logs for a pipeline without a name
    return built


@dataclass(frozen=True)
class SuiteScore:
    """AgentDojo's figures for one suite: tasks and pairs counted, and how many succeeded."""

    suite: str
    user_tasks: int
    solved: int  # user tasks solved without attack
    pairs: int  # (user task, injection task) pairs run under attack
    solved_under_attack: int
    attacks_succeeded: int

    @property
    def utility(self) -> float:
        return self.solved / self.user_tasks if self.user_tasks else 0.0

    @property
    def utility_under_attack(self) -> float:
        return self.solved_under_attack / self.pairs if self.pairs else 0.0

    @property
    def attack_success_rate(self) -> float:
        return self.attacks_succeeded / self.pairs if self.pairs else 0.0


class _Quiet(Logger):
    """A logger that shows nothing (AgentDojo's benchmark functions need one to be active)."""

    def __init__(self, logdir: str) -> None:
        self.logdir = logdir
        self.messages: list[Any] = []

    def log(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_error(self, *args: Any, **kwargs: Any) -> None:
        pass


@contextmanager
def quiet() -> Iterator[None]:
    """AgentDojo's benchmark functions, showing nothing and writing no files."""
    with tempfile.TemporaryDirectory() as folder, _Quiet(folder), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Cannot log executed benchmark")
        warnings.filterwarnings("ignore", message="Not all injection tasks were solved")
        yield


class _Named:
    """What an attack reads of its target: a name (its text addresses the model by it)."""

    def __init__(self, name: str) -> None:
        self.name = name


def score_suite(
    make_pipeline: Callable[[Any], AgentPipeline],
    suite: Any,
    attack: str = "important_instructions",
    user_tasks: Sequence[str] | None = None,
    injection_tasks: Sequence[str] | None = None,
    model: str = ADDRESSED_AS,
) -> SuiteScore:
    """Run AgentDojo's benchmark of ``suite`` on the pipeline ``make_pipeline(suite)`` makes,
    without and with ``attack`` (its text addresses ``model``), over the given tasks (all when
    ``None``)."""
    agent = make_pipeline(suite)
    try:
        attacker = load_attack(attack, suite, _Named(model))
    except ValueError:  # a model the attack cannot name
        attacker = load_attack(attack, suite, _Named(ADDRESSED_AS))
    with quiet():
        benign = benchmark_suite_without_injections(
            agent, suite, logdir=None, force_rerun=True, user_tasks=user_tasks, benchmark_version=VERSION
        )
        attacked = benchmark_suite_with_injections(
            agent,
            suite,
            attacker,
            logdir=None,
            force_rerun=True,
            user_tasks=user_tasks,
            injection_tasks=injection_tasks,
            verbose=False,
            benchmark_version=VERSION,
        )
    utility = benign["utility_results"]
    return SuiteScore(
        suite.name,
        len(utility),
        sum(utility.values()),
        len(attacked["security_results"]),
        sum(attacked["utility_results"].values()),
        sum(attacked["security_results"].values()),
    )
