"""The API reference of docs/serve.md, made from the OpenAPI document (:mod:`.openapi`): one
table row per operation (its route, what it does, the body it reads and what it answers), and
one line per schema the operations name. ``policyc serve openapi --markdown`` prints it;
tests/test_serve_docs.py checks that the page holds exactly this text.

>>> print(shape({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"},
...     "b": {"type": "array", "items": {"type": "integer"}}}}))
{"a": string, "b"?: [integer, ...]}
"""

from __future__ import annotations

from typing import Any

BEGIN = "<!-- the API reference, made from the OpenAPI document by `policyc serve openapi --markdown` -->"
END = "<!-- end of the API reference -->"
DEPTH = 2  # nested objects shown inside a shape; deeper ones are `{...}`


def shape(schema: dict[str, Any], depth: int = 0) -> str:
    """A schema as the JSON it describes: ``{"field": type, "optional"?: type}``, ``[item, ...]``,
    a component by its name, literals and alternatives as JSON."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1].upper()
    if "const" in schema:
        return _literal(schema["const"])
    if "enum" in schema:
        return "|".join(_literal(value) for value in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(shape(dict(schema, type=one), depth) for one in kind)
    if kind == "array":
        return f"[{shape(schema.get('items', {}), depth + 1)}, ...]"
    if kind == "object":
        properties = schema.get("properties")
        if not properties:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                return f"{{NAME: {shape(extra, depth + 1)}, ...}}"
            return "object"
        if depth >= DEPTH:
            return "{...}"
        required = set(schema.get("required", ()))
        fields = (
            f'"{name}"{"" if name in required else "?"}: {shape(field, depth + 1)}'
            for name, field in properties.items()
        )
        return "{" + ", ".join(fields) + "}"
    return kind if isinstance(kind, str) else "any"


def markdown(document: dict[str, Any]) -> str:
    """The reference: a table of the operations, then the schemas they name."""
    lines = [
        BEGIN,
        "",
        "| route | what it does | body | answers |",
        "|---|---|---|---|",
    ]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            lines.append(
                "| "
                + " | ".join(
                    (
                        f"`{method.upper()} {path}`",
                        _cell(_what(operation)),
                        _cell(_body(operation)),
                        _cell(_answers(operation)),
                    )
                )
                + " |"
            )
    lines += ["", "Schemas (`?` marks an optional field):", ""]
    for name, schema in document["components"]["schemas"].items():
        said = f" {schema['description']}" if "description" in schema else ""
        lines.append(f"* `{name.upper()}`: `{shape(dict(schema, description=None), 0)}`.{said}")
    lines += ["", END]
    return "\n".join(lines) + "\n"


def _what(operation: dict[str, Any]) -> str:
    what = operation["summary"]
    if "description" in operation:
        what += ". " + operation["description"]
    if not operation.get("security"):
        what += " (no key)"
    return what


def _body(operation: dict[str, Any]) -> str:
    body = operation.get("requestBody")
    if body is None:
        return ""
    return f"`{shape(body['content']['application/json']['schema'])}`"


def _answers(operation: dict[str, Any]) -> str:
    found = []
    errors = []
    for status, answer in operation["responses"].items():
        content = answer.get("content", {})
        if "application/json" in content and content["application/json"]["schema"].get("$ref", "").endswith(
            "/Error"
        ):
            errors.append(status)
        elif "application/json" in content:
            found.append(f"{status} `{shape(content['application/json']['schema'])}`: {_clause(answer)}")
        else:
            found.append(f"{status}: {_clause(answer)}")
    if errors:
        found.append("errors " + ", ".join(errors))
    return "; ".join(found)


def _clause(answer: dict[str, Any]) -> str:
    return str(answer["description"]).rstrip(".")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _literal(value: Any) -> str:
    import json

    return json.dumps(value)
