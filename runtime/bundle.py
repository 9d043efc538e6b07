"""Bundles: a compiled policy as one verifiable JSON file, written and read here.

::

    {"format": "policyc-bundle", "format_version": 2,
     "manifest": {"policyc_version", "default", "entrypoints", "inputs", "functors", "roles",
                  "fields", "arguments" (when the policy declares some), ...the extensions'
                  sections ("thresholds"), "checks",
                  "sources": [{"path", "sha256"}], "plan_sha256"},
     "plan": {...}, "sources": {"policy.dl": "..."},
     "signature": null | {"algorithm": "ed25519", "value": BASE64}}

Hashes are SHA-256 of canonical JSON (sorted keys, no spaces, UTF-8) for the plan and of the
UTF-8 text for each source. The optional Ed25519 signature covers the canonical manifest,
which holds every hash, so it covers the whole bundle. Reading checks, in order: that the
file is JSON with the bundle's format marker, that its format version is one this policyc
reads, that the plan and every source match their hashes, that the signature verifies (when
a verification key is given), that the plan is well formed, and that a bundle of format 1 does
not call ``contains``, whose arguments format 2 swapped. Any failure is a
:class:`~policyc.runtime.errors.PolicyError` with a one-line reason.

A manifest key the runtime does not own is an extension's section
(:mod:`~policyc.runtime.extensions`): written by the extension when the bundle is compiled,
read back by it when the bundle is loaded (:meth:`Bundle.sections`), and refused when no
available extension reads it. A bundle also gives its sources back as a program
(:meth:`Bundle.compilation`), read from the bundle itself, for the analyses.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyc.compiler.files import replace_file
from policyc.compiler.plan import Plan, PlanError
from policyc.compiler.plan_read import from_data
from policyc.compiler.plan_write import argument_data, to_data
from policyc.compiler.stages import Parsed, Resolved
from policyc.compiler.version import __version__

from .errors import PolicyError
from .extensions import Extension, library_modules, read_sections, resolve, write_sections
from .planned import planned

if TYPE_CHECKING:
    from policyc.compiler.diagnostics import Diagnostic
    from policyc.compiler.loader import Program

FORMAT = "policyc-bundle"
FORMAT_VERSION = 2
# Format 2: `contains(part, text)` takes the part first (Soufflé's order); format 1 bundles
# were compiled when it took the text first, so one that calls it would now mean the opposite.
SWAPPED_IN_FORMAT_2 = ("contains",)


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_bundle(data: bytes) -> bool:
    """Whether a file is meant as a bundle (a policy source never starts with `{`)."""
    return data.lstrip()[:1] == b"{"


# ------------------------------------------------------------------------------- writing


def build_bundle(
    compilation: Resolved,
    plan: Plan,
    signing_key: str | os.PathLike[str] | None = None,
    thresholds: Any = None,
    *,
    extensions: Iterable[Extension] | None = None,
    **options: Any,
) -> bytes:
    """The bytes of a bundle for a compiled policy and its plan. ``options`` go to the
    extensions that claim them, which write their manifest sections (``thresholds=``, a
    :class:`~policyc.risk.thresholds.Thresholds`, is the risk extension's; it may be given
    fourth); an option none claims is a ``TypeError``."""
    if thresholds is not None:
        options["thresholds"] = thresholds
    program = compilation.program
    root_dir = min((os.path.dirname(r) for r in program.roots), default="")
    sources = {}
    for module in program.modules:
        if module.source is None:
            continue
        name = module.path if program.is_library(module.path) else os.path.relpath(module.path, root_dir)
        sources[name] = module.source.text
    plan_data = to_data(plan)
    warnings = sum(1 for d in compilation.diagnostics if not d.is_error)
    manifest = {
        "policyc_version": __version__,
        **describe(compilation, plan),
        **write_sections(compilation, plan, resolve(extensions), options),
        "checks": {"check": "passed", "errors": 0, "warnings": warnings},
        "sources": [
            {"path": name, "sha256": sha256(text.encode("utf-8"))} for name, text in sorted(sources.items())
        ],
        "plan_sha256": sha256(canonical(plan_data)),
    }
    signature = None
    if signing_key is not None:
        key = _private_key(signing_key)
        signature = {
            "algorithm": "ed25519",
            "value": base64.b64encode(key.sign(canonical(manifest))).decode(),
        }
    bundle = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "manifest": manifest,
        "plan": plan_data,
        "sources": sources,
        "signature": signature,
    }
    return json.dumps(bundle, indent=1, ensure_ascii=False).encode("utf-8") + b"\n"


def describe(compilation: Resolved, plan: Plan) -> dict[str, Any]:
    """The parts of a manifest that follow from the policy: what the runtime reads from a
    bundle besides its plan (the default, entry points, inputs, functors, roles, field roles)."""
    symbols = compilation.symbols
    return {
        "default": plan.default,
        "entrypoints": sorted(r.name for r in plan.relations if r.output),
        "inputs": [{"name": r.name, "types": list(r.types)} for r in plan.relations if r.input],
        "functors": [{"name": f.name, "params": list(f.params), "returns": f.returns} for f in plan.functors],
        "roles": [
            {"name": r.name, "budget": r.budget, "pool": r.pool}
            for r in sorted(symbols.roles.values(), key=_name)
        ],
        "fields": [
            {"tool": t, "argument": a, "role": role} for (t, a), role in sorted(symbols.fields.items())
        ],
        **_arguments(plan),
    }


def _arguments(plan: Plan) -> dict[str, Any]:
    """The manifest's ``arguments``: the declared tool arguments the monitor checks, when the
    policy has any. A runtime written before declarations existed takes the key for the section
    of an extension it lacks and refuses the bundle, rather than run it without the checks."""
    return {"arguments": [argument_data(a) for a in plan.arguments]} if plan.arguments else {}


def _name(role: Any) -> str:
    return role.name


# ------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Bundle:
    """A bundle read and verified: its plan, manifest and sources (``origin``: where it was
    read from)."""

    origin: str
    plan: Plan
    manifest: dict[str, Any]
    sources: dict[str, str]
    plan_data: dict[str, Any]

    @property
    def libraries(self) -> list[str]:
        """The library modules the policy imports."""
        return library_modules(entry.get("path", "") for entry in self.manifest["sources"])

    def sections(self, extensions: Iterable[Extension] | None = None) -> dict[str, Any]:
        """What each extension keeps of the manifest, by name (the installed extensions unless
        given): ``PolicyError`` for a section none reads or one that cannot be read."""
        return read_sections(self.manifest, resolve(extensions), self.origin)

    def program(self) -> tuple[Program, tuple[Diagnostic, ...]]:
        """The program of the sources the bundle carries and what loading it found, read from
        the bundle alone (its includes resolve among its sources; library modules are the
        installed ones). A source's path is the bundle's path joined with its name."""
        return self._program

    @functools.cached_property
    def _program(self) -> tuple[Program, tuple[Diagnostic, ...]]:
        from policyc.compiler.loader import load_source

        own = {os.path.normpath(n): text for n, text in self.sources.items() if not n.startswith("<")}
        for name in own:
            parts = Path(name).parts
            if not parts or os.path.isabs(name) or ".." in parts:
                raise PolicyError(
                    f"`{self.origin}`: the bundle names a source `{name}` outside its own folder"
                )
        included = _included(own)
        roots = [name for name in own if name not in included]
        if len(roots) != 1:
            raise PolicyError(f"`{self.origin}`: cannot tell which of its sources is the policy")
        base = os.path.normpath(self.origin)

        def read(path: str) -> bytes:
            name = os.path.relpath(os.path.normpath(path), base)
            if name not in own:
                raise FileNotFoundError(2, "the bundle does not carry this file", path)
            return own[name].encode("utf-8")

        program, found = load_source(own[roots[0]], os.path.join(base, roots[0]), read)
        return program, tuple(found)

    @functools.cached_property
    def _compiled(self) -> Parsed:
        from policyc.compiler.pipeline import compile_program

        program, found = self.program()
        compilation = compile_program(program, list(found))
        self.check(compilation)
        return compilation

    def compilation(self) -> Parsed:
        """The bundle's sources compiled (:meth:`program`), refused (``PolicyError``) unless
        they compile to exactly its plan and manifest (:meth:`check`)."""
        return self._compiled

    def check(self, compilation: Parsed) -> None:
        """Refuse (``PolicyError``) a bundle whose plan or manifest is not what its sources
        compile to: an analysis reads the sources while the runtime runs the plan, so an
        analysis of such a bundle would prove nothing about what runs. ``compilation`` is the
        sources compiled again."""
        origin = self.origin
        what = "the analysis reads its sources but the runtime runs its plan, so it would prove nothing"
        try:
            done = planned(compilation)
        except PolicyError as error:
            raise PolicyError(f"{origin}: the bundle's sources do not compile ({error}): {what}") from None
        if canonical(to_data(done.plan)) != canonical(self.plan_data):
            raise PolicyError(
                f"{origin}: the bundle's plan is not the plan of its sources (the bundle was modified, "
                f"or compiled by another policyc): {what}"
            )
        for key, value in describe(done, done.plan).items():
            if self.manifest.get(key) != value:
                raise PolicyError(
                    f"{origin}: the bundle's manifest `{key}` is not what its sources declare (the bundle "
                    f"was modified): {what}"
                )


def _included(sources: dict[str, str]) -> set[str]:
    """The sources some other source includes (normalised names)."""
    from policyc.compiler import ast
    from policyc.compiler.parser import parse
    from policyc.compiler.source import SourceFile

    included: set[str] = set()
    for name, text in sources.items():
        module, _ = parse(SourceFile(name, text))
        for statement in module.statements:
            if isinstance(statement, ast.Include):
                included.add(os.path.normpath(os.path.join(os.path.dirname(name), statement.path.value)))
    return included


def read_bundle(data: bytes, origin: str, verify_key: str | os.PathLike[str] | bytes | None = None) -> Bundle:
    """A bundle, verified; ``PolicyError`` with the reason if not (at the line and field of
    the part that is wrong, when it is one part)."""
    from policyc.compiler.reading import FormatError

    try:
        return _read_bundle(data, origin, verify_key)
    except FormatError as error:
        raise PolicyError(str(error)) from None


def _read_bundle(data: bytes, origin: str, verify_key: str | os.PathLike[str] | bytes | None) -> Bundle:
    from policyc.compiler.reading import FormatError

    from .documents import document

    def refuse(reason: str) -> PolicyError:
        return PolicyError(f"{origin}: {reason}")

    try:
        top = document(data.decode("utf-8"), origin)
    except UnicodeDecodeError:
        raise refuse("not a policyc bundle: the file is truncated or is not JSON") from None
    except FormatError as error:
        problem = (
            "the file is truncated or is not JSON" if "not valid JSON" in error.problem else error.problem
        )
        raise FormatError(origin, error.line, "", f"not a policyc bundle: {problem}", error.column) from None
    bundle = top.value
    if not isinstance(bundle, dict) or bundle.get("format") != FORMAT:
        raise top.child("format").fail("not a policyc bundle (no `format: policyc-bundle` marker)")
    format_version = top.child("format_version")
    version = format_version.value
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise format_version.fail(f"not a policyc bundle: unknown format version {version!r}")
    if version > FORMAT_VERSION:
        raise format_version.fail(
            f"bundle format {version} is newer than this policyc ({__version__}) reads (up to {FORMAT_VERSION}); "
            "upgrade policyc"
        )
    manifest_at, plan_at, sources_at = (top.child(key) for key in ("manifest", "plan", "sources"))
    for part in (manifest_at, plan_at, sources_at):
        if not isinstance(part.value, dict):
            raise part.expected("an object: a bundle has a manifest, a plan and sources")
    manifest, plan_data, sources = manifest_at.value, plan_at.value, sources_at.value
    if manifest.get("plan_sha256") != sha256(canonical(plan_data)):
        raise manifest_at.child("plan_sha256").fail(
            "integrity check failed: the plan does not match its hash (the bundle was modified)"
        )
    listed = manifest.get("sources")
    if (
        not isinstance(listed, list)
        or not all(isinstance(entry, dict) for entry in listed)
        or {entry.get("path") for entry in listed} != set(sources)
    ):
        raise manifest_at.child("sources").fail(
            "integrity check failed: the sources do not match the manifest"
        )
    for i, entry in enumerate(listed):
        text = sources.get(entry.get("path"))
        if not isinstance(text, str) or entry.get("sha256") != sha256(text.encode("utf-8")):
            raise (
                manifest_at.child("sources")
                .child(i)
                .fail(f"integrity check failed: source `{entry.get('path')}` does not match its hash")
            )
    if verify_key is not None:
        _verify(bundle.get("signature"), manifest, verify_key, refuse)
    try:
        plan = from_data(plan_data, plan_at)
    except PlanError as error:
        raise PolicyError(str(error)) from None
    expected = [{"name": f.name, "params": list(f.params), "returns": f.returns} for f in plan.functors]
    described = {
        "functors": expected,
        "default": plan.default,
        "arguments": _arguments(plan).get("arguments"),
    }
    wrong = next((key for key, value in described.items() if manifest.get(key) != value), None)
    if wrong is not None:
        raise manifest_at.child(wrong).fail("integrity check failed: the manifest does not describe the plan")
    if version < 2 and (swapped := [f.name for f in plan.functors if f.name in SWAPPED_IN_FORMAT_2]):
        raise format_version.fail(
            f"bundle format {version} was compiled when `{swapped[0]}` took `(text, part)`; it now takes "
            f"`(part, text)`, as in Soufflé, so this bundle would not mean what it meant: swap the arguments "
            f"of every `{swapped[0]}` call in its sources (`policyc check` warns at each) and compile it again"
        )
    return Bundle(origin, plan, manifest, sources, plan_data)


def _verify(signature: Any, manifest: dict, key: Any, refuse: Any) -> None:
    from cryptography.exceptions import InvalidSignature

    if not isinstance(signature, dict) or signature.get("algorithm") != "ed25519":
        raise refuse("the bundle is not signed, and a verification key was given")
    try:
        value = base64.b64decode(signature.get("value", ""), validate=True)
    except (ValueError, TypeError):
        raise refuse("the bundle's signature is malformed") from None
    public = _public_key(key, refuse)
    try:
        public.verify(value, canonical(manifest))
    except InvalidSignature:
        raise refuse("signature verification failed: the bundle was not signed with this key") from None


def _private_key(path: str | os.PathLike[str]) -> Any:
    from .ed25519_keys import private_key

    return private_key(path, PolicyError)


def _public_key(key: Any, refuse: Any) -> Any:
    from .ed25519_keys import public_key

    return public_key(key, PolicyError)


class KeyExists(FileExistsError):
    """A key file is already there (``policyc keygen`` replaces it only with ``--force``)."""


def generate_keys(prefix: str, *, force: bool = False) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair: ``PREFIX.key`` (private, mode 0600) and ``PREFIX.pub``.

    Files are created exclusively and never through a symbolic link: an existing file (or
    link) at either path is :class:`KeyExists`, unless ``force``, which writes each key to a
    new file in the same folder and renames it over the old one (a link is replaced, its
    target untouched)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Path(f"{prefix}.key")
    public = Path(f"{prefix}.pub")
    if not force:
        for path in (private, public):
            if os.path.lexists(path):
                raise KeyExists(
                    f"`{path}` exists; pass --force to replace the key pair (bundles signed with the "
                    "old key will no longer verify with the new one)"
                )
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if force:
        replace_file(private, pem, 0o600)
        replace_file(public, pub, 0o644)
        return private, public
    _create_file(private, pem, 0o600)
    try:
        _create_file(public, pub, 0o644)
    except BaseException:
        private.unlink()
        raise
    return private, public


def _create_file(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` (never an existing file, never through a link) holding ``data``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        raise KeyExists(f"`{path}` exists; pass --force to replace the key pair") from None
    try:
        os.fchmod(fd, mode)  # whatever the umask
        with os.fdopen(fd, "wb") as out:
            fd = -1
            out.write(data)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        path.unlink()
        raise
