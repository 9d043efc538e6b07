"""Properties: any input gives diagnostics (never an exception), and valid programs check clean."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyc.compiler.diagnostics import Severity
from policyc.compiler.loader import decode
from policyc.compiler.pipeline import compile_source

from .conftest import EXAMPLES
from .programs import oracle_programs, token_soup

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EXAMPLE_TEXTS = [p.read_text("utf-8") for p in sorted(EXAMPLES.rglob("*.dl"))]


def assert_well_formed(text: str) -> None:
    """Compile the text; every diagnostic must point inside it, consistently."""
    result = compile_source(text, "t.dl")
    source = next(m.source for m in result.program.modules if m.path == "t.dl")
    for d in result.diagnostics:
        span = d.span
        if span.file != "t.dl":
            continue
        assert 0 <= span.start <= span.end <= len(text), d
        assert (span.line, span.column) == source.position(span.start), d
        assert (span.end_line, span.end_column) == source.position(span.end), d
        assert d.message and "\n" not in d.message, d
        assert d.code.startswith("PC") and d.name


@SETTINGS
@given(st.text(max_size=300))
def test_any_text(text: str) -> None:
    assert_well_formed(text)


@SETTINGS
@given(token_soup())
def test_token_soup(text: str) -> None:
    assert_well_formed(text)


@SETTINGS
@given(st.binary(max_size=300))
def test_any_bytes(data: bytes) -> None:
    source = decode("t.dl", data)
    if hasattr(source, "text"):
        assert_well_formed(source.text)
    else:
        assert source.name == "invalid-encoding"


@st.composite
def mutated_example(draw) -> str:
    text = draw(st.sampled_from(EXAMPLE_TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        j = draw(st.integers(i, min(len(text), i + 20)))
        action = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if action == "delete":
            text = text[:i] + text[j:]
        elif action == "insert":
            text = (
                text[:i]
                + draw(st.sampled_from(["(", ")", ".", ",", "not ", "x", '"', "/*", "@", "\n"]))
                + text[i:]
            )
        else:
            text = text[:j] + text[i:j] + text[j:]
    return text


@SETTINGS
@given(mutated_example())
def test_mutated_examples(text: str) -> None:
    assert_well_formed(text)


@SETTINGS
@given(oracle_programs().map(lambda case: case.text))
def test_valid_programs_check_without_errors(text: str) -> None:
    result = compile_source(text, "t.dl")
    errors = [(d.span.line, d.message) for d in result.diagnostics if d.severity is Severity.ERROR]
    assert errors == [], text
    # stratification: non-monotone dependencies point strictly down, others never up
    strata = result.strata
    assert strata is not None and result.graph is not None
    for head, body, _dependency in result.graph.edges():
        for dep in result.graph.dependencies(head, body):
            if dep.monotone:
                assert strata.of[body] <= strata.of[head]
            else:
                assert strata.of[body] < strata.of[head], (head, body)


def test_examples_are_present() -> None:
    assert EXAMPLE_TEXTS and all(Path(p).suffix == ".dl" for p in map(str, EXAMPLES.rglob("*.dl")))
