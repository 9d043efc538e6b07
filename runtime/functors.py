"""Binding the functors a policy declares to Python callables.

A host provides implementations as a mapping ``{"name": callable}``, as functions marked with
:func:`functor`, or as a module holding such functions; the builtins are always bound. A
declared functor without an implementation is an error when the policy is loaded, naming the
functor (:class:`MissingFunctors`).

During an evaluation every functor is called through a wrapper that caches its results (a
functor is deterministic, so each distinct argument tuple is computed once), checks the type
of what it returns against the declaration, and turns an exception into a failed literal and
an error of the evaluation (which then fails closed). A functor may return ``None`` to say it
has no value for those arguments: the literal fails, without an error.

A functor runs on the evaluating thread, and Python cannot stop a function safely while it
runs: functors must be bounded. A call that returns after the time limit of the evaluation
(or session call) it serves does not count, whatever it returned: the wrapper raises
:class:`~policyc.runtime.limits.LimitExceeded`, the evaluation stops and every decision on it
is a denial naming the functor. The builtins are bounded (see :mod:`policyc.stdlib.builtins`).
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from policyc.compiler.plan import FunctorSpec, Plan
from policyc.stdlib.builtins import PER_EVALUATION, builtins_for
from policyc.stdlib.events import SESSION_FUNCTORS

from .codegen import FAIL
from .errors import EvalError
from .limits import LimitExceeded, window

MARK = "__policyc_functor__"

Functors = Mapping[str, Callable[..., Any]] | Iterable[Callable[..., Any]] | types.ModuleType | None


def functor(name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as the implementation of the functor ``name`` (default: its own name).

    >>> @functor("is_tool")
    ... def is_tool(action, name): return action.startswith(name + ":")
    >>> collect([is_tool])["is_tool"]("send_email:1", "send_email")
    True
    """

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(fn, MARK, name or fn.__name__)
        return fn

    return mark


class MissingFunctors(LookupError):
    """The policy declares functors that no implementation was given for."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        listed = ", ".join(f"`{n}`" for n in names)
        super().__init__(
            f"the policy needs an implementation of {listed}; pass it to `policyc.load(..., functors=...)` "
            "or `--functors MODULE`"
        )


def collect(source: Functors) -> dict[str, Callable[..., Any]]:
    """Implementations by functor name, from a mapping, marked functions or a module."""
    if source is None:
        return {}
    if isinstance(source, Mapping):
        found = {}
        for name, fn in source.items():
            if not callable(fn):
                raise TypeError(f"the implementation of functor `{name}` is not callable")
            found[name] = fn
        return found
    items: Iterable[Any] = vars(source).values() if isinstance(source, types.ModuleType) else source
    found = {}
    for fn in items:
        name = getattr(fn, MARK, None)
        if name is not None:
            found[name] = fn
        elif not isinstance(source, types.ModuleType):
            raise TypeError(f"{fn!r} is not marked with @policyc.functor")
    return found


def bind(plan: Plan, provided: Functors) -> list[Callable[..., Any]]:
    """One implementation per functor of the plan, in the plan's order. The event functors
    (``is_tool``, ``tool_arg``, ...) need not be given: a monitor session answers them from
    its events, and outside a session they fail (closed) with a message saying so.

    The builtins are a policy's when the plan has verdict rules (``to_number`` reads a text
    whole, as JSON), else Soufflé's (:func:`policyc.stdlib.builtins.builtins_for`): the choice
    follows from the plan, so a bundle binds what its source does. A given implementation
    replaces a builtin of its name."""
    given = collect(provided)
    builtins = builtins_for(plan.has_verdict_rules)
    bound = []
    missing = []
    for spec in plan.functors:
        fn = given.get(spec.name) or builtins.get(spec.name)
        if fn is None and spec.name in SESSION_FUNCTORS:
            fn = _outside_session(spec.name)
        if fn is None:
            missing.append(spec.name)
        bound.append(fn)
    if missing:
        raise MissingFunctors(missing)
    return bound  # type: ignore[return-value]


def _outside_session(name: str) -> Callable[..., Any]:
    def unavailable(*args: Any) -> Any:
        raise LookupError(f"`{name}` is answered from the events of a monitor session (policyc.Monitor)")

    unavailable.__dict__["__policyc_session__"] = name
    return unavailable


def is_session_placeholder(fn: Callable[..., Any]) -> bool:
    return hasattr(fn, "__policyc_session__")


monotonic = time.monotonic
_PYTHON_TYPES = {"symbol": (str,), "number": (int,), "unsigned": (int,), "float": (float, int)}


def wrap(spec: FunctorSpec, fn: Callable[..., Any], errors: list, state: Any = None) -> Callable[..., Any]:
    """The function generated code calls: cached, type-checked, raising only
    :class:`LimitExceeded` (when the call returned after the time limit). A builtin whose
    value depends on the evaluation (Soufflé's ``autoinc()``, ``recursive_iteration_cnt()``)
    is made for ``state`` (the evaluation) and not cached: each call has its own value."""

    cache: dict[tuple, Any] = {}
    returns = spec.returns
    per_evaluation = getattr(fn, PER_EVALUATION, None)
    if per_evaluation is not None:
        fn = per_evaluation(state)
    cached = per_evaluation is None

    def fail(message: str) -> Any:
        errors.append(EvalError("functor", f"functor `{spec.name}` {message}"))
        return FAIL

    def check(value: Any) -> Any:
        if returns == "bool":
            if value is None:
                return False
            if not isinstance(value, bool):
                return fail(f"returned {type(value).__name__} where a bool is declared")
            return value
        if value is None:
            return FAIL  # no value for these arguments: the literal fails, without an error
        if isinstance(value, bool):
            return fail("returned a bool where a value is declared")
        if returns == "any":
            if isinstance(value, str | int | float):
                return value
            return fail(f"returned {type(value).__name__}, which is not a policy value")
        if not isinstance(value, _PYTHON_TYPES[returns]):
            return fail(f"returned {type(value).__name__} where `{returns}` is declared")
        if returns == "unsigned" and isinstance(value, int) and value < 0:
            return fail(f"returned {value} where `unsigned` is declared")
        return float(value) if returns == "float" and isinstance(value, int | float) else value

    def call(*args: Any) -> Any:
        if cached:
            try:
                return cache[args]
            except KeyError:
                pass
        recorded = len(errors)
        meter = window()
        try:
            value = check(fn(*args))
        except Exception as error:  # the host's code: any failure fails the literal, closed
            value = fail(f"raised {type(error).__name__}: {error}")
        if meter is not None and meter.deadline is not None and monotonic() > meter.deadline:
            raise LimitExceeded(meter.late(spec.name))  # late: what it returned does not count
        if cached and len(errors) == recorded:  # a failure is not cached: asked again, it is reported again
            cache[args] = value
        return value

    return call


def load_module(spec: str) -> Any:
    """A module of functor implementations, by dotted name or ``.py`` file path
    (``ImportError`` when it cannot be loaded, whatever the reason)."""
    import importlib
    import importlib.util
    import os
    from pathlib import Path

    try:
        if spec.endswith(".py") or os.path.sep in spec:
            path = Path(spec)
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            if module_spec is None or module_spec.loader is None:
                raise ImportError("not a Python module")
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            return module
        return importlib.import_module(spec)
    except ImportError:
        raise
    except (OSError, SyntaxError) as error:
        raise ImportError(str(error)) from None
