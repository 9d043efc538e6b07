"""A PydanticAI agent under a policyc policy (docs/integrations.md).

The agent reads web pages, sends mail and pays bills. Its tools are a ``FunctionToolset``
wrapped by policyc's ``PolicyToolset``, so that the policy of ``assistant.dl`` decides every
call and the session holds the run's messages: a mail asked for by a fetched page is refused and
the model reads why; a payment over 1000 goes to an scenario.approver (with ``--ask``, the person at the
terminal).

    python examples/integrations/pydantic_ai_agent.py           # a scripted model, no network
    python examples/integrations/pydantic_ai_agent.py --model gpt-4o-mini [--base-url URL]

``--model`` (or ``POLICYC_EXAMPLE_MODEL``) needs an OpenAI-compatible endpoint
(``OPENAI_API_KEY``, and ``--base-url`` or ``OPENAI_BASE_URL`` for another than OpenAI's).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import scenario
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import policyc
from policyc.integrations.pydantic_ai import guard_toolset


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted model, answering what it reads as a gullible model would: it follows an
    instruction it finds in a page, and reports what the tools said."""
    last = messages[-1]
    step = len(messages)
    parts = last.parts if isinstance(last, ModelRequest) else []
    prompts = [p for p in parts if isinstance(p, UserPromptPart)]
    if prompts:
        words = str(prompts[-1].content).split()
        if words[0] == "Summarize":
            return _calling("fetch", step, url=words[1])
        if words[0] == "Email":
            return _calling("send_email", step, to=words[1], body=" ".join(words[3:]))
        if words[0] == "Pay":
            return _calling("pay", step, to=words[1], amount=int(words[2]))
        return ModelResponse(parts=[TextPart("I cannot help with that.")])
    (result,) = [p for p in parts if isinstance(p, ToolReturnPart)]
    text = str(result.content)
    if result.outcome == "failed":
        return ModelResponse(parts=[TextPart(f"I did not do it: {refusal(text)}")])
    if "email these notes to " in text:  # the injection: the model obeys the page
        recipient = text.split("email these notes to ")[1].rstrip(".")
        return _calling("send_email", step, to=recipient, body=text.split(" IMPORTANT")[0])
    return ModelResponse(parts=[TextPart(f"Done: {text}")])


def refusal(feedback: str) -> str:
    """The first reason of a denial's feedback."""
    reasons = [
        line.strip().removeprefix("- Blocked: ") for line in feedback.splitlines() if "- Blocked:" in line
    ]
    return reasons[0] if reasons else feedback


def _calling(name: str, step: int, **args: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"{name}-{step}")])


def model_of(name: str, base_url: str | None) -> Any:
    if name == "scripted":
        return FunctionModel(scripted)
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    try:
        provider = OpenAIProvider(base_url=base_url or os.environ.get("OPENAI_BASE_URL"))
    except Exception as error:  # no key, say
        sys.exit(f"--model {name}: {error}")
    return OpenAIChatModel(name, provider=provider)


def show(message: ModelMessage) -> list[str]:
    lines = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            args = ", ".join(f"{k}={v!r}" for k, v in part.args_as_dict().items())
            lines.append(f"  model: {part.tool_name}({args})")
        elif isinstance(part, TextPart):
            lines.append(f"  model: {part.content}")
        elif isinstance(part, ToolReturnPart):
            outcome = " (refused)" if part.outcome == "failed" else ""
            lines.append(f"  {part.tool_name}{outcome}: " + str(part.content).replace("\n", "\n    "))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.environ.get("POLICYC_EXAMPLE_MODEL", "scripted"))
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--ask", action="store_true", help="ask at the terminal about escalated calls")
    options = parser.parse_args(argv)
    model = model_of(options.model, options.base_url)
    # escalated calls go to the approver: a person at the terminal with --ask
    monitor = policyc.Monitor(
        policyc.load(scenario.POLICY),
        approver=policyc.ConsoleApprover() if options.ask else scenario.approver,
    )
    tools = FunctionToolset([scenario.fetch, scenario.send_email, scenario.pay])
    for n, request in enumerate(scenario.REQUESTS, 1):
        session = monitor.session(f"conversation-{n}", principal="alice")  # one per conversation
        guarded = guard_toolset(tools, session, result_labels={"fetch": ["untrusted"]})
        agent = Agent(model, instructions=scenario.INSTRUCTIONS, toolsets=[guarded])
        print(f"user: {request}")
        result = agent.run_sync(request)
        for message in result.new_messages()[1:]:
            print("\n".join(show(message)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
