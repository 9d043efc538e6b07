"""Checking a call's arguments against the tool's ``inputSchema`` before anything else, bounded.

A call whose arguments the tool's own schema refuses never reaches the policy or the server:
the client gets an error result naming the field, so the agent can correct the call. A schema
that is not a valid JSON Schema refuses every call of its tool (the gateway cannot say what the
tool accepts).

The schema comes from an upstream server and the arguments from the agent, so neither may make
the check take long. Patterns (``pattern``, ``patternProperties``: ECMAScript, as policies'
``match`` patterns are) run on RE2 through :func:`policyc.compiler.regex.compile_pattern`, whose
time is linear in the text; a schema with a pattern RE2 cannot run (a backreference, a lookaround) is
refused whole when the gateway starts (:func:`unrunnable`), its tool not listed.
``uniqueItems`` compares the items by a key of each (linear; the validator's own check compares
every item with every other when they do not sort, minutes for 20,000 objects). And the check
stops at a deadline (``decide_timeout``): every keyword that descends into the instance or
compares values looks at the clock before it runs (and within its loop over property names;
the keywords of constant cost, :data:`_CONSTANT`, need not), so a schema whose alternatives multiply (``anyOf`` nested
under ``$ref``) is given up at the deadline, in the thread that ran it, which then ends
(:class:`Expired`, a ``policyc:timeout`` of that call); no keyword runs longer than linear time
in what it reads, so none outlives the deadline by much. The schema's own check against its
metaschema runs the same way.

>>> schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
>>> problem(schema, {"n": 3}) is None
True
>>> problem(schema, {"n": "three"})
"argument `n`: 'three' is not of type 'integer'"
>>> problem(schema, {})
"argument `n`: missing ('n' is a required property)"
>>> print(unrunnable({"properties": {"w": {"type": "string", "pattern": "(?=a)"}}}))
`properties.w.pattern` `(?=a)`: `(?=` is a lookahead, which RE2 does not have (it matches in linear time, without backtracking)
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from policyc.compiler.regex import compile_pattern, pattern_problem

_clock = threading.local()  # the deadline of the check running in this thread
# each schema object's canonical JSON (the validators' key), by its id: a tool's schema is
# checked once per call, and its JSON form costs more than its check (the object is kept with it,
# so that an id used again by another object does not match)
_keys: dict[int, tuple[Any, str]] = {}
KEYS_KEPT = 1024


def _key(schema: Any) -> str | None:
    found = _keys.get(id(schema))
    return found[1] if found is not None and found[0] is schema else None


class Expired(Exception):
    """The check of a call's arguments did not end by its deadline."""


def problem(
    schema: Mapping[str, Any] | None, arguments: Mapping[str, Any], deadline: float | None = None
) -> str | None:
    """What is wrong with ``arguments`` under ``schema`` (the first problem, the field named),
    or None when they fit (or there is no schema). :class:`Expired` when the check passes
    ``deadline`` (``time.monotonic()``)."""
    if not schema:
        return None
    from jsonschema.exceptions import best_match

    key = _key(schema)
    if key is None:
        try:
            key = json.dumps(schema, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as bad:
            return f"the tool's inputSchema is not JSON ({type(bad).__name__}), so no call of it is sent"
        _keys[id(schema)] = (schema, key)
        if len(_keys) > KEYS_KEPT:  # the oldest goes (checks in other threads may race: no matter)
            with contextlib.suppress(RuntimeError, StopIteration, KeyError):
                del _keys[next(iter(_keys))]
    _clock.deadline = deadline
    try:
        validator = _validator(key)
        if isinstance(validator, str):
            return validator
        error = best_match(validator.iter_errors(dict(arguments)))
    except Expired:
        raise
    except Exception as bad:  # RecursionError, an unresolvable $ref, ...: no call is sent unchecked
        return f"the arguments cannot be checked against the tool's inputSchema ({type(bad).__name__})"
    finally:
        _clock.deadline = None
    if error is None:
        return None
    path = _cut(".".join(str(p) for p in error.absolute_path))
    message = _cut(error.message)  # it quotes the value (and an enum's every member)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [r for r in error.validator_value if r not in error.instance]
        if missing:
            name = f"{path}.{missing[0]}" if path else str(missing[0])
            return f"argument `{name}`: missing ({message})"
    if not path:
        return f"arguments: {message}"
    return f"argument `{path}`: {message}"


def _cut(text: str, most: int = 500) -> str:
    """``text``, cut to ``most`` characters."""
    return text if len(text) <= most else f"{text[:most]}..."


def unrunnable(schema: Any) -> str | None:
    """Why the patterns of a schema cannot all run in linear time (the first one RE2 cannot
    compile, by its place in the schema), or None. ``unevaluatedProperties`` beside
    ``patternProperties`` is refused too: the validator matches those names with Python's
    backtracking engine."""
    keywords = list(_keywords(schema, ""))
    used = {key for _, key, _ in keywords}
    if {"unevaluatedProperties", "patternProperties"} <= used:
        return (
            "`unevaluatedProperties` with `patternProperties`: the validator would match property "
            "names with a backtracking engine"
        )
    for where, key, value in keywords:
        patterns = [(where, value)] if key == "pattern" else []
        if key == "patternProperties" and isinstance(value, dict):
            patterns = [(f"{where}.{name}", name) for name in value]
        for at, pattern in patterns:
            problem = pattern_problem(pattern) if isinstance(pattern, str) else None
            if problem is not None:
                return f"`{at}` `{pattern}`: {problem}"
    return None


def _keywords(schema: Any, at: str) -> Iterator[tuple[str, str, Any]]:
    """Every keyword of a schema and its subschemas, with where it is (``properties.w.pattern``)
    and its value (the values of ``const``, ``enum``, ``default`` and ``examples`` are data,
    not schemas: not looked into)."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            here = f"{at}.{key}" if at else str(key)
            yield here, str(key), value
            if key not in ("const", "enum", "default", "examples"):
                yield from _keywords(value, here)
    elif isinstance(schema, list):
        for n, value in enumerate(schema):
            yield from _keywords(value, f"{at}.{n}")


def _on_time() -> None:
    deadline = getattr(_clock, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise Expired


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not compile_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = compile_pattern(pattern)
        for name, value in instance.items():
            _on_time()
            if compiled.search(name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, extras: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``additionalProperties``, its names matched against ``patternProperties`` with RE2."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = [compile_pattern(p) for p in schema.get("patternProperties", {})]
    extra = []
    for name in instance:
        _on_time()
        if name not in properties and not any(p.search(name) for p in patterns):
            extra.append(name)
    if validator.is_type(extras, "object"):
        for name in extra:
            yield from validator.descend(instance[name], extras, path=name)
    elif not extras and extra:
        shown = ", ".join(repr(name) for name in sorted(extra))
        verb = "was" if len(extra) == 1 else "were"
        yield ValidationError(f"Additional properties are not allowed ({shown} {verb} unexpected)")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """``uniqueItems`` in linear time: two items are the same when their keys are."""
    from jsonschema.exceptions import ValidationError

    if unique and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for item in instance:
            key = _same(item)
            if key in seen:
                yield ValidationError(f"{_shown(instance)} has non-unique elements")
                return
            seen.add(key)


def _same(value: Any) -> Any:
    """A key of a JSON value, equal for the values JSON Schema calls equal: ``1`` and ``1.0``
    the same, ``true`` apart from ``1``, objects whatever the order of their members.

    >>> _same({"a": [1, True]}) == _same({"a": [1.0, True]}), _same(1) == _same(True)
    (True, False)
    """
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, Mapping):
        return ("object", frozenset((name, _same(item)) for name, item in value.items()))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(_same(item) for item in value))
    return ("other", id(value))  # no JSON value: equal to itself only


def _shown(instance: Any) -> str:
    """An instance as an error shows it: its JSON, cut."""
    return _cut(json.dumps(instance, ensure_ascii=False, default=str))


# keywords whose check takes constant time (or a length's) and never descends: they need not look
# at the clock, since every keyword that descends or compares values does before it runs
_CONSTANT = frozenset(
    {
        "type",
        "required",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "multipleOf",
    }
)


def _bounded(check: Any) -> Any:
    """A keyword's check that looks at the clock before it runs."""

    def bounded(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        _on_time()
        errors = check(validator, value, instance, schema)
        if errors is not None:
            yield from errors

    return bounded


@functools.lru_cache(maxsize=1024)
def _validator(schema: str) -> Any:
    """The validator of a schema (given as canonical JSON), checked once; or why there is none."""
    import jsonschema
    from jsonschema.exceptions import SchemaError, best_match

    parsed = json.loads(schema)
    try:
        base = jsonschema.validators.validator_for(parsed, default=jsonschema.Draft202012Validator)
        meta = _extended(jsonschema.validators.validator_for(base.META_SCHEMA, default=base))
        found = best_match(meta(base.META_SCHEMA, format_checker=base.FORMAT_CHECKER).iter_errors(parsed))
        if found is not None:
            raise SchemaError.create_from(found)
    except Expired:
        raise
    except SchemaError as bad:
        return f"the tool's inputSchema is not a valid JSON Schema ({bad.message}), so no call of it is sent"
    except Exception as bad:
        return f"the tool's inputSchema cannot be used ({type(bad).__name__}), so no call of it is sent"
    why = unrunnable(parsed)
    if why is not None:
        return f"the tool's inputSchema has a pattern the gateway cannot check in bounded time: {why}"
    try:
        return _extended(base)(parsed)
    except Exception as bad:
        return f"the tool's inputSchema cannot be used ({type(bad).__name__}), so no call of it is sent"


@functools.lru_cache(maxsize=16)
def _extended(base: Any) -> Any:
    """A validator class like ``base`` whose every keyword looks at the clock, with patterns
    on RE2 and ``uniqueItems`` in linear time."""
    import jsonschema

    checks = dict(base.VALIDATORS)
    if "pattern" in checks:
        checks["pattern"] = _pattern
    if "patternProperties" in checks:
        checks["patternProperties"] = _pattern_properties
    if "additionalProperties" in checks:
        checks["additionalProperties"] = _additional_properties
    if "uniqueItems" in checks:
        checks["uniqueItems"] = _unique_items
    bounded = {name: check if name in _CONSTANT else _bounded(check) for name, check in checks.items()}
    return jsonschema.validators.extend(base, bounded)
