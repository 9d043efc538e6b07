"""`policyc test`: unit tests for policies, in `*_test.toml` files next to them (see :mod:`.spec`)."""
