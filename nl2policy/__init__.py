"""Natural-language requirements to policies."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "Options": ".pipeline",
        "InputError": ".pipeline",
        "run": ".pipeline",
        "Report": ".report",
        "Settings": ".client",
        "ConfigurationError": ".client",
    },
)
