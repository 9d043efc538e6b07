"""policyc: compile, check and enforce Datalog security policies for LLM agents.

The public API. The compiler is imported on first use, so ``import policyc`` is cheap.

>>> import policyc
>>> [d.name for d in policyc.check_source("Deny(a) :- Send(a), Taint(a).\\n.input Send")]
['undefined-relation']
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .compiler.diagnostics import Diagnostic

__all__ = ["__version__", "check", "check_source"]


def check(path: str) -> list[Diagnostic]:
    """Every diagnostic of a policy file, sorted by position (``SourceError`` if unreadable)."""
    from .compiler.pipeline import compile_file

    return list(compile_file(path).diagnostics)


def check_source(text: str, path: str = "<input>") -> list[Diagnostic]:
    """Every diagnostic of a policy given as text (includes are relative to ``path``)."""
    from .compiler.pipeline import check_source as run

    return run(text, path)
