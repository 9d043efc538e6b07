"""Files to a :class:`Program`: reading, decoding, ``.include`` and ``.import``.

A program is the root file, every file it includes (transitively, each once), every library
module it imports from the standard library, and the builtins prelude that declares the
functors every policy may call. Included paths are relative to the including file. The
components of every file are visible to the instances of every other (``.init``): they are
expanded once all files are loaded.

>>> program, diagnostics = load_source('.include "missing.dl"\\n', "p.dl")
>>> [d.name for d in diagnostics]
['invalid-directive']
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from . import ast, codes, components, syntax_errors
from .diagnostics import Diagnostic, replace_name
from .files import POLICY_LIMIT, read_bytes
from .parser import parse
from .source import SourceFile
from .summary import RuleSummary, summarize

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

PRELUDE = "builtins"
LIBRARY_PREFIX = "<stdlib>/"


class SourceError(Exception):
    """A file named on the command line cannot be read (the CLI exits with status 2)."""


@dataclass(frozen=True)
class Program:
    """Parsed modules in load order: the prelude, imported and included modules, the roots."""

    modules: tuple[ast.Module, ...]
    roots: frozenset[str]
    library: frozenset[str]

    def rules(self) -> Iterator[tuple[ast.Module, ast.Rule]]:
        return iter(self._rules)

    @functools.cached_property
    def _rules(self) -> tuple[tuple[ast.Module, ast.Rule], ...]:
        """Every rule with its module, in program order (each check walks them: once)."""
        return tuple(
            (module, statement)
            for module in self.modules
            for statement in module.statements
            if isinstance(statement, ast.Rule)
        )

    def statements(self) -> Iterator[tuple[ast.Module, ast.Statement]]:
        for module in self.modules:
            for statement in module.statements:
                yield module, statement

    def is_library(self, path: str) -> bool:
        return path in self.library

    def source(self, path: str) -> SourceFile | None:
        return self._sources.get(path)

    def rules_of(self, name: str) -> list[ast.Rule]:
        """The rules (facts included) whose head is relation ``name``, in program order."""
        return self._by_head.get(name, [])

    @functools.cached_property
    def _by_head(self) -> dict[str, list[ast.Rule]]:
        found: dict[str, list[ast.Rule]] = {}
        for _, rule in self._rules:
            found.setdefault(rule.head.name, []).append(rule)
        return found

    def summary(self, rule: ast.Rule) -> RuleSummary:
        """What the rule contains (atoms, calls, variables), computed once per program."""
        return self._summaries[id(rule)]

    @functools.cached_property
    def _summaries(self) -> dict[int, RuleSummary]:
        return {id(rule): summarize(rule) for _, rule in self._rules}

    @functools.cached_property
    def _sources(self) -> dict[str, SourceFile]:
        return {m.path: m.source for m in self.modules if m.source is not None}


def decode(path: str, data: bytes) -> SourceFile | Diagnostic:
    """The text of a file, or an ``invalid-encoding`` diagnostic at the first bad byte."""
    if b"\x00" in data:
        at = data.index(b"\x00")
        text = data[:at].decode("utf-8", errors="replace")
        return codes.INVALID_ENCODING(
            SourceFile(path, text).span(len(text), len(text)),
            "the file looks binary: it contains a NUL byte",
            help="policies are UTF-8 text files",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        prefix = data[: error.start].decode("utf-8", errors="replace")
        return codes.INVALID_ENCODING(
            SourceFile(path, prefix).span(len(prefix), len(prefix)),
            f"the file is not valid UTF-8: byte 0x{data[error.start]:02x} cannot start a character here",
            help="save the file as UTF-8",
        )
    if text.startswith("\ufeff"):
        text = " " + text[1:]  # keep offsets; a byte-order mark is not part of the policy
    return SourceFile(path, text)


def read_file(path: str) -> SourceFile | Diagnostic:
    """Read a root file; :class:`SourceError` if it cannot be read at all (not a regular
    file, or larger than :data:`~policyc.compiler.files.POLICY_LIMIT`)."""
    try:
        data = read_bytes(path, POLICY_LIMIT)
    except IsADirectoryError as error:
        raise SourceError(f"cannot read `{path}`: it is a directory") from error
    except OSError as error:
        raise SourceError(f"cannot read `{path}`: {error.strerror or error}") from error
    return decode(path, data)


def load_file(path: str) -> tuple[Program, list[Diagnostic]]:
    return load_root(read_file(path))


def load_root(source: SourceFile | Diagnostic) -> tuple[Program, list[Diagnostic]]:
    """Load a policy from a root file already read by :func:`read_file`."""
    return _Loader().load_root(source)


def load_source(
    text: str, path: str = "<input>", read: Callable[[str], bytes] | None = None
) -> tuple[Program, list[Diagnostic]]:
    """Load a policy given as text; ``read`` reads the files it includes (from disk if not
    given: an editor passes one that prefers its unsaved buffers)."""
    return _Loader(read).load_root(SourceFile(path, text))


def load_data(
    data: bytes, path: str, read: Callable[[str], bytes] | None = None
) -> tuple[Program, list[Diagnostic]]:
    """Load a policy from raw bytes (standard input), reported under ``path``; ``read`` reads
    the files it includes, as for :func:`load_source`."""
    return _Loader(read).load_root(decode(path, data))


def library_modules() -> list[str]:
    """Names of the modules a policy can ``.import``."""
    root = resources.files("policyc.stdlib")
    names = []
    for entry in root.iterdir():
        if entry.name.endswith(".dl") and entry.name[:-3] != PRELUDE:
            names.append(entry.name[:-3])
    return sorted(names)


VOCABULARY = "events"  # the library module of the execution vocabulary


@dataclass(frozen=True)
class LibraryName:
    """A name a library module declares: a relation (``relation``), a functor (``functor``)
    or a foreign predicate (``predicate``), with its number of arguments."""

    module: str
    kind: str
    arity: int


@functools.cache
def library_names() -> dict[str, LibraryName]:
    """Every name the library modules declare themselves (not through their imports), the
    event vocabulary's first: a name two modules declare is the first's.

    >>> library_names()["ToolCall"], library_names()["Tainted"].module
    (LibraryName(module='events', kind='relation', arity=2), 'provenance')
    """
    found: dict[str, LibraryName] = {}
    for name in sorted(library_modules(), key=lambda m: (m != VOCABULARY, m)):
        module = _library_module(name)
        if module is None:
            continue
        for statement in module[0].statements:
            if isinstance(statement, ast.Decl):
                found.setdefault(
                    statement.name.name, LibraryName(name, "relation", len(statement.attributes))
                )
            elif isinstance(statement, ast.Functor):
                kind = "predicate" if statement.returns.name == "bool" else "functor"
                found.setdefault(statement.name.name, LibraryName(name, kind, len(statement.params)))
    return found


@functools.cache
def library_scope(name: str) -> frozenset[str]:
    """The names ``.import name`` brings: those of the module and of every module it imports."""
    names: set[str] = set()
    stack, seen = [name], set()
    while stack:
        current = stack.pop()
        found = _library_module(current)
        if current in seen or found is None:
            continue
        seen.add(current)
        for statement in found[0].statements:
            if isinstance(statement, ast.Decl | ast.Functor):
                names.add(statement.name.name)
            elif isinstance(statement, ast.Import):
                stack.append(statement.module.name)
    return frozenset(names)


def _is_prelude(path: str) -> bool:
    """Whether a file is the installed builtins prelude."""
    try:
        return os.path.samefile(path, str(resources.files("policyc.stdlib").joinpath(f"{PRELUDE}.dl")))
    except (OSError, TypeError):
        return False


def library_path(name: str) -> str:
    """The path spans give library module ``name`` (stable wherever policyc is installed)."""
    return f"{LIBRARY_PREFIX}{name.replace('.', '/')}.dl"


def library_file(path: str) -> Traversable:
    """The installed file of a library module's path (see :func:`library_path`)."""
    return resources.files("policyc.stdlib").joinpath(*path[len(LIBRARY_PREFIX) :].split("/"))


def include_target(module: ast.Module, include: ast.Include) -> str:
    """The file an ``.include`` names: its path relative to the including file's folder."""
    return os.path.normpath(os.path.join(os.path.dirname(module.path), include.path.value))


def file_key(path: str) -> str:
    """How the loader tells files apart: normalised absolute paths."""
    return os.path.normcase(os.path.abspath(path))


@functools.cache
def _library_module(name: str) -> tuple[ast.Module, tuple[Diagnostic, ...]] | None:
    path = library_path(name)
    resource = library_file(path)
    if not resource.is_file():
        return None
    module, diagnostics = parse(SourceFile(path, resource.read_text("utf-8")))
    return module, tuple(diagnostics)


class _Loader:
    def __init__(self, read: Callable[[str], bytes] | None = None) -> None:
        self.read = read or (lambda path: read_bytes(path, POLICY_LIMIT))
        self.modules: list[ast.Module] = []
        self.library: set[str] = set()
        self.loaded: set[str] = set()
        self.diagnostics: list[Diagnostic] = []

    def load_root(self, source: SourceFile | Diagnostic) -> tuple[Program, list[Diagnostic]]:
        if not (isinstance(source, SourceFile) and _is_prelude(source.path)):
            self._import(PRELUDE, None)  # (checking the prelude itself, it declares the builtins)
        if isinstance(source, Diagnostic):
            self.diagnostics.append(source)
            roots = frozenset({source.span.file})
        else:
            self._load(source, ())
            roots = frozenset({source.path})
        modules = components.expand_program(self.modules, self.diagnostics)
        program = Program(tuple(modules), roots, frozenset(self.library))
        return program, self.diagnostics

    def _load(self, source: SourceFile, stack: tuple[str, ...]) -> None:
        key = file_key(source.path)
        self.loaded.add(key)
        module, diagnostics = parse(source, components=False)
        self.diagnostics.extend(diagnostics)
        for statement in module.statements:
            if isinstance(statement, ast.Include):
                self._include(module, statement, (*stack, key))
            elif isinstance(statement, ast.Import):
                self._import(statement.module.name, statement)
        self.modules.append(module)

    def _include(self, module: ast.Module, include: ast.Include, stack: tuple[str, ...]) -> None:
        target = include_target(module, include)
        key = file_key(target)
        if key in stack:
            chain = [*stack[stack.index(key) :], key]
            self.diagnostics.append(
                codes.INVALID_DIRECTIVE(
                    include.path.span,
                    "include cycle: " + " → ".join(f"`{os.path.relpath(p)}`" for p in chain),
                    help="a file cannot include itself, directly or through other files",
                )
            )
            return
        if key in self.loaded:
            return
        try:
            data = self.read(target)
        except OSError as error:
            reason = (
                "it is a directory"
                if isinstance(error, IsADirectoryError)
                else (error.strerror or str(error)).lower()
            )
            self.diagnostics.append(
                codes.INVALID_DIRECTIVE(
                    include.path.span,
                    f"cannot include `{include.path.value}`: {reason}",
                    help=f"the path is relative to this file's folder: `{target}`",
                )
            )
            return
        source = decode(target, data)
        if isinstance(source, Diagnostic):
            self.loaded.add(key)
            self.diagnostics.append(source)
            return
        here = f"{module.path}:{include.span.line}:{include.span.column}"
        outer = module.source.included_from if module.source is not None else ""
        source = dataclasses.replace(source, included_from=f"{outer};{here}" if outer else here)
        self._load(source, stack)

    def _import(self, name: str, directive: ast.Import | None) -> None:
        found = _library_module(name)
        if found is None:
            assert directive is not None, "the prelude ships with policyc"
            close = syntax_errors.did_you_mean(name, library_modules())
            available = ", ".join(f"`{m}`" for m in library_modules()) or "none"
            self.diagnostics.append(
                codes.INVALID_DIRECTIVE(
                    directive.module.span,
                    f"unknown library module `{name}`",
                    help=(f"did you mean `{close}`? " if close else "")
                    + f"the library modules are: {available}",
                    fix=replace_name(directive.module.span, name, close),
                )
            )
            return
        module, diagnostics = found
        if module.path in self.loaded:
            return
        self.loaded.add(module.path)
        self.library.add(module.path)
        self.diagnostics.extend(diagnostics)
        for statement in module.statements:
            if isinstance(statement, ast.Import):
                self._import(statement.module.name, statement)
        self.modules.append(module)
