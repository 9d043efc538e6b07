"""The compiler pipeline, in one place.

=============  ==========================================================================
stage          what it does
=============  ==========================================================================
``parse``      read the file, parse it and everything it includes or imports
               (syntax errors stop the pipeline here: later stages need whole statements)
``resolve``    build the symbol table; check directives and names that clash
``check``      infer types; build the dependency graph; run every semantic check
``stratify``   order the relations into strata; report recursion through negation
=============  ==========================================================================

Every stage after ``parse`` runs even when an earlier one reported errors, so that one run
reports every problem; ``upto`` stops after a given stage (tests use it).

>>> result = compile_source("Deny(a) :- Send(a).\\n.input Send")
>>> result.ok, [s.relations for s in result.strata.strata]
(True, [('Send',), ('Deny',), ('Allow',)])
"""

from __future__ import annotations

from dataclasses import dataclass

from .checks import run_checks
from .checks.types import infer
from .depgraph import DependencyGraph, build
from .diagnostics import Diagnostic, has_errors, sort_diagnostics
from .loader import Program, load_file, load_source
from .stratify import Strata, stratify
from .symbols import Symbols, resolve

STAGES = ("parse", "resolve", "check", "stratify")


@dataclass(frozen=True)
class Compilation:
    program: Program
    symbols: Symbols | None = None
    graph: DependencyGraph | None = None
    strata: Strata | None = None
    types: dict[str, tuple[str | None, ...]] | None = None  # attribute types of every relation
    diagnostics: tuple[Diagnostic, ...] = ()
    completed: str = "parse"

    @property
    def ok(self) -> bool:
        return not has_errors(self.diagnostics)


def compile_program(program: Program, diagnostics: list[Diagnostic], upto: str = "stratify") -> Compilation:
    if upto not in STAGES:
        raise ValueError(f"unknown stage {upto!r}; the stages are {', '.join(STAGES)}")
    stop = STAGES.index(upto)
    found = list(diagnostics)

    def done(stage: str, **parts: object) -> Compilation:
        return Compilation(program, diagnostics=tuple(sort_diagnostics(found)), completed=stage, **parts)

    if has_errors(found) or stop == 0:
        return done("parse")
    symbols, problems = resolve(program)
    found.extend(problems)
    if stop == 1:
        return done("resolve", symbols=symbols)
    types, problems = infer(program, symbols)
    found.extend(problems)
    graph = build(program, symbols)
    found.extend(run_checks(program, symbols, graph))
    if stop == 2:
        return done("check", symbols=symbols, graph=graph, types=types)
    strata, problems = stratify(graph, symbols)
    found.extend(problems)
    return done("stratify", symbols=symbols, graph=graph, strata=strata, types=types)


def compile_file(path: str, upto: str = "stratify") -> Compilation:
    """Compile a policy file (:class:`~policyc.compiler.loader.SourceError` if unreadable)."""
    program, diagnostics = load_file(path)
    return compile_program(program, diagnostics, upto)


def compile_source(text: str, path: str = "<input>", upto: str = "stratify") -> Compilation:
    program, diagnostics = load_source(text, path)
    return compile_program(program, diagnostics, upto)


def check_source(text: str, path: str = "<input>") -> list[Diagnostic]:
    """Every diagnostic of a policy given as text, sorted."""
    return list(compile_source(text, path).diagnostics)
