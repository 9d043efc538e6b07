"""The one error type of forecasting: bad input of any kind, with a message that says where."""

from __future__ import annotations

MAX_HORIZON = 10_000  # the longest bounded forecast, in steps (each step multiplies by the chain's matrix)


class ForecastError(ValueError):
    """A predicate, invariant, trace or model that cannot be used; the message says where and why."""
