"""Guards for LangChain and LangGraph (docs/integrations.md): guarded tools, a callback
handler recording the conversation, and a guarded ``ToolNode``, all recording into one monitor
session through a :class:`Recorder`.

- :func:`guard_tools` wraps any ``BaseTool`` (sync and async): each call is decided before the
  tool runs; a denied one comes back as the tool's error (a ``ToolMessage`` with the feedback
  and ``status="error"`` when the call came from a model), so the agent loop goes on.
- :class:`PolicyCallbackHandler` records the model's inputs (user and system messages, results
  of tools the guard does not run) and outputs (with the tool calls they request).
- :class:`GuardedToolNode` is LangGraph's ``ToolNode`` deciding every call of an AI message, in
  the message's order, before any of them runs.

How LangChain's messages map to events is :mod:`policyc.integrations.langchain_recorder`;
the calls themselves are decided by :mod:`policyc.integrations.events`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tools import BaseTool, ToolException
from langgraph.prebuilt import ToolNode
from pydantic import ConfigDict

from policyc.runtime.context import error_text
from policyc.runtime.verdict import Decision

from .langchain_recorder import Recorder, call_arguments

__all__ = ["GuardedTool", "GuardedToolNode", "PolicyCallbackHandler", "Recorder", "guard_tools"]

# the input and id of the call a guarded tool is running (set by its run, read by its _run)
_running: contextvars.ContextVar[tuple[Any, str | None, Any] | None] = contextvars.ContextVar(
    "policyc_langchain_running", default=None
)
# the tool call a GuardedToolNode decided and is executing (its guarded tools do not decide it again)
_decided: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "policyc_langchain_decided", default=None
)


# --------------------------------------------------------------------------- guarded tools


class PolicyDeniedTool(ToolException):
    """A call the policy refused: the tool's error, its text the decision's feedback."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__(decision.feedback or "the call was refused by the policy")


class GuardedTool(BaseTool):
    """A ``BaseTool`` whose every call the policy decides before ``tool`` runs (see
    :func:`guard_tools`)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tool: BaseTool
    recorder: Recorder

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        token = _running.set((tool_input, tool_call_id, kwargs.get("config")))
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _running.reset(token)

    async def arun(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        token = _running.set((tool_input, tool_call_id, kwargs.get("config")))
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _running.reset(token)

    def _given(self) -> tuple[Any, str | None, Any]:
        running = _running.get()
        if running is None:  # called other than through run or arun: refused
            raise ToolException("a guarded tool runs through its run or arun method")
        return running

    def _run(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        tool_input, call_id, config = self._given()
        recorder = self.recorder
        call = None
        if call_id is None or _decided.get() != call_id:  # not decided by a GuardedToolNode
            decision, call = recorder.authorize(self.name, call_arguments(self.tool, tool_input), call_id)
            decision = recorder.settle(self.name, decision, call_id)
            if not decision.allowed:
                raise PolicyDeniedTool(decision)
        callbacks = run_manager.get_child() if run_manager is not None else None
        try:
            result = self.tool.run(tool_input, callbacks=callbacks, tool_call_id=call_id, config=config)
        except BaseException as error:
            if call is not None:
                recorder.result(call, call_id, self.name, error_text(error), failed=True)
            raise
        if call is not None:
            recorder.result(call, call_id, self.name, result)
        return result

    async def _arun(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        tool_input, call_id, config = self._given()
        recorder = self.recorder
        call = None
        if call_id is None or _decided.get() != call_id:
            decision, call = recorder.authorize(self.name, call_arguments(self.tool, tool_input), call_id)
            decision = await recorder.settle_async(self.name, decision, call_id)
            if not decision.allowed:
                raise PolicyDeniedTool(decision)
        callbacks = run_manager.get_child() if run_manager is not None else None
        try:
            result = await self.tool.arun(
                tool_input, callbacks=callbacks, tool_call_id=call_id, config=config
            )
        except BaseException as error:
            if call is not None:
                recorder.result(call, call_id, self.name, error_text(error), failed=True)
            raise
        if call is not None:
            recorder.result(call, call_id, self.name, result)
        return result


def _denial_text(error: ToolException) -> str:
    """A guarded tool's error handling: a denial gives the feedback (as the tool's error, a
    ``ToolMessage`` with ``status="error"``); the wrapped tool handled its own errors as it
    does, and one it did not handle is raised, as it would be."""
    if isinstance(error, PolicyDeniedTool):
        return str(error)
    raise error


def guard_tools(tools: Sequence[BaseTool], recorder: Recorder) -> list[GuardedTool]:
    """Each tool guarded: same name, description and arguments; every call decided in
    ``recorder``'s session before the tool runs, and its result recorded."""
    out = []
    for tool in tools:
        if isinstance(tool, GuardedTool):
            tool = tool.tool
        recorder.guarded.add(tool.name)
        out.append(
            GuardedTool(
                name=tool.name,
                description=tool.description,
                args_schema=tool.args_schema,
                return_direct=tool.return_direct,
                response_format="content",
                tool=tool,
                recorder=recorder,
                handle_tool_error=_denial_text,
                handle_validation_error=tool.handle_validation_error,
                tags=tool.tags,
                metadata=tool.metadata,
            )
        )
    return out


# ------------------------------------------------------------------------ the callback handler


class PolicyCallbackHandler(BaseCallbackHandler):
    """Records a conversation as the model sees it: every chat model's input messages (user,
    system and AI messages, results of tools) and its output (with the tool calls requested),
    and the calls and results of tools the guard does not run. Give it as a callback:
    ``graph.invoke(state, config={"callbacks": [handler]})``."""

    run_inline = True  # in order, on the caller's thread or loop
    raise_error = True  # a conversation that cannot be recorded stops the run

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        for conversation in messages[:1]:
            self.recorder.sync(conversation)

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations[:1]:
            for generation in generations[:1]:
                if isinstance(generation, ChatGeneration):
                    self.recorder.output(generation.message)

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = (serialized or {}).get("name") or kwargs.get("name") or ""
        args = inputs if isinstance(inputs, dict) else {"input": input_str}
        self.recorder.unguarded_call(run_id, name, args, kwargs.get("tool_call_id"))

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.recorder.unguarded_result(run_id, output)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.recorder.unguarded_result(run_id, error_text(error), failed=True)


# --------------------------------------------------------------------------- the tool node


def _messages(state: Any, key: str) -> list[BaseMessage]:
    if isinstance(state, list):
        found: Any = state
    elif isinstance(state, Mapping):
        found = state.get(key, [])
    else:
        found = getattr(state, key, [])
    return [m for m in found if isinstance(m, BaseMessage)] if isinstance(found, list) else []


class GuardedToolNode(ToolNode):
    """LangGraph's ``ToolNode`` under the policy: before any call of an AI message runs, the
    conversation so far is recorded and every call of the message decided in order (each
    depending on the message); a denied call gives a ``ToolMessage`` with the feedback and
    ``status="error"``, an allowed one runs as ``ToolNode`` runs it and its result is recorded.
    The other arguments are ``ToolNode``'s (its ``wrap_tool_call`` hooks are the guard's)."""

    def __init__(
        self, tools: Sequence[Any], recorder: Recorder, *, messages_key: str = "messages", **kwargs: Any
    ) -> None:
        self.recorder = recorder
        self._key = messages_key
        super().__init__(
            tools,
            messages_key=messages_key,
            wrap_tool_call=self._guard,
            awrap_tool_call=self._aguard,
            **kwargs,
        )
        recorder.guarded.update(self.tools_by_name)

    def _decision(self, request: Any) -> tuple[str, str | None, Decision, str | None]:
        call = request.tool_call
        call_id = call.get("id")
        self.recorder.decide_message_calls(_messages(request.state, self._key), call, self.tools_by_name)
        decision, event = self.recorder.take(call_id)
        return call.get("name") or "", call_id, decision, event

    def _guard(self, request: Any, execute: Any) -> Any:
        name, call_id, decision, event = self._decision(request)
        decision = self.recorder.settle(name, decision, call_id)
        if not decision.allowed:
            return _denied(name, call_id, decision)
        token = _decided.set(call_id)
        try:
            result = execute(request)
        except Exception as error:
            self.recorder.result(event, call_id, name, error_text(error), failed=True)
            raise
        finally:
            _decided.reset(token)
        self.recorder.result(event, call_id, name, result)
        return result

    async def _aguard(self, request: Any, execute: Any) -> Any:
        name, call_id, decision, event = self._decision(request)
        decision = await self.recorder.settle_async(name, decision, call_id)
        if not decision.allowed:
            return _denied(name, call_id, decision)
        token = _decided.set(call_id)
        try:
            result = await execute(request)
        except Exception as error:
            self.recorder.result(event, call_id, name, error_text(error), failed=True)
            raise
        finally:
            _decided.reset(token)
        self.recorder.result(event, call_id, name, result)
        return result


def _denied(name: str, call_id: str | None, decision: Decision) -> ToolMessage:
    return ToolMessage(
        content=decision.feedback or "the call was refused by the policy",
        tool_call_id=call_id or "",
        name=name,
        status="error",
    )
