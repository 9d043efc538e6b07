"""A policy guard for the OpenAI Agents SDK (``policyc[openai-agents]``, docs/integrations.md).

:class:`AgentGuard` holds one conversation's session and gives the SDK what it needs:

* a tool input guardrail that records each call of a function tool and decides it before the
  tool runs: a denied call gets the SDK's tool-guardrail rejection
  (``ToolGuardrailFunctionOutput.reject_content``), whose message, the decision's feedback, the
  model reads as the call's output, and the run goes on; an escalated call is put to the
  monitor's approver first;
* a tool output guardrail that records the tool's output as the call's ``tool_result``;
* run hooks (``Runner.run(..., hooks=guard.hooks)``) that record the conversation: the
  instructions, the user's messages and each model output, on which the calls it asks for
  depend. With the hooks, a tool that starts without this guard having allowed its call stops
  the run (:data:`UNGUARDED`): nothing runs undecided.

:meth:`AgentGuard.tools` attaches both guardrails to copies of a list of function tools.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from agents import RunHooks
from agents.items import ModelResponse
from agents.tool import FunctionTool
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)

from policyc.runtime.chat import parse_arguments
from policyc.runtime.context import PolicyDenied, refusal
from policyc.runtime.render import value as shown_value
from policyc.runtime.session import Session
from policyc.runtime.verdict import Decision

from .events import ADAPTER_FAILED, INVALID_CALL, decide_call_async, record_message, record_result

UNGUARDED = "policyc:unguarded-tool"
NAME = "policyc"


def item_text(item: Any) -> str:
    """The text of a Responses input or output message: its content, or its text parts joined."""
    content = item.get("content") if isinstance(item, Mapping) else getattr(item, "content", None)
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        text = part.get("text") if isinstance(part, Mapping) else getattr(part, "text", None)
        if isinstance(text, str):
            parts.append(text)
    return "\n".join(parts)


def _role(item: Any) -> str | None:
    role = item.get("role") if isinstance(item, Mapping) else getattr(item, "role", None)
    return role if isinstance(role, str) else None


class AgentGuard:
    """Guardrails and run hooks that put ``session`` in front of an agent's function tools.

    ``result_labels`` label each tool's outputs (``{"fetch": ["untrusted"]}``); ``decisions``
    holds the final decision of each call decided, by the model's call id. One guard is one
    conversation: give each new conversation a guard of its own session.
    """

    def __init__(self, session: Session, *, result_labels: Mapping[str, Sequence[str]] | None = None) -> None:
        self.session = session
        self.result_labels = {tool: tuple(labels) for tool, labels in (result_labels or {}).items()}
        self.input_guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(self._decide, name=NAME)
        self.output_guardrail: ToolOutputGuardrail[Any] = ToolOutputGuardrail(self._record_output, name=NAME)
        self.hooks = _Hooks(self)
        self._requested: dict[str, str] = {}  # a tool call's id -> the model output that asked for it
        self._allowed: dict[str, str] = {}  # an allowed call's id -> its event, until the tool starts
        self._events: dict[str, str] = {}  # a decided call's id -> its event
        self.decisions: dict[str, Decision] = {}  # each call's final decision, by the call's id
        self._users: Counter[str] = Counter()  # the user messages recorded, by their text
        self._instructions: str | None = None

    def tools(self, tools: Sequence[Any]) -> list[FunctionTool]:
        """Copies of ``tools`` with this guard's input and output guardrails added to their own
        (the originals are left as they are). Only function tools can be guarded: any other
        tool is refused with a ``TypeError`` rather than left unguarded."""
        guarded = []
        for tool in tools:
            if not isinstance(tool, FunctionTool):
                raise TypeError(
                    f"tool {getattr(tool, 'name', tool)!r} is a {type(tool).__name__}, not a FunctionTool: "
                    "the policy cannot guard it"
                )
            twin = copy.copy(tool)
            twin.tool_input_guardrails = [*(tool.tool_input_guardrails or []), self.input_guardrail]
            twin.tool_output_guardrails = [*(tool.tool_output_guardrails or []), self.output_guardrail]
            guarded.append(twin)
        return guarded

    # ------------------------------------------------------------------------ deciding

    async def _decide(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        try:
            decision = await self._decision(context.tool_name, context.tool_call_id, context.tool_arguments)
            info = decision.to_json()  # what the SDK keeps of the guardrail's result (JSON)
        except Exception as error:  # whatever fails on the policy's side refuses the call
            decision = refusal(
                ADAPTER_FAILED, f"deciding the call failed ({type(error).__name__}), so it is refused"
            )
            info = decision.to_json()
        if decision.allowed:
            return ToolGuardrailFunctionOutput.allow(output_info=info)
        return ToolGuardrailFunctionOutput.reject_content(
            decision.feedback or "the call was refused by the policy", output_info=info
        )

    async def _decision(self, tool: str, call_id: str, raw: str) -> Decision:
        args, problem = parse_arguments(raw)
        if args is None:
            return refusal(
                INVALID_CALL,
                f"invalid arguments for {shown_value(tool)}: {problem}, so the call is refused",
                "Call the tool with JSON arguments.",
            )
        requested = self._requested.get(call_id)
        deps = [requested] if requested is not None and requested in self.session.events else None
        decision, event = await decide_call_async(self.session, tool, args, deps)
        self.decisions[call_id] = decision
        if event is not None:
            self._events[call_id] = event
            if decision.allowed:
                self._allowed[call_id] = event
        return decision

    # ----------------------------------------------------------------------- recording

    async def _record_output(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        call = self._events.get(context.tool_call_id)
        record_result(
            self.session, call, context.tool_name, data.output, self.result_labels.get(context.tool_name, ())
        )
        return ToolGuardrailFunctionOutput.allow()

    def record_input(self, instructions: str | None, items: Sequence[Any]) -> None:
        """Record the instructions (when they change) and the user messages not yet recorded."""
        if instructions and instructions != self._instructions:
            self._instructions = instructions
            record_message(self.session, "system_message", instructions)
        given = Counter(item_text(item) for item in items if _role(item) == "user")
        for text, count in given.items():  # the whole history, or only what is new in it
            for _ in range(count - self._users[text]):
                record_message(self.session, "user_message", text)
            self._users[text] = max(self._users[text], count)

    def record_response(self, response: ModelResponse) -> None:
        """Record a model output as an assistant message; the calls it asks for depend on it."""
        texts = [item_text(item) for item in response.output if getattr(item, "type", None) == "message"]
        identifier = record_message(self.session, "assistant_message", "\n".join(texts))
        for item in response.output:
            if getattr(item, "type", None) == "function_call":
                self._requested[item.call_id] = identifier

    def starting(self, call_id: str | None, tool: Any) -> None:
        """A tool is about to run: its call must be one this guard allowed (once)."""
        if call_id is not None and self._allowed.pop(call_id, None) is not None:
            return
        name = getattr(tool, "name", type(tool).__name__)
        raise PolicyDenied(
            refusal(
                UNGUARDED,
                f"tool {shown_value(name)} was about to run without the policy deciding its call, "
                "so the run is stopped",
                "Attach the guard to every tool (AgentGuard.tools).",
            )
        )


class _Hooks(RunHooks[Any]):
    """The run hooks of an :class:`AgentGuard`."""

    def __init__(self, guard: AgentGuard) -> None:
        self.guard = guard

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: str | None, input_items: list
    ) -> None:
        self.guard.record_input(system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        self.guard.record_response(response)

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.guard.starting(getattr(context, "tool_call_id", None), tool)
