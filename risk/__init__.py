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

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "RiskError": ".errors",
        "Declarations": ".declarations",
        "Role": ".declarations",
        "Record": ".records",
        "read_records": ".records",
        "Thresholds": ".thresholds",
        "read_thresholds": ".thresholds",
        "Detector": ".detectors",
        "LexicalProvenance": ".detectors",
        "score_call": ".enforce",
        "Interventions": ".enforce",
        "interventions": ".enforce",
        "RiskExtension": ".extension",
    },
)
