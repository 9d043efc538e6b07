"""An OpenAI Agents SDK agent under a policyc policy (docs/integrations.md).

The agent reads web pages, sends mail and pays bills. Its tools carry policyc's tool guardrails
and its runs policyc's run hooks (``AgentGuard``), so that the policy of ``assistant.dl``
decides every call: a mail asked for by a fetched page is refused and the model reads why; a
payment over 1000 goes to an scenario.approver (with ``--ask``, the person at the terminal).

    python examples/integrations/openai_agents_agent.py           # a scripted model, no network
    python examples/integrations/openai_agents_agent.py --model gpt-4o-mini [--base-url URL]

``--model`` needs an OpenAI-compatible endpoint (``OPENAI_API_KEY``, ``--base-url`` or
``OPENAI_BASE_URL``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import scenario
from agents import Agent, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.usage import Usage

import policyc
from policyc.integrations.openai_agents import AgentGuard

fetch, send_email, pay = (function_tool(f) for f in (scenario.fetch, scenario.send_email, scenario.pay))


TOOLS = [fetch, send_email, pay]


class ScriptedModel(Model):
    """The SDK's model interface, answering what it reads as a gullible model would: it follows
    an instruction it finds in a page, and reports what the tools said."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else [dict(i) for i in input]
        return ModelResponse(output=[respond(items)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def respond(items: list[dict[str, Any]]) -> Any:
    last = items[-1]
    step = len(items)
    if last.get("role") == "user":
        words = str(last["content"]).split()
        if words[0] == "Summarize":
            return function_call("fetch", {"url": words[1]}, call_id=f"fetch-{step}")
        if words[0] == "Email":
            return function_call(
                "send_email", {"to": words[1], "body": " ".join(words[3:])}, call_id=f"mail-{step}"
            )
        if words[0] == "Pay":
            return function_call("pay", {"to": words[1], "amount": int(words[2])}, call_id=f"pay-{step}")
        return assistant_message("I cannot help with that.")
    text = str(last.get("output", ""))
    if text.startswith("Authorization issues encountered:"):
        return assistant_message(f"I did not do it: {refusal(text)}")
    if "email these notes to " in text:  # the injection: the model obeys the page
        recipient = text.split("email these notes to ")[1].rstrip(".")
        body = text.split(" IMPORTANT")[0]
        return function_call("send_email", {"to": recipient, "body": body}, call_id=f"mail-{step}")
    return assistant_message(f"Done: {text}")


def refusal(feedback: str) -> str:
    """The first reason of a denial's feedback."""
    reasons = [
        line.strip().removeprefix("- Blocked: ") for line in feedback.splitlines() if "- Blocked:" in line
    ]
    return reasons[0] if reasons else feedback


def model_of(name: str, base_url: str | None) -> Any:
    if name == "scripted":
        return ScriptedModel()
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url or os.environ.get("OPENAI_BASE_URL"))
    return OpenAIChatCompletionsModel(model=name, openai_client=client)


def show(item: Any, guard: AgentGuard, names: dict[str, str]) -> str | None:
    kind = getattr(item, "type", "")
    raw = getattr(item, "raw_item", None)
    if kind == "tool_call_item":
        names[raw.call_id] = raw.name
        arguments = ", ".join(f"{k}={v!r}" for k, v in json.loads(raw.arguments).items())
        return f"  model: {raw.name}({arguments})"
    if kind == "tool_call_output_item":
        call = raw["call_id"] if isinstance(raw, dict) else raw.call_id
        decision = guard.decisions.get(call)
        outcome = " (refused)" if decision is not None and not decision.allowed else ""
        return f"  {names.get(call, 'tool')}{outcome}: " + str(item.output).replace("\n", "\n    ")
    if kind == "message_output_item":
        return "  model: " + " ".join(part.text for part in raw.content if hasattr(part, "text"))
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.environ.get("POLICYC_EXAMPLE_MODEL", "scripted"))
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--ask", action="store_true", help="ask at the terminal about escalated calls")
    options = parser.parse_args(argv)
    model = model_of(options.model, options.base_url)
    # escalated calls go to the approver: a person at the terminal with --ask
    ask = policyc.ConsoleApprover() if options.ask else scenario.approver
    monitor = policyc.Monitor(policyc.load(scenario.POLICY), approver=ask)
    for n, request in enumerate(scenario.REQUESTS, 1):
        session = monitor.session(f"conversation-{n}", principal="alice")  # one per conversation
        guard = AgentGuard(session, result_labels={"fetch": ["untrusted"]})
        agent = Agent(
            name="assistant", instructions=scenario.INSTRUCTIONS, tools=guard.tools(TOOLS), model=model
        )
        print(f"user: {request}")
        result = Runner.run_sync(
            agent, request, hooks=guard.hooks, run_config=RunConfig(tracing_disabled=True)
        )
        names: dict[str, str] = {}
        for item in result.new_items:
            line = show(item, guard, names)
            if line:
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
