"""`policyc lsp`: the installed command, started as a subprocess and driven by a real LSP client
(pytest-lsp), for every feature; the positions and settings helpers in-process.

Most tests share one server (a fresh document each); those that need settings of their own
start their own. The oracle for diagnostics is `policyc check --format json` on the same file.
"""

from __future__ import annotations

import asyncio
import doctest
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_lsp
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from policyc.compiler.formatter import format_source
from policyc.compiler.loader import library_modules
from policyc.compiler.pipeline import check_source, compile_file
from policyc.lsp import positions, settings

from .conftest import EXAMPLES, ROOT, policyc_command, run_policyc

FIXTURES = Path(__file__).parent / "lsp"
STDLIB = ROOT / "stdlib"
WAIT = 60.0  # seconds before a test gives up waiting for the server (a failure, never a pass)

lsp = pytest.mark.asyncio(loop_scope="module")


# --------------------------------------------------------------------------- the client


def _client() -> LanguageClient:
    """pytest-lsp's client, keeping every publication of diagnostics (with its version)."""
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # type: ignore[attr-defined]

    def publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(params)  # type: ignore[attr-defined]

    register_lsp_features(
        client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish}
    )
    return client


def _config() -> ClientServerConfig:
    return ClientServerConfig(server_command=[*policyc_command(), "lsp", "--stdio"], client_factory=_client)


def _initialize(options: dict | None = None, encodings: list | None = None) -> types.InitializeParams:
    capabilities = client_capabilities("visual-studio-code")
    if encodings is not None:
        capabilities.general = types.GeneralClientCapabilities(position_encodings=encodings)
    return types.InitializeParams(capabilities=capabilities, initialization_options=options)


@pytest_lsp.fixture(config=_config(), scope="module")
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(_initialize({"policyc": {"debounceMs": 50}}))
    yield
    await lsp_client.shutdown_session()


async def _own_server(options: dict | None = None, encodings: list | None = None) -> LanguageClient:
    own = await _config().start()
    await own.initialize_session(_initialize(options, encodings))
    return own


async def _close(own: LanguageClient) -> None:
    await own.shutdown_session()
    await own.stop()


async def published(
    client: LanguageClient, uri: str, version: int | None, after: int = 0, want=None
) -> types.PublishDiagnosticsParams:
    """The first publication for ``uri`` at ``version`` from the ``after``-th on (and, given
    ``want``, one it accepts)."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while asyncio.get_running_loop().time() < deadline:
        for params in client.published[after:]:  # type: ignore[attr-defined]
            if params.uri == uri and params.version == version and (want is None or want(params)):
                return params
        await asyncio.sleep(0.02)
    pytest.fail(f"no diagnostics for {uri} version {version} within {WAIT:g} s")


async def open_document(
    client: LanguageClient, path: Path, text: str | None = None
) -> list[types.Diagnostic]:
    """Open a file (with ``text``, or the file's own) and wait for its diagnostics."""
    text = path.read_text("utf-8") if text is None else text
    mark = len(client.published)  # type: ignore[attr-defined]
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(path.as_uri(), "datalog", 1, text))
    )
    return list((await published(client, path.as_uri(), 1, mark)).diagnostics)


async def change(client: LanguageClient, path: Path, text: str, version: int) -> list[types.Diagnostic]:
    mark = len(client.published)  # type: ignore[attr-defined]
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=path.as_uri()),
            [types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )
    return list((await published(client, path.as_uri(), version, mark)).diagnostics)


def close(client: LanguageClient, path: Path) -> None:
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(path.as_uri()))
    )


def doc(path: Path) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(path.as_uri())


# ---------------------------------------------------------------------------- oracles


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def position_of(text: str, needle: str, nth: int = 0, inside: int = 0) -> types.Position:
    """The LSP position of the ``nth`` occurrence of ``needle`` (plus ``inside`` characters)."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    at += inside
    line = text.count("\n", 0, at)
    start = text.rfind("\n", 0, at) + 1
    return types.Position(line, utf16(text[start:at]))


def lsp_range(text: str, line: int, column: int, end_line: int, end_column: int) -> tuple:
    """A 1-based code-point range of `policyc check --format json` as LSP's 0-based UTF-16 one."""
    lines = text.split("\n")

    def at(line: int, column: int) -> tuple[int, int]:
        return line - 1, utf16(lines[line - 1][: column - 1]) if line - 1 < len(lines) else 0

    return at(line, column), at(end_line, end_column)


def astuple(p: types.Position) -> tuple[int, int]:
    return p.line, p.character


def as_tuple(r: types.Range) -> tuple:
    return (r.start.line, r.start.character), (r.end.line, r.end.character)


def check_json(*args: str) -> list[dict]:
    run = run_policyc("check", "--format", "json", *args)
    assert run.status in (0, 1), run.stderr
    return run.json()["diagnostics"]


def expected(path: Path, text: str, *deep: str) -> list[tuple]:
    """What `policyc check` reports for a file, as the LSP should show it."""
    found = []
    for d in check_json(*deep, str(path)):
        assert Path(d["file"]).resolve() == path.resolve(), d
        start, end = lsp_range(text, d["line"], d["column"], d["end_line"], d["end_column"])
        related = [(r["message"], file_uri(r["file"])) for r in d["related"]]
        help_text = [f"help: {d['help']}"] if d["help"] else []
        found.append((d["code"], d["severity"], d["message"], (start, end), related, help_text))
    return found


def file_uri(name: str) -> str:
    """The URI of a file a diagnostic names (a library module is a file of the package)."""
    if name.startswith("<stdlib>/"):
        return (STDLIB / name[len("<stdlib>/") :]).resolve().as_uri()
    return Path(name).resolve().as_uri()


def shown(diagnostics: list[types.Diagnostic]) -> list[tuple]:
    found = []
    for d in diagnostics:
        related = d.related_information or []
        severity = "error" if d.severity == types.DiagnosticSeverity.Error else "warning"
        found.append(
            (
                d.code,
                severity,
                d.message,
                as_tuple(d.range),
                [
                    (r.message, r.location.uri)
                    for r in related
                    if not r.message.startswith(("help: ", "strength: "))
                ],
                [r.message for r in related if r.message.startswith("help: ")],
            )
        )
    return found


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """The text with LSP edits applied (positions in UTF-16, as the server sends them)."""
    index = positions.LineIndex(text)
    spans = sorted(
        (
            (
                index.offset(e.range.start.line, e.range.start.character),
                index.offset(e.range.end.line, e.range.end.character),
                e.new_text,
            )
            for e in edits
        ),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def copy_fixtures(tmp_path: Path) -> tuple[Path, Path]:
    for name in ("main.dl", "rules.dl"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path / "main.dl", tmp_path / "rules.dl"


# ------------------------------------------------------------------------- diagnostics

PLANTED = [
    ("toxic_flow/toxic_flow.dl", "Tainted(a), HasSecret(a)", "Taint(a), HasSecret(a)"),
    ("mls/mls.dl", ".import mls", ".import mls\nDeny(a) :- Action(a), Level(a, x, y)."),
    ("agentdojo/policy.dl", ".import", "Deny(a) :- Action(a), Tainted(a, b).\n.import"),
    (
        "tau2_airline/tau2_airline.dl",
        ".import",
        '@mesage("x")\nDeny(a) :- Action(a), a = 3, Sent(a, v).\n.import',
    ),
]


@lsp
@pytest.mark.parametrize(("example", "old", "new"), PLANTED, ids=[p[0].split("/")[0] for p in PLANTED])
async def test_an_example_with_a_planted_error_gets_what_check_reports(
    client: LanguageClient, tmp_path: Path, example: str, old: str, new: str
) -> None:
    """The Done-when of the issue: same codes, severities, messages, places, related places
    and help as `policyc check --format json` on the same file."""
    folder = tmp_path / example.split("/")[0]
    shutil.copytree(EXAMPLES / example.split("/")[0], folder)
    path = folder / example.split("/")[1]
    text = path.read_text("utf-8")
    assert old in text
    text = text.replace(old, new, 1)
    path.write_text(text, "utf-8")
    want = expected(path, text)
    assert any(code.startswith("PC1") for code, *_ in want), "the planted error is an error"
    got = await open_document(client, path)
    assert shown(got) == want  # in the same order too
    close(client, path)


@lsp
async def test_several_errors_then_an_edit_that_fixes_one(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "several.dl"
    text = (
        ".decl Send(a: symbol, n: number)\n.input Send\n"
        "Deny(a) :- Send(a, n), Taint(a).\n"  # undefined relation
        'Deny(a) :- Send(a, 1, 2), n = "x" + 1.\n'  # arity, type, unsafe
        "Allow(a) :- Send(a, k).\n"  # singleton (a warning)
    )
    got = await open_document(client, path, text)
    oracle = check_source(text, str(path))
    assert len(oracle) >= 4
    assert [(d.code, d.message) for d in got] == [(d.code, d.message) for d in oracle]
    assert {d.code for d in got} >= {"PC101", "PC102", "PC201"}

    fixed = text.replace("Deny(a) :- Send(a, n), Taint(a).\n", "// fixed\nDeny(a) :- Send(a, n).\n")
    after = await change(client, path, fixed, 2)
    oracle = check_source(fixed, str(path))
    assert "PC101" not in {d.code for d in after}
    assert [(d.code, d.message, d.range.start.line) for d in after] == [
        (d.code, d.message, d.span.line - 1) for d in oracle
    ]
    assert len(after) < len(got)
    close(client, path)


@lsp
async def test_a_file_whose_uri_has_escapes(client: LanguageClient, tmp_path: Path) -> None:
    # A space or a non-ASCII letter in the path is percent-escaped in the URI (as is the drive
    # colon of every Windows path in VS Code): the document is still checked, also after changes,
    # and an unsaved change to a file it includes still counts.
    folder = tmp_path / "my policies" / "é"
    folder.mkdir(parents=True)
    main, rules = folder / "main.dl", folder / "rules.dl"
    rules.write_text(".decl Send(a: symbol)\n.input Send\n", "utf-8")
    text = '.include "rules.dl"\nDeny(a) :- Send(a), Taint(a).\n'
    main.write_text(text, "utf-8")
    assert "%20" in main.as_uri() and "%C3%A9" in main.as_uri()
    got = await open_document(client, main)
    assert shown(got) == expected(main, text)
    assert [d.code for d in got] == ["PC101"]
    fixed = text.replace(", Taint(a)", "")
    assert await change(client, main, fixed, 2) == []
    await open_document(client, rules)
    mark = len(client.published)  # type: ignore[attr-defined]
    await change(client, rules, ".decl Sent(a: symbol)\n.input Sent\n", 2)
    rechecked = await published(client, main.as_uri(), 2, mark)
    assert [d.code for d in rechecked.diagnostics] == ["PC101"]  # `Send` is gone from rules.dl
    close(client, rules)
    close(client, main)


@lsp
async def test_non_ascii_text_before_a_diagnostic_counts_utf16_units(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "unicode.dl"
    text = '.input Send, Text\nDeny(a) :- Send(a), Text(a, "é😀𝄞"), Taint(a).\n'
    got = await open_document(client, path, text)
    (undefined,) = [d for d in got if d.code == "PC101"]
    start = position_of(text, "Taint")
    assert (undefined.range.start.line, undefined.range.start.character) == (start.line, start.character)
    assert undefined.range.end.character - undefined.range.start.character == len("Taint")
    # the code-point column policyc reports is smaller: two characters take two units each
    (d,) = [d for d in check_source(text, str(path)) if d.code == "PC101"]
    assert undefined.range.start.character == d.span.column - 1 + 2
    # and positions coming in are read the same way: hover just after the emojis
    hover = await client.text_document_hover_async(
        types.HoverParams(doc(path), position_of(text, "Taint", inside=2))
    )
    assert hover is not None and hover.range.start == undefined.range.start
    close(client, path)


@lsp
async def test_a_file_that_is_not_utf8_is_reported_as_check_reports_it(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "latin1.dl"
    data = ".input Send\n// caf\xe9 au lait\nDeny(a) :- Send(a).\n".encode("latin-1")
    path.write_bytes(data)
    text = data.decode("utf-8", errors="replace")  # what an editor shows and sends
    got = await open_document(client, path, text)
    want = expected(path, text)
    assert [w[0] for w in want] == ["PC002"]
    assert shown(got) == want
    # saved as UTF-8, the file checks clean
    path.write_text(text, "utf-8")
    mark = len(client.published)
    client.text_document_did_save(types.DidSaveTextDocumentParams(doc(path)))
    saved = await published(client, path.as_uri(), 1, mark)
    assert [d.code for d in saved.diagnostics] == [w[0] for w in expected(path, text)]
    assert "PC002" not in {d.code for d in saved.diagnostics}
    close(client, path)


@lsp
async def test_an_included_file_that_is_not_utf8_shows_on_the_include(
    client: LanguageClient, tmp_path: Path
) -> None:
    (tmp_path / "bad.dl").write_bytes(b"Sends(a) :- Action(a).\n// \xff\xfe\n")
    path = tmp_path / "root.dl"
    text = '.import events\n.include "bad.dl"\nDeny(a) :- Action(a).\n'
    path.write_text(text, "utf-8")
    got = await open_document(client, path)
    (check,) = check_json(str(path))
    assert check["code"] == "PC002" and Path(check["file"]).name == "bad.dl"
    (d,) = got
    assert d.code == "PC002"
    assert d.message == f"in `bad.dl` at {check['line']}:{check['column']}: {check['message']}"
    assert as_tuple(d.range) == ((1, 9), (1, 17))  # the path of the `.include`
    real = d.related_information[0]
    assert real.location.uri == (tmp_path / "bad.dl").as_uri() and real.message == check["message"]
    assert real.location.range.start == types.Position(check["line"] - 1, check["column"] - 1)
    close(client, path)


@lsp
async def test_an_unsaved_change_to_an_included_file_rechecks_the_includer(
    client: LanguageClient, tmp_path: Path
) -> None:
    main, rules = copy_fixtures(tmp_path)
    assert await open_document(client, main) == []
    assert await open_document(client, rules) == []
    broken = rules.read_text("utf-8").replace('is_tool(a, "send_email")', 'is_tool(a, "send_email"')
    mark = len(client.published)
    own = await change(client, rules, broken, 2)
    assert [d.code for d in own] == ["PC001"]
    # the includer is checked again with the buffer's text, its error shown on the `.include`
    after = await published(client, main.as_uri(), 1, mark, want=lambda p: p.diagnostics)
    (d,) = after.diagnostics
    main_text = main.read_text("utf-8")
    assert d.code == "PC001" and d.message.startswith("in `rules.dl` at 4:")
    assert d.range.start == position_of(main_text, '"rules.dl"')
    close(client, rules)  # closed unsaved: the file on disk counts again
    clean = await published(client, main.as_uri(), 1, len(client.published), want=lambda p: not p.diagnostics)
    assert list(clean.diagnostics) == []
    close(client, main)


@lsp
async def test_deep_checks_run_on_save_and_are_dropped_on_change(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "shadowed.dl"
    shutil.copy(ROOT / "tests" / "golden" / "shadowed-allow.dl", path)
    text = path.read_text("utf-8")
    opened = await open_document(client, path)
    assert sorted(shown(opened)) == sorted(expected(path, text))
    assert not any(d.code.startswith("PC3") for d in opened)
    mark = len(client.published)
    client.text_document_did_save(types.DidSaveTextDocumentParams(doc(path)))
    deep = await published(
        client, path.as_uri(), 1, mark, want=lambda p: any(d.code.startswith("PC3") for d in p.diagnostics)
    )
    want = expected(path, text, "--deep")
    assert any(w[0] == "PC304" for w in want)
    assert sorted(shown(deep.diagnostics)) == sorted(want)
    strengths = [
        r.message
        for d in deep.diagnostics
        for r in d.related_information or []
        if r.message.startswith("strength: ")
    ]
    assert strengths and all(("proved" in s) or ("bounded" in s) for s in strengths)
    edited = await change(client, path, text + "\n", 2)
    assert not any(d.code.startswith("PC3") for d in edited)
    close(client, path)


@lsp
async def test_deep_checks_whose_searches_run_in_processes_of_their_own(
    client: LanguageClient, tmp_path: Path
) -> None:
    # Redundant rules are found by bounded searches that the analyzer runs in a child process
    # of its own (stopped at its time limit): the server's deep-check process must allow that.
    path = tmp_path / "redundant.dl"
    path.write_text('.decl Send(a: symbol)\n.input Send\nDeny(a) :- Send(a).\nDeny(a) :- Send(a), a = "x".\n')
    text = path.read_text("utf-8")
    want = expected(path, text, "--deep")
    assert any(w[0] == "PC303" for w in want)
    await open_document(client, path)
    mark = len(client.published)
    client.text_document_did_save(types.DidSaveTextDocumentParams(doc(path)))
    deep = await published(
        client, path.as_uri(), 1, mark, want=lambda p: any(d.code.startswith("PC3") for d in p.diagnostics)
    )
    assert sorted(shown(deep.diagnostics)) == sorted(want)
    close(client, path)


@pytest.mark.asyncio
async def test_debounced_changes_publish_only_the_latest_version(tmp_path: Path) -> None:
    own = await _own_server({"policyc": {"debounceMs": 1500, "deep": False}})
    try:
        path = tmp_path / "typing.dl"
        text = ".input Send\nDeny(a) :- Send(a).\n"
        await open_document(own, path, text)
        mark = len(own.published)
        for version, typed in enumerate(("Deny(b) :- S", "Deny(b) :- Sen", "Deny(b) :- Send(b), Ok(b)."), 2):
            own.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    types.VersionedTextDocumentIdentifier(version=version, uri=path.as_uri()),
                    [types.TextDocumentContentChangeWholeDocument(text=text + typed)],
                )
            )
        last = await published(own, path.as_uri(), 4, mark)
        assert [d.code for d in last.diagnostics] == ["PC101"]
        assert [p.version for p in own.published[mark:] if p.uri == path.as_uri()] == [4]
    finally:
        await _close(own)


# ------------------------------------------------------------------------- navigation


@lsp
async def test_hover_on_a_relation(client: LanguageClient, tmp_path: Path) -> None:
    main, _ = copy_fixtures(tmp_path)
    text = main.read_text("utf-8")
    await open_document(client, main)
    hover = await client.text_document_hover_async(
        types.HoverParams(doc(main), position_of(text, "Tainted(a)"))
    )
    value = hover.contents.value
    assert ".decl Tainted(e: symbol)" in value
    assert "`Tainted(e)`: `e` was influenced by untrusted content." in value  # the doc comment
    assert "`Tainted(e) :- DependsOn(e, d), Tainted(d).` (this file, line 8)" in value
    strata = compile_file(str(main)).strata
    assert f"stratum {strata.of['Tainted']} of 0–{len(strata.strata) - 1}, recursive" in value
    # a relation of an included file, not declared: its inferred types and its rules there
    hover = await client.text_document_hover_async(
        types.HoverParams(doc(main), position_of(text, "Reached(a, n)"))
    )
    value = hover.contents.value
    assert "Reached(symbol, number)" in value and "not declared" in value
    assert "(`rules.dl`, line 8)" in value and "from `rules.dl`" in value
    # a library relation: its declaration and doc comment from the module
    hover = await client.text_document_hover_async(types.HoverParams(doc(main), position_of(text, "Label(")))
    value = hover.contents.value
    assert ".decl Label(e: symbol, label: symbol)" in value and "input" in value
    assert "from library `events`" in value and "a label the host attached" in value
    close(client, main)


@lsp
async def test_hover_on_a_functor_a_variable_and_an_import(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "functor.dl"
    text = '.import events\nDeny(a) :- Action(a), Text(a, t), contains(lower(t), "password").\n'
    await open_document(client, path, text)
    hover = await client.text_document_hover_async(
        types.HoverParams(doc(path), position_of(text, "contains"))
    )
    builtins = (STDLIB / "builtins.dl").read_text("utf-8")
    declaration = next(line for line in builtins.splitlines() if line.startswith(".functor contains("))
    comment = builtins.splitlines()[builtins.splitlines().index(declaration) - 1][3:]
    assert declaration in hover.contents.value and comment in hover.contents.value
    assert "builtin foreign predicate" in hover.contents.value
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "lower")))
    assert ".functor lower(text: symbol): symbol" in hover.contents.value
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "t)")))
    assert hover.contents.value == "variable `t`: 2 occurrences in this rule"
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "events")))
    first = (STDLIB / "events.dl").read_text("utf-8").splitlines()[0][3:]
    assert "library module `events`" in hover.contents.value and first in hover.contents.value
    close(client, path)


@lsp
async def test_go_to_definition(client: LanguageClient, tmp_path: Path) -> None:
    main, rules = copy_fixtures(tmp_path)
    text, rules_text = main.read_text("utf-8"), rules.read_text("utf-8")
    await open_document(client, main)

    async def definition(needle: str, nth: int = 0) -> list[tuple]:
        found = await client.text_document_definition_async(
            types.DefinitionParams(doc(main), position_of(text, needle, nth))
        )
        return [
            (Path(at.uri[len("file://") :]), (at.range.start.line, at.range.start.character)) for at in found
        ]

    # a relation: its declaration and the heads of its rules
    tainted = [
        p
        for p in (
            position_of(text, "Tainted(e: "),
            position_of(text, "Tainted(e) :- L"),
            position_of(text, "Tainted(e) :- D"),
        )
    ]
    assert await definition("Tainted(a)") == [(main, (p.line, p.character)) for p in tainted]
    # a relation defined in the included file
    heads = [position_of(rules_text, "Sends(a) :-", n) for n in (0, 1)]
    assert await definition("Sends(a)") == [(rules, (p.line, p.character)) for p in heads]
    # a relation of a library module: its `.decl` in the installed package
    events = (STDLIB / "events.dl").resolve()
    events_text = events.read_text("utf-8")
    line = events_text[: events_text.index(".decl Label(")].count("\n")
    assert await definition("Label(") == [(events, (line, len(".decl ")))]
    # the module of an `.import`, the file of an `.include`
    assert await definition("events") == [(events, (0, 0))]
    assert await definition('"rules.dl"') == [(rules, (0, 0))]
    # a variable: where its rule binds it
    binding = position_of(text, "DependsOn(e, d)", inside=len("DependsOn(e, "))
    assert await definition("d)", 0) == [(main, (binding.line, binding.character))]
    close(client, main)


@lsp
async def test_find_references_across_included_files(client: LanguageClient, tmp_path: Path) -> None:
    main, rules = copy_fixtures(tmp_path)
    text, rules_text = main.read_text("utf-8"), rules.read_text("utf-8")
    await open_document(client, main)

    async def references(needle: str, declaration: bool) -> list[tuple]:
        found = await client.text_document_references_async(
            types.ReferenceParams(
                context=types.ReferenceContext(include_declaration=declaration),
                text_document=doc(main),
                position=position_of(text, needle),
            )
        )
        return sorted((at.uri, at.range.start.line, at.range.start.character) for at in found)

    in_rules = [position_of(rules_text, "Sends(a)", n) for n in range(3)]
    want = [(main.as_uri(), *astuple(position_of(text, "Sends(a)")))]
    want += [(rules.as_uri(), *astuple(p)) for p in in_rules]
    assert await references("Sends(a)", True) == sorted(want)
    with_decl = await references("Tainted(a)", True)
    without = await references("Tainted(a)", False)
    code = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    assert len(with_decl) == len(re.findall(r"\bTainted\(", code)) == len(without) + 1
    assert set(without) < set(with_decl)
    close(client, main)


@lsp
async def test_rename_a_relation_in_every_file_it_is_written_in(
    client: LanguageClient, tmp_path: Path
) -> None:
    main, rules = copy_fixtures(tmp_path)
    text, rules_text = main.read_text("utf-8"), rules.read_text("utf-8")
    await open_document(client, main)
    prepared = await client.text_document_prepare_rename_async(
        types.PrepareRenameParams(doc(main), position_of(text, "Sends(a)", inside=2))
    )
    assert prepared.placeholder == "Sends" and prepared.range.start == position_of(text, "Sends(a)")
    edit = await client.text_document_rename_async(
        types.RenameParams(doc(main), position_of(text, "Sends(a)"), "SendsOut")
    )
    assert set(edit.changes) == {main.as_uri(), rules.as_uri()}
    new_main, new_rules = (
        apply(text, edit.changes[main.as_uri()]),
        apply(rules_text, edit.changes[rules.as_uri()]),
    )
    assert "Sends(" not in new_main + new_rules and new_rules.count("SendsOut(") == rules_text.count("Sends(")
    main.write_text(new_main, "utf-8")
    rules.write_text(new_rules, "utf-8")
    assert check_json(str(main)) == []
    close(client, main)


@lsp
async def test_rename_a_variable_in_its_rule_only(client: LanguageClient, tmp_path: Path) -> None:
    main, _ = copy_fixtures(tmp_path)
    text = main.read_text("utf-8")
    await open_document(client, main)
    edit = await client.text_document_rename_async(
        types.RenameParams(doc(main), position_of(text, "Deny(a)", inside=5), "action")
    )
    renamed = apply(text, edit.changes[main.as_uri()])
    assert '@message("{action} sends data' in renamed  # the placeholder too
    assert "Deny(action) :- Sends(action), Tainted(action), Reached(action, n), n > 1." in renamed
    assert "Tainted(e) :- DependsOn(e, d), Tainted(d)." in renamed  # other rules untouched
    assert check_source(renamed, str(main)) == check_source(text, str(main))
    # the same occurrences are highlighted
    highlights = await client.text_document_document_highlight_async(
        types.DocumentHighlightParams(doc(main), position_of(text, "Deny(a)", inside=5))
    )
    assert sorted(as_tuple(h.range) for h in highlights) == sorted(
        as_tuple(e.range) for e in edit.changes[main.as_uri()]
    )
    assert len(highlights) == 5
    close(client, main)


@lsp
@pytest.mark.parametrize(
    ("needle", "new_name", "reason"),
    [
        ("Label(", "Tag", "belongs to the standard library"),
        ("Deny(a)", "Refuse", "is a verdict relation"),
        ("Tainted(a)", "Sends", "already the name of a relation"),
        ("Tainted(a)", "not", "is not a valid name"),
        ("Tainted(a)", "2x", "is not a valid name"),
        ("d), Tainted(d)", "e", "already has a variable `e`"),
        ("events", "evts", "only relations and variables can be renamed"),
    ],
)
async def test_rename_refuses_what_would_break_the_policy(
    client: LanguageClient, tmp_path: Path, needle: str, new_name: str, reason: str
) -> None:
    main, _ = copy_fixtures(tmp_path)
    text = main.read_text("utf-8")
    await open_document(client, main)
    with pytest.raises(JsonRpcException, match=re.escape(reason)):
        await client.text_document_rename_async(
            types.RenameParams(doc(main), position_of(text, needle), new_name)
        )
    close(client, main)


@lsp
async def test_document_symbols(client: LanguageClient, tmp_path: Path) -> None:
    main, _ = copy_fixtures(tmp_path)
    await open_document(client, main)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(main)))
    assert [(s.name, s.kind) for s in symbols] == [
        ("events", types.SymbolKind.Module),
        ("rules.dl", types.SymbolKind.File),
        ("Tainted", types.SymbolKind.Class),
        ("Deny", types.SymbolKind.Class),
    ]
    tainted, deny = symbols[2], symbols[3]
    assert [c.name for c in tainted.children] == [".decl", "Tainted(e)", "Tainted(e)"]
    assert [c.name for c in deny.children] == ["no-tainted-send"]  # named by its @id

    def within(inner: types.Range, outer: types.Range) -> bool:
        return as_tuple(outer)[0] <= as_tuple(inner)[0] and as_tuple(inner)[1] <= as_tuple(outer)[1]

    for symbol in symbols:
        assert within(symbol.selection_range, symbol.range)
        for child in symbol.children:
            assert within(child.range, symbol.range) and within(child.selection_range, child.range)
    close(client, main)


# ------------------------------------------------------------------------- completion


async def _complete(client: LanguageClient, path: Path, text: str, position: types.Position) -> list:
    result = await client.text_document_completion_async(types.CompletionParams(doc(path), position))
    return result.items


@lsp
async def test_completion_of_directives_modules_and_annotations(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "typing.dl"
    text = ".import events\n.de\n.import \n@mes\n"
    await open_document(client, path, text)
    items = await _complete(client, path, text, position_of(text, ".de", inside=3))
    assert ".decl" in [i.label for i in items] and ".include" in [i.label for i in items]
    decl = next(i for i in items if i.label == ".decl")
    assert decl.text_edit.new_text == ".decl" and decl.text_edit.range.start == position_of(text, ".de")
    items = await _complete(client, path, text, position_of(text, ".import \n", inside=len(".import ")))
    assert [i.label for i in items] == library_modules()
    items = await _complete(client, path, text, position_of(text, "@mes", inside=4))
    assert {i.label for i in items} == {"id", "req", "message", "suggest", "severity"}
    close(client, path)


@lsp
async def test_no_completion_after_a_rule_ends_or_inside_comments_and_strings(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "quiet.dl"
    text = '.input Send\nDeny(a) :- Send(a).\n// a comment about Send\nAllow(a) :- Send(a), a = "x@y".\n'
    await open_document(client, path, text)

    async def labels(position: types.Position, trigger: str | None = None) -> list[str]:
        context = types.CompletionContext(
            types.CompletionTriggerKind.TriggerCharacter if trigger else types.CompletionTriggerKind.Invoked,
            trigger,
        )
        result = await client.text_document_completion_async(
            types.CompletionParams(doc(path), position, context)
        )
        return [i.label for i in result.items]

    assert await labels(position_of(text, "Send(a).", inside=len("Send(a).")), ".") == []
    assert await labels(position_of(text, "about Send", inside=len("about"))) == []
    assert await labels(position_of(text, '"x@y"', inside=3), "@") == []
    assert "Send" in await labels(position_of(text, "Send(a), a"))  # but in code, there is plenty
    close(client, path)


@lsp
async def test_completion_in_a_rule_being_written(client: LanguageClient, tmp_path: Path) -> None:
    main, _ = copy_fixtures(tmp_path)
    text = main.read_text("utf-8") + "Deny(act) :- Sends(act), Reached(act, count_of), Ta"
    await open_document(client, main, text)
    items = await _complete(
        client, main, text, types.Position(text.count("\n"), len(text.rsplit("\n", 1)[1]))
    )
    labels = {i.label: i for i in items}
    # variables of the rule being written (which does not parse yet), first
    assert {"act", "count_of"} <= set(labels) and "Ta" not in labels
    assert labels["act"].kind == types.CompletionItemKind.Variable
    assert labels["act"].sort_text < labels["Tainted"].sort_text
    # relations of this file, its includes and its imports; functors
    assert {"Tainted", "Sends", "Reached", "DependsOn", "Label"} <= set(labels)
    assert labels["Reached"].detail == "Reached(symbol, number)"
    assert labels["contains"].kind == types.CompletionItemKind.Method  # a foreign predicate
    assert labels["lower"].detail == "lower(text: symbol): symbol"
    assert "e" not in labels and "d" not in labels  # the variables of other rules
    # inside a parsed rule: its own variables
    items = await _complete(client, main, text, position_of(text, "DependsOn(e, d)"))
    variables = [i.label for i in items if i.kind == types.CompletionItemKind.Variable]
    assert variables == ["e", "d"]
    close(client, main)


# ------------------------------------------------------------------ actions, formatting


async def _actions(client: LanguageClient, path: Path, diagnostic: types.Diagnostic) -> list:
    only = [types.CodeActionKind.QuickFix]
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            doc(path), diagnostic.range, types.CodeActionContext(diagnostics=[diagnostic], only=only)
        )
    )


@lsp
async def test_quick_fixes_from_diagnostics(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "fixes.dl"
    text = (
        ".import event\n.decl Send(a: symbol, n: number)\n.input Send\n"
        "Tainted(a) :- Send(a, _).\n"
        "Deny(a) :- Send(a, n), Taint(a).\n"
        "Allow(a) :- Send(a, k), External(a, k, 3).\n"
    )
    got = await open_document(client, path, text)
    assert [d.code for d in got] == ["PC107"]  # the unknown module stops the pipeline

    (fix,) = await _actions(client, path, got[0])
    assert fix.title == "Replace `event` with `events`" and fix.kind == types.CodeActionKind.QuickFix
    text = apply(text, fix.edit.changes[path.as_uri()])
    assert text.startswith(".import events\n")
    got = await change(client, path, text, 2)
    by_code = {d.code: d for d in got}
    assert set(by_code) == {"PC101", "PC201", "PC202"}, [d.message for d in got]

    undefined = [d for d in got if d.code == "PC101"]
    taint = next(d for d in undefined if "Taint`" in d.message)
    (fix,) = await _actions(client, path, taint)
    assert fix.title == "Replace `Taint` with `Tainted`" and not fix.is_preferred
    fixed = apply(text, fix.edit.changes[path.as_uri()])
    assert "Deny(a) :- Send(a, n), Tainted(a)." in fixed

    external = next(d for d in undefined if "External" in d.message)
    (fix,) = await _actions(client, path, external)
    assert fix.title == "Declare `External` as an input relation"
    declared = apply(text, fix.edit.changes[path.as_uri()])
    assert ".input Send\n.decl External(a: symbol, k: number, x3: number)\n.input External\n" in declared
    assert "External" not in " ".join(d.message for d in check_source(declared, str(path)))

    singleton = next(d for d in got if d.code == "PC201")
    (fix,) = await _actions(client, path, singleton)
    assert fix.is_preferred and apply(text, fix.edit.changes[path.as_uri()]).count("Send(a, _)") == 2
    close(client, path)


@lsp
async def test_a_builtin_declared_again_is_a_warning_whose_fix_removes_the_line(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "souffle.dl"
    text = (
        ".functor contains(s: symbol, sub: symbol): bool\n.input Send\n"
        'Deny(a) :- Send(a, x), contains(x, "evil").\n'
    )
    (got,) = await open_document(client, path, text)
    assert (got.code, got.severity) == ("PC205", types.DiagnosticSeverity.Warning)
    assert "`contains` is a builtin functor" in got.message
    (fix,) = await _actions(client, path, got)
    assert fix.title == "Remove the declaration" and fix.is_preferred
    fixed = apply(text, fix.edit.changes[path.as_uri()])
    assert fixed == '.input Send\nDeny(a) :- Send(a, x), contains(x, "evil").\n'
    assert await change(client, path, fixed, 2) == []
    close(client, path)


@lsp
async def test_fix_all_applies_every_safe_fix(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "fixall.dl"
    text = ".input P, Q\nDeny(a) :- P(a, x), Q(a, y).\nAllow(a) :- P(a, z), Q(a, _).\n"
    got = await open_document(client, path, text)
    assert sorted(d.code for d in got) == ["PC201"] * 3
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            doc(path),
            types.Range(types.Position(0, 0), types.Position(0, 0)),
            types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll]),
        )
    )
    (every,) = actions
    assert every.kind == "source.fixAll.policyc"
    fixed = apply(text, every.edit.changes[path.as_uri()])
    assert fixed == ".input P, Q\nDeny(a) :- P(a, _), Q(a, _).\nAllow(a) :- P(a, _), Q(a, _).\n"
    assert check_source(fixed, str(path)) == []
    close(client, path)


@lsp
async def test_formatting(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "format.dl"
    text = ".input Send,Ok\nDeny(a):-Send(a),!Ok(a).   // why\n"
    await open_document(client, path, text)
    options = types.FormattingOptions(tab_size=4, insert_spaces=True)
    edits = await client.text_document_formatting_async(types.DocumentFormattingParams(doc(path), options))
    (edit,) = edits
    assert edit.range.start == types.Position(0, 0) and edit.range.end == types.Position(2, 0)
    assert edit.new_text == format_source(text) != text
    await change(client, path, edit.new_text, 2)
    unchanged = await client.text_document_formatting_async(
        types.DocumentFormattingParams(doc(path), options)
    )
    assert list(unchanged) == []
    await change(client, path, "Deny(a) :- Send(a)", 3)  # does not parse: nothing to format
    assert (
        await client.text_document_formatting_async(types.DocumentFormattingParams(doc(path), options))
        is None
    )
    close(client, path)


# --------------------------------------------------------------------- settings, encodings


@pytest.mark.asyncio
async def test_settings_problems_are_logged_and_utf32_is_negotiated(tmp_path: Path) -> None:
    own = await _own_server({"policyc": {"deepBound": 0, "colour": "blue"}}, encodings=["utf-32"])
    try:
        messages = [m.message for m in own.log_messages]
        assert any("`deepBound` is 0" in m for m in messages), messages
        assert any("unknown setting `colour`" in m for m in messages), messages
        path = tmp_path / "wide.dl"
        text = '.input Send, Text\nDeny(a) :- Send(a), Text(a, "😀😀"), Taint(a).\n'
        got = await open_document(own, path, text)
        (d,) = [d for d in got if d.code == "PC101"]
        line = text.splitlines()[1]
        assert d.range.start == types.Position(1, line.index("Taint"))  # code points
    finally:
        await _close(own)


def test_the_server_is_not_imported_by_other_commands() -> None:
    loaded = (
        "import sys, policyc.cli; print([m for m in sys.modules if m.startswith(('pygls', 'policyc.lsp'))])"
    )
    done = subprocess.run([sys.executable, "-c", loaded], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    run = run_policyc("lsp", "--help")
    assert run.status == 0 and "language server" in run.stdout


# ------------------------------------------------------------------- positions, settings


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40), st.data())
def test_positions_round_trip_in_every_encoding(text: str, data) -> None:
    offset = data.draw(st.integers(0, len(text)))
    line_start = text.rfind("\n", 0, offset) + 1
    for encoding, width in (("utf-16", utf16), ("utf-8", lambda s: len(s.encode())), ("utf-32", len)):
        index = positions.LineIndex(text, encoding)
        line, character = index.position(offset)
        assert line == text.count("\n", 0, offset)
        assert character == width(text[line_start:offset])
        assert index.offset(line, character) == offset


def test_settings_keep_their_value_when_given_a_bad_one() -> None:
    base = settings.Settings()
    changed, problems = settings.update(base, {"policyc": {"debounceMs": 120, "deep": False}})
    assert changed == settings.Settings(deep=False, debounce=0.12) and problems == []
    kept, problems = settings.update(changed, {"deep": "yes", "deepTimeout": -1, "deepBound": 2.5})
    assert kept == changed and len(problems) == 3


def test_doctests_of_the_server_modules() -> None:
    import policyc.lsp.positions

    assert doctest.testmod(policyc.lsp.positions).failed == 0


def test_check_json_of_the_fixtures_is_clean() -> None:
    """The fixtures the navigation tests read are a clean policy (so no test reads errors)."""
    assert check_json(str(FIXTURES / "main.dl")) == []
    assert check_json(str(FIXTURES / "rules.dl")) == []
