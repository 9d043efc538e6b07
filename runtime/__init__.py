"""The runtime: opening policies and bundles, evaluation, monitor sessions and decisions, the
extension point, and the in-process fronts (guarded functions, HTTP, chat tool calls)."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "Policy": ".policy",
        "PolicyError": ".policy",
        "EvaluationError": ".policy",
        "Result": ".policy",
        "load": ".policy",
        "load_source": ".policy",
        "Monitor": ".session",
        "Session": ".session",
        "Decision": ".verdict",
        "Reason": ".verdict",
        "Limits": ".limits",
        "LimitExceeded": ".limits",
        "Extension": ".extensions",
        "Attachment": ".extensions",
        "MissingExtension": ".extensions",
        "open_path": ".opener",
        "open_text": ".opener",
        "Bundle": ".bundle",
        "build_bundle": ".bundle",
        "read_bundle": ".bundle",
        "generate_keys": ".bundle",
        "functor": ".functors",
        "MissingFunctors": ".functors",
        "FactsError": ".facts",
        "MalformedJSON": ".jsonio",
        "guard": ".instrument",
        "use_session": ".instrument",
        "PolicyDenied": ".instrument",
        "instrument_httpx": ".instrument",
        "instrument_requests": ".instrument",
        "tool_messages": ".instrument",
    },
)
