"""Numbers an agent wrote are read whole: a policy's `to_number`, `to_unsigned` and `to_float`.

In a program with verdict rules, a conversion reads the whole text as a JSON number (RFC 8259)
or is an error of its call (docs/language.md, "Numbers in text"); a program without verdicts
reads as Soufflé does, and `leading_number`/`leading_float` are Soufflé's readings by another
name everywhere. The oracle of the property tests is Python's own JSON reader.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policyc
from policyc.analyzer.asp import ground_context
from policyc.compiler.pipeline import compile_source
from policyc.runtime.bundle import build_bundle
from policyc.runtime.functors import bind
from policyc.stdlib.builtins import LENIENT_CONVERSIONS, POLICY_BUILTINS
from policyc.stdlib.json_numbers import strict_float, strict_number, strict_unsigned

from .conftest import examples

# a policy converting each text of `T`, and the same rules in a program without verdicts
CONVERT = (
    ".decl T(t: symbol)\n.input T\n"
    "N(t, to_number(t)) :- T(t).\nF(t, to_float(t)) :- T(t).\nL(t, leading_number(t)) :- T(t).\n"
    ".output N, F, L\n"
)
POLICY = CONVERT + "Deny(t) :- N(t, n), n > 1000.\n"


def converted(source: str | Path, texts: list[str]) -> policyc.runtime.policy.Result:
    return policyc.load(source).evaluate({"T": [[t] for t in texts]})


def json_value(text: str) -> object:
    """What Python's JSON reader makes of a text (None when it refuses it)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


# texts near the grammar's edges: its characters, JSON's whitespace and others, other digits
NEAR = st.text(alphabet="0123456789-+.eE _x \t\n\r\v\u00a0３٣a", max_size=12)
NUMBERS = st.from_regex(
    r"[ \t\n\r]*-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,5})?([eE][+-]?[0-9]{1,3})?[ \t\n\r]*", fullmatch=True
)
TEXTS = st.one_of(NEAR, NUMBERS, st.text(max_size=8))


@examples(50, 5_000)
def test_to_number_reads_exactly_the_json_integers(examples: int) -> None:
    @settings(max_examples=examples, deadline=None)
    @given(TEXTS)
    def agree(text: str) -> None:
        value = json_value(text)
        if type(value) is int:
            assert strict_number(text) == value
        else:
            with pytest.raises(ValueError, match=r"^to_number\("):
                strict_number(text)

    agree()


@examples(50, 5_000)
def test_to_float_reads_exactly_the_finite_json_numbers(examples: int) -> None:
    @settings(max_examples=examples, deadline=None)
    @given(TEXTS)
    def agree(text: str) -> None:
        value = json_value(text)
        try:
            number = float(value) if type(value) in (int, float) else math.nan  # type: ignore[arg-type]
        except OverflowError:
            number = math.inf
        if math.isfinite(number):
            assert strict_float(text) == number
        else:
            with pytest.raises(ValueError, match=r"^to_float\("):
                strict_float(text)

    agree()


THIRTY = "123456789012345678901234567890"
READ = {" 3000": 3000, "3000\n": 3000, "-0": 0, "-12": -12, THIRTY: int(THIRTY), "-" + THIRTY: -int(THIRTY)}
REFUSED = {
    "1e9": "an exponent or a fraction",
    "2.0": "an exponent or a fraction",
    "2000abc": 'text after the number "2000"',
    "1_000_000": '"_"',
    "３０００": "digits other than 0-9",
    "+5": 'starts with "+"',
    "007": "leading zero",
    "0x10": "not written in decimal",
    "": "is empty",
    "\u00a03000": "does not start with a number",
}


def test_a_policy_reads_each_text_whole_and_a_program_without_verdicts_as_soufflé() -> None:
    policy = converted(POLICY, [*READ, *REFUSED])
    assert dict(policy.relation("N")) == READ
    messages = [e.message for e in policy.errors]
    for text, why in REFUSED.items():
        (message,) = [m for m in messages if f"to_number({json.dumps(text, ensure_ascii=False)})" in m]
        assert why in message, message
    # the lenient reading, by its own name, in the policy; and Soufflé's in a plain program
    assert dict(policy.relation("L"))["1e9"] == 1 and dict(policy.relation("L"))["2000abc"] == 2000
    plain = converted(CONVERT, ["1e9", "2000abc", " 3000", "007", "+5", "12ab"])
    assert dict(plain.relation("N")) == {
        "1e9": 1,
        "2000abc": 2000,
        " 3000": 3000,
        "007": 7,
        "+5": 5,
        "12ab": 12,
    }


def test_to_float_and_to_unsigned_in_a_policy() -> None:
    texts = ["2.5", " -0.5 ", "1E+2", "1e999", "inf", "nan", ".5", "5.", " 2.5kg", "0x1p3"]
    policy = converted(POLICY, texts)
    assert dict(policy.relation("F")) == {"2.5": 2.5, " -0.5 ": -0.5, "1E+2": 100.0}
    refused = {t for t in texts[3:] for e in policy.errors if f"to_float({json.dumps(t)}):" in e.message}
    assert refused == set(texts[3:])
    assert "too large for a float" in " ".join(e.message for e in policy.errors)
    assert strict_unsigned(" 7") == 7
    for refused in ("-7", "7.0", -1):
        with pytest.raises(ValueError, match=r"^to_unsigned\("):
            strict_unsigned(refused)


def test_a_number_given_as_a_number() -> None:
    assert strict_number(2.0) == 2 and strict_number(-(10**30)) == -(10**30) and strict_float(3) == 3.0
    for value, why in ((2.5, "ftoi"), (math.inf, "no integer value"), (True, "not a symbol or a number")):
        with pytest.raises(ValueError, match=why):
            strict_number(value)
    with pytest.raises(ValueError, match="too large for a float"):
        strict_float(10**400)


PAY = """
.import events
@id("big-payment")
Deny(a) :- ToolCall(a, "pay"), n = to_number(tool_arg(a, "amount")), n > 1000.
"""


def test_a_monitor_does_not_let_an_agent_pay_a_billion_written_1e9() -> None:
    session = policyc.Monitor(policyc.load(PAY)).session("s")

    def pay(call: str, amount: object) -> policyc.runtime.Decision:
        return session.authorize({"id": call, "kind": "tool_call", "tool": "pay", "args": {"amount": amount}})

    assert pay("c1", "500").allowed
    billion = pay("c2", "1e9")
    assert not billion.allowed
    shown = " ".join(r.message or "" for r in billion.reasons)
    assert 'to_number("1e9")' in shown and "an exponent or a fraction" in shown
    assert not pay("c3", "2000abc").allowed


def test_a_bundle_reads_numbers_as_its_source(tmp_path: Path) -> None:
    compilation = compile_source(POLICY, "policy.dl", upto="plan")
    bundle = tmp_path / "policy.bundle"
    bundle.write_bytes(build_bundle(compilation, compilation.plan))
    texts = [*READ, *REFUSED]
    from_bundle, from_source = converted(bundle, texts), converted(POLICY, texts)
    assert from_bundle.relations == from_source.relations
    assert [e.message for e in from_bundle.errors] == [e.message for e in from_source.errors]


@pytest.mark.parametrize(("source", "strict"), [(POLICY, True), (CONVERT, False)])
def test_the_runtime_and_the_analyzer_bind_the_same_conversions(source: str, strict: bool) -> None:
    compilation = compile_source(source, "p.dl", upto="plan")
    bound = dict(zip((f.name for f in compilation.plan.functors), bind(compilation.plan, None), strict=True))
    grounding = ground_context(compilation).functors
    for name in ("to_number", "to_float", "leading_number"):
        assert bound[name] is grounding[name]
    assert (bound["to_number"] is POLICY_BUILTINS["to_number"]) is strict
    assert LENIENT_CONVERSIONS == {"leading_number", "leading_float"}


def test_policyc_eval_of_a_souffle_program_reads_the_number_at_the_start(cli, tmp_path: Path) -> None:
    program = tmp_path / "program.dl"
    program.write_text(CONVERT, encoding="utf-8")
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"T": [["12ab"]]}), encoding="utf-8")
    run = cli("eval", str(program), "--facts", str(facts), "--query", "N", "--format", "json")
    assert run.status == 0, run.stderr
    assert json.loads(run.stdout)["relations"]["N"] == [["12ab", 12]]
