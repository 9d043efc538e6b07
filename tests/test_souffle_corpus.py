"""Soufflé programs run unchanged: each program of tests/souffle/ (written for these tests, in
Soufflé's syntax, with nothing policyc-specific) checks clean and derives exactly the rows of
its ``.json`` file — hand-derived from Soufflé's documented semantics, each program's comment
says what it exercises — and, where the analyzer's clingo translation covers the program,
clingo's unique answer set agrees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import policyc
from policyc.compiler.pipeline import compile_source

CORPUS = Path(__file__).resolve().parent / "souffle"
PROGRAMS = sorted(path.stem for path in CORPUS.glob("*.dl"))


def rows(found: object) -> list[list[object]]:
    return sorted([list(row) for row in found])  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_souffle_program_gives_souffles_answer(name: str) -> None:
    text = (CORPUS / f"{name}.dl").read_text("utf-8")
    expected = json.loads((CORPUS / f"{name}.json").read_text("utf-8"))
    compilation = compile_source(text, f"{name}.dl")
    # I/O options are Soufflé's and only reported as ignored; a construct whose values follow the
    # order of evaluation is evaluated, and reported
    problems = [
        (d.code, d.span.line, d.message)
        for d in compilation.diagnostics
        if d.name not in ("ignored-option", "evaluation-order")
    ]
    assert compilation.ok and not problems, problems
    result = policyc.load(text).evaluate({})
    assert not result.errored, result.errors
    assert {relation: rows(result.relations[relation]) for relation in expected} == {
        relation: sorted(found) for relation, found in expected.items()
    }


# programs using what clingo has no counterpart for (`bshr`, `land`, `max` of two values,
# floats, `?` in names, Soufflé's counters, ...)
UNTRANSLATED = {
    "bits",
    "functors",
    "choice",
    "choice_order",
    "porting",
    "subsumption",
    "counters",
    "legacy_syntax",
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_clingo_agrees_where_it_can_run_the_program(name: str) -> None:
    from policyc.analyzer.asp import Untranslatable, solve_unique, to_clingo

    text = (CORPUS / f"{name}.dl").read_text("utf-8")
    expected = json.loads((CORPUS / f"{name}.json").read_text("utf-8"))
    compilation = compile_source(text, f"{name}.dl")
    try:
        answer = solve_unique(compilation, to_clingo(compilation, {}), {})
    except Untranslatable:
        assert name in UNTRANSLATED
        return
    assert name not in UNTRANSLATED
    assert {relation: rows(answer[relation]) for relation in expected} == {
        relation: sorted(found) for relation, found in expected.items()
    }


def test_the_corpus_has_its_answers() -> None:
    assert len(PROGRAMS) >= 12
    assert sorted(path.stem for path in CORPUS.glob("*.json")) == PROGRAMS
