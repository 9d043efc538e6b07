"""The ambient monitor session: the session and scopes code runs under (:func:`use_session`),
what a call recorded there depends on, and recording a call and its result as events.

The session travels in :mod:`contextvars`, so code between the agent loop and a tool need not
pass it along. A scope may name the event that initiated its work (``parent``, say the model's
message): a call inside then depends on that event and on every event recorded in the session
since the scope began.
"""

from __future__ import annotations

import contextvars
import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .session import Session
from .verdict import Decision, Reason

if TYPE_CHECKING:
    from .protocols import SessionLike

current_session: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "policyc_session", default=None
)
# the parent of the innermost scope (what a call depends on is worked out from every scope)
current_parent: contextvars.ContextVar[str | None] = contextvars.ContextVar("policyc_parent", default=None)
_ids = itertools.count(1)
ERROR_LABEL = "error"  # the label of the result of a tool that failed (its text is the exception's)

NO_SESSION = Reason(
    "policyc:no-session",
    "no monitor session is active, so the action cannot be decided and is refused",
    "Run the agent's work inside `policyc.use_session(session)`.",
    "high",
)


class PolicyDenied(PermissionError):
    """The policy refused an action; ``decision`` holds the reasons, ``feedback`` the text."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.feedback = decision.feedback or "the action was refused by the policy"
        super().__init__(self.feedback)


def refusal(rule: str, message: str, suggestion: str | None = None) -> Decision:
    """A denial made before the policy is asked (the action is not recorded)."""
    return Decision(None, False, (Reason(rule, message, suggestion, "high"),))


# ----------------------------------------------------------------------------- scopes


@dataclass(frozen=True)
class _Scope:
    """A block of :func:`use_session`: its session and parent, and the scope it is in."""

    session: Session
    parent: str | None
    start: int  # how many events the session held when the scope began
    outer: _Scope | None


_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("policyc_scope", default=None)


@contextmanager
def use_session(session: Session, parent: str | None = None) -> Iterator[Session]:
    """Make ``session`` ambient for the code inside.

    With ``parent`` (an event id), a call inside depends on that event and on every event
    recorded in the session since the scope began; scopes of the same session nest by union
    (see :func:`dependencies`). Without it, a call depends on the whole history.
    """
    scope = _Scope(session, parent, len(session.order), _scope.get())
    tokens = current_session.set(session), current_parent.set(parent), _scope.set(scope)
    try:
        yield session
    finally:
        _scope.reset(tokens[2])
        current_parent.reset(tokens[1])
        current_session.reset(tokens[0])


def dependencies(session: Session) -> list[str] | None:
    """What a call recorded now in ``session`` depends on: ``None`` for the whole history, else
    the parent of every enclosing scope of this session and every event recorded since the
    outermost of them began. An enclosing scope of this session without a parent, or with a
    parent the session has not recorded, means the whole history; so does no scope at all."""
    parents: list[str] = []
    start = None
    scope = _scope.get()
    while scope is not None:
        if scope.session is session:
            if scope.parent is None or scope.parent not in session.events:
                return None
            parents.append(scope.parent)
            start = scope.start
        scope = scope.outer
    if start is None:
        return None
    return list(dict.fromkeys([*reversed(parents), *session.order[start:]]))


def new_id(prefix: str, session: SessionLike | None = None) -> str:
    """A fresh event id (one ``session`` has not recorded, when given)."""
    while True:
        identifier = f"{prefix}{next(_ids)}"
        if session is None or identifier not in session.events:
            return identifier


def authorize_call(
    tool: str, args: Mapping[str, Any], session: Session | None = None, allow_outside: bool = False
) -> tuple[Decision, str | None]:
    """Record a call of ``tool`` in the ambient (or given) session, depending on what the
    scopes say it depends on, and decide it (:func:`decide_tool_call`): the decision is final,
    an escalated call put to the monitor's approver. Without a session, the call is denied
    (``policyc:no-session``) unless ``allow_outside``."""
    session = session or current_session.get()
    if session is None:
        return _outside(allow_outside), None
    return decide_tool_call(session, tool, args, dependencies(session), checked=False)


async def authorize_call_async(
    tool: str, args: Mapping[str, Any], session: Session | None = None, allow_outside: bool = False
) -> tuple[Decision, str | None]:
    """:func:`authorize_call` for async code: the approver is awaited (or run in a thread)."""
    session = session or current_session.get()
    if session is None:
        return _outside(allow_outside), None
    return await decide_tool_call_async(session, tool, args, dependencies(session), checked=False)


def _outside(allow_outside: bool) -> Decision:
    return Decision(None, allow_outside, () if allow_outside else (NO_SESSION,))


# ------------------------------------------------------------- deciding one tool call

# The one path every front takes to decide a tool call (the guards, the HTTP instrumentation,
# the chat helpers, the framework adapters, the MCP gateway): make its event, record and decide
# it, fail closed, and settle an escalation with the monitor's approver.

INVALID_CALL = "policyc:invalid-call"
ADAPTER_FAILED = "policyc:adapter-failed"
DETAIL_LIMIT = 200  # characters of a malformed call's problem the denial shows


def tool_call_event(
    session: SessionLike,
    tool: str,
    args: Mapping[str, Any],
    deps: Sequence[str] | None,
    identifier: str | None = None,
    checked: bool = True,
) -> tuple[dict[str, Any] | None, Decision | None]:
    """The call's event (its id ``identifier``, or a fresh one), or (for arguments no event can
    hold, when ``checked``) the denial that refuses it without recording it
    (``policyc:invalid-call``; unchecked, the session refuses it: ``policyc:refused-event``)."""
    from policyc.stdlib.events import EventError, check_event

    event: dict[str, Any] = {"id": identifier or new_id("call", session), "kind": "tool_call", "tool": tool}
    try:
        event["args"] = dict(args)
    except Exception as error:
        return None, invalid_call(tool, f"the arguments are not an object ({type(error).__name__})")
    if deps is not None:
        # checked: the deps the session holds; unchecked: as given, for the session to judge
        event["deps"] = [d for d in dict.fromkeys(deps) if d in session.events] if checked else list(deps)
    if not checked:
        return event, None
    try:
        check_event(dict(event), session.events)
    except EventError as error:
        return None, invalid_call(tool, str(error))
    except Exception as error:
        return None, invalid_call(tool, f"{type(error).__name__}: {error}")
    return event, None


def invalid_call(tool: str, problem: str) -> Decision:
    """The denial of a call no event can hold (``policyc:invalid-call``)."""
    from .render import value as shown_value

    short = problem if len(problem) <= DETAIL_LIMIT else problem[:DETAIL_LIMIT] + "…"
    return refusal(
        INVALID_CALL,
        f"the call of {shown_value(tool)} cannot be decided ({short}), so it is refused",
        "Call the tool with JSON arguments.",
    )


def failed_call(tool: str, error: BaseException) -> Decision:
    """The denial of a call whose deciding raised (``policyc:adapter-failed``)."""
    from .render import value as shown_value

    return refusal(
        ADAPTER_FAILED,
        f"deciding the call of {shown_value(tool)} failed ({type(error).__name__}), so it is refused",
    )


def authorize_tool_call(
    session: SessionLike,
    tool: str,
    args: Mapping[str, Any],
    deps: Sequence[str] | None = None,
    identifier: str | None = None,
    checked: bool = True,
) -> tuple[Decision, str | None]:
    """Record a call of ``tool`` with ``args`` (depending on ``deps``, or on the whole history
    when ``None``) and decide it, an escalation left as it is (see :func:`settled`). The second
    value is the call's event id (``None`` when the call could not be recorded, and is
    refused). Any failure is a denial. ``checked``: a call no event can hold is refused here
    (the framework adapters, the chat helpers); otherwise the session refuses it (the guards,
    the HTTP instrumentation, the gateway), each front as its docs say."""
    event, refused = tool_call_event(session, tool, args, deps, identifier, checked)
    if event is None:
        return refused or invalid_call(tool, "no event"), None
    try:
        return session.authorize(event), event["id"]
    except Exception as error:  # fail closed: nothing undecided reaches the tool
        return failed_call(tool, error), event["id"] if event["id"] in session.events else None


def settled(session: SessionLike, tool: str, decision: Decision) -> Decision:
    """The final decision: an escalated one put to the monitor's approver, any other as it is."""
    if not decision.escalated:
        return decision
    from .approvers import settle

    try:
        return settle(session, decision)
    except Exception as error:
        return failed_call(tool, error)


async def settled_async(session: SessionLike, tool: str, decision: Decision) -> Decision:
    """:func:`settled` for async code: an async approver is awaited, a sync one runs in a
    thread of its own."""
    if not decision.escalated:
        return decision
    from .approvers import settle_async

    try:
        return await settle_async(session, decision)
    except Exception as error:
        return failed_call(tool, error)


def decide_tool_call(
    session: SessionLike,
    tool: str,
    args: Mapping[str, Any],
    deps: Sequence[str] | None = None,
    identifier: str | None = None,
    checked: bool = True,
) -> tuple[Decision, str | None]:
    """:func:`authorize_tool_call`, then :func:`settled`: the decision is final."""
    decision, call = authorize_tool_call(session, tool, args, deps, identifier, checked)
    return settled(session, tool, decision), call


async def decide_tool_call_async(
    session: SessionLike,
    tool: str,
    args: Mapping[str, Any],
    deps: Sequence[str] | None = None,
    identifier: str | None = None,
    checked: bool = True,
) -> tuple[Decision, str | None]:
    """:func:`decide_tool_call` for async code."""
    decision, call = authorize_tool_call(session, tool, args, deps, identifier, checked)
    return await settled_async(session, tool, decision), call


def result_text(value: Any) -> str:
    """A result as the text of its event: a string as it is, anything else as JSON if it can be."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        try:
            return str(value)
        except Exception:
            return f"<{type(value).__name__}>"


def error_text(error: BaseException) -> str:
    """What a tool that raised gives as its result: ``error: ExceptionType: message``."""
    try:
        message = str(error)
    except Exception:
        message = "<the message cannot be shown>"
    return f"error: {type(error).__name__}: {message}" if message else f"error: {type(error).__name__}"


def record_result(
    session: Session | None,
    call: str | None,
    tool: str,
    result: Any,
    labels: Sequence[str] = (),
    failed: bool = False,
) -> str | None:
    """Record ``result`` as the result of the call ``call`` of ``tool`` in the given (or
    ambient) session, labelled ``labels`` (and ``error`` when the tool ``failed``: its text
    is an exception's, which may carry what the agent sent); the result event's id (nothing,
    and None, without a session or a call)."""
    session = session or current_session.get()
    if session is None or call is None:
        return None
    identifier = new_id("result", session)
    event: dict[str, Any] = {
        "id": identifier,
        "kind": "tool_result",
        "of": call,
        "tool": tool,
        "text": result_text(result),
    }
    if labels or failed:
        event["labels"] = list(dict.fromkeys([*labels, *([ERROR_LABEL] if failed else [])]))
    session.record(event)
    return identifier
