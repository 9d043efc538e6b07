"""``policyc lsp``: the language server, over standard input and output (pygls).

Checking a document:

* on open, at once; on change, after :attr:`Settings.debounce` seconds without a further
  change (a newer change cancels the pending check, and a check whose version is no longer the
  document's is dropped rather than published); on save, at once, then the deep checks in a
  child process (:mod:`.deep`), whose findings are added to the document's diagnostics until
  its next change;
* the documents that include a changed, saved or closed document are checked again too (an
  included file is read from its editor buffer when it is open, from disk otherwise);
* compiling runs in a worker thread, the deep checks in a child process: the event loop
  keeps answering requests meanwhile.

The features live in modules of their own (:mod:`.hover`, :mod:`.navigate`, :mod:`.complete`,
:mod:`.outline`, :mod:`.actions`); this module only connects them to the protocol.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import logging
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from policyc.compiler.diagnostics import Diagnostic, sort_diagnostics
from policyc.compiler.loader import decode
from policyc.compiler.version import __version__

from . import actions, complete, hover, navigate, outline
from .deep import Job, warm_up
from .diagnostics import lsp_range, to_lsp
from .document import Snapshot, build, key, path_of, reader
from .index import Occurrence
from .settings import Settings, update


class PolicyServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("policyc", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.settings = Settings()
        self.snapshots: dict[str, Snapshot] = {}
        self.pending: dict[str, asyncio.Task] = {}  # the scheduled check of each document
        self.jobs: dict[str, Job] = {}  # the running deep checks of each document
        self.undecodable: dict[str, bytes] = {}  # documents whose file on disk is not UTF-8
        self.lock = threading.Lock()  # one compilation at a time
        atexit.register(self.stop_jobs)

    # ------------------------------------------------------------------ documents

    @property
    def encoding(self) -> str:
        """The position encoding agreed with the client (UTF-16 unless it asked otherwise)."""
        try:
            found = self.workspace.position_encoding
        except RuntimeError:  # not initialized yet
            found = None
        return str(getattr(found, "value", found) or "utf-16")

    def is_open(self, uri: str) -> bool:
        # pygls keeps documents by their URI with its escapes decoded (`%20`, `%3A`, ...)
        return unquote(uri) in self.workspace.text_documents

    def current(self, uri: str) -> Snapshot:
        """The snapshot of the document's current text (compiled now if it is not yet)."""
        document = self.workspace.get_text_document(uri)
        found = self.snapshots.get(uri)
        if found is not None and found.version == document.version and found.text == document.source:
            return found
        snapshot = self.compile(uri, document.source, document.version, self.overlays())
        self.snapshots[uri] = snapshot
        return snapshot

    def compile(self, uri: str, text: str, version: int | None, overlays: dict[str, bytes]) -> Snapshot:
        with self.lock:
            read = reader(overlays)
            return build(text, path_of(uri), version, read, self.undecodable.get(uri), self.encoding, uri)

    def overlays(self) -> dict[str, bytes]:
        """What the open documents hold, by file: what an ``.include`` of them reads."""
        found = {}
        for document in list(self.workspace.text_documents.values()):
            uri = document.uri  # as the editor wrote it (the workspace's keys are decoded)
            found[key(path_of(uri))] = self.undecodable.get(uri) or document.source.encode("utf-8")
        return found

    def read_disk(self, uri: str) -> None:
        """Note whether the document's file on disk is valid UTF-8 (``policyc check`` reads it)."""
        self.undecodable.pop(uri, None)
        if not uri.startswith("file:"):
            return
        try:
            data = Path(path_of(uri)).read_bytes()
        except OSError:
            return
        if isinstance(decode(path_of(uri), data), Diagnostic):
            self.undecodable[uri] = data

    def schedule(self, uri: str, delay: float) -> None:
        """Check the document after ``delay`` seconds, instead of any check scheduled before."""
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self.check_later(uri, delay))

    async def check_later(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        await self.check(uri)

    async def check(self, uri: str) -> Snapshot | None:
        if not self.is_open(uri):
            return None
        document = self.workspace.get_text_document(uri)
        text, version = document.source, document.version
        snapshot = await asyncio.to_thread(self.compile, uri, text, version, self.overlays())
        if not self.is_open(uri) or self.workspace.get_text_document(uri).version != version:
            return None  # stale: a newer version is on its way
        self.snapshots[uri] = snapshot
        self.publish(uri, snapshot)
        return snapshot

    def publish(self, uri: str, snapshot: Snapshot) -> None:
        diagnostics = sort_diagnostics([*snapshot.checked.diagnostics, *snapshot.deep])
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri, to_lsp(snapshot, diagnostics), version=snapshot.version)
        )

    def dependents(self, uri: str) -> list[str]:
        """The open documents that load this one through ``.include``."""
        mine = key(path_of(uri))
        return [other for other, s in self.snapshots.items() if other != uri and mine in s.files]

    # ----------------------------------------------------------------- deep checks

    async def deep(self, uri: str, snapshot: Snapshot) -> None:
        self.stop_job(uri)
        if not self.settings.deep or not snapshot.checked.ok or uri in self.undecodable:
            return
        settings = self.settings
        job = await asyncio.to_thread(
            Job, snapshot.text, snapshot.path, self.overlays(), settings.deep_bound, settings.deep_timeout
        )
        self.stop_job(uri)
        self.jobs[uri] = job
        if self.snapshots.get(uri) is not snapshot:
            self.stop_job(uri)  # the document changed while the job started
            return
        outcome = await job.outcome()
        if self.jobs.get(uri) is job:
            del self.jobs[uri]
        if outcome is None:
            return  # stopped: the document changed, was saved again or was closed
        if outcome.problem:
            self.log(types.MessageType.Warning, f"{Path(snapshot.path).name}: {outcome.problem}")
        for note in outcome.undecided:
            self.log(
                types.MessageType.Info,
                f"{Path(snapshot.path).name}: {note} (deep checks); they report nothing",
            )
        latest = self.snapshots.get(uri)
        if latest is None or latest.version != snapshot.version or latest.text != snapshot.text:
            return  # the document changed meanwhile: its findings no longer apply
        latest = dataclasses.replace(latest, deep=outcome.findings)
        self.snapshots[uri] = latest
        self.publish(uri, latest)

    def stop_job(self, uri: str) -> None:
        job = self.jobs.pop(uri, None)
        if job is not None:
            job.stop()

    def stop_jobs(self) -> None:
        for uri in list(self.jobs):
            self.stop_job(uri)

    def log(self, kind: types.MessageType, message: str) -> None:
        self.window_log_message(types.LogMessageParams(kind, message))

    def configure(self, raw: Any) -> None:
        self.settings, problems = update(self.settings, raw)
        for problem in problems:
            self.log(types.MessageType.Warning, f"policyc: {problem}")

    # ------------------------------------------------------------------- helpers

    def occurrence(self, uri: str, position: types.Position) -> tuple[Snapshot, Occurrence | None]:
        snapshot = self.current(uri)
        offset = snapshot.offset(position.line, position.character)
        return snapshot, snapshot.index.at(snapshot.path, offset)

    def location(self, snapshot: Snapshot, path: str, span: Any) -> types.Location:
        if span is None:
            start = types.Position(0, 0)
            return types.Location(snapshot.uri_of(path), types.Range(start, start))
        return types.Location(snapshot.uri_of(span.file), lsp_range(snapshot, span))


def refused(message: str) -> JsonRpcException:
    return JsonRpcException(message, code=types.LSPErrorCodes.RequestFailed.value)


def create() -> PolicyServer:
    server = PolicyServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: PolicyServer, params: types.InitializeParams) -> None:
        ls.configure(params.initialization_options)

    @server.feature(types.INITIALIZED)
    def initialized(ls: PolicyServer, params: types.InitializedParams) -> None:
        if ls.settings.deep:
            asyncio.get_running_loop().run_in_executor(None, warm_up)  # the first save answers sooner

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def configuration(ls: PolicyServer, params: types.DidChangeConfigurationParams) -> None:
        ls.configure(params.settings)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: PolicyServer, params: types.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.read_disk(uri)
        ls.schedule(uri, 0)
        for other in ls.dependents(uri):
            ls.schedule(other, ls.settings.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: PolicyServer, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.stop_job(uri)
        ls.schedule(uri, ls.settings.debounce)
        for other in ls.dependents(uri):
            ls.schedule(other, ls.settings.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: PolicyServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.read_disk(uri)
        previous = ls.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        for other in ls.dependents(uri):
            ls.schedule(other, 0)
        snapshot = await ls.check(uri)
        if snapshot is not None:
            await ls.deep(uri, snapshot)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: PolicyServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.stop_job(uri)
        task = ls.pending.pop(uri, None)
        if task is not None:
            task.cancel()
        dependents = ls.dependents(uri)
        ls.snapshots.pop(uri, None)
        ls.undecodable.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))
        for other in dependents:
            ls.schedule(other, 0)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: PolicyServer, params: None) -> None:
        ls.stop_jobs()
        for task in ls.pending.values():
            task.cancel()

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: PolicyServer, params: types.HoverParams) -> types.Hover | None:
        snapshot, occurrence = ls.occurrence(params.text_document.uri, params.position)
        if occurrence is None:
            return None
        text = hover.describe(snapshot, occurrence)
        if text is None:
            return None
        return types.Hover(
            types.MarkupContent(types.MarkupKind.Markdown, text), range=lsp_range(snapshot, occurrence.span)
        )

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: PolicyServer, params: types.DefinitionParams) -> list[types.Location] | None:
        snapshot, occurrence = ls.occurrence(params.text_document.uri, params.position)
        if occurrence is None:
            return None
        return [ls.location(snapshot, t.path, t.span) for t in navigate.definition(snapshot, occurrence)]

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    def references(ls: PolicyServer, params: types.ReferenceParams) -> list[types.Location] | None:
        snapshot, occurrence = ls.occurrence(params.text_document.uri, params.position)
        if occurrence is None:
            return None
        found = navigate.references(snapshot, occurrence, params.context.include_declaration)
        return [ls.location(snapshot, o.span.file, o.span) for o in found]

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT)
    def highlight(
        ls: PolicyServer, params: types.DocumentHighlightParams
    ) -> list[types.DocumentHighlight] | None:
        snapshot, occurrence = ls.occurrence(params.text_document.uri, params.position)
        if occurrence is None:
            return None
        return [
            types.DocumentHighlight(lsp_range(snapshot, o.span))
            for o in snapshot.index.of(occurrence.symbol)
            if snapshot.is_mine(o.span.file)
        ]

    @server.feature(types.TEXT_DOCUMENT_PREPARE_RENAME)
    def prepare_rename(
        ls: PolicyServer, params: types.PrepareRenameParams
    ) -> types.PrepareRenameResult | None:
        snapshot, occurrence = ls.occurrence(params.text_document.uri, params.position)
        if occurrence is None:
            return None
        try:
            navigate.renamable(snapshot, occurrence)
        except navigate.RenameError as error:
            raise refused(str(error)) from None
        return types.PrepareRenamePlaceholder(lsp_range(snapshot, occurrence.span), occurrence.symbol.name)

    @server.feature(types.TEXT_DOCUMENT_RENAME)
    def rename(ls: PolicyServer, params: types.RenameParams) -> types.WorkspaceEdit | None:
        snapshot, occurrence = ls.occurrence(params.text_document.uri, params.position)
        if occurrence is None:
            return None
        try:
            found = navigate.rename(snapshot, occurrence, params.new_name)
        except navigate.RenameError as error:
            raise refused(str(error)) from None
        changes: dict[str, list[types.TextEdit]] = {}
        for o in found:
            changes.setdefault(snapshot.uri_of(o.span.file), []).append(
                types.TextEdit(lsp_range(snapshot, o.span), params.new_name)
            )
        return types.WorkspaceEdit(changes=changes)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: PolicyServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        return outline.outline(ls.current(params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "@"]))
    def completion(ls: PolicyServer, params: types.CompletionParams) -> types.CompletionList:
        snapshot = ls.current(params.text_document.uri)
        offset = snapshot.offset(params.position.line, params.position.character)
        context = params.context
        trigger = context.trigger_character if context is not None else None
        return types.CompletionList(is_incomplete=False, items=complete.complete(snapshot, offset, trigger))

    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls: PolicyServer, params: types.DocumentFormattingParams) -> list[types.TextEdit] | None:
        return actions.formatting(ls.current(params.text_document.uri))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, actions.FIX_ALL]),
    )
    def code_action(ls: PolicyServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        snapshot = ls.current(params.text_document.uri)
        diagnostics = [*snapshot.checked.diagnostics, *snapshot.deep]
        wanted = params.context.only
        found: list[types.CodeAction] = []
        if not wanted or any(k == types.CodeActionKind.QuickFix or k == "quickfix" for k in wanted):
            found += actions.quick_fixes(snapshot, diagnostics, params.range)
        if not wanted or any(actions.FIX_ALL.startswith(str(getattr(k, "value", k))) for k in wanted):
            every = actions.fix_all(snapshot, diagnostics)
            if every is not None:
                found.append(every)
        return found

    return server


def serve(debug: bool = False) -> None:
    """Answer an editor over standard input and output until it says exit. Problems go to
    standard error, one line each (with tracebacks when ``debug``)."""
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLine("policyc lsp: %(levelname)s: %(message)s", debug))
    handler.addFilter(_not_refusals)
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, handlers=[handler], force=True)
    create().start_io(BoundedInput(sys.stdin.buffer), sys.stdout.buffer)


logger = logging.getLogger("policyc.lsp")
MAX_MESSAGE = 64 * 1024 * 1024  # bytes of one message (a policy file is at most 16 MiB)
MAX_HEADER_LINE = 64 * 1024
_SKIPPED = b'{"jsonrpc": "2.0", "method": "$/policyc/skipped"}'  # a notification nobody handles


class BoundedInput:
    """Standard input as the server reads it: a header line in pieces of at most
    ``MAX_HEADER_LINE`` bytes, and a message whose ``Content-Length`` is over ``MAX_MESSAGE``
    read through in pieces and dropped (with a line on standard error), never held whole."""

    def __init__(self, stream: Any, limit: int = MAX_MESSAGE) -> None:
        self.stream = stream
        self.limit = limit

    def readline(self) -> bytes:
        return self.stream.readline(MAX_HEADER_LINE)

    def read(self, size: int) -> bytes:
        if size <= self.limit:
            return self.stream.read(size)
        logger.error(f"a message of {size:,} bytes is over the limit of {self.limit:,}; it is skipped")
        remaining = size
        while remaining:
            chunk = self.stream.read(min(remaining, 1024 * 1024))
            if not chunk:
                return b""  # the input ended inside it
            remaining -= len(chunk)
        return _SKIPPED


class _OneLine(logging.Formatter):
    def __init__(self, fmt: str, debug: bool) -> None:
        super().__init__(fmt)
        self.debug = debug

    def formatException(self, ei: Any) -> str:
        if self.debug:
            return super().formatException(ei)
        return f"{ei[0].__name__}: {ei[1]}" if ei and ei[0] else ""


def _not_refusals(record: logging.LogRecord) -> bool:
    """A request refused on purpose (a rename that cannot be done) is an answer, not a problem."""
    error = record.exc_info[1] if record.exc_info else None
    return not (isinstance(error, JsonRpcException) and error.code == types.LSPErrorCodes.RequestFailed.value)
