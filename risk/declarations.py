"""What a policy says about risk: its roles with their budgets and pools, and the role of each
tool argument (``.role`` and ``.field``).

>>> from policyc.compiler.pipeline import compile_source
>>> d = declarations_of(compile_source('.role target budget 0.01\\n.field send_money.recipient : target'))
>>> d.roles["target"].budget, d.role_of("send_money.recipient")
(0.01, 'target')
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

from policyc.compiler.stages import Parsed, Resolved

from .errors import RiskError


@dataclass(frozen=True)
class Role:
    name: str
    budget: float  # the tolerated residual risk, in (0, 1]
    pool: str | None = None  # the stratum it is pooled into when it is too rare to calibrate alone

    @property
    def controlled(self) -> bool:
        """A budget of 1 tolerates anything: such a role needs no threshold."""
        return self.budget < 1


@dataclass(frozen=True)
class Declarations:
    roles: dict[str, Role] = field(default_factory=dict)
    fields: dict[tuple[str, str], str] = field(default_factory=dict)  # (tool, argument) -> role

    def role_of(self, path: str) -> str | None:
        """The role of ``tool.argument`` (the tool name may itself hold dots)."""
        tool, _, argument = path.rpartition(".")
        return self.fields.get((tool, argument))

    def fields_of(self, tool: str) -> dict[str, str]:
        """The arguments of ``tool`` that have a role, with their roles."""
        return dict(self._by_tool.get(tool, {}))

    @functools.cached_property
    def _by_tool(self) -> dict[str, dict[str, str]]:
        """The field roles per tool (looked up for every recorded call)."""
        by_tool: dict[str, dict[str, str]] = {}
        for (tool, argument), role in self.fields.items():
            by_tool.setdefault(tool, {})[argument] = role
        return by_tool


def declarations_of(compilation: Parsed) -> Declarations:
    """The declarations of a compiled policy (none before its names are resolved)."""
    if not isinstance(compilation, Resolved):
        return Declarations()
    symbols = compilation.symbols
    roles = {name: Role(name, info.budget, info.pool) for name, info in symbols.roles.items()}
    return Declarations(roles, dict(symbols.fields))


def from_manifest(manifest: dict[str, Any], origin: str) -> Declarations:
    """The declarations a bundle's manifest lists (:class:`RiskError` when malformed)."""
    roles: dict[str, Role] = {}
    fields: dict[tuple[str, str], str] = {}
    try:
        for entry in manifest.get("roles") or []:
            budget = entry["budget"]
            if isinstance(budget, bool) or not isinstance(budget, int | float):
                raise TypeError("budget")
            pool = entry.get("pool")
            roles[str(entry["name"])] = Role(
                str(entry["name"]), float(budget), None if pool is None else str(pool)
            )
        for entry in manifest.get("fields") or []:
            fields[(str(entry["tool"]), str(entry["argument"]))] = str(entry["role"])
    except (KeyError, TypeError, AttributeError):
        raise RiskError(f"{origin}: the manifest's roles or fields are malformed") from None
    return Declarations(roles, fields)


def read_declarations(path: str | os.PathLike[str]) -> Declarations:
    """The declarations of a policy file or a bundle (:class:`RiskError` with the reason when it
    cannot be read or has errors; its diagnostics are on ``.diagnostics``)."""
    from policyc.runtime.bundle import Bundle
    from policyc.runtime.errors import PolicyError
    from policyc.runtime.opener import UNREADABLE, open_path

    try:
        opened = open_path(path)
    except PolicyError as error:
        raise RiskError(str(error), io=error.code == UNREADABLE) from None
    if isinstance(opened, Bundle):
        return from_manifest(opened.manifest, str(path))
    compilation = opened.compilation()
    errors = tuple(d for d in compilation.diagnostics if d.is_error)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        first = errors[0]
        where = f"{first.span.file}:{first.span.line}:{first.span.column}"
        raise RiskError(f"{where}: {first.message} [{first.name}]{more}", diagnostics=errors)
    return declarations_of(compilation)
