"""``undefined-relation`` and ``undefined-function``: every name must mean something.

A relation is defined by a rule or fact with it in the head, a ``.decl`` or an ``.input``;
a function by a ``.functor`` (or the builtins). Each use of an unknown name is reported
(in rules, ``.output`` and ``.host``), with the closest known name as a suggestion.

>>> from policyc.compiler.pipeline import check_source
>>> [d.message for d in check_source("Deny(a) :- Tainted(a).\\nTaint(e) :- Src(e).\\n.input Src")
...  if d.name == "undefined-relation"]
['relation `Tainted` is not defined']
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ast, codes
from ..diagnostics import Diagnostic, Edit, Fix, replace_name
from ..generators import is_range
from ..loader import VOCABULARY, library_names, library_scope
from ..source import Span
from ..symbols import VERDICTS
from ..syntax_errors import did_you_mean
from . import Context


def check(context: Context) -> list[Diagnostic]:
    symbols = context.symbols
    known = {
        name
        for name, relation in symbols.relations.items()
        if name in symbols.defined or relation.declared or relation.is_input or name in VERDICTS
    }
    diagnostics: list[Diagnostic] = []
    declare = _Declarations(context)
    imports = _Imports(context)
    for module, statement in context.program.statements():
        listed = isinstance(statement, ast.Output) and not context.program.is_library(module.path)
        if isinstance(statement, ast.Output | ast.Host | ast.LimitSize) and (
            listed or not isinstance(statement, ast.Output)
        ):
            what = "output" if listed else "host-only" if isinstance(statement, ast.Host) else "size-limited"
            names = (statement.relation,) if isinstance(statement, ast.LimitSize) else statement.names
            for ident in names:  # (an output named like a functor is a name conflict)
                if ident.name not in known and not (listed and ident.name in symbols.functors):
                    close = did_you_mean(ident.name, known)
                    diagnostics.append(
                        codes.UNDEFINED_RELATION(
                            ident.span,
                            f"{what} relation `{ident.name}` is not defined",
                            help=f"did you mean `{close}`?" if close else "define it with rules or facts",
                            fix=replace_name(ident.span, ident.name, close),
                        )
                    )
    # the names a relation may be mistaken for, and each undefined name's closest, found once
    candidates = known | {f for f, sig in symbols.functors.items() if sig.is_predicate}
    closest: dict[str, str | None] = {}
    for module, rule in context.user_rules():
        summary = context.program.summary(rule)
        for atom, _, _ in summary.atoms:
            if atom.name in symbols.functors or atom.name in known:
                continue
            library = imports.of(module, atom.name, len(atom.args), ("relation", "predicate"))
            if library is not None:
                diagnostics.append(library.diagnostic(atom.name_span, "relation"))
                continue
            if atom.name not in closest:
                closest[atom.name] = did_you_mean(atom.name, candidates)
            diagnostics.append(_undefined_relation(atom, closest[atom.name], declare.fix(module, atom)))
        for call in summary.calls:
            if call.name not in symbols.functors and not is_range(call, symbols.functors):
                library = imports.of(module, call.name, len(call.args), ("functor",))
                if library is not None and call.name not in known:
                    diagnostics.append(library.diagnostic(call.name_span, "function"))
                    continue
                diagnostics.append(_undefined_function(call, known, symbols.functors))
    return diagnostics


def _undefined_relation(atom: ast.Atom, close: str | None, declare: Fix) -> Diagnostic:
    fix = replace_name(atom.name_span, atom.name, close) or declare
    if close:
        help_text = f"did you mean `{close}`?"
    elif atom.name[:1].islower():
        args = ", ".join(f"x{i + 1}: symbol" for i in range(len(atom.args)))
        help_text = (
            f"if `{atom.name}` is computed by the host, declare it as a foreign predicate: "
            f"`.functor {atom.name}({args}): bool`; if its facts come from outside, `.input {atom.name}`"
        )
    else:
        help_text = f"define it with a rule or a fact, or declare its facts as input: `.input {atom.name}`"
    return codes.UNDEFINED_RELATION(
        atom.name_span, f"relation `{atom.name}` is not defined", help=help_text, fix=fix
    )


def _undefined_function(call: ast.Call, known: set[str], functors: dict) -> Diagnostic:
    if call.name in known:
        return codes.UNDEFINED_FUNCTION(
            call.name_span,
            f"`{call.name}` is a relation, not a function",
            help="relations are conditions in a rule body; only functors compute values",
        )
    close = did_you_mean(call.name, [f for f, sig in functors.items() if not sig.is_predicate] or functors)
    params = ", ".join(f"x{i + 1}: symbol" for i in range(len(call.args)))
    return codes.UNDEFINED_FUNCTION(
        call.name_span,
        f"function `{call.name}` is not declared",
        help=f"did you mean `{close}`?" if close else f"declare it: `.functor {call.name}({params}): symbol`",
        fix=replace_name(call.name_span, call.name, close),
    )


@dataclass(frozen=True)
class _Import:
    """An undefined name a library module declares, and the one fix of every such name of a
    file: the module's ``.import``."""

    name: str
    module: str
    fix: Fix

    def diagnostic(self, span: Span, what: str) -> Diagnostic:
        where = (
            "of the event vocabulary"
            if self.module == VOCABULARY
            else f"declared by the library module `{self.module}`"
        )
        code = codes.UNDEFINED_RELATION if what == "relation" else codes.UNDEFINED_FUNCTION
        message = (
            f"relation `{self.name}` is not defined"
            if what == "relation"
            else (f"function `{self.name}` is not declared")
        )
        return code(
            span,
            message,
            help=f"`{self.name}` is a {what} {where}: add `.import {self.module}`",
            fix=self.fix,
        )


class _Imports:
    """The fix of an undefined name that a library module declares with the same number of
    arguments: import the module (one edit for every such name of a file, so that applying
    the fixes imports it once). It is safe when the module brings no name the policy's own
    files declare or define: then it only gives meaning to names that had none.

    The import goes before the first statement of the file, and before the comments just
    above it."""

    def __init__(self, context: Context) -> None:
        self.context = context
        self.fixes: dict[tuple[str, str], Fix] = {}
        self._own: frozenset[str] | None = None

    def of(self, module: ast.Module, name: str, arity: int, kinds: tuple[str, ...]) -> _Import | None:
        found = library_names().get(name)
        if found is None or found.kind not in kinds or found.arity != arity or module.source is None:
            return None
        key = (module.path, found.module)
        if key not in self.fixes:
            safe = not (library_scope(found.module) & self.own())
            self.fixes[key] = Fix(
                f"add `.import {found.module}`",
                (_before_first(module, f".import {found.module}\n"),),
                safe=safe,
            )
        return _Import(name, found.module, self.fixes[key])

    def own(self) -> frozenset[str]:
        """The names the policy's own files declare or define (relations and functors)."""
        if self._own is None:
            names: set[str] = set()
            program = self.context.program
            for module, statement in program.statements():
                if program.is_library(module.path):
                    continue
                if isinstance(statement, ast.Decl | ast.Functor):
                    names.add(statement.name.name)
                elif isinstance(statement, ast.Input):
                    names.update(ident.name for ident in statement.names)
                elif isinstance(statement, ast.Rule):
                    names.add(statement.head.name)
            self._own = frozenset(names)
        return self._own


class _Declarations:
    """The fix of an undefined relation no known name is close to: declare it, with the
    attribute types inferred from its uses, as an input (its facts come from outside).

    The declaration goes after the directives at the top of the file that uses it (before
    its first statement when the file starts with a rule), so every use offers the same edit.
    """

    def __init__(self, context: Context) -> None:
        self.context = context
        self.fixes: dict[tuple[str, str], Fix] = {}
        self._types: dict[str, tuple[str | None, ...]] | None = None

    def types(self, name: str) -> tuple[str | None, ...]:
        if self._types is None:
            from .types import infer

            self._types = infer(self.context.program, self.context.symbols)[0]
        return self._types.get(name, ())

    def fix(self, module: ast.Module, atom: ast.Atom) -> Fix:
        key = (module.path, atom.name)
        if key not in self.fixes:
            self.fixes[key] = self._fix(module, atom)
        return self.fixes[key]

    def _fix(self, module: ast.Module, atom: ast.Atom) -> Fix:
        types = self.types(atom.name)
        names: list[str] = []
        for i, arg in enumerate(atom.args):
            name = arg.name if isinstance(arg, ast.Var) else f"x{i + 1}"
            while name in names:
                name += "_"
            names.append(name)
        attributes = ", ".join(
            f"{name}: {types[i] if i < len(types) and types[i] else 'symbol'}" for i, name in enumerate(names)
        )
        text = f".decl {atom.name}({attributes})\n.input {atom.name}\n"
        end = _header_end(module)
        if end is not None:
            return Fix(
                f"declare `{atom.name}` as an input relation",
                (Edit(end, "\n" + text.rstrip("\n")),),
                safe=False,
            )
        return Fix(f"declare `{atom.name}` as an input relation", (_before_first(module, text),), safe=False)


def _header_end(module: ast.Module) -> Span | None:
    """The end of the directives that open the file (None when it opens with a rule)."""
    end: Span | None = None
    for statement in module.statements:
        if isinstance(statement, ast.Rule):
            break
        end = statement.span
    return None if end is None else end.at_end()


def _before_first(module: ast.Module, text: str) -> Edit:
    """The insertion of ``text`` (lines) before the file's first statement and the comments
    just above it (a comment stays with the statement it is about), a blank line after it
    unless the first statement is an `.import` or `.include` it joins."""
    source = module.source
    assert source is not None and module.statements
    first = module.statements[0]
    line = first.span.line
    commented = {n for c in module.comments for n in range(c.span.line, c.span.end_line + 1)}
    while line - 1 in commented:  # the comments right above it, no blank line between
        line -= 1
    joins = line == first.span.line and isinstance(first, ast.Import | ast.Include)
    start = source.line_starts[line - 1]
    return Edit(source.span(start, start), text + ("" if joins else "\n"))
