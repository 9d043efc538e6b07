"""The runtime's extension point: what a feature above the runtime adds to policies and sessions.

The runtime imports no feature built on it (risk budgets, forecasts, and the verdict modes,
service, MCP gateway and framework adapters to come). A feature plugs in as an
:class:`Extension`, registered as a Python entry point of the group ``policyc.extensions``
(``[project.entry-points."policyc.extensions"]`` in its ``pyproject.toml``) or passed
explicitly (``policyc.load(..., extensions=[...])``). An extension may add:

* **options** of :class:`~policyc.runtime.session.Monitor` that it claims (``thresholds=``,
  ``forecast=``): an option no extension claims is a ``TypeError`` naming it;
* a **manifest section** of the bundle: written when the bundle is compiled
  (:meth:`Extension.write`), read back and validated when it is loaded (:meth:`Extension.read`);
* per monitor, an :class:`Attachment` (:meth:`Extension.attach`) whose hooks a session runs:
  **start facts**, facts **after each event** is recorded, and an **intervention** on each
  decision (an allow turned into a deny with a reason);
* extra **session queries** (:attr:`Extension.queries`, asked as ``session.NAME()``:
  ``session.forecast()``).

**Failing closed.** A policy that needs an extension which is not available is refused when it
is loaded (:class:`MissingExtension`, code ``missing-extension``): one importing a library
module whose facts only an extension supplies (:data:`SUPPLIED_BY`), or a bundle whose manifest
has a section no available extension reads. A section an extension cannot read is refused too
(code ``invalid-section``). A hook that raises poisons the session (recording, starting) or
denies the decision (intervening), saying which extension failed.

>>> class Stamp(Extension):
...     name = "stamp"
>>> [e.name for e in resolve([Stamp()])]
['stamp']
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from .errors import PolicyError

if TYPE_CHECKING:
    from policyc.compiler.plan import Plan
    from policyc.compiler.stages import Resolved

    from .facts import FactsInput
    from .verdict import Decision

GROUP = "policyc.extensions"
MISSING = "missing-extension"
INVALID = "invalid-section"

# Library modules whose input facts only an extension supplies: without it a policy importing
# one would run with those relations empty (a risk policy without its budgets), so it is refused.
SUPPLIED_BY = {"risk": "risk"}

# The manifest keys the runtime itself writes and reads; any other key is an extension's section.
CORE_KEYS = frozenset(
    {
        "policyc_version",
        "default",
        "entrypoints",
        "inputs",
        "functors",
        "roles",
        "fields",
        "arguments",  # written only when the policy declares arguments: an older runtime refuses it
        "checks",
        "sources",
        "plan_sha256",
    }
)


class Attachment:
    """What an extension adds to the sessions of one monitor. Every hook defaults to adding
    nothing; a session runs the hooks of its monitor's attachments in the order of the
    extensions (see :func:`resolve`)."""

    def start_facts(self, session: Any) -> FactsInput | None:
        """Facts every session starts with (after the policy's own facts and the identity)."""
        return None

    def recorded(self, session: Any, event: Mapping[str, Any], position: int) -> FactsInput | None:
        """Facts to add after ``event`` is recorded (``session.order[:position]``: the events
        before it)."""
        return None

    def intervene(self, session: Any, decision: Decision) -> Decision:
        """The decision as this extension lets it stand (a denial instead of an allow, say)."""
        return decision


class Extension:
    """A feature that plugs into the runtime; subclasses override what they add."""

    name: ClassVar[str] = ""
    options: ClassVar[tuple[str, ...]] = ()  # keyword options of Monitor it claims
    compile_options: ClassVar[tuple[str, ...]] = ()  # keyword options of build_bundle it claims
    sections: ClassVar[tuple[str, ...]] = ()  # the manifest keys it writes and reads
    queries: ClassVar[tuple[str, ...]] = ()  # the session methods it adds
    attribute: ClassVar[str | None] = None  # the monitor attribute holding its attachment

    def write(self, compilation: Resolved, plan: Plan, **options: Any) -> dict[str, Any]:
        """The manifest sections of a bundle compiled with ``options`` (keys of :attr:`sections`;
        a policy loaded from source is read as the bundle compiled without options)."""
        return {}

    def read(self, manifest: Mapping[str, Any], origin: str) -> Any:
        """What the extension keeps of a manifest (its sections, and what else it reads),
        validated: :class:`SectionError` if it cannot be read."""
        return None

    def attributes(self, section: Any) -> Mapping[str, Any]:
        """Attributes a loaded policy shows for what :meth:`read` kept (``policy.thresholds``)."""
        return {}

    def attach(self, monitor: Any, section: Any, **options: Any) -> Attachment | None:
        """What the monitor's sessions run for this extension (None: nothing), given what
        :meth:`read` kept and the options it claims that were given."""
        return None

    def query(self, name: str, session: Any, attachment: Attachment | None) -> Any:
        """The answer to the session query ``name`` (one of :attr:`queries`)."""
        raise NotImplementedError(name)


class SectionError(Exception):
    """A manifest section an extension cannot read (the policy is refused)."""


class MissingExtension(PolicyError):
    """A policy needs an extension that is not available (code ``missing-extension``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=MISSING)


@dataclass(frozen=True)
class Broken:
    """An entry point that could not be loaded (its extension is not available)."""

    name: str
    reason: str


@functools.cache
def installed() -> tuple[tuple[Extension, ...], tuple[Broken, ...]]:
    """The extensions registered as entry points, by name, and those that failed to load
    (looked up once)."""
    from importlib.metadata import entry_points

    found: list[Extension] = []
    broken: list[Broken] = []
    for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
        try:
            loaded = point.load()
            extension = loaded() if isinstance(loaded, type) else loaded
        except Exception as error:
            broken.append(Broken(point.name, f"{type(error).__name__}: {error}"))
            continue
        if not isinstance(extension, Extension):
            broken.append(Broken(point.name, f"`{point.value}` is not a policyc Extension"))
            continue
        found.append(extension)
    return tuple(found), tuple(broken)


def resolve(extensions: Iterable[Extension] | None = None) -> tuple[Extension, ...]:
    """The extensions given (in their order), or else the installed ones (by name). Two with
    one name, or one that is not an :class:`Extension`, are a ``TypeError``."""
    chosen = installed()[0] if extensions is None else tuple(extensions)
    names: set[str] = set()
    for extension in chosen:
        if not isinstance(extension, Extension):
            raise TypeError(f"an extension is a policyc Extension, not {type(extension).__name__}")
        if extension.name in names:
            raise TypeError(f"two extensions are named `{extension.name}`")
        names.add(extension.name)
    return chosen


def _unavailable(name: str, extensions: tuple[Extension, ...]) -> str:
    """Why extension ``name`` is not among ``extensions``."""
    for broken in installed()[1]:
        if broken.name == name:
            return f"the extension `{name}` failed to load ({broken.reason})"
    return f"the extension `{name}` is not installed"


def check_libraries(libraries: Iterable[str], extensions: tuple[Extension, ...], origin: str) -> None:
    """Refuse (:class:`MissingExtension`) a policy importing a library module whose facts an
    extension that is not available supplies."""
    names = {e.name for e in extensions}
    for module in sorted(set(libraries)):
        needed = SUPPLIED_BY.get(module)
        if needed is not None and needed not in names:
            raise MissingExtension(
                f"{origin}: the policy imports `{module}`, whose facts the extension `{needed}` supplies, "
                f"but {_unavailable(needed, extensions)}: it is refused rather than run without them"
            )


def read_sections(
    manifest: Mapping[str, Any], extensions: tuple[Extension, ...], origin: str
) -> dict[str, Any]:
    """What each extension keeps of a manifest, by extension name: :class:`MissingExtension`
    for a section no extension reads (a null section carries nothing), :class:`SectionError`
    for one that an extension cannot read."""
    owner = {section: e for e in extensions for section in e.sections}
    for key, value in manifest.items():
        if key in CORE_KEYS or value is None or key in owner:
            continue
        raise MissingExtension(
            f"{origin}: the bundle's manifest has a section `{key}` that no available extension reads "
            "(it was compiled with an extension this runtime lacks): it is refused rather than run "
            "without it"
        )
    kept: dict[str, Any] = {}
    for extension in extensions:
        try:
            kept[extension.name] = extension.read(manifest, origin)
        except SectionError as error:
            raise PolicyError(str(error), code=INVALID) from None
    return kept


def write_sections(
    compilation: Resolved, plan: Plan, extensions: tuple[Extension, ...], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The manifest sections the extensions write for a bundle compiled with ``options``
    (``TypeError`` for an option no extension claims)."""
    claimed = claim(options, extensions, "compile_options", "build_bundle")
    sections: dict[str, Any] = {}
    for extension in extensions:
        written = extension.write(compilation, plan, **claimed[extension.name])
        for key, value in written.items():
            if key not in extension.sections or key in CORE_KEYS:
                raise SectionError(
                    f"the extension `{extension.name}` wrote a section `{key}` it does not own"
                )
            sections[key] = value
    return sections


def claim(
    options: Mapping[str, Any], extensions: tuple[Extension, ...], kind: str, what: str
) -> dict[str, dict[str, Any]]:
    """The options each extension claims (its ``kind``: ``options`` or ``compile_options``), by
    extension name; an option none claims is a ``TypeError`` naming it, as for any unexpected
    keyword argument of ``what``."""
    claimed: dict[str, dict[str, Any]] = {e.name: {} for e in extensions}
    owners = {option: e.name for e in extensions for option in getattr(e, kind)}
    for option, value in options.items():
        if option not in owners:
            raise TypeError(f"{what}() got an unexpected keyword argument {option!r}")
        claimed[owners[option]][option] = value
    return claimed


def library_modules(paths: Iterable[str]) -> list[str]:
    """The library module names of source paths (``<stdlib>/risk.dl`` is ``risk``)."""
    from policyc.compiler.loader import LIBRARY_PREFIX

    return [
        path[len(LIBRARY_PREFIX) : -len(".dl")].replace("/", ".")
        for path in paths
        if path.startswith(LIBRARY_PREFIX) and path.endswith(".dl")
    ]
