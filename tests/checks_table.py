"""The table of semantic checks the check tests share: a policy and exactly the diagnostics it
must produce. Each expectation is (name, line, text): a diagnostic of that name on that line
whose span starts with that text. The lists are complete: any other diagnostic fails."""

from __future__ import annotations

from policyc.compiler.pipeline import compile_source


def dedent(source: str) -> str:
    lines = source.split("\n")
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def assert_diagnostics(source: str, expected: list[tuple[str, int, str]]) -> None:
    """The policy ``source`` (indented as in the table) produces exactly ``expected``."""
    text = dedent(source)
    result = compile_source(text, "case.dl")
    found = sorted((d.name, d.span.line) for d in result.diagnostics)
    assert found == sorted((name, line) for name, line, _ in expected), [
        (d.name, d.span.line, d.message) for d in result.diagnostics
    ]
    for d in result.diagnostics:
        at = text[d.span.start : d.span.start + 40]
        matches = [snippet for name, line, snippet in expected if name == d.name and line == d.span.line]
        assert any(at.startswith(s) for s in matches), (d.name, d.span.line, at, d.message)
