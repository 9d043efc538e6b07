"""`policyc lsp`: the installed command, started as a subprocess and driven by a real LSP client
(pytest-lsp): diagnostics, settings and encodings; the positions and settings helpers in-process.

Most tests share one server (a fresh document each); those that need settings of their own
start their own. The oracle for diagnostics is `policyc check --format json` on the same file.
"""

import doctest
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types
from pytest_lsp import LanguageClient

from policyc.compiler.pipeline import check_source
from policyc.lsp import positions, settings

from .conftest import EXAMPLES, ROOT, run_policyc
from .lsp_client import (
    FIXTURES,
    as_tuple,
    change,
    check_json,
    close,
    copy_fixtures,
    doc,
    expected,
    lsp,
    open_document,
    own_server,
    position_of,
    published,
    shared_server,
    shown,
    stop_server,
    utf16,
)

client = shared_server()


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
    text = '.include "rules.dl"\n@id("d") @message("m") Deny(a) :- Send(a), Taint(a).\n'
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
    own = await own_server({"policyc": {"debounceMs": 1500, "deep": False}})
    try:
        path = tmp_path / "typing.dl"
        text = '.input Send\n@id("d") @message("m") Deny(a) :- Send(a).\n'
        await open_document(own, path, text)
        mark = len(own.published)
        typing = ('@id("e") @message("n") Deny(b) :- S', "Deny(b) :- Sen", "Deny(b) :- Send(b), Ok(b).")
        typing = tuple(typing[0].split("Deny")[0] + t if i else t for i, t in enumerate(typing))
        for version, typed in enumerate(typing, 2):
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
        await stop_server(own)


# --------------------------------------------------------------------- settings, encodings


@pytest.mark.asyncio
async def test_settings_problems_are_logged_and_utf32_is_negotiated(tmp_path: Path) -> None:
    own = await own_server({"policyc": {"deepBound": 0, "colour": "blue"}}, encodings=["utf-32"])
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
        await stop_server(own)


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
