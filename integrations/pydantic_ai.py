"""A guard for PydanticAI (docs/integrations.md): :class:`PolicyToolset` wraps any toolset (function
tools, an MCP server, a combination) so that the policy decides every call before the wrapped
toolset runs it, and records the run's messages into a monitor session.

A denied call raises PydanticAI's ``ToolFailed`` with the decision's feedback: the model reads
it as the call's failed result (``outcome="failed"``) and the run goes on. ``ModelRetry`` would
say the same but counts against the tool's retries, so that a model that keeps trying a refused
call ends the run with an error; ``ToolFailed`` does not.

How PydanticAI's messages map to events (one place, :class:`RunRecorder`):

| PydanticAI | event |
|---|---|
| ``UserPromptPart`` | ``user_message`` |
| ``SystemPromptPart``, a request's ``instructions`` | ``system_message`` |
| ``ModelResponse`` (its text parts) | ``assistant_message``, depending on the whole history |
| a ``ToolCallPart`` of this toolset's tools | ``tool_call`` (the tool's name, the validated arguments), depending on the response |
| the call's result | ``tool_result`` of its call, labelled with the tool's ``result_labels`` |
| a ``ToolReturnPart`` of another toolset's tool | ``tool_result`` depending on the response that requested it |
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import ApprovalRequired, CallDeferred, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_core import to_jsonable_python

from policyc.runtime.context import error_text, new_id, result_text
from policyc.runtime.verdict import Decision

from .events import authorize_call, record_message, record_result, settled_async

__all__ = ["PolicyToolset", "RunRecorder", "guard_toolset"]


def _text(content: Any) -> str:
    """The text of a prompt's content: a string, or the strings of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            part if isinstance(part, str) else result_text(to_jsonable_python(part)) for part in content
        )
    return result_text(to_jsonable_python(content))


def _key(part: Any) -> tuple:
    """What makes two parts the same part of a conversation."""
    return (type(part).__name__, _text(getattr(part, "content", "")), getattr(part, "tool_call_id", None))


def _canonical(args: Any) -> str:
    return json.dumps(args, sort_keys=True, default=str)


class RunRecorder:
    """One conversation's events in ``session``: the message parts recorded, the calls each
    response requested and the calls decided. One recorder per conversation (agent runs that
    share a message history)."""

    def __init__(self, session: Any, result_labels: Mapping[str, Sequence[str]] | None = None) -> None:
        self.session = session
        self.result_labels = {name: tuple(labels) for name, labels in (result_labels or {}).items()}
        self.seen: Counter[tuple] = Counter()  # parts (and responses) recorded, by fingerprint
        self.requested: dict[str, str] = {}  # tool call id -> the response that requested it
        self.calls: dict[str, str] = {}  # tool call id -> its tool_call event
        self.answered: set[str] = set()  # tool call ids whose result (or denial) is recorded
        self.pending: dict[str, tuple[str, Decision, str | None]] = {}  # id -> (arguments, decision, call)
        self.messages: list[ModelMessage] | None = None  # the run's messages, as last seen
        self.instructions: set[str] = set()  # the instructions recorded

    def labels(self, tool: str) -> tuple[str, ...]:
        return self.result_labels.get(tool, ())

    # ------------------------------------------------------------------- messages to events

    def sync(self, messages: Sequence[ModelMessage]) -> None:
        """Record what the session does not have yet of ``messages``, in order."""
        occurrences: Counter[tuple] = Counter()
        for message in messages:
            if isinstance(message, ModelResponse):
                items: list[tuple[tuple, Any]] = [(("response", *map(_key, message.parts)), message)]
            elif isinstance(message, ModelRequest):
                items = []
                if message.instructions and message.instructions not in self.instructions:
                    self.instructions.add(message.instructions)  # every request repeats them
                    record_message(self.session, "system_message", message.instructions)
                items += [(_key(part), part) for part in message.parts]
            else:
                continue
            for key, item in items:
                occurrences[key] += 1
                if occurrences[key] > self.seen[key]:
                    self.seen[key] += 1
                    self._record(item)

    def _record(self, item: Any) -> None:
        session = self.session
        if isinstance(item, ModelResponse):
            text = "\n".join(p.content for p in item.parts if isinstance(p, TextPart))
            event = record_message(session, "assistant_message", text)
            for part in item.parts:
                if isinstance(part, ToolCallPart):
                    self.requested.setdefault(part.tool_call_id, event)
        elif isinstance(item, UserPromptPart):
            record_message(session, "user_message", _text(item.content))
        elif isinstance(item, SystemPromptPart):
            record_message(session, "system_message", item.content)
        elif isinstance(item, ToolReturnPart):
            if item.tool_call_id in self.answered:
                return  # recorded when the tool ran, or its call was denied
            self.answered.add(item.tool_call_id)
            requested = self.requested.get(item.tool_call_id)
            event: dict[str, Any] = {
                "id": new_id("result", session),
                "kind": "tool_result",
                "tool": item.tool_name,
                "text": _text(item.content),
            }
            if requested is not None:
                event["deps"] = [requested]
            if self.labels(item.tool_name):
                event["labels"] = list(self.labels(item.tool_name))
            session.record(event)
        else:  # a retry prompt, or a part of a kind this mapping does not know
            kind = str(getattr(item, "part_kind", "message")).replace("-", "_")
            record_message(session, kind, _text(getattr(item, "content", "")))

    # ------------------------------------------------------------------------------ calls

    def authorize(self, tool: str, args: Any, call_id: str | None) -> tuple[str, Decision, str | None]:
        """Record a call of ``tool`` (depending on the response that requested it) and decide it,
        escalations left as they are; also the call's arguments as compared."""
        arguments = to_jsonable_python(args)
        requested = self.requested.get(call_id) if call_id else None
        decision, call = authorize_call(
            self.session,
            tool,
            arguments if isinstance(arguments, dict) else {"input": arguments},
            None if requested is None else [requested],
        )
        if call_id and call is not None:
            self.calls[call_id] = call
        return _canonical(arguments), decision, call

    async def decide(
        self,
        messages: Sequence[ModelMessage],
        tools: Mapping[str, Any],
        validation: Any,
        name: str,
        args: dict[str, Any],
        call_id: str | None,
    ) -> tuple[Decision, str | None]:
        """The final decision of a call of ``name`` with ``args``: the conversation recorded,
        every call of the response that requested it decided in the response's order (with the
        arguments the tools' validators make of them), then this one's escalation settled."""
        self.sync(messages)
        response = next(
            (
                m
                for m in reversed(messages)
                if isinstance(m, ModelResponse)
                and any(isinstance(p, ToolCallPart) and p.tool_call_id == call_id for p in m.parts)
            ),
            None,
        )
        if response is not None and call_id not in self.pending and call_id not in self.calls:
            for part in response.parts:
                if not isinstance(part, ToolCallPart) or part.tool_name not in tools:
                    continue
                if part.tool_call_id in self.pending or part.tool_call_id in self.calls:
                    continue
                if part.tool_call_id != call_id:
                    validated = _validated(tools[part.tool_name], part, validation)
                    if validated is None:
                        continue  # PydanticAI will not run it: the model is asked to retry
                else:
                    validated = args
                self.pending[part.tool_call_id] = self.authorize(part.tool_name, validated, part.tool_call_id)
        found = self.pending.pop(call_id, None) if call_id else None
        if found is not None and found[0] == _canonical(to_jsonable_python(args)):
            _, decision, call = found
        else:  # not decided with these arguments yet
            _, decision, call = self.authorize(name, args, call_id)
        decision = await settled_async(self.session, name, decision)
        if call_id and not decision.allowed:
            self.answered.add(call_id)
        return decision, call

    def result(
        self, call: str | None, call_id: str | None, tool: str, result: Any, failed: bool = False
    ) -> None:
        """Record what the call ``call`` of ``tool`` gave (``failed``: the text of what it raised,
        labelled ``error``)."""
        if call_id:
            self.answered.add(call_id)
        text = to_jsonable_python(result, fallback=str)
        record_result(self.session, call, tool, text, self.labels(tool), failed)


def _validated(tool: Any, part: ToolCallPart, validation: Any) -> dict[str, Any] | None:
    """A call's arguments as the tool's validator makes them (``None`` if they are invalid)."""
    try:
        validator = tool.args_validator
        if isinstance(part.args, str):
            return validator.validate_json(part.args or "{}", context=validation)
        return validator.validate_python(part.args or {}, context=validation)
    except Exception:
        return None


@dataclass
class PolicyToolset(WrapperToolset[Any]):
    """A toolset whose every call the policy decides before ``wrapped`` runs it (see the module's
    docstring); the run's messages are recorded into ``recorder``'s session, the last ones when
    the run ends."""

    recorder: RunRecorder = field(kw_only=True)
    tools: dict[str, Any] | None = field(default=None, init=False, repr=False)  # of the last step

    async def get_tools(self, ctx: Any) -> dict[str, Any]:
        tools = await super().get_tools(ctx)
        self.tools = tools
        return tools

    async def for_run_step(self, ctx: Any) -> AbstractToolset[Any]:
        self.recorder.messages = ctx.messages
        self.recorder.sync(ctx.messages)
        return await super().for_run_step(ctx)

    async def __aexit__(self, *args: Any) -> bool | None:
        if self.recorder.messages is not None:  # the run's final answer
            self.recorder.sync(self.recorder.messages)
        return await super().__aexit__(*args)

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        recorder = self.recorder
        tools = self.tools or {name: tool}
        decision, call = await recorder.decide(
            ctx.messages, tools, ctx.validation_context, name, tool_args, ctx.tool_call_id
        )
        if not decision.allowed:
            raise ToolFailed(decision.feedback or "the call was refused by the policy")
        try:
            result = await super().call_tool(name, tool_args, ctx, tool)
        except (CallDeferred, ApprovalRequired):  # the call waits: it has no result yet
            raise
        except BaseException as error:
            recorder.result(call, ctx.tool_call_id, name, error_text(error), failed=True)
            raise
        recorder.result(call, ctx.tool_call_id, name, result)
        return result


def guard_toolset(
    toolset: AbstractToolset[Any], session: Any, result_labels: Mapping[str, Sequence[str]] | None = None
) -> PolicyToolset:
    """``toolset`` under the policy of ``session``'s monitor: ``Agent(model, toolsets=[guard_toolset(...)])``.
    ``result_labels`` label what a tool returns (``{"fetch": ["untrusted"]}``)."""
    return PolicyToolset(toolset, recorder=RunRecorder(session, result_labels))
