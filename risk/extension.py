"""Risk budgets as a runtime extension (:mod:`policyc.runtime.extensions`).

* **options**: ``Monitor(policy, thresholds=..., detector=...)``, and
  ``build_bundle(..., thresholds=...)`` (``policyc compile --thresholds``);
* **manifest section** ``thresholds``: the calibrated thresholds, written into the bundle
  (``null`` without) and read back, validated, with the roles and field roles the manifest
  lists; a loaded policy shows them as ``policy.risk`` (the declarations) and
  ``policy.thresholds``;
* **hooks**: a monitor of a policy that imports ``risk`` attaches an
  :class:`~.enforce.Enforcement` (``monitor.risk``) whose sessions start with the
  ``RoleStratum`` facts and score each recorded call's arguments that have a role.

A policy importing ``risk`` is refused when this extension is not available: it would run
without its budgets.

>>> from policyc.compiler.pipeline import compile_source
>>> from policyc.runtime.bundle import describe
>>> from policyc.runtime.planned import plan_of
>>> compilation = compile_source(".import risk\\n.role target budget 0.01\\n.field pay.to : target")
>>> manifest = {**describe(compilation, plan_of(compilation)), "thresholds": None}
>>> section = RiskExtension().read(manifest, "p.dl")
>>> section.declarations.role_of("pay.to"), section.thresholds
('target', None)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policyc.runtime.extensions import Attachment, Extension, SectionError

from .declarations import Declarations
from .errors import RiskError

if TYPE_CHECKING:
    from policyc.compiler.plan import Plan
    from policyc.compiler.stages import Resolved


@dataclass(frozen=True)
class RiskSection:
    """What a policy carries for its risk budgets: its declarations and calibrated thresholds."""

    declarations: Declarations
    thresholds: Any = None  # a Thresholds, or None


class RiskExtension(Extension):
    """Per-field risk budgets in monitor sessions (docs/risk-budgets.md)."""

    name = "risk"
    options = ("thresholds", "detector")
    compile_options = ("thresholds",)
    sections = ("thresholds",)
    attribute = "risk"

    def write(
        self, compilation: Resolved, plan: Plan, thresholds: Any = None, **options: Any
    ) -> dict[str, Any]:
        return {"thresholds": None if thresholds is None else thresholds.to_json()}

    def read(self, manifest: Mapping[str, Any], origin: str) -> RiskSection:
        from .declarations import from_manifest
        from .thresholds import from_json

        try:
            declarations = from_manifest(dict(manifest), origin)
            data = manifest.get("thresholds")
            loaded = None if data is None else from_json(data, f"{origin}: manifest thresholds")
        except RiskError as error:
            raise SectionError(str(error)) from None
        return RiskSection(declarations, loaded)

    def attributes(self, section: Any) -> Mapping[str, Any]:
        if section is None:
            return {"risk": None, "thresholds": None}
        return {"risk": section.declarations, "thresholds": section.thresholds}

    def attach(
        self, monitor: Any, section: Any, thresholds: Any = None, detector: Any = None, **options: Any
    ) -> Attachment | None:
        from .enforce import enforcement

        declarations = None if section is None else section.declarations
        loaded = None if section is None else section.thresholds
        return enforcement(monitor.policy.plan, declarations, loaded, thresholds, detector)
