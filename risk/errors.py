"""The error of the risk package: input that cannot be used, with a message that says where."""

from __future__ import annotations

from typing import Any


class RiskError(Exception):
    """Calibration records, thresholds or a policy that cannot be used.

    ``problems`` lists every located problem found (the message is the first, or a summary);
    ``io`` marks a file that could not be read at all (the command exits with status 2);
    ``diagnostics`` holds a policy's compile errors.
    """

    def __init__(
        self,
        message: str,
        problems: tuple[str, ...] = (),
        *,
        io: bool = False,
        diagnostics: tuple[Any, ...] = (),
    ) -> None:
        super().__init__(message)
        self.problems = problems or (message,)
        self.io = io
        self.diagnostics = diagnostics
