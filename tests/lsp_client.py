"""The language server tests' client (pytest-lsp, with every publication of diagnostics kept),
servers of their own, and the oracles they compare with (positions, `policyc check`)."""

import asyncio
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from policyc.lsp import positions

from .conftest import ROOT, policyc_command, run_policyc

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


def shared_server():
    """The fixture ``client`` of a test module: one server its tests share (a fresh document
    each). A test module says ``client = shared_server()``."""

    @pytest_lsp.fixture(config=_config(), scope="module")
    async def client(lsp_client: LanguageClient):
        await lsp_client.initialize_session(_initialize({"policyc": {"debounceMs": 50}}))
        yield
        await lsp_client.shutdown_session()

    return client


async def own_server(options: dict | None = None, encodings: list | None = None) -> LanguageClient:
    own = await _config().start()
    await own.initialize_session(_initialize(options, encodings))
    return own


async def stop_server(own: LanguageClient) -> None:
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
