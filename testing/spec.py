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
    escalate = []                     # actions that must wait for a person's approval
    reasons = { c1 = ["toxic-flow"] } # rule ids each denial must give
    derived = ['Tainted("c1")']       # facts that must hold at the end
    not_derived = ['HasSecret("c1")'] # facts that must not

A case's input is ``events`` (inline) or ``trace`` (a JSON Lines file as ``policyc replay``
reads it; ``session`` picks one of its lines, by its ``session`` name or 1-based number,
default the first), and/or ``facts`` (rows per input relation, or the path of a facts file as
``policyc eval`` reads it). With events, the case runs as a monitor session; with facts only,
as one evaluation, and ``deny``/``allow``/``escalate`` name the actions decided on it.

The verdicts are checked exactly: an escalated call (``Escalate``, no ``Deny``) is neither in
``deny`` nor in ``allow``, but in ``escalate``; ``reasons`` of an escalated call are the
escalating rules' ids. The case's monitor has no approver, so a call is allowed after an
escalation only by an ``approval`` event of its trace (as :meth:`Session.approve` records it).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyc.compiler.reading import Cursor

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
    "escalate",
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
    escalate: tuple[Any, ...] = ()  # actions that must be escalated
    session: str | None = None  # the session's id, from its trace (its approvals name it)


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
    from policyc.compiler.reading import FormatError

    try:
        text = read_bytes(path, POLICY_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TestFileError(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None
    try:
        return _file(path, _parse(path, text), _Lines(text))
    except FormatError as error:
        raise TestFileError(str(error)) from None


def _parse(path: Path, text: str) -> dict[str, Any]:
    """The TOML of a test file (:class:`FormatError` at the line and column it fails)."""
    from policyc.compiler.reading import FormatError

    try:
        return tomllib.loads(text)
    except RecursionError:
        raise FormatError(str(path), 1, "", "not valid TOML: nested too deeply", 1) from None
    except ValueError as error:
        if not isinstance(error, tomllib.TOMLDecodeError):  # an integer Python will not convert
            raise FormatError(str(path), 1, "", f"not valid TOML: {error}", 1) from None
        where = re.search(r"\(at line (\d+), column (\d+)\)", str(error))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        line, column = (int(where.group(1)), int(where.group(2))) if where else (1, 1)
        raise FormatError(str(path), line, "", f"not valid TOML: {message}", column) from None


class _Lines:
    """Where a key of a test file is written: :mod:`tomllib` keeps no positions, so a value's
    line is found, on an error only, from the ``[[test]]`` headers and the ``key =`` lines."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers = [n for n, line in enumerate(self.lines, 1) if _HEADER.match(line)]

    def header(self, index: int) -> int:
        return self.headers[index] if index < len(self.headers) else 1

    def locate(self, path: tuple[Any, ...]) -> int:
        if not path:
            return 1
        if path[0] == "test" and len(path) >= 2 and isinstance(path[1], int):
            start = self.header(path[1])
            if len(path) >= 3 and isinstance(path[2], str) and start in self.headers:
                return self.key(path[2], start, self.headers[self.headers.index(start) + 1 :]) or start
            return start
        return (self.key(str(path[0]), 0, self.headers) if isinstance(path[0], str) else None) or 1

    def key(self, name: str, start: int, after: list[int]) -> int | None:
        """The line of ``name = ...`` after line ``start``, before the next header."""
        end = min(after, default=len(self.lines) + 1)
        written = re.compile(rf"\s*(?:{re.escape(name)}|\"{re.escape(name)}\")\s*=")
        for number in range(start + 1, end):
            if written.match(self.lines[number - 1]):
                return number
        return None


_HEADER = re.compile(r"\s*\[\[\s*test\s*\]\]")


def _file(path: Path, data: dict[str, Any], lines: _Lines) -> TestFile:
    from policyc.compiler.reading import Cursor, Source

    top = Cursor.root(data, Source(str(path), lines.locate)).object(TOP_KEYS)
    policy = top.child("policy")
    if not isinstance(policy.value, str):
        raise policy.fail(
            "missing: the path of the policy under test"
            if policy.value is None
            else "expected the path of the policy under test, a string"
        )
    functors = top.optional("functors", _module, None)
    if isinstance(functors, str) and functors.endswith(".py"):
        functors = str(path.parent / functors)
    raw = top.child("test")
    if not isinstance(raw.value, list) or not raw.value:
        raise raw.fail("a test file has at least one `[[test]]` case")
    cases = tuple(_case(path, item, i, lines.header(i)) for i, item in enumerate(raw.list()))
    names = [c.name for c in cases]
    for item, c in zip(raw.list(), cases, strict=True):
        if names.count(c.name) > 1:
            raise item.fail(f"two cases are named `{c.name}`")
    return TestFile(path, path.parent / policy.value, functors, cases)


def _module(at: Cursor) -> str:
    if not isinstance(at.value, str):
        raise at.expected("the path or dotted name of a Python module")
    return at.value


def _case(path: Path, item: Cursor, i: int, line: int) -> Case:
    if not isinstance(item.value, dict):
        raise item.fail("a case is a table")
    item.object(CASE_KEYS)
    name = item.optional("name", lambda at: at.string(empty=False), f"case {i + 1}")
    where = f"case `{name}`"
    events = item.child("events").value
    facts_at = item.child("facts")
    facts = facts_at.value
    principal, roles, session = None, (), None
    if item.has("trace"):
        if events is not None:
            raise item["trace"].fail(f"{where} has both `events` and `trace`")
        record = _trace(path, item["trace"], item.child("session").value, where)
        events = record["events"]
        if record.get("facts"):
            if facts is not None:
                raise facts_at.fail(f"{where} gives `facts` and its trace's session gives facts too")
            facts = record["facts"]
        principal = record.get("principal")
        roles = tuple(record.get("roles") or ())
        session = record.get("session")
    elif item.has("session"):
        raise item["session"].fail(f"{where}: `session` picks a session of a `trace`")
    if events is not None and (not isinstance(events, list) or not all(isinstance(e, dict) for e in events)):
        if item.has("trace"):
            raise item["trace"].fail("the session's `events` is not a list of event objects")
        raise item["events"].expected("a list of event tables")
    if isinstance(facts, str):
        facts = str(path.parent / facts)
    elif facts is not None and not (
        isinstance(facts, dict) and all(isinstance(rows, list) for rows in facts.values())
    ):
        raise facts_at.expected("a table of rows per relation, or a facts file's path")
    if events is None and facts is None:
        raise item.fail(f"{where} has no input: give `events`, `trace` or `facts`")

    def actions(key: str) -> tuple[Any, ...]:
        at = item.child(key)
        value = [] if at.value is None else at.value
        if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
            raise at.expected("a list of actions (strings or integers)")
        return tuple(value)

    def strings(key: str) -> tuple[str, ...]:
        at = item.child(key)
        value = [] if at.value is None else at.value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise at.expected('a list of facts written like `Deny("c1")`')
        return tuple(value)

    reasons_at = item.child("reasons")
    reasons = {} if reasons_at.value is None else reasons_at.value
    if not isinstance(reasons, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in reasons.values()
    ):
        raise reasons_at.expected("a table mapping actions to lists of rule ids")
    deny, allow, escalate = actions("deny"), actions("allow"), actions("escalate")
    both = set(deny) & set(allow)
    if both:
        raise item["allow"].fail(f"`{sorted(map(str, both))[0]}` is both in `deny` and in `allow`")
    for other, given in (("deny", deny), ("allow", allow)):
        both = set(escalate) & set(given)
        if both:
            raise item["escalate"].fail(
                f"`{sorted(map(str, both))[0]}` is both in `{other}` and in `escalate`"
            )
    derived, not_derived = strings("derived"), strings("not_derived")
    if not (deny or allow or escalate or reasons or derived or not_derived):
        raise item.fail(
            f"{where} expects nothing: give `deny`, `allow`, `escalate`, `reasons`, `derived` or `not_derived`"
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
        escalate,
        None if session is None else str(session),
    )


def _trace(path: Path, trace: Cursor, session: Any, where: str) -> dict[str, Any]:
    from policyc.runtime.replay import TraceError, read_sessions

    if not isinstance(trace.value, str):
        raise trace.expected("the path of a JSON Lines file")
    file = path.parent / trace.value
    try:
        records = [record for _, _, record in read_sessions(str(file))]
    except TraceError as error:
        raise trace.fail(str(error)) from None
    except OSError as error:
        raise trace.fail(f"cannot read the trace `{file}`: {error.strerror or error}") from None
    if not records:
        raise trace.fail(f"the trace `{file}` holds no session")
    if session is None:
        return records[0]
    for number, record in enumerate(records, 1):
        if session == number or (isinstance(session, str) and record.get("session") == session):
            return record
    raise trace.fail(f"the trace `{file}` has no session `{session}`")
