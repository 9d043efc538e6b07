"""What the tests share: the installed command, free ports, a real `policyc serve`
and its keys, a real `policyc mcp` gateway with a client, a throwaway PostgreSQL server (each in
a module of its own)."""
