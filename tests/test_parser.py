"""The grammar and the parser: what each construct parses to, spans, and syntax errors."""

from __future__ import annotations

import pytest

from policyc.compiler import ast
from policyc.compiler.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Comparison,
    Float,
    Integer,
    Negate,
    Negation,
    String,
    Var,
    Wildcard,
)
from policyc.compiler.parser import parse
from policyc.compiler.source import SourceFile


def parse_ok(text: str) -> list[ast.Statement]:
    module, diagnostics = parse(SourceFile("t.dl", text))
    assert diagnostics == [], [(d.span.line, d.span.column, d.message) for d in diagnostics]
    return list(module.statements)


def body(text: str) -> tuple[ast.Literal, ...]:
    (rule,) = parse_ok(text)
    assert isinstance(rule, ast.Rule)
    return rule.body


a = Var("a")

BODIES = {
    "Deny(a) :- P(a).": (Atom("P", (a,)),),
    "Deny(a) :- not P(a).": (Negation(Atom("P", (a,))),),
    "Deny(a) :- !P(a).": (Negation(Atom("P", (a,))),),
    "Deny(a) :- P(a), Q().": (Atom("P", (a,)), Atom("Q", ())),
    "Deny(a) :- P(a, _).": (Atom("P", (a, Wildcard())),),
    "Deny(a) :- P(a, e'), Q(e').": (Atom("P", (a, Var("e'"))), Atom("Q", (Var("e'"),))),
    "Deny(a) :- P(a, e’).": (Atom("P", (a, Var("e’"))),),
    'Deny(a) :- P(a, "x\\"y\\n").': (Atom("P", (a, String('x"y\n'))),),
    'Deny(a) :- P(a, "\\u00e9").': (Atom("P", (a, String("é"))),),
    "Deny(a) :- P(a, 3, -4, 2.5, 1e3).": (
        Atom("P", (a, Integer(3), Integer(-4), Float(2.5), Float(1000.0))),
    ),
    "Deny(a) :- P(a, x), x = 1 + 2 * 3.": (
        Atom("P", (a, Var("x"))),
        Comparison("=", Var("x"), BinOp("+", Integer(1), BinOp("*", Integer(2), Integer(3)))),
    ),
    "Deny(a) :- P(a, x), x = (1 + 2) * 3 % 4.": (
        Atom("P", (a, Var("x"))),
        Comparison(
            "=", Var("x"), BinOp("%", BinOp("*", BinOp("+", Integer(1), Integer(2)), Integer(3)), Integer(4))
        ),
    ),
    "Deny(a) :- P(a, x), y = -x - 1.": (
        Atom("P", (a, Var("x"))),
        Comparison("=", Var("y"), BinOp("-", Negate(Var("x")), Integer(1))),
    ),
    'Deny(a) :- P(a), tool_arg(a, "url") != "".': (
        Atom("P", (a,)),
        Comparison("!=", Call("tool_arg", (a, String("url"))), String("")),
    ),
    "Deny(a) :- P(a), f(g(a), h()) <= 2.": (
        Atom("P", (a,)),
        Comparison("<=", Call("f", (Call("g", (a,)), Call("h", ()))), Integer(2)),
    ),
    'Deny(a) :- P(a), is_tool(a, "x").': (Atom("P", (a,)), Atom("is_tool", (a, String("x")))),
    'Deny(a) :- P(a), not url_ok(tool_arg(a, "u")).': (
        Atom("P", (a,)),
        Negation(Atom("url_ok", (Call("tool_arg", (a, String("u"))),))),
    ),
    "Deny(a) :- P(a), n = count : { Q(a, _) }.": (
        Atom("P", (a,)),
        Comparison("=", Var("n"), Aggregate("count", None, (Atom("Q", (a, Wildcard())),))),
    ),
    "Deny(a) :- P(a), t = sum s : { Q(a, s), s > 0 }.": (
        Atom("P", (a,)),
        Comparison(
            "=",
            Var("t"),
            Aggregate("sum", Var("s"), (Atom("Q", (a, Var("s"))), Comparison(">", Var("s"), Integer(0)))),
        ),
    ),
    "Deny(a) :- P(a), m = min x : Q(x).": (
        Atom("P", (a,)),
        Comparison("=", Var("m"), Aggregate("min", Var("x"), (Atom("Q", (Var("x"),)),))),
    ),
    "Deny(a) :- P(a), m = max x * 2 : { Q(x) }, v = mean x : { Q(x), not R(x) }.": (
        Atom("P", (a,)),
        Comparison(
            "=", Var("m"), Aggregate("max", BinOp("*", Var("x"), Integer(2)), (Atom("Q", (Var("x"),)),))
        ),
        Comparison(
            "=",
            Var("v"),
            Aggregate("mean", Var("x"), (Atom("Q", (Var("x"),)), Negation(Atom("R", (Var("x"),))))),
        ),
    ),
    "Deny(a) :- P(a), counter = 1, notice = 2, summary = 3.": (
        Atom("P", (a,)),
        Comparison("=", Var("counter"), Integer(1)),
        Comparison("=", Var("notice"), Integer(2)),
        Comparison("=", Var("summary"), Integer(3)),
    ),
}


@pytest.mark.parametrize("text", sorted(BODIES))
def test_rule_bodies(text: str) -> None:
    assert body(text) == BODIES[text]


def test_facts_and_nullary_atoms() -> None:
    fact, nullary = parse_ok('Level("SECRET", 2).\nUserConfirmed().')
    assert fact == ast.Rule(Atom("Level", (String("SECRET"), Integer(2))), ())
    assert fact.is_fact
    assert nullary == ast.Rule(Atom("UserConfirmed", ()), ())


def test_directives() -> None:
    statements = parse_ok(
        """
        .decl R(x: symbol, n: number, f: float)
        .decl Later(v: symbol) inline
        .input R, S
        .output Deny
        .include "other.dl"
        .import events
        .functor tool_arg(a: symbol, k: symbol): symbol
        .functor is_tool(symbol, symbol): bool
        .default deny
        .role target budget 0.01
        .role credential budget 1 pool high_risk
        .field send_money.recipient : target
        .field "mcp.github.create_issue.title" : target
        """
    )
    I = ast.Ident  # noqa: E741
    assert statements == [
        ast.Decl(
            I("R"),
            (
                ast.Attribute("x", I("symbol")),
                ast.Attribute("n", I("number")),
                ast.Attribute("f", I("float")),
            ),
        ),
        ast.Decl(I("Later"), (ast.Attribute("v", I("symbol")),), inline=True),
        ast.Input((I("R"), I("S"))),
        ast.Output((I("Deny"),)),
        ast.Include(String("other.dl")),
        ast.Import(I("events")),
        ast.Functor(
            I("tool_arg"), (ast.Parameter("a", I("symbol")), ast.Parameter("k", I("symbol"))), I("symbol")
        ),
        ast.Functor(
            I("is_tool"), (ast.Parameter(None, I("symbol")), ast.Parameter(None, I("symbol"))), I("bool")
        ),
        ast.Default(I("deny")),
        ast.Role(I("target"), Float(0.01), None),
        ast.Role(I("credential"), Integer(1), I("high_risk")),
        ast.FieldMap("send_money", "recipient", I("target")),
        ast.FieldMap("mcp.github.create_issue", "title", I("target")),
    ]


def test_soft_keywords_stay_names() -> None:
    """`budget`, `pool` and `inline` are keywords only inside their directives."""
    statements = parse_ok(
        """
        .role r budget 0.5
        pool(x) :- budget(x), inline(x).
        .decl D(x: symbol)
        inline(x) :- D(x).
        """
    )
    assert statements[1] == ast.Rule(
        Atom("pool", (Var("x"),)), (Atom("budget", (Var("x"),)), Atom("inline", (Var("x"),)))
    )
    assert statements[3] == ast.Rule(Atom("inline", (Var("x"),)), (Atom("D", (Var("x"),)),))


def test_annotations() -> None:
    (rule,) = parse_ok('@id("no-exfil")\n@req("R3", "R4")\n@message("blocked {a}")\nDeny(a) :- P(a).')
    assert [(x.name, x.args) for x in rule.annotations] == [
        ("id", (String("no-exfil"),)),
        ("req", (String("R3"), String("R4"))),
        ("message", (String("blocked {a}"),)),
    ]


def test_comments_are_kept_apart() -> None:
    module, diagnostics = parse(SourceFile("t.dl", "// line\nP(1). /* block\nstill */ Q(2).\n"))
    assert diagnostics == []
    assert [c.text for c in module.comments] == ["// line", "/* block\nstill */"]
    assert len(module.statements) == 2


def test_spans_are_exact_and_ignored_by_equality() -> None:
    text = 'Deny(a) :-\n    Send(a),\n    tool_arg(a, "to") = "x".'
    (rule,) = parse_ok(text)
    send, comparison = rule.body
    assert (send.span.line, send.span.column, send.span.end_line, send.span.end_column) == (2, 5, 2, 12)
    assert text[send.span.start : send.span.end] == "Send(a)"
    assert text[comparison.span.start : comparison.span.end] == 'tool_arg(a, "to") = "x"'
    assert text[comparison.left.name_span.start : comparison.left.name_span.end] == "tool_arg"
    assert rule.span.line == 1 and rule.span.end_line == 3
    moved = parse_ok("\n\n" + text)[0]
    assert moved == rule and moved.span != rule.span


SYNTAX_ERRORS = {
    # text: [(line, column, message fragment)]
    "Deny(a) :- P(a)\nAllow(a) :- Q(a).": [(1, 16, "expected `.` at the end of the rule")],
    'Level("S", 2)\nLevel("T", 3).': [(1, 14, "expected `.` at the end of the fact")],
    "Deny(a) : P(a).": [(1, 9, "expected `:-`")],
    "Deny(a) :- P(a), x == 1.": [(1, 21, "there is no `==`")],
    'Deny(a) :- P(a, "open.\n': [(1, 17, "unterminated string")],
    "Deny(a) :- P(a). /* never closed\n": [(1, 18, "unterminated block comment")],
    "Deny(a) :- P(a, “x”).": [(1, 17, "typographic quote")],
    "Deny(a) :- P(a, 'x').": [(1, 17, "double quotes")],
    "Deny(a) :- P(a) # comment.": [(1, 17, "unexpected character `#`")],
    ".decl R(x symbol)": [(1, 11, "unexpected `symbol`; expected `:`")],
    ".typ Id <: symbol\nDeny(a) :- P(a).": [(1, 1, "unknown directive `.typ`")],
    ".inptu R\n": [(1, 1, "unknown directive `.inptu`")],
    "Deny(a) :- P(a), count = 2.": [(1, 18, "`count` is a reserved word")],
    "Deny(a) :- P(a), Q.": [(1, 19, "expected `(` or a comparison")],
    '@id("x")\n': [(2, 1, "expected a rule after the annotations")],
    'Deny(a) :- P(a, "\\q").': [(1, 18, "unknown escape `\\q`")],
    ".role target budgt 0.1\n": [(1, 14, "expected `budget`")],
    "Deny(a) :- .": [(1, 12, "unexpected `.`")],
    "Deny(a :- P(a).": [(1, 8, "unexpected `:-`")],
}


@pytest.mark.parametrize("text", sorted(SYNTAX_ERRORS))
def test_syntax_errors(text: str) -> None:
    _, diagnostics = parse(SourceFile("t.dl", text))
    got = [(d.span.line, d.span.column, d.message) for d in diagnostics]
    assert len(got) == len(SYNTAX_ERRORS[text]), got
    for (line, column, fragment), (gl, gc, message) in zip(SYNTAX_ERRORS[text], got, strict=True):
        assert (gl, gc) == (line, column), got
        assert fragment in message, got
        assert all(d.name == "syntax-error" and d.code == "PC001" for d in diagnostics)


def test_every_error_of_a_file_is_reported() -> None:
    text = "\n".join(
        [
            "Deny(a) :- P(a)",  # missing dot
            "Allow(a) :- Q(a).",  # fine
            "Bad(a) :- , Q(a).",  # unexpected comma
            ".decl R(x: symbol",  # unclosed
            "Ok(a) :- Q(a).",  # fine
            "Deny(a) :- P(a) @ Q(a).",  # stray @ inside a rule
            "Last(a) :- Q(a).",  # fine
        ]
    )
    module, diagnostics = parse(SourceFile("t.dl", text))
    assert [d.span.line for d in diagnostics] == [1, 3, 5, 6]
    heads = [s.head.name for s in module.statements if isinstance(s, ast.Rule)]
    assert heads == ["Allow", "Ok", "Last"]


@pytest.mark.parametrize(
    "text",
    ["", "   \n\n", "// only a comment", "/* block */", "\ufeffDeny(a) :- P(a).", "\t\r\n"],
)
def test_trivial_files(text: str) -> None:
    _module, diagnostics = parse(SourceFile("t.dl", text))
    assert diagnostics == []


def test_deep_nesting_is_refused_not_crashed() -> None:
    text = "Deny(a) :- P(a), x = " + " + ".join(["1"] * 3000) + ", x > 1."
    module, diagnostics = parse(SourceFile("t.dl", text))
    assert [d.message for d in diagnostics] == ["this statement nests terms more than 200 levels deep"]
    assert module.statements == ()


@pytest.mark.parametrize("body", ["x" * 5_000_000, "\\n" * 1_000_000, 'a\\"b' * 500_000])
def test_a_long_string_literal_parses_in_memory_proportional_to_it(body: str) -> None:
    """The string terminal matches without backtracking state per character: a 5 MB literal
    once took 1.6 GB."""
    import subprocess
    import sys

    script = (
        "import resource, sys\n"
        "from policyc.compiler.parser import parse\n"
        "from policyc.compiler.source import SourceFile\n"
        "body = sys.stdin.read()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "module, diagnostics = parse(SourceFile('big.dl', 'Deny(a) :- S(a, \"' + body + '\").'))\n"
        "assert diagnostics == [], diagnostics\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=body, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    grown_mb = int(done.stdout) / 1024
    assert grown_mb < 30 * len(body) / 1e6 + 50, grown_mb  # the child's peak resident size
