"""Natural-language requirements to policies."""
