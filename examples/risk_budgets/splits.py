"""Per-role violation on held-out runs over many random splits, for both calibration methods:
calibrate on a random half of the runs, measure on the other half, repeat.

    python examples/risk_budgets/splits.py --data calib.jsonl [--seeds 20] [--fraction 0.5]

CRC bounds the *expected* violation of each role (the mean over splits should be within the
budget, single splits may exceed it); Clopper-Pearson bounds it with probability 1 - delta on
each split (the share of splits within budget should be at least 1 - delta).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from policyc.risk.calibrate import calibrate
from policyc.risk.declarations import read_declarations
from policyc.risk.records import read_records, split_records
from policyc.risk.report import evaluate

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="calibration records (from derive.py)")
    parser.add_argument("--policy", default=str(HERE / "policy.dl"))
    parser.add_argument("--seeds", type=int, default=20, help="how many random splits")
    parser.add_argument("--fraction", type=float, default=0.5, help="the share of runs held out")
    parser.add_argument("--delta", type=float, default=0.05, help="delta of the Clopper-Pearson certificate")
    args = parser.parse_args(argv)
    declarations = read_declarations(args.policy)
    records = read_records(args.data, declarations)
    controlled = sorted(name for name, role in declarations.roles.items() if role.controlled)
    runs = len({r.episode for r in records})
    print(
        f"{args.seeds} random splits of {runs} runs, {args.fraction:g} of them held out each time; "
        "violation and over-intervention on the held-out runs"
    )
    header = ["method", "role", "budget", "mean viol.", "worst viol.", "within budget", "over-int."]
    rows = []
    for method in ("crc", "clopper-pearson"):
        results: dict[str, list[tuple[float, float | None]]] = {role: [] for role in controlled}
        for seed in range(args.seeds):
            calibration, test = split_records(records, args.fraction, seed)
            thresholds = calibrate(calibration, declarations, method=method, delta=args.delta)
            evaluation = evaluate(test, thresholds)
            for role in controlled:
                counts = evaluation.roles[role]
                results[role].append((counts.violation, counts.over_intervention))
        for role in controlled:
            budget = declarations.roles[role].budget
            rates = [v for v, _ in results[role]]
            over = [o for _, o in results[role] if o is not None]
            rows.append(
                [
                    method,
                    role,
                    f"{budget:g}",
                    f"{sum(rates) / len(rates):.4f}",
                    f"{max(rates):.4f}",
                    f"{sum(v <= budget for v in rates)}/{len(rates)}",
                    f"{sum(over) / len(over):.3f}" if over else "-",
                ]
            )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
