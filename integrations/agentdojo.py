"""A policy guard for AgentDojo's agent pipelines (``policyc[agentdojo]``, docs/integrations.md).

:class:`PolicyElement` is a pipeline element placed right before ``ToolsExecutor`` in an
``AgentPipeline``'s tool loop. Each time it runs it records the messages it has not seen yet into
the task's session (the system prompt, the user's request, the model's outputs, the tool
results) and decides every tool call of the last assistant message; a denied call is answered by
a tool message carrying the decision's feedback as its error, so ``ToolsExecutor`` runs only the
allowed calls and the model reads why the others did not run.

The session of a task lives in the pipeline's ``extra_args`` (under :data:`SESSION_KEY`): a query
that starts without one gets a fresh session of the monitor, so one pipeline runs many tasks.
"""

from __future__ import annotations

import itertools
import json
from ast import literal_eval
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.functions_runtime import EmptyEnv, Env, FunctionCall, FunctionsRuntime
from agentdojo.types import (
    ChatAssistantMessage,
    ChatMessage,
    ChatToolResultMessage,
    get_text_content_as_str,
    text_content_block_from_string,
)

from policyc.runtime.context import ERROR_LABEL, new_id, refusal
from policyc.runtime.render import value as shown_value
from policyc.runtime.session import Session
from policyc.runtime.verdict import Decision

from .events import INVALID_CALL, decide_call, record_message, record_result

NO_ENV = EmptyEnv()  # the environment of a query given none (AgentDojo's default)
SESSION_KEY = "policyc_session"  # the task's session, in extra_args
_STATE_KEY = "policyc_guard_state"
NESTED_CALL = "policyc:nested-call"
_KINDS = {"system": "system_message", "user": "user_message", "assistant": "assistant_message"}


def call_arguments(args: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as the event records them: JSON values, anything else (a nested
    ``FunctionCall``, a date) as its text."""
    return json.loads(json.dumps(dict(args), default=str))


def executed_arguments(call: FunctionCall) -> FunctionCall:
    """The call as ``ToolsExecutor`` will run it: a string argument that reads as a Python list
    becomes that list (what the executor does before running a call), so the call decided is
    the call run."""
    args: dict[str, Any] = {}
    for key, value in call.args.items():
        if isinstance(value, str):
            try:
                parsed = literal_eval(value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                parsed = None
            if isinstance(parsed, list):
                value = parsed
        args[key] = value
    return call.model_copy(update={"args": args})


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return get_text_content_as_str(content) if content else ""


@dataclass
class _State:
    """What the element has done in one task: how many messages it recorded, and the event id of
    each call it decided (by the call's id, or by its place among the calls without one)."""

    session: Session
    element: PolicyElement
    recorded: int = 0
    calls: dict[str, str] = field(default_factory=dict)
    unnamed: list[tuple[FunctionCall, str]] = field(default_factory=list)
    denied: list[FunctionCall] = field(default_factory=list)  # the calls answered by a denial


class PolicyElement(BasePipelineElement):
    """Decide each tool call of the last assistant message under the task's session.

    ``session`` makes the session of a new task from its number (default: a session of
    ``monitor`` named ``agentdojo-N``); ``result_labels`` label each tool's results
    (``{"get_webpage": ["untrusted"]}``). An escalated call is put to the monitor's approver.
    """

    name = "policyc"

    def __init__(
        self,
        monitor: Any,
        *,
        session: Callable[[int], Session] | None = None,
        result_labels: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.monitor = monitor
        self._sessions = session or (lambda n: monitor.session(f"agentdojo-{n}"))
        self._count = itertools.count(1)
        self.result_labels = {tool: list(labels) for tool, labels in (result_labels or {}).items()}

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Env = NO_ENV,
        messages: Sequence[ChatMessage] = (),
        extra_args: dict | None = None,
    ) -> tuple[str, FunctionsRuntime, Env, Sequence[ChatMessage], dict]:
        extra_args = extra_args or {}
        state = extra_args.get(_STATE_KEY)
        if not isinstance(state, _State):
            state = _State(self._sessions(next(self._count)), self)
            extra_args = {**extra_args, SESSION_KEY: state.session, _STATE_KEY: state}
        last = messages[-1] if messages else None
        pending = last is not None and last["role"] == "assistant" and bool(last.get("tool_calls"))
        for message in messages[state.recorded : len(messages) - 1 if pending else len(messages)]:
            self.record(state, message)
        state.recorded = len(messages)
        if not pending:
            return query, runtime, env, messages, extra_args
        self.record(state, messages[-1])
        allowed: list[FunctionCall] = []
        denied: list[tuple[FunctionCall, Decision]] = []
        for original in messages[-1]["tool_calls"] or []:
            call = executed_arguments(original)
            decision, identifier = self._decide(state, call)
            if not decision.allowed or identifier is None:
                denied.append((call, decision))
                state.denied.append(call)
                continue
            allowed.append(call)
            if call.id:
                state.calls.setdefault(call.id, identifier)
            else:
                state.unnamed.append((call, identifier))
        rewritten = _answer(messages[-1], allowed, denied)
        state.recorded = len(messages) - 1 + len(rewritten)
        return query, runtime, env, [*messages[:-1], *rewritten], extra_args

    # ------------------------------------------------------------------------ recording

    def record(self, state: _State, message: Mapping[str, Any]) -> str | None:
        """Record ``message`` into the task's session; the id of its event."""
        role = message.get("role")
        if role == "tool":
            return self._record_result(state, message)
        return record_message(state.session, _KINDS.get(str(role), "agent_message"), message_text(message))

    def _record_result(self, state: _State, message: Mapping[str, Any]) -> str | None:
        call = message.get("tool_call")
        if not isinstance(call, FunctionCall):
            return record_message(state.session, "tool_result", message.get("error") or message_text(message))
        of = state.calls.get(call.id) if call.id else None
        if of is None:
            for n, (seen, event_id) in enumerate(state.unnamed):
                if seen.function == call.function and dict(seen.args) == dict(call.args):
                    of = event_id
                    del state.unnamed[n]
                    break
        failed = bool(message.get("error"))  # what the tool raised: labelled `error`
        text = message.get("error") or message_text(message)
        labels = self.result_labels.get(call.function, ())
        if of is not None:
            return record_result(state.session, of, call.function, text, labels, failed)
        # a result of a call this element did not decide (run before it was placed)
        identifier = new_id("result", state.session)
        event: dict[str, Any] = {"id": identifier, "kind": "tool_result", "tool": call.function, "text": text}
        every = [*labels, *([ERROR_LABEL] if failed else [])]
        if every:
            event["labels"] = list(dict.fromkeys(every))
        state.session.record(event)
        return identifier

    # ------------------------------------------------------------------------- deciding

    def _decide(self, state: _State, call: FunctionCall) -> tuple[Decision, str | None]:
        """The final decision on ``call`` (an escalation settled by the approver) and its
        event's id; any failure is a denial."""
        if _nests_a_call(call.args):
            return refusal(
                NESTED_CALL,
                f"the call of {shown_value(call.function)} nests another call in its arguments, which "
                "would run undecided, so it is refused",
                "Make each call on its own, with plain values as arguments.",
            ), None
        try:
            args = call_arguments(call.args)
        except (TypeError, ValueError, RecursionError) as error:
            return refusal(
                INVALID_CALL,
                f"the call of {shown_value(call.function)} cannot be decided ({type(error).__name__}), "
                "so it is refused",
                "Call the tool with JSON arguments.",
            ), None
        return decide_call(state.session, call.function, args)


class CallsMade(BasePipelineElement):
    """The closing element of a guarded pipeline (after its tool loop): it records the messages
    the guard did not see (the last tool results, the model's answer), and the messages it
    returns hold only the calls that ran. Each call :class:`PolicyElement` denied, and the tool error that
    answered it, leave the message list, so that whatever reads the calls of a finished run
    (AgentDojo's trace-based checks) reads the calls made, not the ones refused; the session
    keeps every call and its decision."""

    name = "policyc-calls-made"

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Env = NO_ENV,
        messages: Sequence[ChatMessage] = (),
        extra_args: dict | None = None,
    ) -> tuple[str, FunctionsRuntime, Env, Sequence[ChatMessage], dict]:
        extra_args = extra_args or {}
        state = extra_args.get(_STATE_KEY)
        if not isinstance(state, _State):
            return query, runtime, env, messages, extra_args
        for message in messages[state.recorded :]:  # the last results and the final answer
            state.element.record(state, message)
        state.recorded = len(messages)
        if not state.denied:
            return query, runtime, env, messages, extra_args
        denied = {id(call) for call in state.denied}
        kept: list[ChatMessage] = []
        for message in messages:
            if message["role"] == "tool" and id(message.get("tool_call")) in denied:
                continue
            calls = message.get("tool_calls") if message["role"] == "assistant" else None
            if calls and any(id(call) in denied for call in calls):
                made = [call for call in calls if id(call) not in denied]
                if not made and not message_text(message):
                    continue
                message = ChatAssistantMessage(
                    role="assistant", content=message["content"], tool_calls=made or None
                )
            kept.append(message)
        return query, runtime, env, kept, extra_args


def _nests_a_call(value: Any, depth: int = 0) -> bool:
    """Whether a call's arguments hold a call (the runtime runs one given as an argument)."""
    if isinstance(value, FunctionCall) or depth > 64:  # deeper than an event allows: refused
        return True
    if isinstance(value, Mapping):
        return any(_nests_a_call(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_nests_a_call(v, depth + 1) for v in value)
    return False


def _answer(
    last: ChatMessage, allowed: list[FunctionCall], denied: list[tuple[FunctionCall, Decision]]
) -> list[ChatMessage]:
    """The last assistant message, with each denied call answered: the denied calls (and the
    message's text) first, each followed by its tool error, then the allowed calls in an
    assistant message of their own, last, for ``ToolsExecutor`` to run."""
    if not denied:
        return [ChatAssistantMessage(role="assistant", content=last["content"], tool_calls=allowed)]
    out: list[ChatMessage] = [
        ChatAssistantMessage(role="assistant", content=last["content"], tool_calls=[c for c, _ in denied])
    ]
    for call, decision in denied:
        out.append(
            ChatToolResultMessage(
                role="tool",
                content=[text_content_block_from_string("")],
                tool_call_id=call.id,
                tool_call=call,
                error=decision.feedback or "the call was refused by the policy",
            )
        )
    if allowed:
        out.append(
            ChatAssistantMessage(
                role="assistant", content=[text_content_block_from_string("")], tool_calls=allowed
            )
        )
    return out
