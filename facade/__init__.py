"""policyc: compile, check and enforce Datalog security policies for LLM agents.

The public API. Heavy parts are imported on first use, so ``import policyc`` is cheap.

>>> import policyc
>>> [d.name for d in policyc.check_source('@id("no-taint") @message("{a} is tainted")\\n'
...                                        "Deny(a) :- Send(a), Taint(a).\\n.input Send")]
['undefined-relation']
>>> policy = policyc.load(".input Send, Untrusted\\nDeny(a) :- Send(a), Untrusted(a).")
>>> policy.decide({"Send": [["e1"]], "Untrusted": [["e1"]]}, "e1").allowed
False
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .compiler.exports import exports
from .compiler.version import __version__

if TYPE_CHECKING:
    from .compiler.diagnostics import Diagnostic
    from .runtime.policy import Policy

__all__ = [
    "AuditLog",
    "ConsoleApprover",
    "EventRefused",
    "Monitor",
    "PolicyDenied",
    "__version__",
    "check",
    "check_source",
    "connect",
    "functor",
    "guard",
    "instrument_httpx",
    "instrument_requests",
    "load",
    "load_source",
    "tool_messages",
    "use_session",
]


def check(path: str) -> list[Diagnostic]:
    """Every diagnostic of a policy file, sorted by position (``SourceError`` if unreadable)."""
    from .compiler.pipeline import compile_file

    return list(compile_file(path).diagnostics)


def check_source(text: str, path: str = "<input>") -> list[Diagnostic]:
    """Every diagnostic of a policy given as text (includes are relative to ``path``)."""
    from .compiler.pipeline import check_source as run

    return run(text, path)


def load(policy: Any = None, functors: Any = None, **options: Any) -> Policy:
    """A :class:`~policyc.runtime.policy.Policy` from a source file, a bundle or source text.

    ``policy`` is a path (a ``Path``, or a string naming an existing file or ending in
    ``.dl``, ``.bundle`` or ``.json``) or else source text; ``source=TEXT`` (or
    :func:`load_source`) gives text explicitly. ``functors`` binds the functors the policy
    declares: a mapping ``{"name": callable}``, functions marked with :func:`functor`, or a
    module holding them. Options: ``verify_key`` (a bundle must carry a valid signature by
    this Ed25519 public key; refused with source text) and ``limits``.
    """
    from .runtime.opener import load as run

    return run(policy, functors, **options)


def load_source(text: str, functors: Any = None, **options: Any) -> Policy:
    """A :class:`~policyc.runtime.policy.Policy` from source text, never looked up as a file
    (options: ``limits``, and ``name``, the file name its diagnostics give)."""
    from .runtime.opener import load_source as run

    return run(text, functors, **options)


def functor(name: str | None = None) -> Any:
    """Mark a function as the implementation of the functor ``name`` (default: its name)."""
    from .runtime.functors import functor as mark

    return mark(name)


__getattr__ = exports(
    __name__,
    {
        "Monitor": ".runtime.session",
        "EventRefused": ".runtime.verdict",
        "AuditLog": ".runtime.audit",
        "ConsoleApprover": ".runtime.approvers",
        "guard": ".runtime.instrument",
        "use_session": ".runtime.instrument",
        "PolicyDenied": ".runtime.instrument",
        "instrument_httpx": ".runtime.instrument",
        "instrument_requests": ".runtime.instrument",
        "tool_messages": ".runtime.instrument",
        "connect": ".serve.client",
    },
)[1]  # the monitor API, imported on first use
