"""The LangChain and LangGraph guards (policyc.integrations.langchain) in real agent loops:
LangGraph graphs driven by LangChain's fake chat model, scripted to answer what it reads (a
tool result carrying an injection makes it send mail), with the policy deciding every call."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import ToolException, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from pydantic import Field

from policyc.integrations.langchain import (
    GuardedToolNode,
    PolicyCallbackHandler,
    Recorder,
    guard_tools,
)
from policyc.runtime import Monitor, load_source

from .integration_scenario import FEEDBACK, INJECTION, PAGES, POLICY, run_example


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model answering from what it reads: a user request becomes the
    calls it asks for; a tool result carrying the injection makes it send mail to the attacker;
    anything else ends the turn with a summary of the last tool messages."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ):
        self.seen.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=respond(messages, len(self.seen)))])


def call(name: str, n: int, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"{name}-{n}", "type": "tool_call"}


def respond(messages: list[BaseMessage], n: int) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        request = str(last.text)
        if request.startswith("Summarize "):
            return AIMessage("", tool_calls=[call("fetch", n, url=request.split()[1])])
        if request.startswith("Email "):
            return AIMessage("", tool_calls=[call("send_email", n, to=request.split()[1], body="hello")])
        if request.startswith("Pay "):
            _, to, amount = request.split()
            return AIMessage("", tool_calls=[call("pay", n, to=to, amount=amount)])  # a string
        if request.startswith("Both "):  # two calls in one message
            _, to, url = request.split()
            return AIMessage(
                "", tool_calls=[call("send_email", n, to=to, body="hi"), call("fetch", n + 100, url=url)]
            )
        return AIMessage("I cannot help with that.")
    results = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    injected = any(INJECTION in str(m.text) for m in results)
    tried = any(
        c["args"].get("to") == "eve@attacker.example"
        for m in messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    )
    if injected and not tried:
        return AIMessage("", tool_calls=[call("send_email", n, to="eve@attacker.example", body="the notes")])
    summary = "; ".join(f"{m.name} {m.status}: {m.text}" for m in reversed(results))
    return AIMessage(f"Done. {summary}")


class State(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]


class Tools:
    """The tools, sync or async, and what they did."""

    def __init__(self, asynchronous: bool = False) -> None:
        self.sent: list[tuple[str, str]] = []
        self.paid: list[tuple[str, int]] = []
        self.threads: set[int] = set()
        sent, paid, threads = self.sent, self.paid, self.threads
        if asynchronous:

            @tool
            async def fetch(url: str) -> str:
                """Fetch a web page."""
                await asyncio.sleep(0)
                return PAGES.get(url, "not found")

            @tool
            async def send_email(to: str, body: str) -> str:
                """Send an email."""
                sent.append((to, body))
                return f"sent to {to}"

            @tool
            async def pay(to: str, amount: int) -> str:
                """Pay someone."""
                paid.append((to, amount))
                return f"paid {amount} to {to}"

        else:

            @tool
            def fetch(url: str) -> str:
                """Fetch a web page."""
                threads.add(threading.get_ident())
                return PAGES.get(url, "not found")

            @tool
            def send_email(to: str, body: str) -> str:
                """Send an email."""
                threads.add(threading.get_ident())
                sent.append((to, body))
                return f"sent to {to}"

            @tool
            def pay(to: str, amount: int) -> str:
                """Pay someone."""
                paid.append((to, amount))
                return f"paid {amount} to {to}"

        self.all = [fetch, send_email, pay]


def agent(tools_node: Any, model: ScriptedModel) -> Any:
    def think(state: State) -> dict:
        return {"messages": [model.invoke(state["messages"])]}

    async def athink(state: State) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(State)
    graph.add_node("model", RunnableLambda(think, afunc=athink))
    graph.add_node("tools", tools_node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile()


def setup(approver: Any = None, asynchronous: bool = False, node: str = "guarded") -> tuple:
    session = Monitor(load_source(POLICY), approver=approver).session("s1", principal="alice")
    recorder = Recorder(session, result_labels={"fetch": ["untrusted"]})
    tools = Tools(asynchronous)
    model = ScriptedModel(messages=iter(()))
    tools_node = (
        GuardedToolNode(tools.all, recorder)
        if node == "guarded"
        else ToolNode(guard_tools(tools.all, recorder))
    )
    return session, recorder, tools, model, agent(tools_node, model)


def run(graph: Any, recorder: Recorder, text: str, asynchronous: bool = False) -> list[BaseMessage]:
    config = {"callbacks": [PolicyCallbackHandler(recorder)]}
    state = {"messages": [HumanMessage(text)]}
    if asynchronous:
        return asyncio.run(graph.ainvoke(state, config=config))["messages"]
    return graph.invoke(state, config=config)["messages"]


def events(session: Any, kind: str) -> list[dict[str, Any]]:
    return [session.events[e] for e in session.order if session.events[e]["kind"] == kind]


# ----------------------------------------------------------------------------- scenarios


@pytest.mark.parametrize("node", ["guarded", "tools"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_injected_send_is_denied_and_the_agent_finishes(node: str, asynchronous: bool) -> None:
    session, recorder, tools, model, graph = setup(asynchronous=asynchronous, node=node)
    messages = run(graph, recorder, "Summarize https://example.com/notes", asynchronous)
    assert tools.sent == []  # the tool did not run
    (denial,) = [m for m in messages if isinstance(m, ToolMessage) and m.name == "send_email"]
    assert denial.status == "error" and FEEDBACK in str(denial.text)
    assert FEEDBACK in str(model.seen[-1][-1].text)  # the next model input holds the feedback
    assert isinstance(messages[-1], AIMessage) and messages[-1].text.startswith("Done.")
    assert len(model.seen) == 3
    # the events: the conversation as the model saw it, the calls depending on what asked for them
    calls = events(session, "tool_call")
    assert [c["tool"] for c in calls] == ["fetch", "send_email"]
    assert calls[1]["args"] == {"to": "eve@attacker.example", "body": "the notes"}
    outputs = events(session, "assistant_message")
    assert [c["deps"] for c in calls] == [[outputs[0]["id"]], [outputs[1]["id"]]]
    (result,) = events(session, "tool_result")
    assert (
        result["of"] == calls[0]["id"] and result["labels"] == ["untrusted"] and INJECTION in result["text"]
    )
    assert [e["text"] for e in events(session, "user_message")] == ["Summarize https://example.com/notes"]
    assert len(outputs) == 3  # the final answer too, recorded once each
    assert session.decide(calls[1]["id"]).allowed is False


@pytest.mark.parametrize("node", ["guarded", "tools"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_benign_send_is_allowed_and_runs(node: str, asynchronous: bool) -> None:
    session, recorder, tools, _, graph = setup(asynchronous=asynchronous, node=node)
    messages = run(graph, recorder, "Email bob@example.com", asynchronous)
    assert tools.sent == [("bob@example.com", "hello")]
    assert messages[-1].text == "Done. send_email success: sent to bob@example.com"
    (result,) = events(session, "tool_result")
    assert result["text"] == "sent to bob@example.com" and "labels" not in result


def test_a_clean_page_is_summarized_without_mail() -> None:
    session, recorder, tools, _, graph = setup()
    messages = run(graph, recorder, "Summarize https://example.com/plain")
    assert tools.sent == [] and messages[-1].text.startswith("Done. fetch success: Meeting notes")
    assert [c["tool"] for c in events(session, "tool_call")] == ["fetch"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_parallel_calls_of_one_message_are_each_decided_in_order(asynchronous: bool) -> None:
    session, recorder, tools, _, graph = setup(asynchronous=asynchronous)
    messages = run(graph, recorder, "Both bob@example.com https://example.com/notes", asynchronous)
    kinds = [(session.events[e]["kind"], session.events[e].get("tool")) for e in session.order]
    # both calls recorded and decided, in the message's order, before either ran
    first_result = next(i for i, k in enumerate(kinds) if k[0] == "tool_result")
    calls = [i for i, k in enumerate(kinds) if k[0] == "tool_call"]
    assert [kinds[i][1] for i in calls[:2]] == ["send_email", "fetch"] and calls[1] < first_result
    assert tools.sent[0] == ("bob@example.com", "hi")  # allowed: it depends on nothing untrusted
    # the injected send that followed the fetch is refused
    assert ("eve@attacker.example", "the notes") not in tools.sent
    denials = [m for m in messages if isinstance(m, ToolMessage) and m.status == "error"]
    assert [m.tool_call_id for m in denials] == ["send_email-2"] and FEEDBACK in str(denials[0].text)
    assert messages[-1].text.startswith("Done.")


def test_parallel_calls_run_concurrently_after_their_decisions() -> None:
    """ToolNode runs the calls of one message in a thread pool; the guard decides them all
    first, under one lock, so that the order of the events does not depend on the threads."""
    for _ in range(5):
        session, recorder, tools, _, graph = setup()
        run(graph, recorder, "Both bob@example.com https://example.com/plain")
        calls = [session.events[e] for e in session.order if session.events[e]["kind"] == "tool_call"]
        assert [c["tool"] for c in calls] == ["send_email", "fetch"]
        assert tools.sent == [("bob@example.com", "hi")]
        assert tools.threads and threading.get_ident() not in tools.threads  # ToolNode's worker threads


class Approver:
    """An approver object: approves payments to bob, remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict]] = []

    def __call__(self, request: Any) -> bool:
        self.asked.append((request.tool, dict(request.arguments)))
        return request.arguments.get("to") == "bob"


class AsyncApprover(Approver):
    async def __call__(self, request: Any) -> bool:
        await asyncio.sleep(0)
        return super().__call__(request)


@pytest.mark.parametrize("node", ["guarded", "tools"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_escalated_call_goes_to_the_approver(node: str, asynchronous: bool) -> None:
    approver = AsyncApprover() if asynchronous else Approver()
    session, recorder, tools, _, graph = setup(approver, asynchronous, node)
    approved = run(graph, recorder, "Pay bob 5000", asynchronous)
    assert tools.paid == [("bob", 5000)] and approved[-1].text == "Done. pay success: paid 5000 to bob"
    # the policy saw the amount the tool reads (a number), not the model's text "5000"
    assert events(session, "tool_call")[0]["args"] == {"to": "bob", "amount": 5000}
    assert [k for k in (session.events[e]["kind"] for e in session.order) if k == "approval"] == ["approval"]
    refused = run(graph, recorder, "Pay eve 5000", asynchronous)
    assert tools.paid == [("bob", 5000)]
    (denial,) = [m for m in refused if isinstance(m, ToolMessage)]
    assert denial.status == "error" and "the approver did not approve the call" in str(denial.text)
    assert approver.asked == [("pay", {"to": "bob", "amount": 5000}), ("pay", {"to": "eve", "amount": 5000})]
    small = run(graph, recorder, "Pay eve 10", asynchronous)  # not escalated: nobody is asked
    assert tools.paid[-1] == ("eve", 10) and len(approver.asked) == 2 and small[-1].text.startswith("Done.")


def test_an_escalation_without_an_approver_is_refused() -> None:
    _, recorder, tools, _, graph = setup()
    messages = run(graph, recorder, "Pay bob 5000")
    assert tools.paid == [] and "no approver is set" in str(messages[-2].text)


# ------------------------------------------------------------------ guarded tools on their own


def test_a_guarded_tool_called_directly_returns_the_feedback() -> None:
    session = Monitor(load_source(POLICY)).session("s2")
    recorder = Recorder(session, result_labels={"fetch": ["untrusted"]})
    tools = Tools()
    fetch, send_email, _ = guard_tools(tools.all, recorder)
    assert (
        fetch.name == "fetch" and fetch.description == "Fetch a web page." and fetch.args == tools.all[0].args
    )
    assert fetch.invoke({"url": "https://example.com/plain"}) == PAGES["https://example.com/plain"]
    refused = send_email.invoke({"to": "x@y.z", "body": "b"})
    assert FEEDBACK in refused and tools.sent == []
    message = send_email.invoke(call("send_email", 1, to="x@y.z", body="b"))
    assert (
        isinstance(message, ToolMessage)
        and message.status == "error"
        and message.tool_call_id == "send_email-1"
    )


def test_arguments_no_event_can_hold_refuse_the_call_alone() -> None:
    session = Monitor(load_source(POLICY)).session("s3")
    recorder = Recorder(session)

    @tool
    def store(value: Any) -> str:
        """Store a value."""
        return f"stored {value}"

    (guarded,) = guard_tools([store], recorder)
    message = guarded.invoke(call("store", 1, value=math.nan))
    assert message.status == "error" and "cannot be decided" in str(message.text)
    assert session.sticky == [] and session.order == []  # nothing recorded, nothing poisoned
    assert guarded.invoke({"value": 5}) == "stored 5"


def test_the_callback_records_tools_the_guard_does_not_run() -> None:
    session = Monitor(load_source(POLICY)).session("s4")
    recorder = Recorder(session, result_labels={"fetch": ["untrusted"]})
    tools = Tools()
    fetch, send_email, _ = tools.all
    guarded_send = guard_tools([send_email], recorder)
    model = ScriptedModel(messages=iter(()))
    graph = agent(ToolNode([fetch, *guarded_send]), model)
    messages = run(graph, recorder, "Summarize https://example.com/notes")
    calls = events(session, "tool_call")
    assert [(c["tool"], c.get("labels")) for c in calls] == [("fetch", ["unguarded"]), ("send_email", None)]
    (result,) = events(session, "tool_result")
    assert result["of"] == calls[0]["id"] and result["labels"] == ["untrusted"]
    assert tools.sent == [] and FEEDBACK in str(messages[-2].text)
    assert json.dumps(calls[0]["args"]) == json.dumps({"url": "https://example.com/notes"})


def test_the_example_runs() -> None:
    run_example("langchain_agent.py")


def test_a_message_whose_calls_run_again_is_decided_again() -> None:
    """A node that runs the same AI message twice (a retried step) decides its calls twice."""
    session = Monitor(load_source(POLICY)).session("s5")
    recorder = Recorder(session, result_labels={"fetch": ["untrusted"]})
    tools = Tools()
    graph = StateGraph(State)
    graph.add_node("tools", GuardedToolNode(tools.all, recorder))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    node = graph.compile()
    state = {
        "messages": [
            HumanMessage("mail bob"),
            AIMessage("", tool_calls=[call("send_email", 1, to="bob", body="b")]),
        ]
    }
    first = node.invoke(state)["messages"][2:]
    second = node.invoke(state)["messages"][2:]
    assert [m.status for m in first + second] == ["success", "success"] and len(tools.sent) == 2
    assert [e["tool"] for e in events(session, "tool_call")] == ["send_email", "send_email"]
    assert len(events(session, "user_message")) == 1  # the conversation recorded once


def test_guarded_tools_in_langchains_prebuilt_agent() -> None:
    """`langchain.agents.create_agent` runs guarded tools in its own tool node."""
    from langchain.agents import create_agent

    session = Monitor(load_source(POLICY)).session("s6")
    recorder = Recorder(session, result_labels={"fetch": ["untrusted"]})
    tools = Tools()
    model = ScriptedModel(messages=iter(()))
    prebuilt = create_agent(model, tools=guard_tools(tools.all, recorder))
    messages = run(prebuilt, recorder, "Summarize https://example.com/notes")
    assert tools.sent == [] and [
        getattr(m, "status", None) for m in messages if isinstance(m, ToolMessage)
    ] == [
        "success",
        "error",
    ]
    assert FEEDBACK in str(model.seen[-1][-1].text) and messages[-1].text.startswith("Done.")
    calls_ = events(session, "tool_call")
    assert [c["deps"] for c in calls_] == [[e["id"]] for e in events(session, "assistant_message")[:2]]


def test_a_session_at_a_policyc_serve_service(tmp_path: Path) -> None:
    """The guard records into and asks a remote session (`policyc.connect`) as a local one."""
    from policyc.serve import connect

    from .support.service import Server, prepare

    key = prepare(tmp_path, POLICY, {"agent": ()})["agent"]
    server = Server(tmp_path)
    try:
        with connect(server.url, key) as monitor:
            session = monitor.session("remote-1")
            recorder = Recorder(session, result_labels={"fetch": ["untrusted"]})
            tools = Tools()
            model = ScriptedModel(messages=iter(()))
            messages = run(
                agent(GuardedToolNode(tools.all, recorder), model),
                recorder,
                "Summarize https://example.com/notes",
            )
            assert tools.sent == [] and session.sticky == []
            (denial,) = [m for m in messages if isinstance(m, ToolMessage) and m.name == "send_email"]
            assert denial.status == "error" and FEEDBACK in str(denial.text)
            assert messages[-1].text.startswith("Done.")
            benign = monitor.session("remote-2")
            recorder = Recorder(benign, result_labels={"fetch": ["untrusted"]})
            run(agent(GuardedToolNode(tools.all, recorder), model), recorder, "Email bob@example.com")
            assert tools.sent == [("bob@example.com", "hello")]
    finally:
        server.stop()


@pytest.mark.parametrize("node", ["guarded", "tools"])
def test_a_session_that_cannot_decide_refuses_every_call(node: str) -> None:
    session, recorder, tools, _, graph = setup(node=node)
    session.add_facts({"Event": [["bad"]]})  # the host's malformed facts: the session fails closed
    messages = run(graph, recorder, "Email bob@example.com")
    assert tools.sent == []
    assert "could not decide this action" in str(messages[-2].text) and messages[-2].status == "error"


@pytest.mark.parametrize("node", ["guarded", "tools"])
def test_a_tool_that_fails_has_its_error_recorded_as_its_result(node: str) -> None:
    session = Monitor(load_source(POLICY)).session("s7")
    recorder = Recorder(session)

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        raise ConnectionError("the mail server is down")

    @tool
    def fetch(url: str) -> str:
        """Fetch a web page."""
        raise ToolException("no such page")

    fetch.handle_tool_error = True  # the tool's own handling: its error as its result

    # errors as messages (LangGraph raises the ones it does not know by default)
    tools_node = (
        GuardedToolNode([send_email, fetch], recorder, handle_tool_errors=True)
        if node == "guarded"
        else ToolNode(guard_tools([send_email, fetch], recorder), handle_tool_errors=True)
    )
    messages = run(
        agent(tools_node, ScriptedModel(messages=iter(()))), recorder, "Both bob@example.com https://x"
    )
    errors = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.status for m in errors] == ["error", "error"] and "no such page" in str(errors[1].text)
    results = {e["tool"]: e["text"] for e in events(session, "tool_result")}
    assert "the mail server is down" in results["send_email"] and "no such page" in results["fetch"]
    assert len(events(session, "tool_result")) == 2
