"""Policy test files: what `policyc test` reads.

A test file is TOML, named ``*_test.toml``, next to the policy it tests::

    policy = "toxic_flow.dl"          # relative to this file (a source file or a bundle)
    functors = "functors.py"          # optional: a module implementing the policy's functors

    [[test]]
    name = "untrusted and sensitive data may not leave"
    events = [                        # a session, in order; tool calls are decided as they come
      { id = "r1", kind = "tool_result", labels = ["untrusted"] },
      { id = "c1", kind = "tool_call", tool = "send_email", deps = ["r1"] },
    ]
    deny = ["c1"]                     # actions that must be denied
    allow = []                        # actions that must be allowed
    reasons = { c1 = ["toxic-flow"] } # rule ids each denial must give
    derived = ['Tainted("c1")']       # facts that must hold at the end
    not_derived = ['HasSecret("c1")'] # facts that must not

A case's input is ``events`` (inline) or ``trace`` (a JSON Lines file as ``policyc replay``
reads it; ``session`` picks one of its lines, by its ``session`` name or 1-based number,
default the first), and/or ``facts`` (rows per input relation, or the path of a facts file as
``policyc eval`` reads it). With events, the case runs as a monitor session; with facts only,
as one evaluation, and ``deny``/``allow`` name the actions decided on it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUFFIX = "_test.toml"
TOP_KEYS = {"policy", "functors", "test"}
CASE_KEYS = {
    "name",
    "events",
    "trace",
    "session",
    "facts",
    "deny",
    "allow",
    "reasons",
    "derived",
    "not_derived",
}


class TestFileError(ValueError):
    """A test file that cannot be run; the message starts with its location."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class Case:
    name: str
    line: int  # where its `[[test]]` header is
    events: list[dict[str, Any]] | None = None
    facts: dict[str, list[list[Any]]] | str | None = None  # rows, or a facts file's path
    deny: tuple[Any, ...] = ()
    allow: tuple[Any, ...] = ()
    reasons: dict[str, tuple[str, ...]] = field(default_factory=dict)
    derived: tuple[str, ...] = ()
    not_derived: tuple[str, ...] = ()
    principal: str | None = None  # a session's, from its trace
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class TestFile:
    __test__ = False  # not a pytest class

    path: Path
    policy: Path
    functors: str | None
    cases: tuple[Case, ...]


def discover(paths: list[str]) -> tuple[list[Path], list[str]]:
    """The test files under the given paths (files or folders, searched recursively), and the
    paths that do not exist."""
    found: list[Path] = []
    missing: list[str] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob(f"*{SUFFIX}"))
                if not any(part.startswith(".") for part in p.parts)
            )
        elif path.is_file():
            found.append(path)
        else:
            missing.append(name)
    return list(dict.fromkeys(found)), missing


def read(path: Path) -> TestFile:
    """A test file, checked (:class:`TestFileError` with a location otherwise)."""
    from policyc.compiler.files import POLICY_LIMIT, read_bytes

    try:
        text = read_bytes(path, POLICY_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TestFileError(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise TestFileError(f"{path}:1:1: not valid TOML: nested too deeply") from None
    except ValueError as error:
        if not isinstance(error, tomllib.TOMLDecodeError):  # an integer Python will not convert
            raise TestFileError(f"{path}:1:1: not valid TOML: {error}") from None
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(error))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        place = f"{where.group(1)}:{where.group(2)}" if where else "1:1"
        raise TestFileError(f"{path}:{place}: not valid TOML: {message}") from None
    headers = [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"\s*\[\[\s*test\s*\]\]", line)]

    def fail(message: str, line: int = 1) -> TestFileError:
        return TestFileError(f"{path}:{line}: {message}")

    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise fail(f"unknown key `{unknown[0]}` (a test file has {', '.join(sorted(TOP_KEYS))})")
    if not isinstance(data.get("policy"), str):
        raise fail("`policy` (the path of the policy under test) is missing")
    functors = data.get("functors")
    if functors is not None and not isinstance(functors, str):
        raise fail("`functors` is the path or dotted name of a Python module")
    if isinstance(functors, str) and functors.endswith(".py"):
        functors = str(path.parent / functors)
    raw = data.get("test", [])
    if not isinstance(raw, list) or not raw:
        raise fail("a test file has at least one `[[test]]` case")
    cases = []
    for i, item in enumerate(raw):
        line = headers[i] if i < len(headers) else 1
        cases.append(_case(path, item, i, line, fail))
    names = [c.name for c in cases]
    for c in cases:
        if names.count(c.name) > 1:
            raise fail(f"two cases are named `{c.name}`", c.line)
    return TestFile(path, path.parent / data["policy"], functors, tuple(cases))


def _case(path: Path, item: Any, i: int, line: int, fail: Any) -> Case:
    if not isinstance(item, dict):
        raise fail("a case is a table", line)
    unknown = sorted(set(item) - CASE_KEYS)
    if unknown:
        raise fail(f"unknown key `{unknown[0]}` in a case (a case has {', '.join(sorted(CASE_KEYS))})", line)
    name = item.get("name", f"case {i + 1}")
    if not isinstance(name, str) or not name:
        raise fail("a case's `name` is a non-empty string", line)
    where = f"case `{name}`"
    events = item.get("events")
    facts = item.get("facts")
    principal, roles = None, ()
    if "trace" in item:
        if events is not None:
            raise fail(f"{where} has both `events` and `trace`", line)
        record = _trace(path, item["trace"], item.get("session"), where, line, fail)
        events = record["events"]
        if record.get("facts"):
            if facts is not None:
                raise fail(f"{where} gives `facts` and its trace's session gives facts too", line)
            facts = record["facts"]
        principal = record.get("principal")
        roles = tuple(record.get("roles") or ())
    elif "session" in item:
        raise fail(f"{where}: `session` picks a session of a `trace`", line)
    if events is not None and (not isinstance(events, list) or not all(isinstance(e, dict) for e in events)):
        raise fail(f"{where}: `events` is a list of event tables", line)
    if isinstance(facts, str):
        facts = str(path.parent / facts)
    elif facts is not None and not (
        isinstance(facts, dict) and all(isinstance(rows, list) for rows in facts.values())
    ):
        raise fail(f"{where}: `facts` is a table of rows per relation, or a facts file's path", line)
    if events is None and facts is None:
        raise fail(f"{where} has no input: give `events`, `trace` or `facts`", line)

    def actions(key: str) -> tuple[Any, ...]:
        value = item.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
            raise fail(f"{where}: `{key}` is a list of actions (strings or integers)", line)
        return tuple(value)

    def strings(key: str) -> tuple[str, ...]:
        value = item.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(f'{where}: `{key}` is a list of facts written like `Deny("c1")`', line)
        return tuple(value)

    reasons = item.get("reasons", {})
    if not isinstance(reasons, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in reasons.values()
    ):
        raise fail(f"{where}: `reasons` maps actions to lists of rule ids", line)
    deny, allow = actions("deny"), actions("allow")
    both = set(deny) & set(allow)
    if both:
        raise fail(f"{where}: `{sorted(map(str, both))[0]}` is both in `deny` and in `allow`", line)
    derived, not_derived = strings("derived"), strings("not_derived")
    if not (deny or allow or reasons or derived or not_derived):
        raise fail(
            f"{where} expects nothing: give `deny`, `allow`, `reasons`, `derived` or `not_derived`", line
        )
    return Case(
        name,
        line,
        events,
        facts,
        deny,
        allow,
        {str(k): tuple(v) for k, v in reasons.items()},
        derived,
        not_derived,
        principal if isinstance(principal, str) else None,
        tuple(str(r) for r in roles),
    )


def _trace(path: Path, trace: Any, session: Any, where: str, line: int, fail: Any) -> dict[str, Any]:
    from policyc.runtime.replay import TraceError, read_sessions

    if not isinstance(trace, str):
        raise fail(f"{where}: `trace` is the path of a JSON Lines file", line)
    file = path.parent / trace
    try:
        records = [record for _, _, record in read_sessions(str(file))]
    except TraceError as error:
        raise fail(f"{where}: {error}", line) from None
    except OSError as error:
        raise fail(f"{where}: cannot read the trace `{file}`: {error.strerror or error}", line) from None
    if not records:
        raise fail(f"{where}: the trace `{file}` holds no session", line)
    if session is None:
        return records[0]
    for number, record in enumerate(records, 1):
        if session == number or (isinstance(session, str) and record.get("session") == session):
            return record
    raise fail(f"{where}: the trace `{file}` has no session `{session}`", line)
