"""The table of semantic checks the check tests share: a policy and exactly the diagnostics it
must produce. Each expectation is (name, line, text): a diagnostic of that name on that line
whose span starts with that text. The lists are complete: any other diagnostic fails, except
``missing-verdict-annotation`` (a `Deny` rule without `@id` or `@message`), which a case about
another check does not list: it is checked only in the cases that expect it."""

from __future__ import annotations

from policyc.compiler.pipeline import compile_source

UNNAMED = "missing-verdict-annotation"  # listed only by the cases about it


def dedent(source: str) -> str:
    lines = source.split("\n")
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def assert_diagnostics(source: str, expected: list[tuple[str, int, str]]) -> None:
    """The policy ``source`` (indented as in the table) produces exactly ``expected``."""
    text = dedent(source)
    result = compile_source(text, "case.dl")
    wanted = {name for name, _, _ in expected}
    diagnostics = [d for d in result.diagnostics if d.name in wanted or d.name != UNNAMED]
    found = sorted((d.name, d.span.line) for d in diagnostics)
    assert found == sorted((name, line) for name, line, _ in expected), [
        (d.name, d.span.line, d.message) for d in diagnostics
    ]
    for d in diagnostics:
        at = text[d.span.start : d.span.start + 40]
        matches = [snippet for name, line, snippet in expected if name == d.name and line == d.span.line]
        assert any(at.startswith(s) for s in matches), (d.name, d.span.line, at, d.message)
