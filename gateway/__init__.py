"""The MCP gateway (``policyc mcp``, docs/mcp.md): a Model Context Protocol server in front of
real MCP servers that decides every ``tools/call`` with the policy before forwarding it."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "GatewayConfig": ".config",
        "Upstream": ".config",
        "ToolOptions": ".config",
        "SessionOptions": ".config",
        "ConfigError": ".config",
        "Problem": ".config",
        "read_config": ".config",
        "parse_config": ".config",
        "quick_config": ".config",
        "Upstreams": ".upstreams",
        "UpstreamTool": ".upstreams",
        "Callbacks": ".upstreams",
        "list_tools": ".upstreams",
        "Gate": ".decide",
        "Approvers": ".decide",
        "Verdict": ".decide",
        "Gateway": ".server",
        "serve": ".server",
        "always_denied": ".analysis",
        "Lock": ".pins",
        "Pin": ".pins",
        "Change": ".pins",
        "LockError": ".pins",
        "read_lock": ".pins",
        "write_lock": ".pins",
        "changes": ".pins",
        "listing": ".pins",
        "Starter": ".starter",
        "Settings": ".launch",
        "StartError": ".launch",
        "Prepared": ".launch",
    },
)
