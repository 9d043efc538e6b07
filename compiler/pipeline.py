"""The compiler pipeline, in one place.

=============  ==========================================================================
stage          what it does
=============  ==========================================================================
``parse``      read the file, parse it and everything it includes or imports
               (syntax errors stop the pipeline here: later stages need whole statements)
``resolve``    build the symbol table; check directives and names that clash
``check``      infer types; build the dependency graph; run every semantic check
``stratify``   order the relations into strata; report recursion through negation
``plan``       plan the evaluation (only a policy without errors: the others stop before)
=============  ==========================================================================

Each stage is a function from the previous stage's result to its own
(:mod:`policyc.compiler.stages` says what each adds); :func:`compile_program` runs them in
order and returns the result of the last stage reached. Every stage after ``parse`` up to
``stratify`` runs even when an earlier one reported errors, so that one run reports every
problem; ``upto`` stops after a given stage (tests use it, and the default leaves planning
to those who evaluate).

>>> result = compile_source("Deny(a) :- Send(a).\\n.input Send")
>>> result.ok, [s.relations for s in result.strata.strata]
(True, [('Send',), ('Deny',), ('Allow',)])
>>> [r.name for r in plan(result).plan.relations]
['Send', 'Deny', 'Allow']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from . import ast, depgraph
from . import stratify as stratification
from . import symbols as symbol_table
from .checks import run_checks
from .checks.types import infer_program
from .diagnostics import Diagnostic, sort_diagnostics
from .inlining import materialized
from .loader import Program, load_file, load_source
from .magic import Options
from .stages import Checked, Parsed, Planned, Resolved, Stratified
from .witnesses import grounded

STAGES = ("parse", "resolve", "check", "stratify", "plan")


def _with(earlier: tuple[Diagnostic, ...], found: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    return tuple(sort_diagnostics([*earlier, *found]))


def parse(program: Program, diagnostics: Iterable[Diagnostic]) -> Parsed:
    """The ``parse`` stage's result, from what the loader read and reported."""
    return Parsed(program, _with((), diagnostics))


def resolve(parsed: Parsed) -> Resolved:
    """The symbol table, and the clashes and bad directives found building it."""
    table, problems = symbol_table.resolve(parsed.program)
    table = materialized(parsed.program, table)
    return Resolved(parsed.program, _with(parsed.diagnostics, problems), table)


def check(resolved: Resolved) -> Checked:
    """Types inferred, the dependency graph, and every semantic check's findings."""
    program, table = resolved.program, resolved.symbols
    program = grounded(program, table)  # the witnesses of `min` and `max`, as Soufflé grounds them
    types, problems, program = infer_program(program, table)
    program = _without_casts(program)
    graph = depgraph.build(program, table)
    found = _with(resolved.diagnostics, [*problems, *run_checks(program, table, graph)])
    return Checked(program, found, table, types, graph)


def _without_casts(program: Program) -> Program:
    """The program with each ``as(x, T)`` replaced by ``x``, once types are checked: every
    later stage (checks, planner, analyzer) sees the values, not the conversions."""
    if not any(_rule_has_cast(rule) for _, rule in program.rules()):
        return program
    modules = []
    for module in program.modules:
        statements = tuple(
            ast.map_rule(s, ast.without_casts) if isinstance(s, ast.Rule) and _rule_has_cast(s) else s
            for s in module.statements
        )
        modules.append(dataclasses.replace(module, statements=statements))
    return dataclasses.replace(program, modules=tuple(modules))


def _rule_has_cast(rule: ast.Rule) -> bool:
    terms = [*rule.head.args, *(t for lit in rule.body for t in ast.literal_terms(lit))]
    return any(ast.has_cast(t) for t in terms)


def stratify(checked: Checked) -> Stratified:
    """The relations in strata, and the recursion through negation found ordering them."""
    strata, problems = stratification.stratify(checked.graph, checked.symbols)
    found = _with(checked.diagnostics, problems)
    return Stratified(checked.program, found, checked.symbols, checked.types, checked.graph, strata)


def plan(stratified: Stratified, magic: Options | None = None) -> Planned:
    """The ``plan`` stage (itself if it is planned already, unless ``magic`` asks for other
    demand-driven relations than by default: see :mod:`.magic`);
    :class:`~policyc.compiler.planner.PlanningError` for a policy with errors."""
    if isinstance(stratified, Planned) and magic is None:
        return stratified
    from . import planner  # only those who evaluate plan: `check` does not import it

    program, found, table = stratified.program, stratified.diagnostics, stratified.symbols
    evaluation = planner.build_plan(stratified, magic or Options())
    return Planned(program, found, table, stratified.types, stratified.graph, stratified.strata, evaluation)


def compile_program(program: Program, diagnostics: Iterable[Diagnostic], upto: str = "stratify") -> Parsed:
    """Run the stages up to ``upto`` (or the last one reached: see :mod:`.stages`)."""
    if upto not in STAGES:
        raise ValueError(f"unknown stage {upto!r}; the stages are {', '.join(STAGES)}")
    stop = STAGES.index(upto)
    parsed = parse(program, diagnostics)
    if not parsed.ok or stop == 0:
        return parsed
    resolved = resolve(parsed)
    if stop == 1:
        return resolved
    checked = check(resolved)
    if stop == 2:
        return checked
    stratified = stratify(checked)
    if stop == 3 or not stratified.ok:
        return stratified
    return plan(stratified)


def compile_file(path: str, upto: str = "stratify") -> Parsed:
    """Compile a policy file (:class:`~policyc.compiler.loader.SourceError` if unreadable)."""
    program, diagnostics = load_file(path)
    return compile_program(program, diagnostics, upto)


def compile_source(text: str, path: str = "<input>", upto: str = "stratify") -> Parsed:
    program, diagnostics = load_source(text, path)
    return compile_program(program, diagnostics, upto)


def check_source(text: str, path: str = "<input>") -> list[Diagnostic]:
    """Every diagnostic of a policy given as text, sorted."""
    return list(compile_source(text, path).diagnostics)
