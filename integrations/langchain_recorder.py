"""How a LangChain conversation becomes events (docs/integrations.md): :class:`Recorder`
maps each message, tool call and tool result of one conversation onto the session's events,
for the guarded tools, the callback handler and the tool node of
:mod:`policyc.integrations.langchain`.

| LangChain | event |
|---|---|
| ``HumanMessage`` | ``user_message`` |
| ``SystemMessage`` | ``system_message`` |
| ``AIMessage`` (a model's output) | ``assistant_message``, depending on the whole history |
| a tool call of an ``AIMessage`` | ``tool_call`` (the tool's name, the arguments as the tool validates them), depending on the message |
| ``ToolMessage`` (a tool's result) | ``tool_result`` of its call, labelled with the tool's ``result_labels`` |
| a call of a tool the guard does not run | ``tool_call`` labelled ``unguarded``, recorded and not decided |
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from policyc.runtime.context import ERROR_LABEL, new_id
from policyc.runtime.verdict import Decision

from .events import authorize_call, record_message, record_result, settled, settled_async

__all__ = ["Recorder"]


def call_arguments(tool: BaseTool | None, tool_input: Any) -> dict[str, Any]:
    """The arguments of a call as the tool will read them: the model's, validated by the tool's
    call schema (so ``"5000"`` for an ``int`` is 5000, and defaults are filled in), arguments a
    framework injects (a tool call id, the graph's state) left out. Arguments the schema refuses
    are given as the model gave them (the tool refuses them too)."""
    schema = tool.tool_call_schema if tool is not None else None
    if isinstance(schema, dict):
        fields = list((schema.get("properties") or {}).keys())
    else:
        fields = list(getattr(schema, "model_fields", {}).keys())
    if isinstance(tool_input, str):
        tool_input = {fields[0] if len(fields) == 1 else "input": tool_input}
    if not isinstance(tool_input, Mapping):
        return {"input": tool_input}
    given = {k: v for k, v in tool_input.items() if k in fields} if fields else dict(tool_input)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            return to_jsonable_python(dict(schema.model_validate(given)))  # NaN stays NaN: refused
        except Exception:  # invalid: the tool does not run
            return given
    return given


def _text(message: BaseMessage) -> str:
    return str(message.text)


def _fingerprint(message: BaseMessage) -> tuple:
    """What makes two messages the same message of a conversation (ids differ between a model's
    output and the copy a graph keeps)."""
    calls = tuple(c.get("id") or "" for c in getattr(message, "tool_calls", None) or ())
    return (message.type, _text(message), getattr(message, "tool_call_id", None), calls)


class Recorder:
    """One conversation's events in ``session``: the messages recorded, the tool calls each
    model output requested and the calls decided. ``result_labels`` label what a tool returns
    (``{"fetch": ["untrusted"]}``). Share one recorder between the guarded tools, the callback
    handler and the tool node of one conversation; it is safe to use from several threads."""

    def __init__(self, session: Any, result_labels: Mapping[str, Sequence[str]] | None = None) -> None:
        self.session = session
        self.result_labels = {name: tuple(labels) for name, labels in (result_labels or {}).items()}
        self.lock = threading.RLock()
        self.seen: Counter[tuple] = Counter()  # messages recorded, by fingerprint
        self.requested: dict[str, str] = {}  # tool call id -> the output that requested it
        self.calls: dict[str, str] = {}  # tool call id -> its tool_call event
        self.answered: set[str] = set()  # tool call ids whose result (or denial) the session has
        self.pending: dict[str, tuple[Decision, str | None]] = {}  # decided, not yet settled
        self.guarded: set[str] = set()  # names of the tools the guard runs
        self.unguarded: dict[UUID, tuple[str, str | None, str]] = {}  # a run of another tool: its call

    def labels(self, tool: str) -> tuple[str, ...]:
        return self.result_labels.get(tool, ())

    # ------------------------------------------------------------------- messages to events

    def sync(self, messages: Sequence[BaseMessage]) -> None:
        """Record the messages of a conversation the session does not have yet, in order (a
        message is new when it occurs more often in ``messages`` than it was recorded)."""
        with self.lock:
            occurrences: Counter[tuple] = Counter()
            for message in messages:
                key = _fingerprint(message)
                occurrences[key] += 1
                if occurrences[key] > self.seen[key]:
                    self._record(message)
                    self.seen[key] += 1

    def output(self, message: BaseMessage) -> None:
        """Record a model's output (unless recorded already) with the tool calls it requests."""
        with self.lock:
            key = _fingerprint(message)
            if self.seen[key] == 0:
                self._record(message)
                self.seen[key] += 1

    def _record(self, message: BaseMessage) -> None:
        session = self.session
        if isinstance(message, AIMessage):
            event = record_message(session, "assistant_message", _text(message))
            for call in message.tool_calls:
                if call.get("id"):
                    self.requested.setdefault(call["id"], event)
        elif isinstance(message, HumanMessage):
            record_message(session, "user_message", _text(message))
        elif isinstance(message, SystemMessage):
            record_message(session, "system_message", _text(message))
        elif isinstance(message, ToolMessage):
            call_id = message.tool_call_id
            if call_id in self.answered:
                return  # recorded when the tool ran, or its call was denied
            self.answered.add(call_id)
            tool = message.name or ""
            call = self.calls.get(call_id)
            failed = getattr(message, "status", None) == "error"
            if call is not None:  # a result of the tool the call called, whatever the message says
                tool = session.events[call].get("tool") or tool
                record_result(session, call, tool, _text(message), self.labels(tool), failed)
            else:  # a result of a call the session never saw: it depends on what requested it
                requested = self.requested.get(call_id)
                event: dict[str, Any] = {
                    "id": new_id("result", session),
                    "kind": "tool_result",
                    "tool": tool,
                    "text": _text(message),
                }
                if requested is not None:
                    event["deps"] = [requested]
                labels = [*self.labels(tool), *([ERROR_LABEL] if failed else [])]
                if labels:
                    event["labels"] = list(dict.fromkeys(labels))
                session.record(event)
        else:
            role = getattr(message, "role", None) or message.type
            record_message(
                session,
                f"{role}_message" if role in ("user", "assistant", "system") else "message",
                _text(message),
            )

    # ------------------------------------------------------------------------------ calls

    def authorize(
        self, tool: str, args: Mapping[str, Any], call_id: str | None
    ) -> tuple[Decision, str | None]:
        """Record a call of ``tool`` (depending on the output that requested it, when known)
        and decide it, escalations left to :meth:`settle`."""
        with self.lock:
            requested = self.requested.get(call_id) if call_id else None
            decision, call = authorize_call(
                self.session, tool, args, None if requested is None else [requested]
            )
            if call_id and call is not None:
                self.calls[call_id] = call
            return decision, call

    def settle(self, tool: str, decision: Decision, call_id: str | None) -> Decision:
        with self.lock:
            final = settled(self.session, tool, decision)
            if call_id and not final.allowed:
                self.answered.add(call_id)  # the model reads the feedback, not a result
            return final

    async def settle_async(self, tool: str, decision: Decision, call_id: str | None) -> Decision:
        final = await settled_async(self.session, tool, decision)
        if call_id and not final.allowed:
            self.answered.add(call_id)
        return final

    def result(
        self, call: str | None, call_id: str | None, tool: str, result: Any, failed: bool = False
    ) -> None:
        """Record what the call ``call`` of ``tool`` gave (a ``ToolMessage``'s text, a
        ``Command``'s tool messages, anything else as JSON); ``failed``: the text of what it
        raised (labelled ``error``, as a ``ToolMessage`` of status ``error`` is)."""
        if isinstance(result, ToolMessage) and getattr(result, "status", None) == "error":
            failed = True
        if isinstance(result, ToolMessage):
            result = _text(result)
        elif isinstance(result, Command):
            update = result.update
            messages = update.get("messages", []) if isinstance(update, Mapping) else []
            texts = [_text(m) for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]
            result = "\n".join(texts)
        with self.lock:
            if call_id:
                self.answered.add(call_id)
            record_result(self.session, call, tool, result, self.labels(tool), failed)

    def decide_message_calls(
        self, messages: Sequence[BaseMessage], call: Mapping[str, Any], tools: Mapping[str, BaseTool]
    ) -> None:
        """Record the conversation up to the AI message that requested ``call`` and decide every
        call of that message not decided yet, in the message's order (their decisions wait in
        :attr:`pending`)."""
        call_id = call.get("id")
        with self.lock:
            if (call_id or "") in self.pending:
                return
            index = next(
                (
                    i
                    for i in range(len(messages) - 1, -1, -1)
                    if isinstance(messages[i], AIMessage)
                    and any(c.get("id") == call_id for c in messages[i].tool_calls)
                ),
                None,
            )
            if index is not None:
                self.sync(messages[: index + 1])
                for each in messages[index].tool_calls:
                    each_id = each.get("id")
                    if each_id and each_id not in self.pending and each_id not in self.calls:
                        self.pending[each_id] = self.authorize(
                            each.get("name") or "", self._arguments(tools, each), each_id
                        )
            if (call_id or "") not in self.pending:  # not in the state, or run before: decided anew
                self.pending[call_id or ""] = self.authorize(
                    call.get("name") or "", self._arguments(tools, call), call_id
                )

    @staticmethod
    def _arguments(tools: Mapping[str, BaseTool], call: Mapping[str, Any]) -> dict[str, Any]:
        return call_arguments(tools.get(call.get("name") or ""), call.get("args") or {})

    def take(self, call_id: str | None) -> tuple[Decision, str | None]:
        with self.lock:
            return self.pending.pop(call_id or "")

    # ----------------------------------------------------------------- tools the guard does not run

    def unguarded_call(self, run: UUID, tool: str, args: dict[str, Any], call_id: str | None) -> None:
        """Record the call of a tool the guard does not run (it is not decided: nothing can stop
        it), so that what follows depends on it; a guarded tool's call is left to the guard."""
        if tool in self.guarded:
            return
        with self.lock:
            requested = self.requested.get(call_id) if call_id else None
            event: dict[str, Any] = {
                "id": new_id("call", self.session),
                "kind": "tool_call",
                "tool": tool,
                "args": to_jsonable_python(args, fallback=str),
                "labels": ["unguarded"],
            }
            if requested is not None:
                event["deps"] = [requested]
            self.session.record(event)
            self.unguarded[run] = (tool, call_id, event["id"])
            if call_id:
                self.calls[call_id] = event["id"]

    def unguarded_result(self, run: UUID, output: Any, failed: bool = False) -> None:
        """Record the result of an unguarded tool's run (see :meth:`unguarded_call`)."""
        with self.lock:
            started = self.unguarded.pop(run, None)
        if started is not None:
            tool, call_id, call = started
            self.result(call, call_id, tool, output, failed)
