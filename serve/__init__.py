"""The reference monitor as an HTTP service (``policyc serve``, docs/serve.md): keys, the store of
sessions and decisions (SQLite, or PostgreSQL shared by several instances: :func:`open_store`),
the Starlette application and its OpenAPI document, and the Python client (:func:`connect`: a
remote monitor with the in-process session API)."""

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
        "open_store": ".stores",
        "SessionStore": ".stores",
        "PostgresStore": ".pgstore",
        "Lease": ".pgleases",
        "StoreFailure": ".failures",
        "LeaseLost": ".failures",
        "Settings": ".server",
        "connect": ".client",
        "RemoteMonitor": ".client",
        "RemoteSession": ".client",
        "RemoteDecision": ".client",
    },
)
