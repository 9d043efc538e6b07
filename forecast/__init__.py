"""Forecasting violations before they happen (ProbGuard, seed 003).

Learn a discrete-time Markov chain over the truth values of chosen policy predicates from
recorded sessions, cache each state's probability of reaching the unsafe predicate, and let a
monitor report the probability of staying safe at every step and intervene below a threshold.

    monitor = policyc.Monitor(policy, forecast=Forecaster("model.json", threshold=0.7))
    session.forecast().safe  # the probability of staying safe from the current step

``policyc forecast learn|query|show|replay`` is the command line; docs/forecasting.md the guide.
Only :mod:`.build`, :mod:`.reach`, :mod:`.pac` and :mod:`.render` import numpy, scipy or
matplotlib; a monitor loading a model needs none of them.
"""

from .errors import ForecastError
from .model import Model
from .model import load as load_model
from .monitor import Forecast, Forecaster

__all__ = ["Forecast", "ForecastError", "Forecaster", "Model", "load_model"]
