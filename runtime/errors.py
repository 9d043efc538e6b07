"""What the runtime refuses with, below every other module of it: a policy that cannot be
loaded (:class:`PolicyError`), a problem an evaluation met (:class:`EvalError`, which makes
the decisions that need it denials), and the rule ids the monitor's own refusals carry.

>>> EvalError("functor", "functor `f` raised ValueError")
EvalError(kind='functor', message='functor `f` raised ValueError')
>>> causes([EvalError("rule", "a"), EvalError("rule", "b"), EvalError("rule", "a")])
'a; b'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyc.compiler.diagnostics import Diagnostic

# the rule id of a call refused for arguments that break their declarations (runtime/arguments.py)
INVALID_ARGUMENT = "policyc:invalid-argument"


class PolicyError(Exception):
    """A policy that cannot be loaded: compile errors, an unreadable or invalid bundle."""

    def __init__(
        self, message: str, diagnostics: tuple[Diagnostic, ...] = (), code: str | None = None
    ) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics
        self.code = code  # a stable code for some refusals (``missing-extension``, ``unreadable``)


@dataclass(frozen=True)
class EvalError:
    """A problem an evaluation met: every decision on it is a denial naming the problem."""

    kind: str  # functor | arithmetic | rule | limit | facts
    message: str


def causes(errors: Iterable[EvalError]) -> str:
    """What went wrong, each message once, in order."""
    return "; ".join(dict.fromkeys(e.message for e in errors))
