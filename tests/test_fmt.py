"""`policyc fmt`: the canonical layout, through golden files, properties and the command.

Golden files: `tests/golden/fmt/<name>.dl` is formatted by `policyc fmt` and must print
`<name>.out` (or, for a file with errors, report `<name>.err` on standard error). After a
deliberate change of the layout, regenerate them with `POLICYC_UPDATE_GOLDEN=1 pytest
tests/test_fmt.py` and review the diff.

Properties, over every example and library policy and over random programs, laid out at
random with comments between any two tokens: the output parses to the same syntax tree, keeps
every comment in order, is its own layout, and does not depend on the input's layout.
"""

from __future__ import annotations

import doctest
import functools
import os
import random
import re
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyc.compiler import ast, formatter, pretty
from policyc.compiler.formatter import WIDTH, FormatError, format_source
from policyc.compiler.parser import parse
from policyc.compiler.source import SourceFile

from .conftest import EXAMPLES, ROOT, examples, run_policyc
from .programs import oracle_programs

GOLDEN = ROOT / "tests" / "golden" / "fmt"
CASES = sorted(p.stem for p in GOLDEN.glob("*.dl"))
POLICIES = sorted(
    str(p.relative_to(ROOT)) for folder in (EXAMPLES, ROOT / "stdlib") for p in folder.rglob("*.dl")
)


def module_of(text: str):
    """The module as written (several heads and `;` not desugared)."""
    module, diagnostics = parse(SourceFile("p.dl", text), surface=True)
    assert diagnostics == [], [d.message for d in diagnostics]
    return module


def comment_texts(text: str) -> list[str]:
    """The comments of a policy as the formatter prints them (line comments end with their
    last non-blank character; line breaks are `\\n`)."""
    return [
        c.text.rstrip() if c.text.startswith("//") else c.text.replace("\r\n", "\n")
        for c in module_of(text).comments
    ]


def assert_canonical(text: str) -> str:
    """Format ``text`` and check what formatting guarantees; return the formatted text."""
    formatted = format_source(text)
    assert module_of(formatted) == module_of(text), "the formatted policy means something else"
    assert comment_texts(formatted) == comment_texts(text), "comments lost, changed or moved across others"
    assert format_source(formatted) == formatted, "formatting the formatted text changes it"
    assert formatted == "" or (formatted.endswith("\n") and not formatted.endswith("\n\n"))
    assert "\n\n\n" not in formatted and not formatted.startswith("\n")
    assert all(line == line.rstrip() for line in formatted.split("\n")) or "/*" in formatted
    return formatted


# ------------------------------------------------------------------------ re-laying out


# The tokens of a policy, comments included (a test's own reading, independent of the parser).
TOKEN = re.compile(
    r"""//[^\n]*|/\*[\s\S]*?\*/
    |"(?:[^"\\\n]|\\.)*"
    |\.[a-z]+\b
    |[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+
    |[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*['\u2019]*
    |<:|:-|!=|<=|>=
    |\S""",
    re.X,
)

LAYOUT = [" ", " ", " ", "\n", "\n    ", "\t", "  \n\n  "]


def relayout(text: str, seed: int, comments: bool) -> str:
    """The tokens of ``text`` separated by random blanks and, when asked, random comments."""
    rng = random.Random(seed)
    tokens = TOKEN.findall(text)
    out: list[str] = []
    for i, token in enumerate(tokens):
        out.append(token)
        separator = rng.choice(LAYOUT)
        if comments and rng.random() < 0.15:
            separator = rng.choice(
                [
                    f" /* c{i} */ ",
                    f" // c{i}\n",
                    f"\n// c{i}\n",
                    f"\n\n/* c{i}\n   over lines */\n",
                    f"/*c{i}*/",
                    f" /* c{i} */\n",
                ]
            )
        if token.startswith("//") and "\n" not in separator:
            separator += "\n"
        if token == "/":  # `/` then `/*` would start a line comment
            separator = " " + separator
        out.append(separator)
    return "".join(out)


def flat(text: str) -> str:
    """The tokens of ``text`` on one line, without its comments or blank lines."""
    return " ".join(t for t in TOKEN.findall(text) if not t.startswith(("//", "/*")))


# -------------------------------------------------------------------- random policies

NAMES = ["P", "Q", "Send", "ToolArg", "AVeryLongRelationNameForBreaking", "Deny", "e'", "x"]
VARIABLES = ["a", "b", "x", "y", "e'", "e\u2019", "_", "_old", "res_id"]
STRINGS = ['""', '"a"', '"a \\"quoted\\" word"', '"\\u00e9\\n\\\\"', '"// not a comment"', '"/* nor this */"']
NUMBERS = ["0", "3", "42", "2.5", "1.50", "1e3", "2.5E-3", "007"]


@functools.cache
def terms(depth: int) -> st.SearchStrategy[str]:
    leaves = st.one_of(
        st.sampled_from(VARIABLES),
        st.sampled_from(STRINGS),
        st.sampled_from(NUMBERS),
        st.sampled_from(NUMBERS).map(lambda n: f"-{n}"),
    )
    if depth <= 0:
        return leaves
    inner = terms(depth - 1)
    return st.one_of(
        leaves,
        st.tuples(st.sampled_from(["f", "tool_arg", "cat"]), st.lists(inner, max_size=3)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})"
        ),
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner, st.booleans()).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})" if t[3] else f"{t[0]} {t[1]} {t[2]}"
        ),
        inner.map(lambda t: f"-({t})"),
        st.sampled_from(VARIABLES[:5]).map(lambda v: f"- {v}"),
        inner.map(lambda t: f"({t})"),
        st.tuples(AGGREGATORS, inner, st.lists(literals(depth - 1), min_size=1, max_size=3)).map(
            lambda t: f"{t[0]}{_target(t)} : {{ {', '.join(t[2])} }}"
        ),
        st.tuples(AGGREGATORS, inner, atoms(depth - 1)).map(lambda t: f"{t[0]}{_target(t)} : {t[2]}"),
    )


AGGREGATORS = st.sampled_from(["count", "sum", "min", "max", "mean"])


def _target(parts: tuple) -> str:
    return "" if parts[0] == "count" else f" {parts[1]}"


@functools.cache
def atoms(depth: int) -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(NAMES[:6]), st.lists(terms(depth), max_size=4)).map(
        lambda t: f"{t[0]}({', '.join(t[1])})"
    )


@functools.cache
def literals(depth: int) -> st.SearchStrategy[str]:
    return st.one_of(
        atoms(depth),
        st.tuples(st.sampled_from(["not ", "!", "! "]), atoms(depth)).map("".join),
        st.tuples(terms(depth), st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), terms(depth)).map(
            " ".join
        ),
    )


ANNOTATIONS = st.tuples(
    st.sampled_from(["id", "req", "message", "suggest", "severity"]),
    st.lists(st.sampled_from(['"x"', '"a long requirement text, quoted"', "high", "3", "2.5"]), max_size=2),
).map(lambda t: f"@{t[0]}({', '.join(t[1])})")

DIRECTIVES = st.one_of(
    st.tuples(
        st.sampled_from(NAMES[:5]),
        st.lists(st.sampled_from(["a: symbol", "n: number", "v: float"]), max_size=3),
        st.booleans(),
    ).map(lambda t: f".decl {t[0]}({', '.join(t[1])}){' inline' if t[2] else ''}"),
    st.lists(st.sampled_from(NAMES[:5]), min_size=1, max_size=3).map(lambda n: ".input " + ", ".join(n)),
    st.lists(st.sampled_from(NAMES[:5]), min_size=1, max_size=3).map(lambda n: ".output " + ", ".join(n)),
    st.just('.include "common/shared.dl"'),
    st.sampled_from([".import events", ".import provenance"]),
    st.tuples(
        st.sampled_from(["f", "is_tool"]),
        st.lists(st.sampled_from(["a: symbol", "symbol", "n: number", "v: any"]), max_size=3),
        st.sampled_from(["symbol", "number", "bool", "any"]),
    ).map(lambda t: f".functor {t[0]}({', '.join(t[1])}): {t[2]}"),
    st.sampled_from([".default deny", ".default allow"]),
    st.sampled_from([".role target budget 0.01", ".role credential budget 1 pool high_risk"]),
    st.sampled_from([".field send_money.recipient : target", '.field "mcp.gh.create_issue.title" : content']),
)


@st.composite
def policies(draw) -> str:
    """Random policies that parse (their meaning does not matter to the formatter)."""
    statements = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            statements.append(draw(DIRECTIVES))
        elif kind == 1:  # annotations before a directive parse (the checker reports them)
            statements.append(f"{draw(ANNOTATIONS)}\n{draw(DIRECTIVES)}")
        else:
            annotations = draw(st.lists(ANNOTATIONS, max_size=2))
            head = draw(atoms(0))
            body = draw(st.lists(literals(2), max_size=6))
            rule = f"{head} :- {', '.join(body)}." if body else f"{head}."
            statements.append("\n".join([*annotations, rule]))
    return "\n".join(statements) + "\n"


# ----------------------------------------------------------------------------- golden


@pytest.mark.parametrize("name", CASES)
def test_golden(name: str) -> None:
    given = (GOLDEN / f"{name}.dl").read_bytes()  # formatted to standard output, never rewritten
    run = run_policyc("fmt", "--stdin-filename", f"{name}.dl", "-", stdin=given, cwd=GOLDEN)
    out, err = GOLDEN / f"{name}.out", GOLDEN / f"{name}.err"
    if os.environ.get("POLICYC_UPDATE_GOLDEN"):
        if run.status == 0:
            out.write_text(run.stdout, "utf-8")
        else:
            err.write_text(run.stderr, "utf-8")
    if err.exists():
        assert run.status == 1 and run.stdout == ""
        assert run.stderr == err.read_text("utf-8")
        return
    expected = out.read_text("utf-8")
    assert (run.status, run.stderr) == (0, "")
    assert run.stdout == expected
    assert expected != (GOLDEN / f"{name}.dl").read_text("utf-8"), "a golden input that is canonical already"
    assert_canonical((GOLDEN / f"{name}.dl").read_text("utf-8"))
    assert run_policyc("fmt", "--check", f"{name}.out", cwd=GOLDEN).status == 0


def test_every_golden_input_has_an_expected_output() -> None:
    assert CASES
    for name in CASES:
        assert (GOLDEN / f"{name}.out").exists() != (GOLDEN / f"{name}.err").exists(), name


def test_docstring_examples() -> None:
    for module in (formatter, pretty):
        failed, tried = doctest.testmod(module)
        assert tried > 0 and failed == 0, module.__name__


# ------------------------------------------------------------------------- properties


@pytest.mark.parametrize("path", POLICIES)
def test_policies_of_the_repository(path: str) -> None:
    text = (ROOT / path).read_text("utf-8")
    formatted = assert_canonical(text)
    assert flat(relayout(text, 0, comments=False)) == flat(text), "the test's tokens are not the policy's"
    assert format_source(flat(text)) == format_source(flat(formatted))


def prove(check, examples: int, **strategies) -> None:
    """Run ``check`` on ``examples`` cases drawn from ``strategies``."""
    run = settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    run(given(**strategies)(check))()


def check_laid_out_anyhow(text: str, seed: int) -> None:
    assert_canonical(relayout(text, seed, comments=True))
    # without comments and blank lines, the layout of the input makes no difference
    plain = relayout(flat(text), seed, comments=False).replace("\n\n", "\n")
    assert format_source(plain) == format_source(flat(text))


@pytest.mark.parametrize("path", POLICIES)
@examples(8, 100)
def test_policies_of_the_repository_laid_out_anyhow(path: str, examples: int) -> None:
    text = (ROOT / path).read_text("utf-8")
    prove(lambda seed: check_laid_out_anyhow(text, seed), examples, seed=st.integers(0, 2**32))


@examples(200, 5000)
def test_random_policies(examples: int) -> None:
    def check(text: str, seed: int) -> None:
        assert_canonical(text)
        check_laid_out_anyhow(text, seed)

    prove(check, examples, text=policies(), seed=st.integers(0, 2**32))


@examples(40, 1000)
def test_random_stratified_programs(examples: int) -> None:
    def check(case, seed: int) -> None:
        assert_canonical(case.text)
        check_laid_out_anyhow(case.text, seed)

    prove(check, examples, case=oracle_programs(), seed=st.integers(0, 2**32))


@examples(100, 1000)
def test_rules_fit_or_break_one_literal_per_line(examples: int) -> None:
    """A rule printed on one line fits in the width; a broken rule has its head and `:-` on
    the first line and one literal per line after it, indented (without comments, nothing
    else breaks)."""

    def check(text: str) -> None:
        formatted = format_source(flat(text))
        lines = formatted.split("\n")
        for statement in module_of(formatted).statements:
            if not isinstance(statement, ast.Rule) or not statement.body:
                continue
            first = statement.head.span.line
            if statement.span.end_line == first:
                assert len(lines[first - 1]) <= WIDTH
                continue
            assert lines[first - 1].endswith(" :-") and not lines[first - 1].startswith(" ")
            assert [lit.span.line - first for lit in statement.body] == list(
                range(1, len(statement.body) + 1)
            )
            for literal in statement.body:
                assert (
                    literal.span.column == formatter.INDENT + 1 and literal.span.end_line == literal.span.line
                )
            assert len(flat(formatted[statement.span.start : statement.span.end])) > WIDTH

    prove(check, examples, text=policies())


# ------------------------------------------------------------------------ the library


def test_syntax_errors_are_raised_with_their_diagnostics() -> None:
    with pytest.raises(FormatError) as raised:
        format_source("Deny(a) :- Send(a\nOk(x) :- .\n", "bad.dl")
    diagnostics = raised.value.diagnostics
    assert diagnostics and all(d.code == "PC001" and d.span.file == "bad.dl" for d in diagnostics)


def test_line_ends_and_blanks() -> None:
    assert format_source("") == ""
    assert format_source(" \n\n\t\n") == ""
    assert format_source("A(1).\r\nB(x) :- A(x). // c \r\n") == "A(1).\nB(x) :- A(x).  // c\n"
    assert format_source("\ufeffA(1).") == "A(1).\n"
    assert format_source("/* a\r\n b */ A(1).") == "/* a\n b */ A(1).\n"


def test_a_builtin_declared_again_is_laid_out_like_any_functor() -> None:
    text = (
        '.functor contains(s:symbol,sub:symbol):bool\n.input Send\nDeny(a):-Send(a,x),contains("evil",x).\n'
    )
    assert format_source(text) == (
        '.functor contains(s: symbol, sub: symbol): bool\n.input Send\nDeny(a) :- Send(a, x), contains("evil", x).\n'
    )


def test_statements_on_one_line_are_split() -> None:
    assert format_source("A(1). A(2).  B(x):-A(x).\n") == "A(1).\nA(2).\nB(x) :- A(x).\n"


def test_a_fitting_rule_joins_and_a_long_one_breaks() -> None:
    short = "Deny(a) :-\n    Send(a),\n    not Ok(a).\n"
    assert format_source(short) == "Deny(a) :- Send(a), not Ok(a).\n"
    body = [f"Condition{i}(a)" for i in range(8)]
    rule = f"Deny(a) :- {', '.join(body)}."
    assert len(rule) > WIDTH
    assert format_source(rule) == "Deny(a) :-\n" + ",\n".join(f"    {b}" for b in body) + ".\n"


# ------------------------------------------------------------------------- the command


def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, "utf-8")
    return path


UGLY = "Deny(a):-Send(a),!Ok(a).\n"
PRETTY = "Deny(a) :- Send(a), not Ok(a).\n"


def test_rewrites_the_files_in_place_as_ruff_format_does(policyc, tmp_path) -> None:
    path = write(tmp_path, "p.dl", UGLY)
    run = policyc("fmt", str(path))
    assert (run.status, run.stdout, run.stderr) == (0, "", "1 file reformatted, 0 files left unchanged\n")
    assert path.read_text("utf-8") == PRETTY
    run = policyc("fmt", str(path))
    assert (run.status, run.stdout, run.stderr) == (0, "", "0 files reformatted, 1 file left unchanged\n")


def test_reads_standard_input_and_writes_standard_output(policyc) -> None:
    assert policyc("fmt", "-", stdin=UGLY.encode()).stdout == PRETTY
    run = policyc("fmt", "--stdin-filename", "mine.dl", "-", stdin=UGLY.encode())
    assert (run.status, run.stdout, run.stderr) == (0, PRETTY, "")
    run = policyc("fmt", "--write", "-", stdin=UGLY.encode())  # nothing to write: printed
    assert (run.status, run.stdout) == (0, PRETTY)
    run = policyc("fmt", "--check", "--stdin-filename", "mine.dl", "-", stdin=UGLY.encode())
    assert run.status == 1 and run.stdout == "would reformat: mine.dl\n"
    # without a FILE, nothing is guessed: no folder is rewritten, no standard input awaited
    run = policyc("fmt", stdin=UGLY.encode())
    assert run.status == 2 and "`-` for standard input" in run.stderr and run.stdout == ""


def test_check(policyc, tmp_path) -> None:
    ugly = write(tmp_path, "ugly.dl", UGLY)
    pretty_file = write(tmp_path, "pretty.dl", PRETTY)
    run = policyc("fmt", "--check", str(ugly), str(pretty_file))
    assert run.status == 1
    assert run.stdout == f"would reformat: {ugly}\n"
    assert "1 file would be reformatted, 1 file already formatted" in run.stderr
    assert ugly.read_text("utf-8") == UGLY
    run = policyc("fmt", "--check", str(pretty_file))
    assert (run.status, run.stdout) == (0, "")


def test_diff(policyc, tmp_path) -> None:
    ugly = write(tmp_path, "ugly.dl", "// policy\n" + UGLY)
    write(tmp_path, "pretty.dl", PRETTY)
    run = policyc("fmt", "--diff", str(tmp_path))
    assert run.status == 1
    assert run.stdout == (f"--- {ugly}\n+++ {ugly}\n@@ -1,2 +1,2 @@\n // policy\n-{UGLY}+{PRETTY}")
    assert ugly.read_text("utf-8") == "// policy\n" + UGLY
    run = policyc("fmt", "--diff", str(tmp_path / "pretty.dl"))
    assert (run.status, run.stdout) == (0, "")


def test_write(policyc, tmp_path) -> None:
    ugly = write(tmp_path, "ugly.dl", UGLY)
    ugly.chmod(0o640)
    pretty_file = write(tmp_path, "pretty.dl", PRETTY)
    before = pretty_file.stat().st_mtime_ns
    (tmp_path / "notes.txt").write_text(UGLY)
    run = policyc("fmt", "--write", str(tmp_path))
    assert (run.status, run.stdout) == (0, "")
    assert "1 file reformatted, 1 file left unchanged" in run.stderr
    assert ugly.read_text("utf-8") == PRETTY
    assert stat.S_IMODE(ugly.stat().st_mode) == 0o640
    assert pretty_file.stat().st_mtime_ns == before  # a formatted file is not rewritten
    assert (tmp_path / "notes.txt").read_text() == UGLY  # only `*.dl` files in a folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "pretty.dl", "ugly.dl"]
    assert policyc("fmt", "--check", str(tmp_path)).status == 0


def test_write_through_a_symbolic_link(policyc, tmp_path) -> None:
    # The file a link points to is formatted; the link stays a link (as ruff and gofmt do).
    target = write(tmp_path, "policy.dl", UGLY)
    link = tmp_path / "link.dl"
    link.symlink_to(target.name)
    run = policyc("fmt", "--write", str(link))
    assert run.status == 0, run.stderr
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert target.read_text("utf-8") == PRETTY
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.dl", "policy.dl"]


def test_syntax_errors_are_reported_like_check_and_nothing_is_written(policyc, tmp_path) -> None:
    text = "Deny(a) :- Send(a\nOk(x) :- .\n"
    bad = write(tmp_path, "bad.dl", text)
    good = write(tmp_path, "good.dl", UGLY)
    checked = policyc("check", str(bad))
    diagnostics = checked.stdout[: checked.stdout.rindex("Found ")]
    assert "error[PC001]" in diagnostics
    for mode in ("--check", "--diff", "--write", None):
        good.write_text(UGLY, "utf-8")
        run = policyc("fmt", *([mode] if mode else []), str(bad), str(good))
        assert run.status == 1
        assert run.stderr.startswith(diagnostics)
        assert "1 file with errors not formatted" in run.stderr
        assert "Traceback" not in run.stderr
        assert bad.read_text("utf-8") == text
        assert good.read_text("utf-8") == (UGLY if mode in ("--check", "--diff") else PRETTY)


def test_invalid_encoding_is_reported_like_check(policyc) -> None:
    path = ROOT / "tests" / "golden" / "invalid-encoding.dl"
    checked = policyc("check", str(path))
    run = policyc("fmt", "--check", str(path))
    assert run.status == 1
    assert run.stderr.startswith(checked.stdout[: checked.stdout.rindex("Found ")])
    assert "[invalid-encoding]" in run.stderr


def test_json(policyc, tmp_path) -> None:
    ugly = write(tmp_path, "ugly.dl", UGLY)
    bad = write(tmp_path, "bad.dl", "Deny(a :- Send(a).\n")
    run = policyc("fmt", "--format", "json", "--diff", str(ugly), str(bad))
    assert run.status == 1
    out = run.json()
    assert [f["file"] for f in out["files"]] == [str(ugly), str(bad)]
    assert [(f["changed"], f["error"]) for f in out["files"]] == [(True, False), (False, True)]
    assert out["files"][0]["diff"].startswith(f"--- {ugly}\n")
    assert [d["name"] for d in out["diagnostics"]] == ["syntax-error"] and out["errors"] == 1
    run = policyc("fmt", "--format", "json", str(ugly))
    assert run.status == 0 and run.json()["files"][0]["changed"] and ugly.read_text("utf-8") == PRETTY
    run = policyc("fmt", "--format", "json", "-", stdin=UGLY.encode())
    assert run.status == 0 and run.json()["files"][0]["text"] == PRETTY


def test_usage_and_io_errors_exit_2(policyc, tmp_path) -> None:
    path = write(tmp_path, "p.dl", UGLY)
    run = policyc("fmt", "--check", "--write", str(path))
    assert run.status == 2 and "choose one of" in run.stderr
    run = policyc("fmt", "--check", str(tmp_path / "missing.dl"), str(path))
    assert run.status == 2 and "cannot read" in run.stderr and "missing.dl" in run.stderr
    assert run.stdout == f"would reformat: {path}\n"  # the other files are still checked
    empty = tmp_path / "empty"
    empty.mkdir()
    run = policyc("fmt", "--check", str(empty))
    assert run.status == 2 and "no policy files" in run.stderr


def test_examples_and_library_are_formatted(policyc) -> None:
    run = policyc("fmt", "--check", "examples/", "stdlib/")
    assert run.status == 0, run.stdout + run.stderr
    assert run.stdout == ""


def test_the_layout_shown_in_the_docs_is_the_formatters() -> None:
    docs = (ROOT / "docs" / "formatting.md").read_text("utf-8")
    examples = re.findall(r"^( *)```datalog\n(.*?)^ *```", docs, flags=re.S | re.M)
    assert len(examples) >= 3
    for indent, example in examples:
        example = "".join(line.removeprefix(indent) for line in example.splitlines(keepends=True))
        assert format_source(example) == example
    rows = re.findall(r"^\| `(.+)` \| `(.+)` \|$", docs, flags=re.M)
    assert len(rows) >= 6
    for written, formatted in rows:
        if written.startswith("@"):
            assert format_source(f"{written}\nR(1).") == f"{formatted}\nR(1).\n"
        elif written.startswith(".") or written.endswith("."):
            assert format_source(written) == f"{formatted}\n"
        else:  # literals of a rule's body
            assert format_source(f"R(1) :- {written}.") == f"R(1) :- {formatted}.\n"
