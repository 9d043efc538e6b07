"""The verdicts' names: which relations are verdicts (``Allow``, ``Deny``, a unary
``Escalate``), and whether a program has verdict rules (is a policy). Below the symbol table
and the plan, which both ask."""

from __future__ import annotations

from collections.abc import Iterable

VERDICTS = ("Allow", "Deny")  # the verdicts every policy has: unary outputs
ESCALATE = "Escalate"  # the third verdict, where a policy has it unary


def is_verdict(name: str, arity: int | None) -> bool:
    """Whether a relation of this name and arity is a verdict (``Allow``, ``Deny``, or a
    unary ``Escalate``)."""
    return name in VERDICTS or (name == ESCALATE and arity == 1)


def has_verdict_rules(heads: Iterable[tuple[str, int | None]]) -> bool:
    """Whether a program whose rules and facts have these heads (name, arity) has verdict
    rules: whether it is a policy, which reads numbers in agent text whole, rather than a
    Soufflé program (docs/language.md, "Numbers in text").

    >>> has_verdict_rules([("Reach", 2), ("Escalate", 2)]), has_verdict_rules([("Deny", 1)])
    (False, True)
    """
    return any(is_verdict(name, arity) for name, arity in heads)
