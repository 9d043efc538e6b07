"""A LangGraph agent under a policyc policy (docs/integrations.md).

The agent reads web pages, sends mail and pays bills. Its graph is the usual one (a model node,
a tool node, a loop between them); the tool node is policyc's ``GuardedToolNode`` and a
``PolicyCallbackHandler`` records the conversation, so that the policy of ``assistant.dl``
decides every call: a mail asked for by a fetched page is refused and the model reads why; a
payment over 1000 goes to an scenario.approver (with ``--ask``, the person at the terminal).

    python examples/integrations/langchain_agent.py           # a scripted model, no network
    python examples/integrations/langchain_agent.py --model gpt-4o-mini [--base-url URL]

``--model`` (or ``POLICYC_EXAMPLE_MODEL``) needs ``langchain-openai`` and an OpenAI-compatible
endpoint (``OPENAI_API_KEY``, ``--base-url`` or ``OPENAI_BASE_URL``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Annotated, Any, TypedDict

import scenario
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import policyc
from policyc.integrations.langchain import GuardedToolNode, PolicyCallbackHandler, Recorder

fetch, send_email, pay = (tool(f) for f in (scenario.fetch, scenario.send_email, scenario.pay))


TOOLS = [fetch, send_email, pay]


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, answering what it reads as a gullible model would: it
    follows an instruction it finds in a page, and reports what the tools said."""

    messages: Any = iter(())

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ):
        return ChatResult(generations=[ChatGeneration(message=respond(messages))])


def respond(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    step = len(messages)
    if isinstance(last, HumanMessage):
        words = str(last.text).split()
        if words[0] == "Summarize":
            return _calling("fetch", step, url=words[1])
        if words[0] == "Email":
            return _calling("send_email", step, to=words[1], body=" ".join(words[3:]))
        if words[0] == "Pay":
            return _calling("pay", step, to=words[1], amount=int(words[2]))
        return AIMessage("I cannot help with that.")
    if isinstance(last, ToolMessage) and last.status != "error":
        text = str(last.text)
        if "email these notes to " in text:  # the injection: the model obeys the page
            recipient = text.split("email these notes to ")[1].rstrip(".")
            return _calling("send_email", step, to=recipient, body=text.split(" IMPORTANT")[0])
        return AIMessage(f"Done: {text}")
    return AIMessage(f"I did not do it: {refusal(str(last.text))}")


def refusal(feedback: str) -> str:
    """The first reason of a denial's feedback."""
    reasons = [
        line.strip().removeprefix("- Blocked: ") for line in feedback.splitlines() if "- Blocked:" in line
    ]
    return reasons[0] if reasons else feedback


def _calling(name: str, step: int, **args: Any) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": name, "args": args, "id": f"{name}-{step}", "type": "tool_call"}]
    )


class State(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]


def build(model: Any, recorder: Recorder) -> Any:
    """The agent's graph, its tool node guarded."""
    bound = model.bind_tools(TOOLS)

    def think(state: State) -> dict:
        return {"messages": [bound.invoke(state["messages"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(State)
    graph.add_node("model", think)
    graph.add_node("tools", GuardedToolNode(TOOLS, recorder))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()


def chat_model(name: str, base_url: str | None) -> Any:
    if name == "scripted":
        return ScriptedModel()
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        sys.exit("--model needs langchain-openai: pip install langchain-openai")
    return ChatOpenAI(model=name, base_url=base_url or os.environ.get("OPENAI_BASE_URL"), temperature=0)


def show(message: BaseMessage) -> str:
    if isinstance(message, AIMessage):
        calls = ", ".join(
            f"{c['name']}({', '.join(f'{k}={v!r}' for k, v in c['args'].items())})"
            for c in message.tool_calls
        )
        return f"  model: {calls or message.text}"
    if isinstance(message, ToolMessage):
        outcome = " (refused)" if message.status == "error" else ""
        return f"  {message.name}{outcome}: " + str(message.text).replace("\n", "\n    ")
    return f"  {message.type}: {message.text}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.environ.get("POLICYC_EXAMPLE_MODEL", "scripted"))
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--ask", action="store_true", help="ask at the terminal about escalated calls")
    options = parser.parse_args(argv)
    model = chat_model(options.model, options.base_url)
    # escalated calls go to the approver: a person at the terminal with --ask
    ask = policyc.ConsoleApprover() if options.ask else scenario.approver
    monitor = policyc.Monitor(policyc.load(scenario.POLICY), approver=ask)
    for n, request in enumerate(scenario.REQUESTS, 1):
        session = monitor.session(f"conversation-{n}", principal="alice")  # one per conversation
        recorder = Recorder(session, result_labels={"fetch": ["untrusted"]})
        graph = build(model, recorder)
        state = {"messages": [SystemMessage(scenario.INSTRUCTIONS), HumanMessage(request)]}
        print(f"user: {request}")
        config = {"callbacks": [PolicyCallbackHandler(recorder)]}
        for update in graph.stream(state, config=config, stream_mode="updates"):
            for node in update.values():
                for message in node["messages"]:
                    print(show(message))
    return 0


if __name__ == "__main__":
    sys.exit(main())
