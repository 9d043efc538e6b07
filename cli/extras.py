"""The optional parts of policyc and the extra that installs each.

A runtime deployment installs the compiler, the analyzer and the monitor only; translation, plots,
the language server, the HTTP service and its PostgreSQL store, replay on Ray, the MCP gateway and
the framework guards come with extras (``pip install 'policyc[translate]'``, ``[plots]``,
``[lsp]``, ``[serve]``, ``[postgres]``, ``[ray]``, ``[mcp]``, ``[langchain]``,
``[openai-agents]``, ``[pydantic-ai]``, ``[agentdojo]``, or ``[all]``). A command that needs a
missing one says which in one line.

>>> extra_of("matplotlib.pyplot")
'plots'
>>> extra_of("json") is None
True
"""

from __future__ import annotations

import importlib.util

# extra -> the top-level modules it installs
EXTRAS: dict[str, tuple[str, ...]] = {
    "translate": ("openai",),
    "plots": ("matplotlib", "jinja2"),
    "lsp": ("pygls", "lsprotocol"),
    "serve": ("uvicorn", "starlette", "orjson", "prometheus_client", "httpx"),
    "ray": ("ray",),
    "mcp": ("mcp", "jsonschema"),
    "langchain": ("langchain_core", "langgraph"),
    "openai-agents": ("agents",),
    "pydantic-ai": ("pydantic_ai",),
    "agentdojo": ("agentdojo",),
    "postgres": ("psycopg",),
}


class MissingExtra(Exception):
    """A command needs an extra that is not installed."""

    def __init__(self, extra: str, what: str) -> None:
        self.extra = extra
        super().__init__(f"{what} needs the `{extra}` extra: pip install 'policyc[{extra}]'")


def extra_of(module: str) -> str | None:
    """The extra that installs ``module`` (a dotted name), if it is one of them."""
    top = module.split(".", 1)[0]
    return next((extra for extra, modules in EXTRAS.items() if top in modules), None)


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` can be imported."""
    for module in EXTRAS[extra]:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise MissingExtra(extra, what)
