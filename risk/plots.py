"""One figure per role: its violation rate and its utility (the share of benign fields allowed)
as the threshold varies, with the budget and the calibrated threshold marked, for the
calibration data and, when given, the test data. Matplotlib with the Agg backend, imported
only here.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

from .errors import RiskError
from .records import Record
from .thresholds import Thresholds

FORMATS = ("png", "svg")


def curves(records: Sequence[Record], grid: Sequence[float]) -> tuple[list[float], list[float]]:
    """The violation rate and the utility of records at each threshold of ``grid``."""
    import numpy as np

    scores = np.array([r.score for r in records], dtype=float)
    violated = np.array([r.violated for r in records], dtype=bool)
    if scores.size == 0:
        return [math.nan] * len(grid), [math.nan] * len(grid)
    at = np.asarray(grid, dtype=float)[:, None]
    allowed = scores[None, :] <= at
    violation = (allowed & violated[None, :]).sum(axis=1) / scores.size
    clean = (~violated).sum()
    utility = (allowed & ~violated[None, :]).sum(axis=1) / clean if clean else np.full(len(grid), math.nan)
    return violation.tolist(), utility.tolist()


def write_plots(
    thresholds: Thresholds,
    calibration: Sequence[Record],
    test: Sequence[Record] | None,
    folder: str | os.PathLike[str],
    fmt: str = "png",
) -> list[Path]:
    """Write ``FOLDER/ROLE.FMT`` for every role with calibration or test fields."""
    import numpy as np

    if fmt not in FORMATS:
        raise RiskError(f"unknown plot format `{fmt}`; the formats are {', '.join(FORMATS)}")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RiskError(f"cannot create `{folder}`: {error.strerror or error}", io=True) from None
    written = []
    for role in sorted(thresholds.role_to_stratum):
        cal = [r for r in calibration if r.role == role]
        held = [r for r in test or () if r.role == role]
        if not cal and not held:
            continue
        stratum = thresholds.strata[thresholds.role_to_stratum[role]]
        result = thresholds.roles.get(role)
        budget = result.budget if result else stratum.budget
        scores = [r.score for r in (*cal, *held)]
        low, high = min(scores), max(scores)
        pad = (high - low) * 0.05 or 0.05
        grid = np.unique(np.concatenate([np.linspace(low - pad, high + pad, 400), scores]))
        figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(6.4, 5.6))
        for data, label, style in ((cal, "calibration", "-"), (held, "test", "--")):
            if not data:
                continue
            violation, utility = curves(data, grid)
            top.step(grid, violation, where="post", linestyle=style, label=f"{label} ({len(data)} fields)")
            bottom.step(grid, utility, where="post", linestyle=style, label=label)
        top.axhline(budget, color="tab:red", linewidth=1, label=f"budget {budget:g}")
        for axis in (top, bottom):
            if math.isfinite(stratum.threshold):
                axis.axvline(stratum.threshold, color="black", linewidth=1, linestyle=":")
            axis.grid(alpha=0.3)
        where = (
            f"threshold {stratum.threshold:.3f}"
            if math.isfinite(stratum.threshold)
            else f"threshold {stratum.threshold}"
        )
        via = "" if stratum.name == role else f" (pool {stratum.name})"
        top.set_title(f"role {role}: {where}{via}")
        top.set_ylabel("violation rate")
        bottom.set_ylabel("utility (benign allowed)")
        bottom.set_xlabel("threshold (a field is allowed when its score is at most it)")
        bottom.set_ylim(-0.02, 1.02)
        top.legend(fontsize="small")
        figure.tight_layout()
        path = out / f"{_safe(role)}.{fmt}"
        try:
            figure.savefig(path, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
        except OSError as error:
            raise RiskError(f"cannot write `{path}`: {error.strerror or error}", io=True) from None
        finally:
            plt.close(figure)
        written.append(path)
    return written


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
