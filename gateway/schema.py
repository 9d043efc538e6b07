"""Checking a call's arguments against the tool's ``inputSchema`` before anything else.

A call whose arguments the tool's own schema refuses never reaches the policy or the server:
the client gets an error result naming the field, so the agent can correct the call. A schema
that is not a valid JSON Schema refuses every call of its tool (the gateway cannot say what the
tool accepts).

>>> schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
>>> problem(schema, {"n": 3}) is None
True
>>> problem(schema, {"n": "three"})
"argument `n`: 'three' is not of type 'integer'"
>>> problem(schema, {})
"argument `n`: missing ('n' is a required property)"
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any


def problem(schema: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with ``arguments`` under ``schema`` (the first problem, the field named),
    or None when they fit (or there is no schema)."""
    if not schema:
        return None
    from jsonschema.exceptions import best_match

    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as bad:
        return f"the tool's inputSchema is not JSON ({type(bad).__name__}), so no call of it is sent"
    validator = _validator(key)
    if isinstance(validator, str):
        return validator
    try:
        error = best_match(validator.iter_errors(dict(arguments)))
    except (RecursionError, ValueError, TypeError) as bad:
        return f"the arguments cannot be checked against the tool's inputSchema ({type(bad).__name__})"
    if error is None:
        return None
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [r for r in error.validator_value if r not in error.instance]
        if missing:
            name = f"{path}.{missing[0]}" if path else str(missing[0])
            return f"argument `{name}`: missing ({error.message})"
    if not path:
        return f"arguments: {error.message}"
    return f"argument `{path}`: {error.message}"


@functools.lru_cache(maxsize=1024)
def _validator(schema: str) -> Any:
    """The validator of a schema (given as canonical JSON), checked once; or why there is none."""
    import jsonschema
    from jsonschema.exceptions import SchemaError

    parsed = json.loads(schema)
    try:
        validator_class = jsonschema.validators.validator_for(parsed, default=jsonschema.Draft202012Validator)
        validator_class.check_schema(parsed)
        return validator_class(parsed)
    except SchemaError as bad:
        return f"the tool's inputSchema is not a valid JSON Schema ({bad.message}), so no call of it is sent"
    except (RecursionError, ValueError, TypeError) as bad:
        return f"the tool's inputSchema cannot be used ({type(bad).__name__}), so no call of it is sent"
