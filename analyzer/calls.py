"""Calls replayed through a real monitor, for the findings whose witness is a call.

A finding about what an agent can slip past (:mod:`.slips`) is shown only with a call that a
:class:`~policyc.runtime.session.Monitor` of the policy really decides as the finding says:
each call is decided in a new session of its own, as a host would record it (a ``tool_call``
event, after the events given with it). Functors that neither the library nor a session
implements (a host's own) answer nothing here: a finding whose rules call one names it.

>>> from policyc.compiler.pipeline import compile_source
>>> compilation = compile_source('.import events\\nDeny(a) :- ToolCall(a, "rm").')
>>> replay = Replayer.of(compilation)
>>> replay.decide(call("rm", {})).verdict, replay.decide(call("ls", {})).verdict
('deny', 'allow')
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policyc.compiler import ast
from policyc.compiler.diagnostics import Scenario
from policyc.compiler.source import Span
from policyc.compiler.stages import Stratified

CALL_ID = "c1"


def call(tool: str, args: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    """The event of a call of ``tool`` with ``args`` (and ``text``, when given)."""
    event: dict[str, Any] = {"id": CALL_ID, "kind": "tool_call", "tool": tool, "args": args}
    if text is not None:
        event["text"] = text
    return event


@dataclass(frozen=True)
class Decided:
    """What the monitor decided of a call: ``verdict`` (``allow``, ``deny``, ``escalate``, or
    ``refuse`` when an error refused it), and the ids of the rules that denied or escalated."""

    verdict: str
    rules: tuple[str, ...]

    @property
    def allowed(self) -> bool:
        return self.verdict == "allow"


class Replayer:
    """A monitor of a compiled policy, deciding one call per session."""

    def __init__(self, monitor: Any, ids: dict[tuple[str, int, int], str], hosts: tuple[str, ...]) -> None:
        self.monitor = monitor
        self.ids = ids  # (head, line, column) of a rule -> its id in decisions
        self.hosts = hosts  # the host functors, answering nothing here
        self.sessions = 0

    @classmethod
    def of(cls, compilation: Stratified) -> Replayer:
        """A replayer of the policy (``PolicyError`` and the runtime's own errors propagate)."""
        from policyc.runtime.opener import from_compilation
        from policyc.runtime.session import Monitor
        from policyc.stdlib.builtins import BUILTINS
        from policyc.stdlib.events import SESSION_FUNCTORS

        from .replay import table_function

        hosts = tuple(
            sorted(
                name
                for name, signature in compilation.symbols.functors.items()
                if name not in BUILTINS and name not in SESSION_FUNCTORS and not signature.library
            )
        )
        functors = {
            name: table_function([], compilation.symbols.functors[name].is_predicate) for name in hosts
        }
        policy = from_compilation(compilation, functors)
        ids = {(info.head, info.line, info.column): info.id for info in policy.plan.rules}
        return cls(Monitor(policy), ids, hosts)

    def rule_id(self, rule: ast.Rule) -> str | None:
        """The id decisions give ``rule``."""
        head = rule.head
        return self.ids.get((head.name, head.span.line, head.span.column))

    def decide(self, event: dict[str, Any], before: Sequence[dict[str, Any]] = ()) -> Decided:
        """The monitor's decision on the call ``event``, recorded after ``before``."""
        self.sessions += 1
        session = self.monitor.session(f"policyc-check-{self.sessions}")
        for earlier in before:
            session.record(json.loads(json.dumps(earlier)))
        decision = session.authorize(json.loads(json.dumps(event)))
        rules = tuple(reason.rule for reason in decision.reasons)
        if decision.errored:
            return Decided("refuse", rules)
        if decision.allowed:
            return Decided("allow", rules)
        return Decided(decision.verdict or "deny", rules)


def witness(events: Sequence[dict[str, Any]], decided: Decided, note: str) -> Scenario:
    """The witness of a finding: the events replayed, the last the call decided."""
    recorded = tuple(json.dumps(e, ensure_ascii=False) for e in events)
    return Scenario((), recorded, str(events[-1]["id"]), decided.verdict, note=note)


def rule_span(rule: ast.Rule) -> Span:
    """The rule from its head to its end, without the annotations written before it."""
    head, whole = rule.head.span, rule.span
    return Span(head.file, head.start, whole.end, head.line, head.column, whole.end_line, whole.end_column)


def show(value: Any) -> str:
    """A JSON value as a finding's message shows it: ``"x"``, ``5000``, ``["a", "b"]``."""
    return json.dumps(value, ensure_ascii=False)
