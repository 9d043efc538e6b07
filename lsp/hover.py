"""Hover: what a name under the cursor is.

* a relation: its signature (declared, or the types inferred from its uses), whether it is an
  input, an output or inline, its doc comment, the rules that define it and its stratum;
* a functor: its signature and doc comment;
* a variable: its occurrences in the rule;
* a library module, an included file, a role: what they are;
* a tool's argument (``.arg pay.amount: number``, and the key of ``tool_arg(a, "amount")``
  where the rule fixes ``a``'s tool): its declared type and presence.

A doc comment is the run of comment lines right above the declaration (or, for a relation
without one, above its first rule).
"""

from __future__ import annotations

import os
import re
from typing import Any

from policyc.compiler import ast
from policyc.compiler.generators import RANGE, RANGE_SIGNATURE
from policyc.compiler.loader import LIBRARY_PREFIX, library_path
from policyc.compiler.symbols import VERDICTS

from .document import Snapshot, real_path
from .index import (
    ARGUMENT,
    CONSTRUCTOR,
    FILE,
    FUNCTOR,
    MODULE,
    RELATION,
    ROLE,
    TYPE,
    VARIABLE,
    Occurrence,
)

SHOWN_RULES = 5


def describe(snapshot: Snapshot, occurrence: Occurrence) -> str | None:
    symbol = occurrence.symbol
    if symbol.kind == RELATION:
        return relation(snapshot, symbol.name)
    if symbol.kind == FUNCTOR:
        return functor(snapshot, symbol.name)
    if symbol.kind == VARIABLE:
        uses = snapshot.index.of(symbol)
        return f"variable `{symbol.name}`: {len(uses)} occurrence{'s' if len(uses) != 1 else ''} in this rule"
    if symbol.kind == MODULE:
        return module(snapshot, symbol.name)
    if symbol.kind == FILE:
        return f"included file `{symbol.name}`"
    if symbol.kind == ROLE:
        role = (snapshot.model.symbols.roles if snapshot.model.symbols else {}).get(symbol.name)
        if role is None:
            return f"role `{symbol.name}` (not declared)"
        pool = f", pooled in `{role.pool}`" if role.pool else ""
        return f"role `{symbol.name}`: risk budget {role.budget:g}{pool}"
    if symbol.kind in (TYPE, CONSTRUCTOR):
        return type_(snapshot, symbol.kind, symbol.name)
    if symbol.kind == ARGUMENT:
        return argument(snapshot, symbol.name)
    return None


def argument(snapshot: Snapshot, name: str) -> str:
    """A tool's argument (``name`` is ``tool.argument``): its declaration, or that it has none."""
    tool, _, key = name.rpartition(".")
    declared = (snapshot.model.symbols.arguments if snapshot.model.symbols else {}).get((tool, key))
    if declared is None:
        return (
            f"argument `{key}` of `{tool}`: not declared, so `tool_arg` gives any value it holds "
            f"(declare it: `.arg {name}: TYPE`)"
        )
    presence = "required: every call must give it" if declared.required else "optional"
    parts = [_code(_text(snapshot, declared.span)), f"argument `{key}` of `{tool}` · {presence}"]
    place = _origin(snapshot, declared.span)
    if place:
        parts[-1] += f" · {place}"
    doc = doc_comment(snapshot, declared.span)
    if doc:
        parts.append(doc)
    return "\n\n".join(parts)


def type_(snapshot: Snapshot, kind: str, name: str) -> str:
    """A type's declaration (a constructor's: its ADT's), as written."""
    symbols = snapshot.model.symbols
    table = symbols.typedefs if symbols else None
    owner = name
    if kind == CONSTRUCTOR:
        branch = table.constructors.get(name) if table else None
        if branch is None:
            return f"`${name}` (not a branch of any ADT)"
        owner = branch.adt
    declared = _declaration(snapshot, owner, ast.TypeDecl)
    if declared is None:
        return f"type `{name}` (not declared)"
    text = f"```datalog\n{_text(snapshot, declared.span)}\n```"
    return (f"constructor `${name}` of `{owner}`\n\n" if kind == CONSTRUCTOR else "") + text


def relation(snapshot: Snapshot, name: str) -> str:
    model = snapshot.model
    symbols = model.symbols
    info = symbols.relations.get(name) if symbols else None
    decl = _declaration(snapshot, name)
    parts = []
    traits = []
    if decl is not None and _text(snapshot, decl.name.span) != name:
        # an instance's copy of a component's relation: its own name and types, and where it is written
        attributes = ", ".join(f"{a.name}: {a.type.name}" for a in decl.attributes)
        parts.append(_code(f".decl {name}({attributes})"))
        traits.append(f"declared in a component, line {decl.span.line}")
    elif decl is not None:
        parts.append(_code(_text(snapshot, decl.span)))
    else:
        types = (model.types or {}).get(name, ())
        arguments = ", ".join(t or "any" for t in types)
        parts.append(_code(f"{name}({arguments})"))
        if name not in VERDICTS:
            parts.append("not declared: the types are inferred from its uses")
    if name in VERDICTS:
        traits.append("the verdict relation")
    if info is not None:
        traits += [t for t, on in (("input", info.is_input), ("output", info.is_output)) if on]
        traits += list(info.qualifiers)
    place = _origin(snapshot, decl.span if decl is not None else info.span if info else None)
    if place:
        traits.append(place)
    if model.strata is not None and name in model.strata.of:
        stratum = model.strata.strata[model.strata.of[name]]
        recursive = ", recursive" if stratum.recursive else ""
        last = len(model.strata.strata) - 1  # numbered from 0, as `policyc check --show strata` does
        traits.append(f"evaluated in stratum {stratum.index} of 0–{last}{recursive}")
    if traits:
        parts.append(" · ".join(traits))
    rules = model.program.rules_of(name)
    anchor = decl if decl is not None else (rules[0] if rules else None)
    doc = doc_comment(snapshot, anchor.span) if anchor is not None else None
    if doc:
        parts.append(doc)
    if rules:
        proper = [r for r in rules if not r.is_fact]
        facts = len(rules) - len(proper)
        # the rules of one statement (`;`, several heads) are shown once, as written
        proper = list({(r.span, r.head.span): r for r in proper}.values())
        lines = []
        for rule in proper[:SHOWN_RULES]:
            lines.append(
                f"- `{_rule_text(snapshot, rule)}` ({_where(snapshot, rule.span)}, line {rule.head.span.line})"
            )
        if len(proper) > SHOWN_RULES:
            lines.append(f"- and {len(proper) - SHOWN_RULES} more rules")
        if facts:
            lines.append(f"- {facts} fact{'s' if facts != 1 else ''}")
        parts.append("Defined by:\n" + "\n".join(lines))
    elif info is not None and not info.is_input and name not in VERDICTS:
        parts.append("No rule or fact defines it.")
    return "\n\n".join(parts)


def functor(snapshot: Snapshot, name: str) -> str:
    symbols = snapshot.model.symbols
    sig = symbols.functors.get(name) if symbols else None
    statement = _declaration(snapshot, name, ast.Functor)
    if statement is None and name == RANGE:
        return f"{_code(RANGE_SIGNATURE)}\n\nbuiltin generator: `x = range(from, to[, step])` binds `x` to each value"
    if statement is None:
        return f"`{name}`: not declared"
    parts = [_code(_text(snapshot, statement.span))]
    kind = "foreign predicate" if sig is not None and sig.is_predicate else "functor"
    where = "builtin " if sig is not None and sig.library else ""
    place = _origin(snapshot, statement.span)
    parts.append(f"{where}{kind}" + (f" · {place}" if place else ""))
    doc = doc_comment(snapshot, statement.span)
    if doc:
        parts.append(doc)
    return "\n\n".join(parts)


def module(snapshot: Snapshot, name: str) -> str:
    source = snapshot.model.program.source(library_path(name))
    parts = [f"library module `{name}`"]
    if source is not None:
        lines = []
        for line in source.text.splitlines():
            if not line.startswith("//"):
                break
            lines.append(line[2:].strip())
        if lines:
            parts.append(" ".join(lines))
    return "\n\n".join(parts)


def doc_comment(snapshot: Snapshot, span) -> str | None:
    """The comment lines right above ``span`` (each on a line of its own), joined."""
    module = next((m for m in snapshot.model.program.modules if m.path == span.file), None)
    if module is None or module.source is None:
        return None
    source = module.source
    by_end = {c.span.end_line: c for c in module.comments}
    found: list[str] = []
    line = span.line - 1
    while line in by_end:
        comment = by_end[line]
        if source.line_text(comment.span.line)[: comment.span.column - 1].strip():
            break  # a comment after code on its line belongs to that code
        found.append(_comment_text(comment.text))
        line = comment.span.line - 1
    return "\n".join(reversed(found)) or None


def _comment_text(text: str) -> str:
    if text.startswith("//"):
        return text[2:].strip()
    body = text[2:-2]
    return "\n".join(re.sub(r"^\s*\*?\s?", "", line) for line in body.strip().splitlines())


def _declaration(snapshot: Snapshot, name: str, kind: type = ast.Decl) -> Any:
    """The ``.decl`` (or, with ``kind``, the ``.functor``) of a name."""
    for _, statement in snapshot.model.program.statements():
        if isinstance(statement, kind) and statement.name.name == name:
            return statement
    return None


def _text(snapshot: Snapshot, span) -> str:
    source = snapshot.model.program.source(span.file)
    return source.text[span.start : span.end] if source else ""


def _rule_text(snapshot: Snapshot, rule: ast.Rule, width: int = 100) -> str:
    source = snapshot.model.program.source(rule.span.file)
    if source is None:
        return rule.head.name
    text = " ".join(source.text[rule.head.span.start : rule.span.end].split())
    text = text.replace("`", "'")
    return text if len(text) <= width else text[: width - 1] + "…"


def _where(snapshot: Snapshot, span) -> str | None:
    """The file of a span, as a reader names it: this file, a library module or a path."""
    if span is None or span.file == "<none>":
        return None
    if span.file.startswith(LIBRARY_PREFIX):
        return f"library `{span.file[len(LIBRARY_PREFIX) : -3].replace('/', '.')}`"
    if snapshot.is_mine(span.file):
        return "this file"
    folder = os.path.dirname(os.path.abspath(snapshot.path))
    return f"`{os.path.relpath(real_path(span.file), folder)}`"


def _origin(snapshot: Snapshot, span) -> str | None:
    """``from <file>`` for a name that comes from another file."""
    where = _where(snapshot, span)
    return None if where is None or where == "this file" else f"from {where}"


def _code(text: str) -> str:
    return f"```datalog\n{text}\n```"
