"""Guards for agent frameworks (docs/integrations.md): one module per framework, each imported
only when used and installed with its extra (``policyc[langchain]``, ``policyc[openai-agents]``,
``policyc[pydantic-ai]``, ``policyc[agentdojo]``)."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(__name__, {})
