"""Forecasting violations before they happen (ProbGuard, seed 003).

Learn a discrete-time Markov chain over the truth values of chosen policy predicates from
recorded sessions, cache each state's probability of reaching the unsafe predicate, and let a
monitor report the probability of staying safe at every step and intervene below a threshold.

    monitor = policyc.Monitor(policy, forecast=Forecaster("model.json", threshold=0.7))
    session.forecast().safe  # the probability of staying safe from the current step

``policyc forecast learn|query|show|replay`` is the command line; docs/forecasting.md the guide.
Only :mod:`.build`, :mod:`.reach`, :mod:`.pac` and :mod:`.render` import numpy, scipy or
matplotlib; a monitor loading a model needs none of them. The names below are imported on
first use, so that the runtime finding the forecast extension (:mod:`.extension`) costs
nothing until a monitor forecasts.
"""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "Forecast": ".monitor",
        "ForecastError": ".errors",
        "Forecaster": ".monitor",
        "Model": ".model",
        "load_model": ".model:load",
        "ForecastExtension": ".extension",
    },
)
