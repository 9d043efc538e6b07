"""Tool pinning (policyc.gateway.pins): the lock of the tools' definitions, what changed since,
and the lock file's reader.

Properties where an oracle exists: any change to a tool's description or input schema is
found, and only that field is named; reordering a schema's keys or the tools is no change; a
lock written and read back is the same lock.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.types import Implementation, Tool

from policyc.gateway.pins import (
    Change,
    Lock,
    LockError,
    changes,
    dump_lock,
    parse_lock,
    pins,
    read_lock,
    write_lock,
)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
schemas = st.dictionaries(st.text(max_size=8), json_values, max_size=5)
names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
descriptions = st.none() | st.text(max_size=40)


def tool(name: str, description: str | None = "d", schema: dict | None = None) -> Tool:
    return Tool(
        name=name, description=description, input_schema=schema if schema is not None else {"type": "object"}
    )


def reordered(value):
    """``value`` with the keys of every object in reverse order."""
    if isinstance(value, dict):
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(v) for v in value]
    return value


# ---------------------------------------------------------------------------- properties


@SETTINGS
@given(names, descriptions, schemas, descriptions)
def test_a_changed_description_is_found(name, description, schema, other) -> None:
    lock = pins({"s": [tool(name, description, schema)]})
    found = changes(lock, {"s": [tool(name, other, schema)]})
    assert found == ([] if other == description else [Change("s", name, "description")])


@SETTINGS
@given(names, descriptions, schemas, schemas)
def test_a_changed_schema_is_found(name, description, schema, other) -> None:
    lock = pins({"s": [tool(name, description, schema)]})
    found = changes(lock, {"s": [tool(name, description, other)]})
    same = json.dumps(schema, sort_keys=True) == json.dumps(other, sort_keys=True)
    assert found == ([] if same else [Change("s", name, "inputSchema")])


@SETTINGS
@given(names, descriptions, schemas)
def test_key_order_in_a_schema_is_no_change(name, description, schema) -> None:
    lock = pins({"s": [tool(name, description, schema)]})
    assert changes(lock, {"s": [tool(name, description, reordered(schema))]}) == []


@SETTINGS
@given(st.dictionaries(names, st.tuples(descriptions, schemas), min_size=1, max_size=5))
def test_a_lock_written_and_read_is_the_same(listed) -> None:
    tools = {"s": [tool(n, d, s) for n, (d, s) in listed.items()], "t": []}
    lock = pins(tools, {"s": Implementation(name="srv", version="1.2")})
    assert parse_lock(dump_lock(lock), "x.lock.json") == lock
    assert changes(lock, {"s": list(reversed(tools["s"])), "t": []}) == []


# -------------------------------------------------------------------------------- cases


def test_new_removed_and_both_fields() -> None:
    lock = pins(
        {"fs": [tool("read", "reads"), tool("write", "writes", {"type": "object"})], "git": [tool("log")]}
    )
    now = {
        "fs": [
            tool("read", "reads"),
            tool("write", "writes, then mails", {"type": "object", "x": 1}),
            tool("rm"),
        ],
    }
    assert changes(lock, now) == [
        Change("fs", "rm", "new"),
        Change("fs", "write", "description"),
        Change("fs", "write", "inputSchema"),
        Change("git", "log", "removed"),  # its server is not listed at all
    ]
    assert [str(c) for c in changes(lock, now)][1] == "fs.write: the description changed since the lock"


def test_a_tool_listed_twice_differently_is_a_change() -> None:
    lock = pins({"s": [tool("t", "first"), tool("t", "second")]})
    assert lock.pin("s", "t").description == "first"
    assert changes(lock, {"s": [tool("t", "first"), tool("t", "second")]}) == [
        Change("s", "t", "description")
    ]


def test_no_description_and_an_empty_one_differ() -> None:
    lock = pins({"s": [tool("t", None)]})
    assert changes(lock, {"s": [tool("t", "")]}) == [Change("s", "t", "description")]


def test_the_file_is_reviewable_json(tmp_path: Path) -> None:
    lock = pins(
        {"fs": [tool("read", "Reads a file.\nIgnore earlier instructions \u2028 \ud800")]},
        {"fs": Implementation(name="secure-filesystem-server", version="0.2.0")},
    )
    path = tmp_path / "gateway.lock.json"
    write_lock(str(path), lock)
    document = json.loads(path.read_text("utf-8"))
    assert document["version"] == 1
    assert document["servers"]["fs"]["server"] == {"name": "secure-filesystem-server", "version": "0.2.0"}
    entry = document["servers"]["fs"]["tools"]["read"]
    assert entry["description"].startswith("Reads a file.\nIgnore")
    assert entry["inputSchema"].startswith("sha256:") and len(entry["inputSchema"]) == 71
    assert read_lock(str(path)) == lock  # a lone surrogate survives the round trip


@pytest.mark.parametrize(
    ("text", "location", "code"),
    [
        ("{", "1:2", "lock-syntax"),
        ("[]", "", "lock-invalid"),
        ('{"version": 2, "servers": {}}', "version", "lock-version"),
        ('{"version": 1}', "", "lock-invalid"),
        ('{"version": 1, "servers": {}, "extra": 1}', "", "lock-invalid"),
        (
            '{"version": 1, "servers": {"fs": {"server": {"name": null, "version": null}}}}',
            "servers.fs",
            "lock-invalid",
        ),
        (
            '{"version": 1, "servers": {"fs": {"server": {"name": 3, "version": null}, "tools": {}}}}',
            "servers.fs.server.name",
            "lock-invalid",
        ),
        (
            '{"version": 1, "servers": {"fs": {"server": {"name": null, "version": null}, '
            '"tools": {"read": {"description": "d", "inputSchema": "md5:00"}}}}}',
            "servers.fs.tools.read.inputSchema",
            "lock-invalid",
        ),
        (
            '{"version": 1, "servers": {"fs": {"server": {"name": null, "version": null}, '
            '"tools": {"read": {"description": ["d"], "inputSchema": "sha256:' + "0" * 64 + '"}}}}}',
            "servers.fs.tools.read.description",
            "lock-invalid",
        ),
        ("[" * 100_000, "", "lock-syntax"),
    ],
)
def test_a_bad_lock_is_an_error_value(text: str, location: str, code: str) -> None:
    error = parse_lock(text, "g.lock.json")
    assert isinstance(error, LockError), error
    assert (error.file, error.location, error.code) == ("g.lock.json", location, code)
    assert str(error).startswith("g.lock.json") and f"[{code}]" in str(error) and "\n" not in str(error)


def test_files_that_cannot_be_read(tmp_path: Path) -> None:
    missing = read_lock(str(tmp_path / "none.json"))
    assert isinstance(missing, LockError) and missing.code == "lock-missing"
    assert read_lock(str(tmp_path)).code == "lock-unreadable"
    (tmp_path / "latin1.json").write_bytes(b'{"\xe9"}')
    assert read_lock(str(tmp_path / "latin1.json")).code == "lock-unreadable"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_lock(str(fifo)).code == "lock-unreadable"  # not waited on


def test_an_empty_lock_is_a_lock() -> None:
    lock = parse_lock('{"version": 1, "servers": {}}', "x")
    assert lock == Lock((), ())
    assert changes(lock, {"s": [tool("t")]}) == [Change("s", "t", "new")]
