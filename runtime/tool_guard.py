"""Guarded tool functions: :func:`guard` wraps a Python function so that each call is recorded
as a tool-call event in the ambient (or given) session, decided, and either run (its result, or
the exception it raised, recorded as a tool-result event) or refused with the decision's
feedback (raised as :class:`~.context.PolicyDenied`, or returned as text). Without a session,
a guarded call is refused (complete mediation) unless the guard was told otherwise.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any

from .context import PolicyDenied, authorize_call, authorize_call_async, error_text, record_result, refusal
from .render import value as shown_value
from .session import Session
from .verdict import Decision

AMBIGUOUS = "policyc:ambiguous-arguments"


def call_arguments(
    signature: inspect.Signature, args: tuple, kwargs: dict
) -> tuple[dict[str, Any], str | None]:
    """The arguments of a call as recorded: each parameter by name (defaults applied), a
    ``*args`` parameter under its own name as a list, and the keys of a ``**kwargs`` parameter
    among the others; a method's ``self`` or ``cls`` is not an argument. Values Python gives
    that JSON spells otherwise become JSON values: a path its text, bytes their UTF-8 text, a
    tuple or a set a list (a set in a fixed order); anything else that is no JSON value makes
    the event malformed, which the session refuses. The second value is a key given both ways
    (``None`` if none)."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    out: dict[str, Any] = {}
    extra: Mapping[str, Any] = {}
    first = next(iter(signature.parameters), None)
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if name == first and name in ("self", "cls") and kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            continue
        if kind is inspect.Parameter.VAR_KEYWORD:
            extra = value
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = [_as_json(v) for v in value]
        else:
            out[name] = _as_json(value)
    for key, value in extra.items():
        if key in out:
            return out, key
        out[key] = _as_json(value)
    return out, None


def _as_json(value: Any, depth: int = 0) -> Any:
    """A Python value as the JSON value it stands for (see :func:`call_arguments`)."""
    if depth > 64:  # deeper than an event allows: left for the event check to refuse
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value) if isinstance(os.fspath(value), str) else value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, tuple | list):
        return [_as_json(v, depth + 1) for v in value]
    if isinstance(value, set | frozenset):
        return [_as_json(v, depth + 1) for v in sorted(value, key=repr)]
    if isinstance(value, dict):
        return {k: _as_json(v, depth + 1) for k, v in value.items()}
    return value


def guard(
    fn: Callable[..., Any] | None = None,
    *,
    tool: str | None = None,
    session: Session | None = None,
    on_deny: str = "raise",
    result_labels: tuple[str, ...] | list[str] = (),
    allow_outside_session: bool = False,
) -> Any:
    """Decorate a tool function so that the policy decides every call before it runs.

    ``tool`` names the tool (default: the function's name); ``on_deny="raise"`` raises
    :class:`PolicyDenied`, ``on_deny="return"`` returns the feedback text instead of running;
    ``result_labels`` label what the tool returns, or the exception it raises
    (``["untrusted"]`` for a web fetch). A call the policy escalates runs only once the
    monitor's approver approves it (an async tool awaits an async approver).
    """
    if on_deny not in ("raise", "return"):
        raise ValueError("on_deny is 'raise' or 'return'")

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        name = tool or function.__name__
        signature = inspect.signature(function)
        labels = tuple(result_labels)

        def arguments_of(args: tuple, kwargs: dict) -> tuple[dict[str, Any], Decision | None]:
            arguments, twice = call_arguments(signature, args, kwargs)
            if twice is not None:
                return arguments, refusal(
                    AMBIGUOUS,
                    f"argument {shown_value(twice)} of {name} is given twice, as a parameter and "
                    "as a keyword argument, so the call is refused",
                    "Pass each argument once.",
                )
            return arguments, None

        def decide(args: tuple, kwargs: dict) -> tuple[Decision, str | None]:
            arguments, ambiguous = arguments_of(args, kwargs)
            if ambiguous is not None:
                return ambiguous, None
            return authorize_call(name, arguments, session, allow_outside_session)

        async def decide_async(args: tuple, kwargs: dict) -> tuple[Decision, str | None]:
            arguments, ambiguous = arguments_of(args, kwargs)
            if ambiguous is not None:
                return ambiguous, None
            return await authorize_call_async(name, arguments, session, allow_outside_session)

        def refused(decision: Decision) -> Any:
            if on_deny == "return":
                return decision.feedback
            raise PolicyDenied(decision)

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                decision, call = await decide_async(args, kwargs)
                if not decision.allowed:
                    return refused(decision)
                try:
                    result = await function(*args, **kwargs)
                except BaseException as error:
                    record_result(session, call, name, error_text(error), labels, failed=True)
                    raise
                record_result(session, call, name, result, labels)
                return result

            return run_async

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            decision, call = decide(args, kwargs)
            if not decision.allowed:
                return refused(decision)
            try:
                result = function(*args, **kwargs)
            except BaseException as error:
                record_result(session, call, name, error_text(error), labels, failed=True)
                raise
            record_result(session, call, name, result, labels)
            return result

        return run

    return wrap(fn) if fn is not None else wrap
