"""Random policies for property tests.

:func:`oracle_programs` draws stratified, range-restricted, well-typed programs with input
facts: relations in layers, rules with positive and negated atoms, comparisons, arithmetic
(Soufflé's bitwise operators and power too, hexadecimal and binary constants), aggregates,
functors, inline relations, rules with several heads or with `;`, records and ADT values
(built, taken apart, matched, counted), recursion within a layer and negation or aggregation
only over lower layers. Every such program must check without errors, and evaluate to what
clingo computes. :func:`token_soup` draws text that is mostly not a program at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class Relation:
    name: str
    arity: int
    layer: int  # 0: input


TOKENS = [
    "Deny",
    "Allow",
    "P",
    "Q",
    "x",
    "y",
    "_",
    "e'",
    "(",
    ")",
    ",",
    ".",
    ":-",
    "not",
    "!",
    "=",
    "!=",
    "<",
    ">=",
    "+",
    "*",
    "-",
    "%",
    "/",
    ";",
    "^",
    "band",
    "bnot",
    "lor",
    "max",
    "0x1F",
    "0b1",
    '"s"',
    '"a\\"b"',
    "1",
    "2.5",
    "count",
    "sum",
    "min",
    ":",
    "{",
    "}",
    ".decl",
    ".input",
    ".output",
    ".functor",
    ".default",
    ".role",
    ".field",
    ".arg",
    "required",
    ".include",
    ".import",
    "@id",
    "@message",
    "symbol",
    "number",
    "bool",
    "budget",
    "pool",
    "inline",
    "//c\n",
    "/*c*/",
    "\n",
    "\t",
    "contains",
    "tool.arg",
    "\u201c",
    "'",
    "#",
    "\x00",
    "\ufeff",
]


@st.composite
def token_soup(draw) -> str:
    parts = draw(st.lists(st.sampled_from(TOKENS), max_size=60))
    seps = draw(st.lists(st.sampled_from(["", " ", "\n"]), min_size=len(parts), max_size=len(parts)))
    return "".join(p + s for p, s in zip(parts, seps, strict=True))


@dataclass(frozen=True)
class OracleCase:
    """A random stratified program with input facts, for comparison with clingo."""

    text: str
    facts: dict[str, list[tuple]]


@st.composite
def oracle_programs(draw, max_layers: int = 4) -> OracleCase:
    """Programs over small integers exercising recursion (also mutual), stratified negation,
    comparisons, arithmetic, every aggregate (grouped or not, two of a rule sharing a local
    variable), `range`, constants, wildcards and repeated variables. Recursive rules stay within finite values (no arithmetic in them)."""
    inputs = [Relation(f"E{i}", draw(st.integers(1, 3)), 0) for i in range(draw(st.integers(1, 3)))]
    derived = []
    for layer in range(1, draw(st.integers(1, max_layers)) + 1):
        for i in range(draw(st.integers(1, 2))):
            derived.append(Relation(f"R{layer}_{i}", draw(st.integers(1, 3)), layer))
    lines = []
    facts: dict[str, list[tuple]] = {}
    for rel in inputs:
        attributes = ", ".join(f"a{i}: number" for i in range(rel.arity))
        lines.append(f".decl {rel.name}({attributes})")
        lines.append(f".input {rel.name}")
        rows = draw(st.lists(st.tuples(*[st.integers(0, 4)] * rel.arity), max_size=8, unique=True))
        facts[rel.name] = rows
    for rel in derived:
        lower = inputs + [r for r in derived if r.layer < rel.layer]
        same = [r for r in derived if r.layer == rel.layer]
        lines.append(draw(_oracle_rule(rel, lower, lower, rich=True, also=same)))
        for _ in range(draw(st.integers(0, 2))):
            recursive = draw(st.booleans())
            positive = lower + same if recursive else lower
            lines.append(draw(_oracle_rule(rel, positive, lower, rich=not recursive, also=same)))
        if draw(st.integers(0, 4)) == 0:
            lines.append(f"{rel.name}({', '.join(str(draw(st.integers(0, 4))) for _ in range(rel.arity))}).")
    for rel in derived:
        lines.append(f".output {rel.name}")
    if draw(st.booleans()):
        lines.extend(draw(_inline_block(inputs)))
    if draw(st.booleans()):
        lines.extend(draw(_record_block(inputs, facts)))
    if draw(st.integers(0, 2)) == 0:
        lines.extend(draw(demand_block(facts)))
    return OracleCase("\n".join(FUNCTOR_LINES + lines) + "\n", facts)


RECORD_RULES = [
    "Unpack(x, y) :- RecIn([x, y], _).",
    "Swap([y, x]) :- RecIn([x, y], _).",
    "Swap(p) :- Swap([x, y]), p = [x, x], y > x.",
    "Somes(v) :- RecIn(_, $Some(v)).",
    "Nones(p) :- RecIn(p, $None).",
    "Nones(p) :- RecIn(p, $None()), p != [1, 1].",
    "Lonely(x) :- Swap([x, _]), !RecIn([x, x], _).",
    "CountP(n) :- n = count : { RecIn([_, y], _), y > 1 }.",
    "SumP(n) :- n = sum x : { RecIn([x, _], $Some(_)) }.",
    "Eq(a) :- RecIn(p, _), p = [a, a].",
    "Wrapped($Some(x + y)) :- RecIn([x, y], $None).",
    "Wrapped(o) :- RecIn(_, o), o != $None.",
    "Same(v) :- RecIn([v, _], $Some(v)).",
    "NoRight(x) :- Unpack(x, _), !RecIn([_, x], _).",
    "NoneLeft(x) :- Unpack(x, _), !RecIn([x, _], $Some(_)).",
]


@st.composite
def _record_block(draw, inputs: list[Relation], facts: dict[str, list[tuple]]) -> list[str]:
    """A record type, an ADT and an input of both, with rules over them (and one joining an
    input of numbers)."""
    from policyc.runtime.values import Adt

    lines = [
        ".type Pair = [l: number, r: number]",
        ".type Opt = Some {v: number} | None {}",
        ".decl RecIn(p: Pair, o: Opt)",
        ".input RecIn",
        ".decl Swap(p: Pair)",
        ".decl Nones(p: Pair)",
        ".decl Wrapped(o: Opt)",
    ]
    option = st.one_of(st.just(Adt(("None",))), st.integers(0, 3).map(lambda v: Adt(("Some", v))))
    pair = st.tuples(st.integers(0, 3), st.integers(0, 3))
    facts["RecIn"] = draw(st.lists(st.tuples(pair, option), max_size=6, unique=True))
    rules = draw(st.lists(st.sampled_from(RECORD_RULES), min_size=1, max_size=6, unique=True))
    if any(r.startswith("Swap(p)") for r in rules):
        rules.append(RECORD_RULES[1])  # `Swap` needs its first rule
    if any(r.startswith(("NoRight", "NoneLeft")) for r in rules):
        rules.append(RECORD_RULES[0])  # they need `Unpack`
    source = inputs[0]
    rest = ", _" * (source.arity - 1)
    if draw(st.booleans()):
        rules.append(f"Joined(x) :- {source.name}(x{rest}), RecIn([x, _], $Some(x)).")
    heads = sorted({rule.split("(", 1)[0] for rule in rules})
    return lines + sorted(set(rules)) + [f".output {', '.join(heads)}"]


# recursive relations that are no output, each a template of its rules (`{n}`: its name)
DEMANDED = [
    "{n}(x, y) :- DEdge(x, y).\n{n}(x, z) :- DEdge(x, y), {n}(y, z).",  # right-recursive closure
    "{n}(x, y) :- DEdge(x, y).\n{n}(x, z) :- {n}(x, y), DEdge(y, z).",  # left-recursive closure
    "{n}(x, x) :- DEdge(x, _).\n{n}(x, y) :- DEdge(x, xp), {n}(xp, yp), DEdge(y, yp).",  # same generation
    "{n}(x, y) :- DEdge(x, y), x != y.\n{n}(x, y) :- {n}(y, x).\n{n}(x, z) :- {n}(x, y), {n}(y, z).",
    "{n}(x, y) :- DEdge(x, y).\n{n}(x, z) :- DEdge(x, y), {n}Odd(y, z).\n"  # mutual recursion
    "{n}Odd(x, z) :- DEdge(x, y), {n}(y, z).\n{n}Odd(x, x) :- DSeed(x), DEdge(x, _).",
    "{n}(x, y) :- DEdge(x, y).\n{n}(x, z) :- DEdge(x, y), {n}(y, z), !DSeed(y), y < 4.",
    "{n}(x, 0) :- DSeed(x).\n{n}(x, c + 1) :- {n}(x, c), c < 3.\n{n}(x, c) :- DEdge(x, y), {n}(y, c).",
]
# queries (outputs) of a demanded relation `{n}` (`{m}`: another one)
QUERIES = [
    "{q}(y) :- DSeed(q), {n}(q, y).",
    "{q}(y) :- {n}(2, y).",
    "{q}(x) :- {n}(x, 3).",
    "{q}(x) :- DSeed(x), {n}(x, x).",
    "{q}(y) :- DSeed(q), {n}(q + 1, y), !DSeed(y).",
    "{q}(y) :- DSeed(q), {n}(q, x), {m}(x, y).",
    "{q}(n) :- DSeed(q), n = count : {{ {n}(q, _) }}.",
    "{q}(x, y) :- {n}(x, y), x < 2.",
    "{q}(y) :- DEdge(q, _), !DSeed(q), {n}(q, y), y > 0.",
]


@st.composite
def demand_block(draw, facts: dict[str, list[tuple]]) -> list[str]:
    """Recursive relations that are no output, read by queries that mostly bind some of their
    arguments: what the planner evaluates demand-driven (magic sets), with an edge and a seed
    input of their own."""
    lines = [".decl DEdge(a: number, b: number)", ".decl DSeed(a: number)", ".input DEdge, DSeed"]
    facts["DEdge"] = draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=10, unique=True))
    facts["DSeed"] = draw(st.lists(st.tuples(st.integers(0, 5)), max_size=3, unique=True))
    chosen = draw(st.lists(st.sampled_from(DEMANDED), min_size=1, max_size=2))
    names = [f"Dm{i}" for i in range(len(chosen))]
    for name, template in zip(names, chosen, strict=True):
        lines.append(template.format(n=name))
    queries = []
    for i, template in enumerate(draw(st.lists(st.sampled_from(QUERIES), min_size=1, max_size=3))):
        name = f"Dq{i}"
        queries.append(name)
        lines.append(template.format(q=name, n=draw(st.sampled_from(names)), m=draw(st.sampled_from(names))))
    return [*lines, f".output {', '.join(queries)}"]


FUNCTOR_LINES = [".functor inc(x: number): number", ".functor small(x: number): bool"]
FUNCTORS = {"inc": lambda x: x + 1, "small": lambda x: x < 2}


@st.composite
def _inline_block(draw, inputs: list[Relation]) -> list[str]:
    """An inline relation `Near(x, y)` over the inputs, and a relation that uses it."""
    lines = [".decl Near(x: number, y: number) inline"]
    binary = [r for r in inputs if r.arity >= 2]
    options = ["Near(x, y) :- y = x + 1.", "Near(x, y) :- small(x), y = inc(inc(x))."]
    if binary:
        r = binary[0]
        rest = ", _" * (r.arity - 2)
        options.append(f"Near(x, y) :- {r.name}(x, y{rest}).")
    for rule in draw(st.lists(st.sampled_from(options), min_size=1, max_size=3, unique=True)):
        lines.append(rule)
    source = inputs[0]
    args = ", ".join(["a"] + ["_"] * (source.arity - 1))
    negated = "not " if draw(st.booleans()) else ""
    lines.append(f"UsesNear(a, b) :- {source.name}({args}), b = inc(a), {negated}Near(a, b).")
    lines.append(f"UsesNear2(a) :- {source.name}({args}), Near(a, a + 1).")
    lines.append(".output UsesNear, UsesNear2")
    return lines


@st.composite
def _oracle_rule(
    draw,
    head: Relation,
    positive: list[Relation],
    lower: list[Relation],
    rich: bool,
    also: list[Relation] = (),
) -> str:
    """A rule for ``head``; sometimes with a second head among ``also`` (relations the same
    body may define), sometimes with a second body after `;`."""
    first, bound = draw(_oracle_body(positive, lower, rich, "x"))
    heads = [head]
    if also and draw(st.integers(0, 4)) == 0:
        others = [r for r in also if r != head]
        if others:
            heads.append(draw(st.sampled_from(others)))
    if draw(st.integers(0, 4)):
        atoms = [
            f"{h.name}({', '.join(draw(st.sampled_from(bound)) for _ in range(h.arity))})" for h in heads
        ]
        return f"{', '.join(atoms)} :- {', '.join(first)}."
    # `;`: each alternative binds the head's variables h0, h1, ... its own way
    second, bound2 = draw(_oracle_body(positive, lower, rich, "y"))
    width = max(h.arity for h in heads)
    alternatives = []
    for body, names in ((first, bound), (second, bound2)):
        parts = body + [f"h{i} = {draw(st.sampled_from(names))}" for i in range(width)]
        text = ", ".join(parts)
        alternatives.append(f"({text})" if draw(st.booleans()) else text)
    atoms = [f"{h.name}({', '.join(f'h{i}' for i in range(h.arity))})" for h in heads]
    if draw(st.booleans()) and len(first) > 1:  # `S, (A ; B)`: a group after a shared atom
        rest = ", ".join(first[1:] + [f"h{i} = {draw(st.sampled_from(bound))}" for i in range(width)])
        other = ", ".join(second + [f"h{i} = {draw(st.sampled_from(bound2))}" for i in range(width)])
        return f"{', '.join(atoms)} :- {first[0]}, ({rest} ; {other})."
    return f"{', '.join(atoms)} :- {' ; '.join(alternatives)}."


def _constant(draw) -> str:
    """A small constant, sometimes written in hexadecimal or binary."""
    value = draw(st.integers(0, 4))
    return draw(st.sampled_from([str(value), hex(value), bin(value)]))


@st.composite
def _oracle_body(
    draw, positive: list[Relation], lower: list[Relation], rich: bool, prefix: str
) -> tuple[list[str], list[str]]:
    names = (f"{prefix}{i}" for i in range(1000))
    bound: list[str] = []
    body: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        rel = draw(st.sampled_from(positive))
        args = []
        for _ in range(rel.arity):
            choice = draw(st.integers(0, 6))
            if choice == 0 and bound:
                args.append(draw(st.sampled_from(bound)))
            elif choice == 1:
                args.append(_constant(draw))
            elif choice == 2:
                args.append("_")
            elif choice == 3 and bound and rich:
                # an expression over a variable bound elsewhere: planned after its variable
                args.append(
                    draw(st.sampled_from([f"{draw(st.sampled_from(bound))} + 1", f"inc({bound[0]})"]))
                )
            else:
                var = next(names)
                bound.append(var)
                args.append(var)
        body.append(f"{rel.name}({', '.join(args)})")
    if not bound:
        var = next(names)
        body.append(f"{var} = {draw(st.integers(0, 4))}")
        bound.append(var)
    kinds = ["neg", "cmp", "neggroup"] + (
        ["assign", "count", "sum", "min", "max", "mean", "test", "range"] if rich else []
    )
    shared = None  # the local variable of the last aggregate: the next may use the same name
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(kinds))
        if kind == "neg":
            rel = draw(st.sampled_from(lower))
            args = [draw(st.sampled_from([*bound, "_", "1"])) for _ in range(rel.arity)]
            body.append(f"not {rel.name}({', '.join(args)})")
        elif kind == "neggroup":  # `not (A ; B, x < y)`: De Morgan's laws
            parts = []
            for _ in range(2):
                rel = draw(st.sampled_from(lower))
                args = [draw(st.sampled_from([*bound, "_", "1"])) for _ in range(rel.arity)]
                parts.append(f"{rel.name}({', '.join(args)})")
            op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
            comparison = f"{draw(st.sampled_from(bound))} {op} {draw(st.sampled_from([*bound, '2']))}"
            body.append(f"not ({parts[0]} ; {parts[1]}, {comparison})")
        elif kind == "test":
            body.append(f"{draw(st.sampled_from(['', 'not ']))}small({draw(st.sampled_from(bound))})")
        elif kind == "cmp":
            op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
            right = draw(st.sampled_from([*bound, str(draw(st.integers(0, 4)))]))
            body.append(f"{draw(st.sampled_from(bound))} {op} {right}")
        elif kind == "range":
            var = next(names)
            # ends small whatever the values (products grow from layer to layer)
            ends = [
                draw(st.sampled_from([*(f"{v} % 5" for v in bound), str(draw(st.integers(-2, 5)))]))
                for _ in range(2)
            ]
            step = draw(st.sampled_from(["", ", 1", ", 2", ", -1", ", -3", ", 0"]))
            body.append(f"{var} = range({ends[0]}, {ends[1]}{step})")
            bound.append(var)
        elif kind == "assign":
            var = next(names)
            op = draw(st.sampled_from(["+", "-", "*", "/", "%", "band", "bor", "bxor", "^", "bshl", "bnot"]))
            if op in ("/", "%"):
                operand = str(draw(st.integers(1, 3)))
            elif op in ("^", "bshl"):  # clingo has them for a constant exponent or shift
                operand = draw(st.sampled_from(["0", "1", "2", "0b10"]))
            else:
                operand = draw(st.sampled_from([*bound, "2", "0x3"]))
            if op == "bnot":
                body.append(f"{var} = bnot {draw(st.sampled_from(bound))}")
            else:
                body.append(f"{var} = {draw(st.sampled_from(bound))} {op} {operand}")
            bound.append(var)
        else:
            rel = draw(st.sampled_from(lower))
            inner = shared if shared is not None and draw(st.booleans()) else next(names)
            shared = inner
            args = [draw(st.sampled_from([inner, "_", *bound])) for _ in range(rel.arity)]
            atom = f"{rel.name}({', '.join(args)})"
            extra = f", {inner} != 2" if inner in args and draw(st.booleans()) else ""
            var = next(names)
            if kind == "count" or inner not in args:
                body.append(f"{var} = count : {{ {atom}{extra} }}")
                bound.append(var)
            elif kind == "mean":
                body.append(f"{var} = mean {inner} : {{ {atom}{extra} }}")
                body.append(
                    f"{var} {draw(st.sampled_from(['<', '>=', '>', '!=']))} {draw(st.integers(1, 3))}"
                )
            else:
                target = inner if draw(st.booleans()) else f"{inner} * 2 - 1"
                body.append(f"{var} = {kind} {target} : {{ {atom}{extra} }}")
                bound.append(var)
    return body, bound
