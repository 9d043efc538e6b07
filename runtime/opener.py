"""Opening a policy, one way for every caller: a source file, source text or a bundle.

:func:`open_path` reads a file and tells a bundle from a policy source (a source never starts
with ``{``); :func:`open_data` does the same for bytes already read and :func:`open_text` takes
source text. What they give is :class:`Source` (the program, compiled on demand) or a verified
:class:`~policyc.runtime.bundle.Bundle` (its plan, manifest and sources). :func:`to_policy`
makes a runtime :class:`~policyc.runtime.policy.Policy` of either, refusing one that needs an
extension which is not available (:mod:`~policyc.runtime.extensions`): a policy from source is
read as the bundle it would compile to, so both are read, and refused, the same way.

>>> opened = open_text(".input Send\\nDeny(a) :- Send(a).", "p.dl")
>>> type(opened).__name__, opened.origin
('Source', 'p.dl')
>>> to_policy(opened).decide({"Send": [["e1"]]}, "e1").allowed
False
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.loader import Program
from policyc.compiler.magic import Options
from policyc.compiler.stages import Parsed

from .bundle import Bundle, describe, is_bundle, read_bundle
from .errors import PolicyError
from .evaluator import Limits
from .extensions import Extension, check_libraries, library_modules, read_sections, resolve, write_sections
from .functors import Functors
from .planned import planned
from .policy import Policy

UNREADABLE = "unreadable"  # the code of a PolicyError for a file that cannot be read


@dataclass(frozen=True)
class Source:
    """A policy's source: its program and what loading it found (before any check)."""

    origin: str
    program: Program
    diagnostics: tuple[Diagnostic, ...]

    @property
    def libraries(self) -> list[str]:
        """The library modules the policy imports."""
        return library_modules(self.program.library)

    @functools.cached_property
    def _compiled(self) -> Parsed:
        from policyc.compiler.pipeline import compile_program

        return compile_program(self.program, list(self.diagnostics))

    def compilation(self) -> Parsed:
        """The program compiled as ``policyc check`` compiles it (once)."""
        return self._compiled


Opened = Source | Bundle


def read_path(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a policy file or bundle (``PolicyError`` with code ``unreadable`` if the
    file cannot be read)."""
    from policyc.compiler.files import read_bytes

    try:
        return read_bytes(path)
    except OSError as error:
        raise PolicyError(f"cannot read `{path}`: {error.strerror or error}", code=UNREADABLE) from None


def open_path(path: str | os.PathLike[str], verify_key: Any = None) -> Opened:
    """A policy file or a bundle, by path (see :func:`open_data`)."""
    return open_data(read_path(path), str(path), verify_key)


def open_data(data: bytes, origin: str, verify_key: Any = None) -> Opened:
    """A bundle, verified (with a signature by ``verify_key`` when given), or else a policy
    source; a verification key for a source is refused, since it carries no signature."""
    if is_bundle(data):
        return read_bundle(data, origin, verify_key)
    if verify_key is not None:
        raise PolicyError(f"`{origin}` is not a bundle, so it carries no signature to verify")
    from policyc.compiler.loader import load_data

    program, found = load_data(data, origin)
    return Source(origin, program, tuple(found))


def open_text(text: str, name: str = "<source>") -> Source:
    """Policy source text, reported as ``name`` (includes are relative to it)."""
    from policyc.compiler.loader import load_source

    program, found = load_source(text, name)
    return Source(name, program, tuple(found))


def to_policy(
    opened: Opened,
    functors: Functors = None,
    limits: Limits | None = None,
    extensions: Iterable[Extension] | None = None,
    magic: Options | None = None,
) -> Policy:
    """A runtime policy of what was opened (``PolicyError`` for a source with errors, or a
    policy needing an extension that is not among ``extensions``, the installed ones unless
    given; ``MissingFunctors`` if a functor has no implementation)."""
    chosen = resolve(extensions)
    if isinstance(opened, Bundle):
        check_libraries(opened.libraries, chosen, opened.origin)
        sections = opened.sections(chosen)
        return Policy(opened.plan, functors, limits, opened.manifest, extensions=chosen, sections=sections)
    return from_compilation(opened.compilation(), functors, limits, chosen, opened.origin, magic)


def from_compilation(
    compilation: Parsed,
    functors: Functors = None,
    limits: Limits | None = None,
    extensions: Iterable[Extension] | None = None,
    origin: str | None = None,
    magic: Options | None = None,
) -> Policy:
    """A runtime policy of a compiled policy (see :func:`to_policy`)."""
    chosen = resolve(extensions)
    done = planned(compilation, magic)
    plan = done.plan
    origin = origin or min(done.program.roots, default="<source>")
    check_libraries(library_modules(done.program.library), chosen, origin)
    described = {**describe(done, plan), **write_sections(done, plan, chosen, {})}
    sections = read_sections(described, chosen, origin)
    fields = dict(done.symbols.fields)
    return Policy(plan, functors, limits, extensions=chosen, sections=sections, fields=fields)


def frozen(path: str, verify_key: Any = None) -> tuple[str, bytes]:
    """The digest and bytes of the bundle of the policy at ``path``: a bundle as it is, verified
    (with ``verify_key``, its signature too); a source compiled as ``policyc compile`` would,
    refused when it has errors (``PolicyError``). What a process hands others that must run the
    same policy (the service's workers, replay's)."""
    import hashlib

    from .bundle import build_bundle

    data = read_path(path)
    opened = open_data(data, path, verify_key)
    if not isinstance(opened, Bundle):
        compilation = planned(opened.compilation())
        data = build_bundle(compilation, compilation.plan)
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def policy_of(data: bytes, origin: str, functors: Functors = None) -> Policy:
    """The runtime policy of a bundle's bytes (as :func:`frozen` gives them)."""
    return to_policy(open_data(data, origin), functors)


PATH_SUFFIXES = (".dl", ".bundle", ".json")


def is_path(policy: str | os.PathLike[str]) -> bool:
    """Whether :func:`load` reads ``policy`` as a path rather than source text: a
    ``PathLike`` always is one; a string is one when it names an existing file, or when it is
    one line ending in ``.dl``, ``.bundle`` or ``.json`` (a missing file is then "cannot
    read", never compiled as text)."""
    if isinstance(policy, os.PathLike):
        return True
    if os.path.exists(policy):
        return True
    return "\n" not in policy and policy.strip().endswith(PATH_SUFFIXES)


def load(
    policy: str | os.PathLike[str] | None = None,
    functors: Functors = None,
    *,
    source: str | None = None,
    verify_key: str | os.PathLike[str] | bytes | None = None,
    limits: Limits | None = None,
    extensions: Iterable[Extension] | None = None,
    magic: Options | None = None,
) -> Policy:
    """A policy from a source file, a bundle file or source text (:class:`PolicyError` if it
    has errors, cannot be read, or needs an extension that is not available;
    ``MissingFunctors`` if a functor has no implementation).

    ``policy`` is a path when :func:`is_path` says so, else source text; ``source=`` gives
    source text explicitly (never looked up as a file). Source text carries no signature, so
    a ``verify_key`` with it is refused. ``extensions`` are the runtime extensions its
    monitors run (the installed ones unless given; see :mod:`~policyc.runtime.extensions`).
    ``magic`` says which relations of a policy planned from source may be evaluated
    demand-driven (:mod:`policyc.compiler.magic`; a bundle carries its plan)."""
    if (policy is None) == (source is None):
        raise TypeError("policyc.load takes a policy path or text, or source=TEXT (exactly one)")
    if source is None:
        assert policy is not None
        if not isinstance(policy, str | os.PathLike):
            raise TypeError(f"policyc.load takes a path or source text, not {type(policy).__name__}")
        if is_path(policy):
            return to_policy(open_path(Path(policy), verify_key), functors, limits, extensions, magic)
        source = os.fspath(policy)  # text: a PathLike is always a path
    elif not isinstance(source, str):
        raise TypeError(f"source= takes policy text (a str), not {type(source).__name__}")
    if verify_key is not None:
        raise PolicyError(
            "a verification key was given, but the policy is source text, which carries no signature "
            "to verify (load a signed bundle by its path)"
        )
    return load_source(source, functors, limits=limits, extensions=extensions, magic=magic)


def load_source(
    text: str,
    functors: Functors = None,
    *,
    limits: Limits | None = None,
    name: str = "<source>",
    extensions: Iterable[Extension] | None = None,
    magic: Options | None = None,
) -> Policy:
    """A policy from source text (reported as ``name``; includes are relative to the current
    folder)."""
    return to_policy(open_text(text, name), functors, limits, extensions, magic)
