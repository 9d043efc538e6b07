"""The builtins Soufflé also has return what Soufflé returns.

Each expected value is derived from Soufflé's source (souffle-lang/souffle), cited at the test:
``src/interpreter/Engine.cpp`` (the interpreter's intrinsic functors and constraints),
``src/include/souffle/utility/StringUtil.h`` (``RamSignedFromString``, ``RamFloatFromString``)
and ``src/include/souffle/utility/EvaluatorUtil.h`` (``symbol2numeric``, what ``to_number``
calls), read with the C and C++ library functions they call (``std::stoll``/``strtoll``,
``std::stod``, ``std::string::substr``, ``std::regex_match`` with the ECMAScript grammar).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policyc
from policyc.compiler.pipeline import check_source
from policyc.compiler.regex import pattern_problem
from policyc.stdlib import builtins

from .conftest import examples


def evaluate(source: str, facts: dict) -> policyc.runtime.policy.Result:
    return policyc.load(source).evaluate(facts)


# ------------------------------------------------------------------------------- contains

WORDS = ["", "a", "ab", "ba", "evil.com", "https://evil.com/x", "EVIL.COM"]


def test_contains_takes_the_part_first() -> None:
    """Engine.cpp, ``BinaryConstraintOp::CONTAINS``: ``text.find(pattern) != npos`` with the
    pattern the left argument and the text the right one."""
    result = evaluate(
        ".decl W(w: symbol)\n.input W\nIn(p, t) :- W(p), W(t), contains(p, t).\n"
        "Out(p, t) :- W(p), W(t), !contains(p, t).\n.output In, Out\n",
        {"W": [[w] for w in WORDS]},
    )
    assert result.relation("In") == {(p, t) for p in WORDS for t in WORDS if p in t}
    assert result.relation("Out") == {(p, t) for p in WORDS for t in WORDS if p not in t}
    assert ("evil.com", "https://evil.com/x") in result.relation("In")


def _diagnostics(text: str) -> list:
    """What `check` says of the builtins' calls (the test policies' rules are not named)."""
    return [d for d in check_source(text, "policy.dl") if d.name != "missing-verdict-annotation"]


def test_check_warns_at_a_contains_call_in_the_old_order_and_the_fix_swaps_it() -> None:
    text = (
        ".input Fetch\n"
        'Deny(a) :- Fetch(a, u), contains(lower(u), "evil.com").\n'
        'Deny(a) :- Fetch(a, u), !contains(u, "x"), n = count : { Fetch(_, v), contains(v, "y") }, n > 1.\n'
    )
    found = [d for d in _diagnostics(text) if d.name == "contains-order"]
    lines = text.splitlines()
    assert [(d.code, d.span.line, d.span.column) for d in found] == [
        ("PC206", 2, lines[1].index("contains") + 1),
        ("PC206", 3, lines[2].index("contains") + 1),
        ("PC206", 3, lines[2].index("contains(v") + 1),
    ]
    assert not found[0].is_error and found[0].fix is not None and not found[0].fix.safe
    fixed = text
    for edit in sorted((e for d in found for e in d.fix.edits), key=lambda e: -e.span.start):
        fixed = fixed[: edit.span.start] + edit.text + fixed[edit.span.end :]
    assert 'contains("evil.com", lower(u))' in fixed and '!contains("x", u)' in fixed
    assert 'contains("y", v)' in fixed
    assert [d for d in _diagnostics(fixed) if d.name == "contains-order"] == []


@pytest.mark.parametrize(
    "call",
    ['contains("evil.com", u)', "contains(u, u)", 'u != "", contains("a", "ab")', 'startswith(u, "http:")'],
)
def test_no_warning_for_calls_in_the_new_order_or_without_a_lone_constant(call: str) -> None:
    text = f".input Fetch\nDeny(a) :- Fetch(a, u), {call}.\n"
    assert [d.name for d in _diagnostics(text)] == []


# ------------------------------------------------------------------------------- to_number

# EvaluatorUtil.h: to_number is symbol2numeric<RamSigned>, i.e. RamSignedFromString(src,
# nullptr, 0) (StringUtil.h): "0b"/"-0b" → base 2 on the text without the prefix, "0x"/"-0x" →
# std::stoll(text, 16), else std::stoll(text, 10). std::stoll is strtoll: leading spaces,
# a sign, in base 16 an optional 0x, the longest run of digits; the rest is ignored.
TO_NUMBER = {
    "42": 42,
    "-7": -7,
    "+7": 7,
    " 42": 42,
    "12abc": 12,
    "3.9": 3,
    "0x10": 16,
    "0xff": 255,
    "-0x10": -16,
    "0x1g": 1,
    "0X10": 0,  # only a lower-case prefix selects base 16; base 10 reads the 0
    "0x": 0,  # strtoll reads the 0 when no hexadecimal digit follows the x
    "0b101": 5,
    "-0b101": -5,
    "0b 101": 5,  # the prefix removed, strtoll skips the space
    "007": 7,
}


def test_to_number_reads_as_souffle() -> None:
    result = evaluate(
        ".decl T(t: symbol)\n.input T\nN(t, to_number(t)) :- T(t).\n.output N\n",
        {"T": [[t] for t in TO_NUMBER]},
    )
    assert not result.errored, result.errors
    assert dict(result.relation("N")) == TO_NUMBER


@pytest.mark.parametrize("text", ["", "abc", "-", "0b", "0b2", "x12"])
def test_to_number_of_a_text_without_a_number_is_an_error(text: str) -> None:
    """Soufflé stops the program (symbol2numeric raises SIGFPE); here the call is an error."""
    program = policyc.load(".decl T(t: symbol)\n.input T\nN(t, to_number(t)) :- T(t).\n.output N\n")
    result = program.evaluate({"T": [[text], ["5"]]})
    assert result.errored and "does not start with a number" in result.errors[0].message


@pytest.mark.parametrize("text", ["", "abc", "-", "0b", "0b2", "x12"])
def test_leading_number_in_a_policy_reads_as_souffle_and_fails_closed(text: str) -> None:
    """A policy's `to_number` reads a text whole (test_json_numbers.py); `leading_number` is
    Soufflé's reading under another name, in policies too."""
    policy = policyc.load(
        ".decl Amount(a: symbol, t: symbol)\n.input Amount\n.default deny\n"
        "Allow(a) :- Amount(a, t), leading_number(t) < 100.\n"
    )
    result = policy.evaluate({"Amount": [["a1", text], ["a2", "5"], ["a3", "12ab"], ["a4", "0x10"]]})
    assert result.errored and "does not start with a number" in result.errors[0].message
    assert not result.decide("a1").allowed and result.decide("a1").errored
    assert {a for (a,) in result.relation("Allow")} == {"a2", "a3", "a4"}
    assert result.decide("a2").allowed  # the error refuses only what needs it


# ------------------------------------------------------------------------------- substr

# Engine.cpp, FunctorOp::SUBSTR: str.substr(idx, len) with idx and len converted to size_t,
# "" (and a warning) when substr throws, which it does when idx > size(); a negative idx is a
# huge size_t (throws); a negative len is a huge count (the rest of the text).
SUBSTR = {
    ("hello", 1, 3): "ell",
    ("hello", 0, 5): "hello",
    ("hello", 1, 100): "ello",
    ("hello", 5, 2): "",
    ("hello", 6, 1): "",
    ("hello", -1, 2): "",
    ("hello", 1, -1): "ello",
    ("hello", 2, 0): "",
    ("", 0, 1): "",
}


def test_substr_out_of_range_is_what_souffle_gives() -> None:
    result = evaluate(
        ".decl S(t: symbol, i: number, n: number)\n.input S\nR(t, i, n, substr(t, i, n)) :- S(t, i, n).\n"
        ".output R\n",
        {"S": [list(k) for k in SUBSTR]},
    )
    assert not result.errored, result.errors
    assert {(t, i, n): r for t, i, n, r in result.relation("R")} == SUBSTR


# ------------------------------------------------------------------------------- other conversions


def test_to_string_strlen_and_the_float_conversions() -> None:
    """Engine.cpp: TOSTRING is std::to_string (decimal), STRLEN the string's size; to_float is
    RamFloatFromString (std::stod: spaces, a prefix of the text, hexadecimal floats, inf);
    itof and ftoi are static_casts (ftoi truncates toward zero)."""
    result = evaluate(
        ".decl T(t: symbol)\n.decl N(n: number)\n.input T, N\n"
        "S(n, to_string(n)) :- N(n).\nL(t, strlen(t)) :- T(t).\n"
        'F(t, to_float(t)) :- T(t), t != "".\nI(n, itof(n), ftoi(itof(n) / 2.0)) :- N(n).\n'
        ".output S, L, F, I\n",
        {"T": [["2.5"], [" 2.5kg"], ["1e3"], ["-0x1p3"], ["inf"], ["7"], [""]], "N": [[-5], [0], [42]]},
    )
    assert not result.errored, result.errors
    assert result.relation("S") == {(-5, "-5"), (0, "0"), (42, "42")}
    assert dict(result.relation("L")) == {
        "2.5": 3,
        " 2.5kg": 6,
        "1e3": 3,
        "-0x1p3": 6,
        "inf": 3,
        "7": 1,
        "": 0,
    }
    assert dict(result.relation("F")) == {
        "2.5": 2.5,
        " 2.5kg": 2.5,
        "1e3": 1000.0,
        "-0x1p3": -8.0,
        "inf": float("inf"),
        "7": 7.0,
    }
    assert result.relation("I") == {(-5, -5.0, -2), (0, 0.0, 0), (42, 42.0, 21)}


@pytest.mark.parametrize(
    ("functor", "value"), [("to_float", "nan"), ("to_float", "kg"), ("ftoi", float("inf"))]
)
def test_conversions_without_a_value_are_errors(functor: str, value) -> None:
    with pytest.raises(ValueError):
        builtins.BUILTINS[functor](value)


# ------------------------------------------------------------------------------- match


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("[[:digit:]]+", "2024", True),  # POSIX classes work (as they did on plain RE2)
        ("[[:digit:]]+", "20a", False),
        ("[[:d:]][[:w:]]+[[:s:]]", "1a_\v", True),  # std::regex's short names; \v is a space
        ("[[:alpha:]]+[[:punct:]]", "ab!", True),
        ("\\s", "\v", True),
        ("[^\\s]", "\v", False),
        (".", "\r", False),  # ECMAScript: `.` takes no line terminator
        (".", "\n", False),
        ("(?s).", "\n", True),  # RE2's flag, kept as an extension
        ("\\u0041\\x42", "AB", True),
        ("\\cJ", "\n", True),
        ("[\\b]", "\b", True),
        ("[]", "a", False),  # ECMAScript: `[]` matches nothing, `[^]` anything
        ("[^]", "\n", True),
        ("[[.-.]a]+", "-a-", True),
        ("a|b", "ab", False),  # regex_match: the whole text
        ("https?://[a-z.]+/.*", "https://x.com/a", True),
        ("(?i)ABC", "abc", True),
        ("\\pL+", "héllo", True),
    ],
)
def test_match_reads_soufflés_patterns(pattern: str, text: str, matches: bool) -> None:
    assert pattern_problem(pattern) is None
    assert builtins.match(pattern, text) is matches


# Patterns of a small ECMAScript grammar, written twice: as Soufflé reads them and as Python's
# `re` (an independent engine) spells the same language, with std::regex's classes in the C
# locale spelt out by hand.
SETS = {
    "[:digit:]": "0-9",
    "[:d:]": "0-9",
    "[:alpha:]": "a-zA-Z",
    "[:space:]": " \\t\\n\\r\\f\\v",
    "[:s:]": " \\t\\n\\r\\f\\v",
    "[:w:]": "a-zA-Z0-9_",
    "\\d": "0-9",
    "\\s": " \\t\\n\\r\\f\\v",
    "\\w": "a-zA-Z0-9_",
    "a": "a",
    "b": "b",
    "\\-": "\\-",
}
ESCAPES = {
    "\\d": "[0-9]",
    "\\D": "[^0-9]",
    "\\s": "[ \\t\\n\\r\\f\\v]",
    "\\S": "[^ \\t\\n\\r\\f\\v]",
    "\\w": "[a-zA-Z0-9_]",
}


def _patterns() -> st.SearchStrategy[tuple[str, str]]:
    atoms = st.one_of(
        st.sampled_from([("a", "a"), ("b", "b"), ("1", "1"), ("\\.", "\\."), (".", "[^\\n\\r]")]),
        st.sampled_from(sorted(ESCAPES.items())),
        st.tuples(st.lists(st.sampled_from(sorted(SETS)), min_size=1, max_size=3), st.booleans()).map(
            lambda c: (
                ("[^" if c[1] else "[") + "".join(c[0]) + "]",
                ("[^" if c[1] else "[") + "".join(SETS[i] for i in c[0]) + "]",
            )
        ),
    )

    def extend(inner: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str]]:
        return st.one_of(
            st.tuples(inner, inner).map(lambda p: (p[0][0] + p[1][0], p[0][1] + p[1][1])),
            st.tuples(inner, inner).map(lambda p: (f"(?:{p[0][0]}|{p[1][0]})", f"(?:{p[0][1]}|{p[1][1]})")),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,2}", "*?"])).map(
                lambda p: (f"({p[0][0]}){p[1]}", f"({p[0][1]}){p[1]}")
            ),
        )

    return st.recursive(atoms, extend, max_leaves=6)


@examples(30, 600)
def test_match_agrees_with_an_independent_engine(examples: int) -> None:
    @settings(max_examples=examples, deadline=None)
    @given(_patterns(), st.text(alphabet="ab1 .-_\n\r\v", max_size=5))
    def agree(patterns: tuple[str, str], text: str) -> None:
        souffle, python = patterns
        expected = re.fullmatch(python, text, flags=re.ASCII) is not None
        assert builtins.match(souffle, text) is expected, (souffle, python, text)

    agree()


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(a)\\1", "backreference"),
        ("(?=a)a", "lookahead"),
        ("(?!a)b", "negative lookahead"),
        ("(?<=a)b", "lookbehind"),
        ("a(", "missing )"),
        ("[a", "no closing `]`"),
        ("[[.space.]]", "collating element"),
        ("a{1001}", "repetition"),
        ("\\", "lone `\\`"),
        ("x" * 10_001, "more than the 10,000 allowed"),
    ],
)
def test_a_constant_pattern_match_cannot_run_is_a_located_error_of_check(pattern: str, reason: str) -> None:
    escaped = pattern.replace("\\", "\\\\")
    text = f'.input Send\nDeny(a) :- Send(a, x), match("{escaped}", x).\n'
    (found,) = _diagnostics(text)
    assert (found.code, found.name, found.is_error) == ("PC110", "invalid-pattern", True)
    assert (found.span.line, found.span.column) == (2, 30)
    assert found.span.end - found.span.start == len(escaped) + 2  # the whole string constant
    assert reason in found.message


def test_a_pattern_computed_at_run_time_is_an_error_of_the_call_and_fails_closed() -> None:
    text = (
        ".decl Rule(p: symbol)\n.decl Send(a: symbol, x: symbol)\n.input Rule, Send\n.default deny\n"
        "Allow(a) :- Send(a, x), Rule(p), match(p, x).\n"
    )
    assert _diagnostics(text) == []  # nothing to check before it runs
    policy = policyc.load(text)
    result = policy.evaluate({"Rule": [["a("]], "Send": [["a1", "a("]]})
    assert result.errored and "invalid pattern 'a('" in result.errors[0].message  # not read literally
    refused = result.decide("a1")
    assert not refused.allowed and refused.errored and "invalid pattern" in refused.reasons[0].message


def test_the_library_and_example_patterns_are_valid() -> None:
    from .conftest import EXAMPLES, ROOT

    found = []
    for path in [*sorted((ROOT / "stdlib").glob("*.dl")), *sorted(EXAMPLES.rglob("*.dl"))]:
        for literal in re.findall(r'match\("((?:[^"\\]|\\.)*)"', path.read_text("utf-8")):
            found.append(literal)
            pattern = literal.encode().decode("unicode_escape")
            assert pattern_problem(pattern) is None, (path, pattern)
    assert len(found) >= 4


# ---------------------------------------------------- match in a program without verdicts
#
# Soufflé's `match` is `std::regex_match(text, std::regex(pattern))` (Engine.cpp, `MATCH`), in a
# try block that warns and answers false when the pattern is not a regular expression. How GCC's
# library reads a pattern is its scanner's (libstdc++, bits/regex_scanner.tcc,
# `_M_eat_escape_ecma`: an escape it does not define is the character itself, `\c` takes the next
# character as it is; `_M_scan_normal`: after `(?` only `:`, `=` and `!`; `{` must start an
# interval; bits/regex_compiler.tcc: a class name `lookup_classname` does not know is an error),
# and it matches `char`s: the bytes of the text.

SOUFFLE_READINGS = [
    ("\\pL", "pL", True),  # `\p` is `p`, not RE2's Unicode class
    ("\\pL", "x", False),
    ("\\A\\z", "Az", True),
    ("\\cJ", "J", True),
    ("\\cJ", "\n", False),
    ("(?i)abc", "abc", False),  # rejected: no flags in ECMAScript
    ("(?<=a)b", "b", False),  # rejected: no lookbehind in std::regex
    ("[[:^alpha:]]", "1", False),  # rejected: not a class name of std::regex
    ("[[:word:]]", "a", False),
    ("a{,3}", "a{,3}", False),  # rejected: a `{` that starts no interval
    ("\\x{41}", "A", False),  # rejected: `\x` takes two hexadecimal digits
    ("\\x41", "A", True),
    ("^.$", "\u00e9", False),  # `é` is two bytes
    ("^..$", "\u00e9", True),
    ("[\u00e9]", "\u00e9", False),  # a class of the two bytes, one byte matched
    ("(a)\\1", "aa", False),  # RE2 cannot run it: no match (Soufflé would match)
    ("(?=a)a", "a", False),
    ("[[:digit:]]+-\\d", "12-3", True),
    ("a(", "a(", False),
]


@pytest.mark.parametrize(("pattern", "text", "matches"), SOUFFLE_READINGS)
def test_match_in_a_souffle_program_reads_the_pattern_as_souffle(
    pattern: str, text: str, matches: bool
) -> None:
    escaped = pattern.replace("\\", "\\\\")
    program = (
        f'.decl T(t: symbol)\n.input T\n.decl M(t: symbol)\nM(t) :- T(t), match("{escaped}", t).\n.output M'
    )
    result = evaluate(program, {"T": [[text]]})
    assert not result.errored, result.errors
    assert result.relation("M") == ({(text,)} if matches else set())


def test_a_pattern_computed_at_run_time_that_souffle_rejects_matches_nothing_in_a_souffle_program() -> None:
    program = (
        ".decl P(p: symbol, t: symbol)\n.input P\n.decl M(p: symbol, t: symbol)\n"
        "M(p, t) :- P(p, t), match(p, t).\n.output M"
    )
    result = evaluate(program, {"P": [["(?i)a", "a"], ["a(", "a("], ["(a)\\1", "aa"], ["a+", "aa"]]})
    assert not result.errored, result.errors
    assert result.relation("M") == {("a+", "aa")}


def test_in_a_policy_a_pattern_match_cannot_run_stays_an_error_of_its_call() -> None:
    """Fail closed wins over Soufflé in a program with verdict rules: the call is an error."""
    program = ".decl P(a: symbol, p: symbol)\n.input P\nDeny(a) :- P(a, p), match(p, a).\n"
    result = evaluate(program, {"P": [["x", "a("]]})
    assert result.errored and "a(" in result.errors[0].message


@pytest.mark.parametrize(
    ("pattern", "kind"),
    [
        ("(?i)[a-z]+", "rejects"),
        ("(a)\\1", "cannot run"),
        ("[[:word:]]", "rejects"),
        ("x" * 10_001, "cannot run"),
    ],
)
def test_check_warns_at_a_pattern_that_matches_nothing_in_a_souffle_program(pattern: str, kind: str) -> None:
    escaped = pattern.replace("\\", "\\\\")
    text = (
        f'.decl T(t: symbol)\n.input T\n.decl M(t: symbol)\nM(t) :- T(t), match("{escaped}", t).\n.output M'
    )
    (found,) = _diagnostics(text)
    assert (found.code, found.name, found.is_error) == ("PC208", "unmatched-pattern", False)
    assert (found.span.line, found.span.column) == (4, 21)  # the string constant
    assert kind in found.message


@pytest.mark.parametrize(
    ("pattern", "reading"),
    [
        ("(?i)secret", "rejects it"),
        ("\\pL+", "`\\p` is the character `p`"),
        ("\\Aa", "`\\A` is the character `A`"),
        ("\\cJ", "`\\cJ` is the character `J`"),
        ("[[:^digit:]]", "rejects it"),
    ],
)
def test_check_warns_at_a_policys_pattern_souffle_reads_otherwise(pattern: str, reading: str) -> None:
    escaped = pattern.replace("\\", "\\\\")
    text = f'.input Send\nDeny(a) :- Send(a, x), match("{escaped}", x).\n'
    (found,) = _diagnostics(text)
    assert (found.code, found.name, found.is_error) == ("PC209", "souffle-difference", False)
    assert reading in found.message
    assert _diagnostics('.input Send\nDeny(a) :- Send(a, x), match("[a-z]+\\\\d", x).\n') == []
