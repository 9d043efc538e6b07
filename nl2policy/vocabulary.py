"""The vocabulary a translation is written against: the deployment's assumptions.

A vocabulary is made of library modules (``events``, ``tools``, ...; see docs/stdlib.md) and
policy files. Of a policy file, everything but its decisions is vocabulary: declarations,
inputs, functors and the rules of its helper relations (say ``GaveCoveredReason(a)``), with
their comments; its ``Deny`` and ``Allow`` rules are left out, since the translation writes
those. The vocabulary's text opens the translated policy, which is therefore self-contained
(an ``.include`` of the file is rewritten relative to the output).

The translator sees every relation and functor with its signature, whether facts come from the
deployment (``input``) or from rules (shown), and its doc comment: the ``//`` lines right above
its declaration.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from policyc.compiler import ast
from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.loader import PRELUDE, Program, decode, library_modules, load_source
from policyc.compiler.pipeline import compile_program
from policyc.compiler.source import SourceFile
from policyc.compiler.stages import Stratified

DECISIONS = ("Allow", "Deny")
MAX_RULES_SHOWN = 12


class VocabularyError(Exception):
    """A vocabulary that cannot be used; ``status`` is the exit status (2: unreadable)."""

    def __init__(self, message: str, diagnostics: tuple[Diagnostic, ...] = (), status: int = 1) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics
        self.status = status


@dataclass(frozen=True)
class Entry:
    """A relation or functor of the vocabulary, as the translator sees it."""

    name: str
    kind: str  # "input", "derived", "functor" or "builtin"
    signature: str
    doc: str
    rules: tuple[str, ...] = ()  # the vocabulary's rules and facts of a derived relation
    more_rules: int = 0  # rules not shown


@dataclass(frozen=True)
class Vocabulary:
    sources: tuple[str, ...]
    text: str  # what opens the translated policy
    entries: tuple[Entry, ...]
    relations: frozenset[str]  # every relation the vocabulary declares, defines or reads
    inputs: frozenset[str]
    derived: frozenset[str]
    functors: frozenset[str]
    default: str  # "allow" or "deny"
    sources_text: dict[str, SourceFile]  # the files of the vocabulary, for rendering diagnostics

    def render(self) -> str:
        """The vocabulary as the translator and the back-translator see it."""
        verdict = (
            "allow: an action is allowed unless a `Deny` rule derives `Deny(a)` for it"
            if self.default == "allow"
            else "deny: an action is allowed only when an `Allow` rule derives `Allow(a)` for it "
            "and no `Deny` rule derives `Deny(a)`"
        )
        lines = [f"Default verdict: {verdict}.", "", "Relations:"]
        for entry in self.entries:
            if entry.kind in ("input", "derived"):
                lines.append(_entry_line(entry))
                lines.extend(f"      {rule}" for rule in entry.rules)
                if entry.more_rules:
                    lines.append(f"      ... and {entry.more_rules} more")
        functors = [e for e in self.entries if e.kind == "functor"]
        if functors:
            lines += ["", "Functors of the deployment:"]
            lines.extend(_entry_line(e) for e in functors)
        lines += ["", "Builtin functors (every policy may call them):"]
        lines.extend(_entry_line(e) for e in self.entries if e.kind == "builtin")
        return "\n".join(lines)

    def doc(self, name: str) -> str:
        return next((e.doc for e in self.entries if e.name == name), "")


def _entry_line(entry: Entry) -> str:
    kind = {"input": " — input", "derived": " — derived:" if entry.rules else " — derived"}.get(
        entry.kind, ""
    )
    doc = f" — {entry.doc}" if entry.doc else ""
    if entry.kind == "derived" and entry.rules:
        return f"- `{entry.signature}`{doc}{kind}"
    return f"- `{entry.signature}`{kind}{doc}"


def load_vocabulary(specs: list[str], output: str) -> Vocabulary:
    """The vocabulary of library modules and policy files, for a policy written to ``output``."""
    parts: list[str] = []
    modules = library_modules()
    for spec in specs or ["events"]:
        if os.path.isfile(spec) or spec.endswith(".dl") or os.sep in spec:
            parts.append(_from_file(spec, output))
        elif spec in modules:
            parts.append(f".import {spec}")
        else:
            available = ", ".join(modules)
            raise VocabularyError(
                f"unknown vocabulary `{spec}`: it is neither a policy file nor a library module ({available})",
                status=2,
            )
    text = "\n\n".join(parts) + "\n"
    program, found = load_source(text, output)
    compilation = compile_program(program, found)
    errors = tuple(d for d in compilation.diagnostics if d.is_error)
    if errors:
        first = errors[0]
        raise VocabularyError(
            f"the vocabulary has errors: {first.span.file}:{first.span.line}:{first.span.column}: "
            f"{first.message} [{first.name}]",
            errors,
        )
    return _describe(tuple(specs or ["events"]), text, compilation)


def _from_file(spec: str, output: str) -> str:
    from policyc.compiler.files import POLICY_LIMIT, read_bytes

    try:
        data = read_bytes(spec, POLICY_LIMIT)
    except OSError as error:
        raise VocabularyError(f"cannot read `{spec}`: {error.strerror or error}", status=2) from None
    source = decode(spec, data)
    if isinstance(source, Diagnostic):
        raise VocabularyError(f"`{spec}`: {source.message}", (source,))
    from policyc.compiler.parser import parse

    module, diagnostics = parse(source)
    errors = tuple(d for d in diagnostics if d.is_error)
    if errors:
        raise VocabularyError(f"the vocabulary `{spec}` does not parse: {errors[0].message}", errors)
    edits: list[tuple[int, int, str]] = []
    for statement in module.statements:
        if isinstance(statement, ast.Rule) and statement.head.name in DECISIONS:
            edits.append((statement.span.start, statement.span.end, ""))
        elif isinstance(statement, ast.Include):
            target = os.path.normpath(os.path.join(os.path.dirname(spec), statement.path.value))
            moved = os.path.relpath(target, os.path.dirname(os.path.abspath(output)) or ".")
            quoted = '"' + moved.replace("\\", "\\\\").replace('"', '\\"') + '"'
            edits.append((statement.path.span.start, statement.path.span.end, quoted))
    text = source.text
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    while lines and (not lines[-1] or lines[-1].lstrip().startswith("//")):
        lines.pop()  # the headings of the sections whose rules were left out
    kept: list[str] = []
    for line in lines:
        if not line and kept and not kept[-1]:
            continue
        kept.append(line)
    header = f"// ---- vocabulary: {os.path.basename(spec)} (its Deny and Allow rules are left out)"
    return header + "\n" + "\n".join(kept)


def _describe(specs: tuple[str, ...], text: str, compilation: Stratified) -> Vocabulary:
    symbols = compilation.symbols
    assert symbols is not None
    program = compilation.program
    modules = {m.path: m for m in program.modules}
    entries: list[Entry] = []
    for name in sorted(symbols.relations):
        if name in DECISIONS:
            continue
        relation = symbols.relations[name]
        attributes = relation.attributes or ("",) * (relation.arity or 0)
        params = ", ".join(
            (f"{a or f'x{i + 1}'}: {t}" if t else (a or f"x{i + 1}"))
            for i, (a, t) in enumerate(
                zip(attributes, relation.types or (None,) * len(attributes), strict=False)
            )
        )
        signature = f"{name}({params})"
        doc = _doc(modules.get(relation.home), relation.span.line)
        if name in symbols.inputs:
            entries.append(Entry(name, "input", signature, doc))
            continue
        rules = program.rules_of(name)
        shown = tuple(_rule_text(program, rule) for rule in rules[:MAX_RULES_SHOWN])
        entries.append(Entry(name, "derived", signature, doc, shown, max(0, len(rules) - MAX_RULES_SHOWN)))
    for name in sorted(symbols.functors):
        sig = symbols.functors[name]
        params = ", ".join(
            f"{p or f'x{i + 1}'}: {t or 'any'}"
            for i, (p, t) in enumerate(zip(sig.param_names, sig.params, strict=True))
        )
        signature = f"{name}({params}): {sig.returns or 'any'}"
        builtin = sig.span.file.endswith(f"/{PRELUDE}.dl") and program.is_library(sig.span.file)
        doc = _doc(modules.get(sig.span.file), sig.span.line)
        entries.append(Entry(name, "builtin" if builtin else "functor", signature, doc))
    relations = frozenset(n for n in symbols.relations if n not in DECISIONS)
    sources = {m.path: m.source for m in program.modules if m.source is not None}
    return Vocabulary(
        specs,
        text,
        tuple(entries),
        relations,
        frozenset(symbols.inputs),
        frozenset(n for n in relations if n not in symbols.inputs),
        frozenset(symbols.functors),
        symbols.default,
        sources,
    )


def _doc(module: ast.Module | None, line: int) -> str:
    """The ``//`` comment lines right above ``line`` (none: "")."""
    if module is None or module.source is None:
        return ""
    by_line = {}
    for comment in module.comments:
        start = comment.span
        before = module.source.line_text(start.line)[: start.column - 1]
        if not before.strip() and comment.text.startswith("//"):
            by_line[start.line] = comment.text[2:].strip()
    found: list[str] = []
    current = line - 1
    while current in by_line:
        found.append(by_line[current])
        current -= 1
    return " ".join(reversed(found))


def _rule_text(program: Program, rule: ast.Rule) -> str:
    source = program.source(rule.span.file)
    if source is None:
        return ""
    return one_line(source.text[rule.span.start : rule.span.end])


def one_line(text: str) -> str:
    """A rule's text on one line, without its annotations."""
    return " ".join(line.strip() for line in text.splitlines() if not line.strip().startswith("@"))
