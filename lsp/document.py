"""An open document, compiled: what `policyc check` reports for it, and the model that the
editor features read.

A :class:`Snapshot` holds two compilations of one version of the text:

* ``checked``, exactly what ``policyc check FILE`` computes: the pipeline stops after a stage
  with errors, so its diagnostics are the command's. When the file on disk is not valid UTF-8,
  it is compiled from those bytes, as the command would, and reports ``invalid-encoding``;
* ``model``, every stage run on whatever parsed (syntax errors set aside), so that hover,
  go to definition and completion keep working while the text has errors.

Included files are read through ``read``, which prefers the editor's unsaved buffers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pygls import uris

from policyc.compiler import ast
from policyc.compiler.loader import LIBRARY_PREFIX, include_target, library_file, load_data, load_source
from policyc.compiler.loader import file_key as key
from policyc.compiler.pipeline import check, compile_program, parse, resolve, stratify
from policyc.compiler.source import Span
from policyc.compiler.stages import Parsed, Stratified

from .index import Index
from .positions import UTF16, LineIndex


def reader(files: dict[str, bytes]) -> Callable[[str], bytes]:
    """How to read an included file: from ``files`` (the editor's buffers, by :func:`key`) when
    it is there, else from disk."""

    def read(path: str) -> bytes:
        found = files.get(key(path))
        return found if found is not None else Path(path).read_bytes()

    return read


def real_path(path: str) -> str:
    """The file a span's path names: a library module's is inside the installed package."""
    if path.startswith(LIBRARY_PREFIX):
        return str(library_file(path))
    return path


def uri_of(path: str) -> str:
    """The URI of a file a span names."""
    return uris.from_fs_path(os.path.abspath(real_path(path))) or path


def path_of(uri: str) -> str:
    """The file system path of a ``file:`` URI; other schemes (an unsaved buffer) keep the URI's
    path, so that what it includes is looked up relative to the working folder."""
    path = uris.to_fs_path(uri)
    if path is None:
        path = uris.urlparse(uri)[2] or uri
    return path


@dataclass(frozen=True)
class Snapshot:
    path: str
    text: str
    version: int | None
    checked: Parsed
    model: Stratified
    encoding: str = UTF16
    uri: str = ""  # the document's URI, as the editor names it
    deep: tuple = field(default=())  # findings of the deep checks, for this version

    @cached_property
    def module(self) -> ast.Module | None:
        """The document's own parsed module."""
        mine = key(self.path)
        return next((m for m in self.model.program.modules if key(m.path) == mine), None)

    @cached_property
    def index(self) -> Index:
        return Index.build(self.model)

    @cached_property
    def files(self) -> frozenset[str]:
        """The user files this document loads (itself and what it includes), by key."""
        program = self.checked.program
        found = {key(m.path) for m in program.modules if not program.is_library(m.path)}
        return frozenset(found | {key(self.path)})

    @cached_property
    def includes(self) -> dict[str, ast.Include]:
        """For each file the document includes, directly or not, the ``.include`` of the
        document that brings it in."""
        modules = {key(m.path): m for m in self.checked.program.modules}
        found: dict[str, ast.Include] = {}
        root = modules.get(key(self.path))
        if root is None:
            return found
        for statement in root.statements:
            if not isinstance(statement, ast.Include):
                continue
            stack = [include_target(root, statement)]
            while stack:
                target = key(stack.pop())
                if target in found or target == key(self.path):
                    continue
                found[target] = statement
                module = modules.get(target)
                if module is not None:
                    stack.extend(
                        include_target(module, s) for s in module.statements if isinstance(s, ast.Include)
                    )
        return found

    def is_mine(self, path: str) -> bool:
        return key(path) == key(self.path)

    def uri_of(self, path: str) -> str:
        """The URI of a file of the program (the editor's own for the document)."""
        return self.uri if self.uri and self.is_mine(path) else uri_of(path)

    def lines(self, path: str) -> LineIndex:
        """The line index of a file of the program (the document's text for itself)."""
        return self._lines.get(key(path)) or self._lines_of(path)

    @cached_property
    def _lines(self) -> dict[str, LineIndex]:
        return {key(self.path): LineIndex(self.text, self.encoding)}

    def _lines_of(self, path: str) -> LineIndex:
        source = self.model.program.source(path) or self.checked.program.source(path)
        if source is None:
            try:
                text = Path(real_path(path)).read_text("utf-8", errors="replace")
            except OSError:
                text = ""
        else:
            text = source.text
        index = LineIndex(text, self.encoding)
        self._lines[key(path)] = index
        return index

    def range(self, span: Span) -> tuple[tuple[int, int], tuple[int, int]]:
        return self.lines(span.file).range(span)

    def offset(self, line: int, character: int) -> int:
        return self.lines(self.path).offset(line, character)


def build(
    text: str,
    path: str,
    version: int | None,
    read: Callable[[str], bytes] | None = None,
    undecodable: bytes | None = None,
    encoding: str = UTF16,
    uri: str = "",
) -> Snapshot:
    """Compile one version of a document. ``undecodable``: the bytes of its file on disk, when
    they are not valid UTF-8 (they are what ``policyc check`` reads, and reports)."""
    program, found = load_source(text, path, read)
    if undecodable is not None:
        checked = compile_program(*load_data(undecodable, path))
    else:
        checked = compile_program(program, found)
    model = (
        checked
        if isinstance(checked, Stratified) and undecodable is None
        else stratify(check(resolve(parse(program, ()))))
    )
    return Snapshot(path, text, version, checked, model, encoding, uri)
