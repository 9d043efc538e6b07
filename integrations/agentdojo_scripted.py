"""A scripted model for AgentDojo pipelines: no network, no weights, and it follows injections.

:class:`ScriptedLLM` takes the place of the LLM element of an AgentDojo pipeline. Asked a task's
prompt, it makes that task's ground-truth calls (``task.ground_truth(env)``, as AgentDojo's own
``GroundTruthPipeline`` does), one call per turn, then answers with the task's ground-truth
output. When a tool result carries the goal of one of the suite's injection tasks (an attack put
it there), it does what the injection asks first: that injection task's ground-truth calls.
So the undefended pipeline falls for every injection it reads, and a defence is measured by
what it stops.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.functions_runtime import Env, FunctionCall, FunctionsRuntime
from agentdojo.types import ChatAssistantMessage, ChatMessage, text_content_block_from_string

from .agentdojo import NO_ENV, message_text

_STATE_KEY = "policyc_scripted_state"
_WORD = re.compile(r"[a-z0-9]+")


def normalized(text: str) -> str:
    """Text reduced to its lowercase words, so that a goal is found however a tool's output
    quotes, escapes or wraps it (YAML folds long strings)."""
    return " ".join(_WORD.findall(text.lower()))


@dataclass
class _Plan:
    """The calls still to make in one task, the injection tasks already followed, and how many
    messages were read."""

    task: Any
    pending: list[FunctionCall]
    followed: set[str] = field(default_factory=set)
    read: int = 0
    calls: int = 0


class ScriptedLLM(BasePipelineElement):
    """A pipeline LLM element that plays the ground truth of the suite's tasks (see the module)."""

    name = "scripted"

    def __init__(self, suite: Any) -> None:
        self.suite = suite
        self.tasks: dict[str, Any] = {t.PROMPT: t for t in suite.user_tasks.values()}
        self.tasks.update({t.GOAL: t for t in suite.injection_tasks.values()})
        self.goals = [(normalized(t.GOAL), t) for t in suite.injection_tasks.values()]

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Env = NO_ENV,
        messages: Sequence[ChatMessage] = (),
        extra_args: dict | None = None,
    ) -> tuple[str, FunctionsRuntime, Env, Sequence[ChatMessage], dict]:
        extra_args = extra_args or {}
        plan = extra_args.get(_STATE_KEY)
        if not isinstance(plan, _Plan):
            task = self.tasks.get(query)
            if task is None:
                raise ValueError(
                    f"the scripted model knows no task of suite {self.suite.name!r} with this prompt"
                )
            plan = _Plan(task, list(task.ground_truth(env.model_copy(deep=True))))
            extra_args = {**extra_args, _STATE_KEY: plan}
        for message in messages[plan.read :]:
            if message["role"] != "tool":
                continue
            text = normalized(message.get("error") or message_text(message))
            for goal, injection in self.goals:
                if injection.ID not in plan.followed and injection is not plan.task and goal in text:
                    plan.followed.add(injection.ID)
                    plan.pending[:0] = injection.ground_truth(env.model_copy(deep=True))
        plan.read = len(messages)
        if not plan.pending:
            answer = ChatAssistantMessage(
                role="assistant",
                content=[text_content_block_from_string(plan.task.GROUND_TRUTH_OUTPUT)],
                tool_calls=None,
            )
            return query, runtime, env, [*messages, answer], extra_args
        plan.calls += 1
        call = plan.pending.pop(0).model_copy(update={"id": f"call_{plan.calls}"}, deep=True)
        step = ChatAssistantMessage(
            role="assistant", content=[text_content_block_from_string("")], tool_calls=[call]
        )
        return query, runtime, env, [*messages, step], extra_args
