"""The MCP gateway (``policyc mcp``, docs/mcp.md): a Model Context Protocol server in front of
real MCP servers that decides every ``tools/call`` with the policy before forwarding it."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(__name__, {})
