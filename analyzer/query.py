"""Loading a policy for analysis, and questions about it written as Datalog.

Analyses need the policy's rules, not only its plan: a policy file is compiled as ``policyc
check`` compiles it; a bundle is compiled again from the sources it carries. A **query** is a
conjunction of literals over the policy's relations and functors, such as
``Deny(a), is_tool(a, "send_email")``; it becomes the rule ``PolicycQuery(a) :- ...`` added to
the policy (every variable of the query, in order of appearance, is an argument), checked like
any rule, so that a misspelt relation in a query is reported as in a policy.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from policyc.compiler import ast
from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.loader import Program
from policyc.compiler.parser import parse
from policyc.compiler.pipeline import compile_program
from policyc.compiler.source import SourceFile
from policyc.compiler.stages import Parsed, Stratified

QUERY = "PolicycQuery"
QUERY_FILE = "<query>"
PREFIX = f"{QUERY}(0) :- "  # what a query is parsed after; positions are reported without it


class AnalysisError(Exception):
    """A policy or question that cannot be analysed; ``diagnostics`` holds the reasons, if any."""

    def __init__(self, message: str, diagnostics: tuple[Diagnostic, ...] = ()) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


@dataclass(frozen=True)
class Loaded:
    """A policy's program and the diagnostics of loading it (before checks)."""

    program: Program
    diagnostics: tuple[Diagnostic, ...]
    path: str


def load(path: str) -> Loaded:
    """A policy file or a bundle, as a program. A bundle's program is read from the sources
    it carries, and refused unless they compile to the bundle's plan: the runtime runs the
    plan, so only then does an analysis of the sources say what runs."""
    from policyc.runtime.bundle import Bundle
    from policyc.runtime.errors import PolicyError
    from policyc.runtime.opener import open_path

    try:
        opened = open_path(path)  # a policy or a bundle
        if not isinstance(opened, Bundle):
            return Loaded(opened.program, opened.diagnostics, path)
        opened.compilation()  # checked against the plan and the manifest
    except PolicyError as error:
        raise AnalysisError(str(error)) from None
    program, found = opened.program()
    return Loaded(program, found, path)


def compile_loaded(loaded: Loaded, extra: tuple[ast.Module, ...] = ()) -> Parsed:
    program = loaded.program
    if extra:
        program = Program(
            program.modules + extra,
            program.roots | {m.path for m in extra},
            program.library,
        )
    return compile_program(program, list(loaded.diagnostics))


def errors_of(compilation: Parsed) -> tuple[Diagnostic, ...]:
    return tuple(d for d in compilation.diagnostics if d.is_error)


@dataclass(frozen=True)
class Query:
    text: str
    variables: tuple[str, ...]
    rule: ast.Rule
    module: ast.Module


def parse_query(text: str) -> Query:
    """A query's rule (:class:`AnalysisError` with the syntax errors if it does not parse)."""
    body = text.strip().rstrip(".")
    source = SourceFile(QUERY_FILE, f"{PREFIX}{body}.")
    module, diagnostics = parse(source)
    rules = [s for s in module.statements if isinstance(s, ast.Rule)]
    if diagnostics or len(rules) != 1:
        raise AnalysisError(
            f"the query `{text}` is not a conjunction of literals", tuple(map(in_query, diagnostics))
        )
    parsed = rules[0]
    names: list[str] = []
    for literal in parsed.body:
        for term in ast.literal_terms(literal):
            for inner in ast.walk_term(term, into_aggregates=False):
                if isinstance(inner, ast.Var) and inner.name not in names:
                    names.append(inner.name)
    head = ast.Atom(
        QUERY,
        tuple(ast.Var(n, span=parsed.head.span) for n in names),
        span=parsed.head.span,
        name_span=parsed.head.name_span,
    )
    rule = ast.Rule(head, parsed.body, span=parsed.span)
    return Query(text, tuple(names), rule, ast.Module(QUERY_FILE, (rule,), (), source))


def with_query(loaded: Loaded, text: str) -> tuple[Parsed, Query]:
    query = parse_query(text)
    if any(m.path == QUERY_FILE for m in loaded.program.modules):
        raise AnalysisError("a policy cannot be analysed with a query twice")
    if any(name == QUERY for name in _relation_names(loaded.program)):
        raise AnalysisError(f"the policy defines `{QUERY}`, the name queries use")
    compilation = compile_loaded(loaded, (query.module,))
    return compilation, query


def _relation_names(program: Program) -> set[str]:
    return {rule.head.name for _, rule in program.rules()}


def in_query(diagnostic: Diagnostic) -> Diagnostic:
    """A diagnostic with its position in the query as the user wrote it."""
    span = diagnostic.span
    if span.file != QUERY_FILE:
        return diagnostic
    n = len(PREFIX)
    shifted = span._replace(
        start=max(0, span.start - n),
        end=max(0, span.end - n),
        column=max(1, span.column - n),
        end_column=max(1, span.end_column - n),
    )
    return replace(diagnostic, span=shifted)


def ensure_clean(compilation: Parsed, what: str) -> Stratified:
    """The compilation, stratified and without errors; :class:`AnalysisError` otherwise."""
    errors = tuple(map(in_query, errors_of(compilation)))
    if errors:
        first = errors[0]
        where = f"{first.span.file}:{first.span.line}:{first.span.column}"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise AnalysisError(f"{what} has errors: {where}: {first.message} [{first.name}]{more}", errors)
    if not isinstance(compilation, Stratified):
        raise AnalysisError(f"{what} was compiled only up to {compilation.completed}")
    return compilation


def describe(value: Any) -> str:
    return repr(value) if not isinstance(value, str) else f'"{value}"'
