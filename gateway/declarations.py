"""The argument declarations of the upstream servers' tools, from their input schemas
(``policyc mcp lock --declare-args FILE``, docs/mcp.md).

Each property of a tool's ``inputSchema`` becomes ``.arg S.T.key: TYPE``, ``S.T`` the tool's
name in the gateway; JSON Schema's ``type`` gives the type (``string`` a ``symbol``,
``integer`` a ``number``, or ``unsigned`` when its ``minimum`` is at least 0, ``number`` a
``float``, ``boolean`` a ``bool``, ``array`` a ``list``, ``object`` an ``object``), and a
property the schema's ``required`` lists is ``required`` unless it may be null. An ``enum`` or
``const`` of strings only (or of integers only) is a ``symbol`` (a ``number``); ``anyOf`` and
``oneOf`` of one type (null aside) are that type. What a declaration cannot say (a union of
types, a reference, no type at all) is ``any``, with a comment saying why; a property whose name
a declaration cannot hold (one with a ``.``, or text that is no character) is left out, with a
comment.

Everything a server says is written as data: names in quoted strings with their escapes when
they are not plain names, comments cleared of line breaks, so a hostile schema cannot add a
statement.

>>> from mcp.types import Tool
>>> send = Tool(name="send", input_schema={"type": "object", "required": ["to"], "properties": {
...     "to": {"type": "string"}, "cc": {"type": ["array", "null"]}, "n": {"type": ["integer", "string"]}}})
>>> print(declarations_text({"mail": [send]}), end="")
// The arguments of the MCP servers' tools, as their input schemas declare them: written by
// `policyc mcp lock --declare-args`, written anew by each run (docs/mcp.md).
<BLANKLINE>
// ---- mail.send
.arg mail.send.cc: list
// `n`: a union of integer, string
.arg mail.send.n: any
.arg mail.send.to: symbol required
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .starter import datalog_string, one_line

_JSON_TYPES = {
    "string": "symbol",
    "integer": "number",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "object",
}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Declared:
    """One property of a tool's schema as a declaration: its type, whether required, and why
    it is ``any`` (None when the schema says its type)."""

    key: str
    type: str
    required: bool
    note: str | None = None


def declarations_text(tools: Mapping[str, Sequence[Any]]) -> str:
    """The ``.arg`` declarations of ``tools`` (a server's name → its ``mcp.types.Tool`` list),
    sorted by tool and argument (a tool a server lists twice as it is listed first)."""
    out = [
        "// The arguments of the MCP servers' tools, as their input schemas declare them: written by",
        "// `policyc mcp lock --declare-args`, written anew by each run (docs/mcp.md).",
    ]
    named: dict[str, Any] = {}
    for server in sorted(tools):
        for tool in tools[server]:
            named.setdefault(f"{server}.{tool.name}", tool)
    for name in sorted(named):
        out.append("")
        out.append(f"// ---- {one_line(name)}")
        if not _writable(name):
            out.append("// its name is not text a policy can hold: not declared")
            continue
        for declared in properties(named[name].input_schema):
            if "." in declared.key or not declared.key or not _writable(declared.key):
                out.append(f"// `{one_line(declared.key)}`: a name a declaration cannot hold, not declared")
                continue
            if declared.note is not None:
                out.append(f"// `{one_line(declared.key)}`: {declared.note}")
            out.append(
                f".arg {_path(name, declared.key)}: {declared.type}{' required' if declared.required else ''}"
            )
    return "\n".join(out) + "\n"


def properties(schema: Any) -> list[Declared]:
    """The declared properties of a tool's input schema, sorted by name."""
    if not isinstance(schema, Mapping):
        return []
    found = schema.get("properties")
    if not isinstance(found, Mapping):
        return []
    listed = schema.get("required")
    required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
    out = []
    for key in sorted(k for k in found if isinstance(k, str)):
        kind, nullable, note = _type_of(found[key])
        out.append(Declared(key, kind, key in required and not nullable, note))
    return out


def _type_of(schema: Any) -> tuple[str, bool, str | None]:
    """A property's declared type, whether it may be null, and why it is ``any`` (if it is)."""
    if not isinstance(schema, Mapping):
        return "any", False, "no schema of its own"
    types = _types(schema)
    if types is None:
        if "$ref" in schema:
            return "any", False, "a reference to another schema"
        return "any", False, "the schema gives no type"
    nullable = "null" in types
    found = set(types) - {"null"}
    if {"integer", "number"} <= found:  # every integer is a JSON Schema number
        found.discard("integer")
    kinds = sorted(found)
    if len(kinds) != 1:
        what = ", ".join(kinds)
        return "any", nullable, f"a union of {what}" if len(kinds) > 1 else "only null"
    (kind,) = kinds
    declared = _JSON_TYPES.get(kind)
    if declared is None:
        return "any", nullable, f"the type `{one_line(kind)}` is not one of JSON Schema's"
    minimum = schema.get("minimum")
    if (
        declared == "number"
        and isinstance(minimum, int | float)
        and not isinstance(minimum, bool)
        and minimum >= 0
    ):
        declared = "unsigned"
    return declared, nullable, None


def _types(schema: Mapping[str, Any]) -> list[str] | None:
    """The JSON types a schema allows (None when it does not say)."""
    given = schema.get("type")
    if isinstance(given, str):
        return [given]
    if isinstance(given, list) and given and all(isinstance(t, str) for t in given):
        return list(given)
    for key in ("enum", "const"):
        if key in schema:
            values = schema[key] if key == "enum" else [schema[key]]
            if isinstance(values, list) and values:
                return sorted({_json_type(v) for v in values})
    for key in ("anyOf", "oneOf"):
        alternatives = schema.get(key)
        if isinstance(alternatives, list) and alternatives:
            found: set[str] = set()
            for alternative in alternatives:
                types = _types(alternative) if isinstance(alternative, Mapping) else None
                if types is None:
                    return None
                found.update(types)
            return sorted(found)
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _writable(text: str) -> bool:
    """Whether a policy's string can hold ``text`` as it is (no lone surrogate)."""
    return not any("\ud800" <= c <= "\udfff" for c in text)


def _path(tool: str, key: str) -> str:
    """``tool.key`` as an ``.arg`` names it: as it is when it is a path of plain names, else a
    string."""
    path = f"{tool}.{key}"
    return path if _PLAIN.fullmatch(path) else datalog_string(path)
