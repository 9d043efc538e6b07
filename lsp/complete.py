"""Completion, from what the line says so far:

* ``.`` at the start of a line: the directives;
* after ``.import``: the library modules;
* after ``@``: the rule annotations;
* after ``:`` in a ``.decl`` or ``.functor``: the types; in an ``.arg``: the argument types,
  then ``required`` and ``optional``;
* anywhere else: the variables of the rule being written, the relations and functors the
  program knows (the document's, its includes' and its imports'), and ``not`` and the
  aggregates.

The variables of the rule being written come from the parsed rule under the cursor or, when
the text around the cursor does not parse yet, from the names in that unparsed text.
"""

from __future__ import annotations

import re

from lsprotocol import types

from policyc.compiler.arguments import ARG_TYPES, PRESENCES
from policyc.compiler.generators import RANGE, RANGE_SIGNATURE
from policyc.compiler.loader import library_modules
from policyc.compiler.symbols import FUNCTOR_PARAMS, FUNCTOR_RESULTS, TYPES
from policyc.compiler.syntax_errors import DIRECTIVES, RESERVED

from .document import Snapshot
from .index import NAME

ANNOTATIONS = {
    "id": "a stable identifier of the rule",
    "req": "the requirement(s) the rule encodes",
    "message": "why the action is denied, for the agent",
    "suggest": "what the agent can do instead",
    "severity": "low, medium, high or critical",
    "mode": "enforce (the default) or shadow: a Deny rule that only reports would-deny",
}
DIRECTIVE_HELP = {
    ".decl": "declare a relation and its attribute types",
    ".input": "facts of these relations come from outside",
    ".output": "these relations are results",
    ".include": "include another policy file",
    ".import": "import a library module",
    ".functor": "declare a foreign function or predicate",
    ".default": "the verdict when no Allow rule fires: allow or deny",
    ".role": "declare a role with a risk budget",
    ".field": "give a tool argument a role",
    ".arg": "declare a tool argument's type (and `required`)",
    ".key": "the attributes of a relation that determine its others",
    ".host": "relations only the host states (no front takes them from an agent)",
}
KEYWORDS = tuple(RESERVED.values())  # `not` and the aggregates
_STRINGS_AND_COMMENTS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|/\*[\s\S]*?(?:\*/|$)')
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*['\u2019]*$")
Kind = types.CompletionItemKind


def complete(snapshot: Snapshot, offset: int, trigger: str | None = None) -> list[types.CompletionItem]:
    """What may be written at ``offset``; ``trigger``: the character whose typing asked (a `.`
    ending a rule or an `@` in a string asks for nothing)."""
    text = snapshot.text
    line_start = text.rfind("\n", 0, offset) + 1
    before = text[line_start:offset]
    if _in_comment_or_string(snapshot, line_start, offset):
        return []
    if re.fullmatch(r"\s*\.[A-Za-z]*", before):
        lines = snapshot.lines(snapshot.path)
        start, end = lines.position(line_start + before.index(".")), lines.position(offset)
        where = types.Range(types.Position(*start), types.Position(*end))
        items = []
        for directive in DIRECTIVES:
            item = _item(directive, Kind.Keyword, DIRECTIVE_HELP.get(directive))
            item.text_edit = types.TextEdit(where, directive)
            items.append(item)
        return items
    if re.fullmatch(r"\s*\.import\s+[\w.]*", before):
        return [_item(m, Kind.Module, "library module") for m in library_modules()]
    if re.search(r"@[A-Za-z_]*$", before):
        return [_item(name, Kind.Property, help_text) for name, help_text in ANNOTATIONS.items()]
    if trigger is not None:
        return []  # a `.` that ends a rule: nothing to offer
    if re.match(r"\s*\.(decl|functor|type)\b", before) and re.search(r"(:|<:|=|\|)\s*[A-Za-z_]*$", before):
        if not before.lstrip().startswith(".functor"):
            declared = snapshot.model.symbols.typedefs.types if snapshot.model.symbols else {}
            allowed = (*TYPES, "unsigned", *sorted(declared))
        else:
            allowed = FUNCTOR_RESULTS if ")" in before else FUNCTOR_PARAMS
        return [_item(t, Kind.TypeParameter, "type") for t in allowed]
    if re.match(r"\s*\.arg\b", before):  # `.arg tool.argument: TYPE [required]`
        if re.search(r":\s*[A-Za-z_]*$", before):
            return [_item(t, Kind.TypeParameter, "argument type") for t in ARG_TYPES]
        if re.search(r":\s*[A-Za-z_]+\s+[A-Za-z_]*$", before):
            return [_item(p, Kind.Keyword, "presence") for p in PRESENCES]
        return []
    if re.match(r"\s*\.", before):
        return []  # other directives name things that are written out, not chosen
    items = [_item(v, Kind.Variable, "variable of this rule", sort="0") for v in _variables(snapshot, offset)]
    symbols = snapshot.model.symbols
    qualified = re.search(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z0-9_]*$", before)
    if symbols is not None:
        for name in sorted(symbols.relations):
            item = _item(name, Kind.Class, _signature(snapshot, name), sort="1")
            if qualified is not None:  # `g.re`: the name replaces what is written, instance included
                lines = snapshot.lines(snapshot.path)
                start = lines.position(line_start + qualified.start())
                where = types.Range(types.Position(*start), types.Position(*lines.position(offset)))
                item.text_edit = types.TextEdit(where, name)
            items.append(item)
        for name, sig in sorted(symbols.functors.items()):
            params = ", ".join(
                f"{n}: {t}" if n else str(t) for n, t in zip(sig.param_names, sig.params, strict=True)
            )
            kind = Kind.Function if not sig.is_predicate else Kind.Method
            items.append(_item(name, kind, f"{name}({params}): {sig.returns}", sort="2"))
        if RANGE not in symbols.functors:  # the intrinsic generator
            items.append(_item(RANGE, Kind.Function, RANGE_SIGNATURE, sort="2"))
    items += [_item(k, Kind.Keyword, None, sort="3") for k in KEYWORDS]
    return items


def _item(
    label: str, kind: types.CompletionItemKind, detail: str | None, sort: str = "0"
) -> types.CompletionItem:
    return types.CompletionItem(label=label, kind=kind, detail=detail, sort_text=f"{sort}{label}")


def _in_comment_or_string(snapshot: Snapshot, line_start: int, offset: int) -> bool:
    module = snapshot.module
    if module is not None and any(c.span.start < offset <= c.span.end for c in module.comments):
        if not any(c.span.end == offset and c.text.startswith("/*") for c in module.comments):
            return True
    line = _STRINGS_AND_COMMENTS.sub(lambda m: "\0" * len(m.group()), snapshot.text[line_start:offset])
    return line.endswith("\0")


def _signature(snapshot: Snapshot, name: str) -> str:
    symbols = snapshot.model.symbols
    relation = symbols.relations[name]
    if relation.declared:
        shown = ", ".join(f"{a}: {t}" for a, t in zip(relation.attributes, relation.types, strict=True))
    else:
        shown = ", ".join(t or "any" for t in (snapshot.model.types or {}).get(name, ()))
    return f"{name}({shown})"


def _variables(snapshot: Snapshot, offset: int) -> list[str]:
    """The variables of the rule the cursor is in: the parsed one, or the names of the text
    that does not parse (between the statements before and after the cursor)."""
    index = snapshot.index
    scope = index.rule_at(snapshot.path, offset)
    if scope is not None:
        return index.variables(scope)
    module = snapshot.module
    start, end = 0, len(snapshot.text)
    if module is not None:
        for statement in module.statements:
            if statement.span.end <= offset:
                start = max(start, statement.span.end)
            elif statement.span.start >= offset:
                end = min(end, statement.span.start)
    gap = _STRINGS_AND_COMMENTS.sub(lambda m: " " * len(m.group()), snapshot.text[start:end])
    cursor = offset - start
    typing = _WORD.search(gap[:cursor])
    names: dict[str, None] = {}
    for match in NAME.finditer(gap):
        name = match.group()
        after = gap[match.end() :].lstrip()
        if typing is not None and match.start() == typing.start():
            continue  # the word being typed
        if after.startswith("(") or name in KEYWORDS or name == "_":
            continue
        if match.start() > 0 and gap[match.start() - 1] in ".@":
            continue
        names.setdefault(name)
    return list(names)
