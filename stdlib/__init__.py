"""Library policies (``.dl``) importable with ``.import NAME``, and their functor implementations."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "BUILTINS": ".builtins",
        "EventError": ".events",
        "RELATIONS": ".events",
        "check_event": ".events",
        "event_facts": ".events",
        "session_functors": ".events",
    },
)
