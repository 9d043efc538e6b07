"""The reference monitor as an HTTP service (``policyc serve``, docs/serve.md): keys, the SQLite
store of sessions and decisions, the Starlette application and its OpenAPI document, and the
Python client (:func:`connect`: a remote monitor with the in-process session API)."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "Service": ".service",
        "application": ".app",
        "Keys": ".keys",
        "KeysError": ".keys",
        "Principal": ".keys",
        "new_key": ".keys",
        "read_keys": ".keys",
        "Store": ".store",
        "StoreError": ".store",
        "Settings": ".server",
        "connect": ".client",
        "RemoteMonitor": ".client",
        "RemoteSession": ".client",
        "RemoteDecision": ".client",
    },
)
