"""Forecasts as a runtime extension (:mod:`policyc.runtime.extensions`).

* **option**: ``Monitor(policy, forecast=...)`` (a :class:`~.monitor.Forecaster`, a model or
  the path of a model file) binds a model to the monitor (``monitor.forecaster``);
* **intervention**: with ``intervention="stop"``, a decision below the threshold, and every
  later one, is a denial with the rule ``policyc:forecast``;
* **query**: ``session.forecast()``, the probability of staying safe from the current step.

>>> ForecastExtension().queries
('forecast',)
"""

from __future__ import annotations

from typing import Any

from policyc.runtime.extensions import Attachment, Extension


class ForecastExtension(Extension):
    """The probability of staying safe, and the interventions below a threshold
    (docs/forecasting.md)."""

    name = "forecast"
    options = ("forecast",)
    queries = ("forecast",)
    attribute = "forecaster"

    def attach(self, monitor: Any, section: Any, forecast: Any = None, **options: Any) -> Attachment | None:
        if forecast is None:
            return None
        from .monitor import attach

        return attach(forecast, monitor)

    def query(self, name: str, session: Any, attachment: Attachment | None) -> Any:
        from .monitor import session_forecast

        return session_forecast(session)
