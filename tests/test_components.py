"""Components (`.comp`, `.init`, `.override`): expansion, its diagnostics, syntax recovery inside
a component, and a differential property: a random program wrapped in a component with a type
parameter and instantiated derives, under the instance's names, what it derives unwrapped (and
clingo agrees on the wrapped program)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import policyc
from policyc.compiler import ast, components
from policyc.compiler.magic import is_magic
from policyc.compiler.parser import parse
from policyc.compiler.pipeline import compile_source
from policyc.compiler.source import SourceFile

from .conftest import examples
from .programs import FUNCTOR_LINES, FUNCTORS, OracleCase, oracle_programs

GRAPH = """\
.comp Graph<N> {
    .decl edge(a: N, b: N)
    .decl reach(a: N, b: N) overridable
    reach(x, y) :- edge(x, y).
    reach(x, z) :- reach(x, y), edge(y, z).
}
"""


def derived(text: str, relation: str) -> list[tuple]:
    compilation = compile_source(text, "c.dl")
    assert compilation.ok, [(d.span.line, d.message) for d in compilation.diagnostics]
    result = policyc.load(text).evaluate({})
    assert not result.errored, result.errors
    return sorted(tuple(row) for row in result.relations[relation])


def problems(text: str) -> list[tuple[str, int, int, str]]:
    return [(d.name, d.span.line, d.span.column, d.message) for d in compile_source(text, "c.dl").diagnostics]


def test_an_instance_is_the_component_under_its_name() -> None:
    text = GRAPH + '.init g = Graph<symbol>\ng.edge("a", "b").\ng.edge("b", "c").\n'
    assert derived(text, "g.reach") == [("a", "b"), ("a", "c"), ("b", "c")]
    module, _ = parse(SourceFile("c.dl", text))
    decls = {s.name.name: s for s in module.statements if isinstance(s, ast.Decl)}
    assert [a.type.name for a in decls["g.edge"].attributes] == ["symbol", "symbol"]
    assert decls["g.reach"].name.span.line == 3  # the declaration inside the component


def test_two_instances_are_apart_and_type_arguments_differ() -> None:
    text = GRAPH + ".init a = Graph<number>\n.init b = Graph<number>\na.edge(1, 2).\nb.edge(2, 3).\n"
    assert derived(text, "a.reach") == [(1, 2)]
    assert derived(text, "b.reach") == [(2, 3)]
    wrong = GRAPH + '.init s = Graph<symbol>\ns.edge(1, "x").\n'
    assert [p[0] for p in problems(wrong)] == ["type-mismatch"]


def test_override_drops_the_bases_rules_of_that_relation_only() -> None:
    text = GRAPH + textwrap.dedent("""\
        .comp Back<N> : Graph<N> {
            .override reach
            reach(x, y) :- edge(y, x).
        }
        .init r = Back<symbol>
        r.edge("a", "b").
        r.edge("b", "c").
    """)
    assert derived(text, "r.reach") == [("b", "a"), ("c", "b")]  # no transitive rule left


def test_names_the_component_does_not_declare_are_the_programs() -> None:
    text = GRAPH + textwrap.dedent("""\
        .decl seen(x: symbol)
        .comp Use {
            .init g = Graph<symbol>
            g.edge(x, "end") :- seen(x).
            Out(y) :- g.reach(_, y).
        }
        seen("a").
        .init u = Use
        .decl Out(x: symbol)
    """)
    assert derived(text, "u.g.reach") == [("a", "end")]
    assert derived(text, "Out") == [("end",)]


def test_a_type_declared_in_a_component_is_the_instances() -> None:
    text = '.comp C {\n    .type Id <: symbol\n    .decl r(x: Id)\n    r("a").\n}\n.init c = C\n'
    module, _ = parse(SourceFile("c.dl", text))
    kinds = [
        (type(s).__name__, s.name.name) for s in module.statements if isinstance(s, ast.Decl | ast.TypeDecl)
    ]
    assert kinds == [("TypeDecl", "c.Id"), ("Decl", "c.r")]
    assert derived(text, "c.r") == [("a",)]


def test_a_nested_component_sees_the_enclosing_type_parameter() -> None:
    text = textwrap.dedent("""\
        .comp Outer<T> {
            .comp Inner {
                .decl r(x: T)
            }
            .init i = Inner
            i.r(x) :- src(x).
            .decl src(x: T)
        }
        .init o = Outer<number>
        o.src(4).
    """)
    assert derived(text, "o.i.r") == [(4,)]


def test_diagnostics_inside_an_instance_point_inside_the_component() -> None:
    text = GRAPH.replace("reach(x, z) :- reach(x, y), edge(y, z).", "reach(x, z) :- reach(x, y), edge(y, w).")
    text += ".init g = Graph<symbol>\n"
    found = {(name, line) for name, line, _, _ in problems(text)}
    assert ("unsafe-variable", 5) in found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (".init g = Nope\n", [("unknown-component", 1, 11)]),
        (GRAPH + ".init g = Graph\n", [("component-arguments", 7, 11)]),
        (GRAPH + ".init g = Graph<symbol>\n.init g = Graph<number>\n", [("duplicate-instance", 8, 7)]),
        (".comp A {\n    .init a = A\n}\n.init x = A\n", [("recursive-component", 2, 15)]),
        (".comp A : B {}\n.comp B : A {}\n.init x = A\n", [("recursive-component", 2, 11)]),
        (".comp A {}\n.comp A {}\n", [("duplicate-instance", 2, 7)]),
        (".override r\n", [("invalid-override", 1, 1)]),
        (
            GRAPH.replace(" overridable", "")
            + ".comp D : Graph<number> {\n    .override reach\n}\n.init d = D\n",
            [("invalid-override", 8, 15)],
        ),
        (
            GRAPH + ".comp D : Graph<number> {\n    .override edges\n}\n.init d = D\n",
            [("invalid-override", 8, 15)],
        ),
        (".comp A {\n    .decl r(x: number\n    r(1).\n}\n", [("syntax-error", 3, 5)]),
        (".comp A {\n    .decl r(x: number)\n", [("syntax-error", 1, 1)]),
        ("}\n", [("syntax-error", 1, 1)]),
        ("@id(x)\n.comp A {}\n", [("invalid-annotation", 1, 1)]),
    ],
)
def test_located_diagnostics(text: str, expected: list[tuple[str, int, int]]) -> None:
    assert [p[:3] for p in problems(text)] == expected


def test_one_syntax_error_per_statement_inside_a_component() -> None:
    text = (
        ".comp A {\n    .decl r(x number)\n    r(1)\n    .decl q(x: number)\n}\n.decl z(x: number)\nz(1 2).\n"
    )
    found = problems(text)
    assert [(name, line) for name, line, _, _ in found] == [
        ("syntax-error", 2),
        ("syntax-error", 3),
        ("syntax-error", 7),
    ]
    module, _ = parse(SourceFile("c.dl", text), surface=True)
    (component,) = [s for s in module.statements if isinstance(s, ast.Component)]
    assert [s.name.name for s in component.body] == ["q"]  # the statement after the errors still parsed


def test_expansion_is_bounded() -> None:
    levels = [".comp L0 {\n    .decl r(x: number)\n}\n"]
    for i in range(1, 16):  # 2 ** 15 instances of L0
        levels.append(f".comp L{i} {{\n    .init a = L{i - 1}\n    .init b = L{i - 1}\n}}\n")
    found = problems("".join(levels) + ".init top = L15\n")
    assert [name for name, *_ in found] == ["recursive-component"]
    assert str(components.MAX_STATEMENTS)[:2] in found[0][3].replace(",", "")


def test_formatting_round_trips_and_is_idempotent() -> None:
    from policyc.compiler.formatter import format_source

    text = (
        GRAPH.replace("    ", "  ")
        + ".comp S<N>:Graph<N>{.override reach  reach(x,y):-edge(y,x).}\n.init s=S<symbol>\n"
    )
    once = format_source(text)
    assert format_source(once) == once
    assert ".comp S<N> : Graph<N> {\n    .override reach\n    reach(x, y) :- edge(y, x).\n}\n" in once
    for surface in (True, False):
        assert (
            parse(SourceFile("c.dl", once), surface)[0].statements
            == parse(SourceFile("c.dl", text), surface)[0].statements
        )


def wrapped(case: OracleCase) -> tuple[str, dict[str, list[tuple]]]:
    """The program in a component with a type parameter for `number`, instantiated as `c`."""
    header = "\n".join(FUNCTOR_LINES) + "\n"
    assert case.text.startswith(header)
    body = case.text[len(header) :].replace(": number", ": T")
    text = header + ".comp C<T> {\n" + textwrap.indent(body, "    ") + "}\n.init c = C<number>\n"
    return text, {f"c.{name}": [in_instance(row) for row in rows] for name, rows in case.facts.items()}


def in_instance(value: object) -> object:
    """A value of the program as the instance `c` holds it: an ADT value's branch is the
    instance's, `c.Some` (Soufflé names an instance's branches after it, as its types)."""
    from policyc.runtime.values import Adt

    if type(value) is Adt:
        return Adt((f"c.{value[0]}", *(in_instance(v) for v in value[1:])))
    if isinstance(value, tuple):
        return tuple(in_instance(v) for v in value)
    return value


def check_wrapped(case: OracleCase) -> None:
    from policyc.analyzer.asp import solve_unique, to_clingo

    text, facts = wrapped(case)
    compilation = compile_source(text, "wrapped.dl")
    assert compilation.ok, [(d.span.line, d.message) for d in compilation.diagnostics if d.is_error]
    plain = policyc.load(case.text, FUNCTORS)
    inside = policyc.load(text, FUNCTORS)
    expected = plain.evaluate({name: [list(r) for r in rows] for name, rows in case.facts.items()})
    found = inside.evaluate({name: [list(r) for r in rows] for name, rows in facts.items()})
    assert not found.errored, found.errors
    clingo = solve_unique(compilation, to_clingo(compilation, facts), FUNCTORS)
    declared = set(re.findall(r"^\.decl (\w+)", case.text, flags=re.M))  # the others stay the program's
    for relation in plain.plan.relations:
        if is_magic(relation.name):  # the demand of a demand-driven relation: the planner's own
            continue
        if not relation.inline:
            name = f"c.{relation.name}" if relation.name in declared else relation.name
            rows = {in_instance(row) for row in expected.relations[relation.name]}
            assert found.relations[name] == rows, (relation.name, text)
            if relation.magic is not None:  # demand-driven: the facts asked for, each a true one
                assert clingo[name] >= rows, (relation.name, text)
            else:
                assert clingo[name] == rows, (relation.name, text)


@examples(15, 300)
def test_a_program_in_a_component_derives_what_it_derives_alone(examples: int) -> None:
    run = settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))(
        given(oracle_programs(max_layers=3))(check_wrapped)
    )
    run()


def test_the_language_server_knows_instances_and_components() -> None:
    from policyc.lsp import hover, navigate, outline
    from policyc.lsp.document import build

    text = GRAPH + '.init g = Graph<symbol>\ng.edge("a", "b").\nDeny(x) :- g.reach("a", x).\n'
    snapshot = build(text, "/tmp/c.dl", 1)
    occurrence = snapshot.index.at("/tmp/c.dl", text.index("g.reach(") + 3)
    assert occurrence is not None and occurrence.symbol.name == "g.reach"
    targets = navigate.definition(snapshot, occurrence)
    assert (targets[0].span.line, targets[0].span.column) == (3, 11)  # `reach` in `.decl reach(...)`
    described = hover.describe(snapshot, occurrence)
    assert described is not None and ".decl g.reach(a: symbol, b: symbol)" in described
    with pytest.raises(navigate.RenameError):
        navigate.rename(snapshot, occurrence, "r")
    entries = {e.name: e for e in outline.outline(snapshot)}
    assert [c.name for c in entries["Graph<N>"].children] == ["edge", "reach", "reach(x, y)", "reach(x, z)"]
    assert entries["g"].detail == "Graph<symbol>"
    assert "reach" not in entries and "g.reach" not in entries  # the instance's copies are the component's


def test_the_analyzer_searches_databases_of_instance_relations() -> None:
    """A witness chooses facts of `g.edge` (a prime in clingo, a `.` again in the answer) and the
    evaluator, given them, derives the query; `policyc diff` finds what reversing the edges changes."""
    from policyc.analyzer.diff import diff
    from policyc.analyzer.query import Loaded
    from policyc.analyzer.witness import find_witness
    from policyc.compiler.loader import load_data

    def loaded(text: str) -> Loaded:
        program, found = load_data(text.encode(), "c.dl")
        return Loaded(program, tuple(found), "c.dl")

    text = GRAPH + '.init g = Graph<symbol>\n.input g.edge\nDeny(x) :- g.reach("root", x), x != "root".\n'
    answer = find_witness(loaded(text), "Deny(x)").to_json()
    assert answer["status"] == "found", answer
    facts = answer["facts"]
    assert set(facts) == {"g.edge"}
    result = policyc.load(text).evaluate(facts)
    assert [list(row) for row in result.relations["Deny"]] == [[answer["bindings"]["x"]]]
    reverse = text.replace("reach(x, y) :- edge(x, y).", "reach(x, y) :- edge(y, x).")
    assert diff(loaded(text), loaded(reverse)).to_json()["verdict"] == "incomparable"  # either way


def test_an_instance_may_be_of_a_component_of_another_file(tmp_path) -> None:
    from policyc.compiler.pipeline import compile_file

    (tmp_path / "graph.dl").write_text(GRAPH, "utf-8")
    main = tmp_path / "main.dl"
    main.write_text(
        '.include "graph.dl"\n.init g = Graph<symbol>\ng.edge("a", "b").\n.output g.reach\n', "utf-8"
    )
    compilation = compile_file(str(main))
    assert compilation.ok, [d.message for d in compilation.diagnostics]
    assert policyc.load(main).evaluate({}).relations["g.reach"] == {("a", "b")}
    twice = tmp_path / "twice.dl"
    twice.write_text('.include "graph.dl"\n.comp Graph {}\n', "utf-8")
    assert [(d.name, d.span.line) for d in compile_file(str(twice)).diagnostics] == [
        ("duplicate-instance", 2)
    ]
    inside = tmp_path / "inside.dl"
    inside.write_text('.comp A {\n    .include "graph.dl"\n}\n.init a = A\n', "utf-8")
    assert [(d.name, d.span.line) for d in compile_file(str(inside)).diagnostics] == [
        ("invalid-directive", 2)
    ]


def test_rule_ids_are_the_instances() -> None:
    text = (
        ".decl Target(x: symbol)\n.input Target\n"
        '.comp Block {\n    .decl bad(x: symbol)\n    @id("blocked") @message("{x} is bad")\n    Deny(x) :- Target(x), bad(x).\n}\n'
        '.init a = Block\n.init b = Block\na.bad("x").\nb.bad("y").\n'
    )
    assert problems(text) == []
    module, _ = parse(SourceFile("c.dl", text))
    ids = [
        r.annotation("id").args[0].value
        for r in module.statements
        if isinstance(r, ast.Rule) and r.annotation("id")
    ]
    assert ids == ["a.blocked", "b.blocked"]
    decisions = policyc.load(text).evaluate({"Target": [["x"], ["y"], ["z"]]})
    assert sorted(decisions.relations["Deny"]) == [("x",), ("y",)]


def test_deep_findings_point_inside_the_component() -> None:
    from policyc.analyzer.deep import deep_findings

    text = (
        ".comp G {\n    .decl edge(a: number, b: number)\n    .input edge\n    .decl bad(a: number)\n"
        "    bad(x) :- edge(x, y), y > 3, y < 2.\n    Deny(x) :- bad(x).\n}\n.init g = G\n"
    )
    found = {(d.name, d.span.line, d.span.column) for d in deep_findings(compile_source(text, "c.dl"))}
    assert {("unsatisfiable-rule", 5, 5), ("unreachable-rule", 6, 16)} <= found


def test_deep_nesting_and_long_chains_of_bases_are_refused_not_a_crash() -> None:
    nested = "".join(f".comp A{i} {{\n" for i in range(3000)) + "}\n" * 3000 + ".init x = A0\n"
    assert [(name, line) for name, line, _, _ in problems(nested)] == [("syntax-error", 33)]
    chain = ".comp A0 {}\n" + "".join(f".comp A{i} : A{i - 1} {{}}\n" for i in range(1, 3000))
    assert [name for name, *_ in problems(chain + ".init x = A2999\n")] == ["recursive-component"]


def test_completion_of_an_instance_relation_replaces_the_written_prefix() -> None:
    from policyc.lsp.complete import complete
    from policyc.lsp.document import build

    text = GRAPH + ".init g = Graph<symbol>\nDeny(x) :- g.re"
    snapshot = build(text, "/tmp/c.dl", 1)
    (item,) = [i for i in complete(snapshot, len(text)) if i.label == "g.reach"]
    assert item.text_edit is not None and item.text_edit.new_text == "g.reach"
    assert item.text_edit.range.start.character == len("Deny(x) :- ")


def test_a_subsumption_rule_in_a_component_drops_tuples_of_the_instances_relation() -> None:
    """Both atoms of `dist(x, d1) <= dist(x, d2)` are the instance's `s.dist`."""
    text = (
        ".comp Short<N> {\n    .decl edge(x: N, y: N, w: number)\n    .decl dist(x: N, d: number)\n"
        "    dist(y, d + w) :- dist(x, d), edge(x, y, w).\n    dist(x, d1) <= dist(x, d2) :- d2 <= d1.\n}\n"
        '.init s = Short<symbol>\ns.dist("a", 0).\ns.edge("a", "b", 3).\ns.edge("b", "a", 1).\n'
        's.edge("a", "b", 1).\n.output s.dist\n'
    )
    compilation = compile_source(text, "short.dl")
    assert [d.message for d in compilation.diagnostics if d.is_error] == []
    result = policyc.load(text).evaluate({})
    assert not result.errored, result.errors
    assert result.relations["s.dist"] == {("a", 0), ("b", 1)}


def test_eval_prints_an_instances_relations_by_their_qualified_names_without_facts(tmp_path) -> None:
    """`policyc eval prog.dl --query TopA.Foo.X.x`: a program holding its facts needs no
    `--facts`; the relation of an instance made in a base of a component given as a type
    argument is named as Soufflé names it (tests/souffle/component_parameters.dl says why)."""
    import json
    import shutil

    from click.testing import CliRunner

    from policyc.cli import main

    program = tmp_path / "p.dl"
    shutil.copy(Path(__file__).parent / "souffle" / "component_parameters.dl", program)
    done = CliRunner().invoke(main, ["eval", str(program), "--query", "TopB.Foo.X.x", "--query", "g2.v"])
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [
        "TopB.Foo.X.x: 2 facts",
        '  TopB.Foo.X.x("b")',
        '  TopB.Foo.X.x("beta")',
        "g2.v: 2 facts",
        "  g2.v(2)",
        "  g2.v(12)",
    ]
    done = CliRunner().invoke(main, ["eval", str(program), "--format", "json"])
    assert done.exit_code == 0, done.output
    relations = json.loads(done.stdout)["relations"]
    assert relations["TopA.Foo.X.x"] == [["alpha"]] and relations["TopA.Foo.size"] == [[1]]
    done = CliRunner().invoke(main, ["eval", str(program), "--query", "X.x"])
    assert done.exit_code == 2 and "no stored relation `X.x`" in done.output


def test_a_type_argument_types_the_instances_attributes() -> None:
    """souffle-lang.github.io/components, "Type Parametrization": one component instantiated
    with `number` and with `float` holds 42 as an integer in one and as a float in the other."""
    text = (
        ".comp Answer<T> {\n    .decl a(x: T)\n    a(42).\n    .decl twice(x: T)\n    twice(x + x) :- a(x).\n"
        "    .output twice\n}\n.init i = Answer<number>\n.init f = Answer<float>\n"
    )
    assert problems(text) == []
    result = policyc.load(text).evaluate({})
    ((whole,),) = result.relations["i.twice"]
    ((real,),) = result.relations["f.twice"]
    assert (whole, type(whole), real, type(real)) == (84, int, 84.0, float)


def test_a_parameter_naming_no_component_is_refused_where_it_is_instantiated() -> None:
    text = ".decl R(x: number)\n.comp Case<S> {\n    .comp One { R(1). }\n    .init s = S\n}\n.init c = Case<Nope>\n"
    assert [(name, line, column) for name, line, column, _ in problems(text)] == [
        ("unknown-component", 4, 15)
    ]
    assert "`Nope`" in problems(text)[0][3]


def test_two_instances_of_a_component_declaring_an_adt_have_branches_of_their_own() -> None:
    """Soufflé's ComponentInstantiation.cpp names an instance's branches after it (`a.Leaf`):
    each instance's values are its own, and the rest of the program builds them by that name."""
    text = (
        ".comp T {\n    .type Shape = Dot {} | Box {w: number}\n    .decl s(x: Shape)\n    s($Box(1)).\n}\n"
        ".init a = T\n.init b = T\na.s($a.Dot()).\n.decl wide(w: number)\nwide(w) :- b.s($b.Box(w)).\n.output wide, a.s\n"
    )
    assert problems(text) == []
    result = policyc.load(text).evaluate({})
    assert result.relations["wide"] == {(1,)}
    assert sorted(result.relations["a.s"]) == [(("a.Box", 1),), (("a.Dot",),)]
    mixed = text.replace("a.s($a.Dot()).", "a.s($b.Dot()).")
    assert [name for name, *_ in problems(mixed)] == ["type-mismatch"]
