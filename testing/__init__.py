"""`policyc test`: unit tests for policies, in `*_test.toml` files next to them (see :mod:`.spec`)."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "TestFile": ".spec",
        "TestFileError": ".spec",
        "Case": ".spec",
        "discover": ".spec",
        "read": ".spec",
        "FileResult": ".run",
        "run_file": ".run",
    },
)
