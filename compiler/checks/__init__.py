"""Semantic checks: one per module, each a function from a :class:`Context` to diagnostics.

Every check runs on every program that parsed, whatever the others found, and tolerates
what they report (an undefined relation has no types; a call with the wrong number of
arguments is not type-checked), so that one pass shows every problem of a file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .. import ast
from ..depgraph import DependencyGraph
from ..diagnostics import Diagnostic
from ..loader import Program
from ..source import Span
from ..symbols import Symbols

__all__ = ["Check", "Context", "all_checks", "run_checks"]


@dataclass(frozen=True)
class Context:
    """What every check reads: the program, its symbols and its dependency graph."""

    program: Program
    symbols: Symbols
    graph: DependencyGraph

    def text(self, span: Span) -> str:
        source = self.program.source(span.file)
        return source.text[span.start : span.end] if source else ""

    def user_rules(self) -> Iterator[tuple[ast.Module, ast.Rule]]:
        """Rules of the files the user wrote (not the shipped library)."""
        for module, rule in self.program.rules():
            if not self.program.is_library(module.path):
                yield module, rule


Check = Callable[[Context], list[Diagnostic]]


def all_checks() -> tuple[Check, ...]:
    """The checks, in the order their findings are most useful to read."""
    from . import (
        arity,
        builtin_calls,
        duplicates,
        empty,
        evaluation_order,
        generators,
        ignored_options,
        keys,
        rule_annotations,
        safety,
        singletons,
        subsumption,
        undefined,
        unused,
        verdict_annotations,
    )

    # type inference runs in the pipeline itself: later stages need the types it finds
    return (
        undefined.check,
        arity.check,
        generators.check,
        safety.check,
        builtin_calls.check,
        evaluation_order.check,
        rule_annotations.check,
        verdict_annotations.check,
        singletons.check,
        duplicates.check,
        unused.check,
        empty.check,
        ignored_options.check,
        keys.check,
        subsumption.check,
    )


def run_checks(program: Program, symbols: Symbols, graph: DependencyGraph) -> list[Diagnostic]:
    context = Context(program, symbols, graph)
    diagnostics: list[Diagnostic] = []
    for check in all_checks():
        diagnostics.extend(check(context))
    return diagnostics
