"""Role-stratified risk budgets: calibrate a threshold per semantic role of tool arguments, and
enforce it per field at decision time (docs/risk-budgets.md).

* :mod:`.declarations` — the policy's roles, budgets, pools and field roles;
* :mod:`.records` — calibration records (JSONL) with located errors, and test splits;
* :mod:`.calibrators` — CRC (Eq. 5) and Clopper-Pearson (Eq. 6) thresholds for one stratum;
* :mod:`.strata` — Algorithm 1's stratification: rare roles pooled;
* :mod:`.calibrate` — the whole calibration, giving :class:`~.thresholds.Thresholds`;
* :mod:`.thresholds` — ``thresholds.json``, written and read back (validated);
* :mod:`.detectors` — per-field scores: the lexical provenance score, and the interface;
* :mod:`.context` — the trusted and untrusted context of a call in a session;
* :mod:`.enforce` — what a monitor session adds for each call: scores, flags, fail-closed facts;
* :mod:`.extension` — risk budgets as a runtime extension: the monitor's options, the bundle's
  ``thresholds`` section, the enforcement a monitor attaches;
* :mod:`.report`, :mod:`.plots` — violation, floors, over-intervention; plots per role.

Nothing heavy is imported here: numpy, scipy and matplotlib load when a calibration, a score or
a plot needs them.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "RiskError": "policyc.risk.errors",
    "Declarations": "policyc.risk.declarations",
    "Role": "policyc.risk.declarations",
    "Record": "policyc.risk.records",
    "read_records": "policyc.risk.records",
    "calibrate": "policyc.risk.calibrate",
    "Thresholds": "policyc.risk.thresholds",
    "read_thresholds": "policyc.risk.thresholds",
    "Detector": "policyc.risk.detectors",
    "LexicalProvenance": "policyc.risk.detectors",
    "score_call": "policyc.risk.enforce",
    "Interventions": "policyc.risk.enforce",
    "interventions": "policyc.risk.enforce",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'policyc.risk' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
