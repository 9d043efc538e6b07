"""What each stage of the compiler pipeline produces, one type per stage.

Each stage's result has every field of the stage before it, and its own fields are never
``None``: a function that needs the strata takes a :class:`Stratified`, one that needs the
plan a :class:`Planned`, and its signature says so.

==============  =============================================================  ==============
type            adds                                                           stage
==============  =============================================================  ==============
``Parsed``      ``program`` (every module read), ``diagnostics`` (sorted)      ``parse``
``Resolved``    ``symbols``: the symbol table                                  ``resolve``
``Checked``     ``types`` of every relation's attributes, the dependency       ``check``
                ``graph``
``Stratified``  ``strata``: the relations in evaluation order                  ``stratify``
``Planned``     ``plan``: what the runtime evaluates                           ``plan``
==============  =============================================================  ==============

A stage's result is a subclass of the one before (a ``Planned`` is a ``Stratified``), so the
pipeline returns the result of the last stage it reached, typed as a :class:`Parsed`; which
stage that was is its class (``completed`` names it), and ``isinstance`` narrows it. A result can stop early for two
reasons only: ``upto`` asked for an earlier stage, or errors: syntax errors stop after
``parse`` (a ``Parsed`` that is no ``Resolved``), and a policy with errors is not planned (a
``Stratified`` that is no ``Planned``, with ``ok`` false). Errors of ``resolve`` and
``check`` do not stop the later stages, so that one run reports every problem.

>>> from policyc.compiler.pipeline import compile_source
>>> broken = compile_source("Deny(a) :- Send(a)")
>>> type(broken).__name__, broken.ok
('Parsed', False)
>>> result = compile_source("Deny(a) :- Send(a).\\n.input Send", upto="plan")
>>> type(result).__name__, result.completed, isinstance(result, Stratified)
('Planned', 'plan', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .diagnostics import Diagnostic, has_errors

if TYPE_CHECKING:  # the types of the fields only: the runtime imports this module, cheaply
    from .depgraph import DependencyGraph
    from .loader import Program
    from .plan import Plan
    from .stratify import Strata
    from .symbols import Symbols


@dataclass(frozen=True)
class Parsed:
    """A program read and parsed, with everything it includes or imports."""

    completed: ClassVar[str] = "parse"  # the name of the stage this is the result of

    program: Program
    diagnostics: tuple[Diagnostic, ...]  # sorted, of every stage so far

    @property
    def ok(self) -> bool:
        """No stage so far reported an error."""
        return not has_errors(self.diagnostics)


@dataclass(frozen=True)
class Resolved(Parsed):
    """A parsed program with its symbol table."""

    completed: ClassVar[str] = "resolve"

    symbols: Symbols


@dataclass(frozen=True)
class Checked(Resolved):
    """A resolved program whose types are inferred and whose semantic checks have run."""

    completed: ClassVar[str] = "check"

    types: dict[str, tuple[str | None, ...]]  # the attribute types of every relation
    graph: DependencyGraph


@dataclass(frozen=True)
class Stratified(Checked):
    """A checked program with its relations ordered into strata."""

    completed: ClassVar[str] = "stratify"

    strata: Strata


@dataclass(frozen=True)
class Planned(Stratified):
    """A stratified program without errors, and its evaluation plan."""

    completed: ClassVar[str] = "plan"

    plan: Plan
