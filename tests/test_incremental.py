"""Incremental sessions decide exactly as a from-scratch evaluation does.

Random policies (the oracle's generator, plus verdict rules that use negation, aggregates and
the relations it derives), random facts added in random batches; after every batch, each
action's decision in the session is compared with a from-scratch evaluation of all the facts
so far: verdict, and every deny reason; and that evaluation with one computing every relation
in full (no demand-driven relation).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.compiler import ast
from policyc.compiler.magic import NO_MAGIC
from policyc.compiler.parser import parse
from policyc.compiler.source import SourceFile

from .conftest import examples
from .programs import FUNCTORS, oracle_programs

# a relation with long recursive chains, so that maintenance needs many rounds
REACH = """
.decl G(a: number, b: number)
.input G
Reach(x, y) :- G(x, y).
Reach(x, z) :- Reach(x, y), G(y, z).
Deny(x) :- Reach(x, 0), x > 2.
Allow(x) :- G(x, _), not Reach(x, x).
"""

# recursive relations read with bound arguments only: evaluated demand-driven (magic sets), the
# demand growing as seeds arrive
DEMAND = """
.decl H(a: number, b: number)
.decl Seed(a: number)
.input H, Seed
Climb(x, y) :- H(x, y).
Climb(x, z) :- H(x, y), Climb(y, z).
Gen(x, x) :- H(x, _).
Gen(x, y) :- H(x, xp), Gen(xp, yp), H(y, yp).
Deny(x) :- Seed(q), Climb(q, x), x > 1.
Deny(y) :- Seed(q), Gen(q, y), !Seed(y).
Allow(x) :- H(x, _), Climb(x, x).
"""

VERDICTS = [
    "Deny(x) :- {R}(x{rest}).",
    "Deny(x) :- E0(x{rest0}), not {R}(x{rest}).",
    "Deny(x) :- E0(x{rest0}), n = count : {{ {R}(_{restw}) }}, n > x.",
    "Allow(x) :- E0(x{rest0}), not {R}(x{rest}).",
    "Allow(x) :- {R}(x{rest}), x > 1.",
    "Helper(x) :- {R}(x{rest}), not E0(x{rest0}).\nDeny(x) :- E0(x{rest0}), Helper(y), y < x.",
]


@st.composite
def sessions(draw):
    case = draw(oracle_programs(max_layers=3))
    names = [
        line.split("(")[0].split()[-1] for line in case.text.splitlines() if line.startswith(".output R")
    ]
    module, _ = parse(SourceFile("random.dl", case.text))  # a rule may have several heads
    arities = {s.head.name: len(s.head.args) for s in module.statements if isinstance(s, ast.Rule)}
    e0_arity = len(case.facts["E0"][0]) if case.facts["E0"] else None
    lines = [case.text]
    if names and e0_arity:
        for template in draw(st.lists(st.sampled_from(VERDICTS), min_size=1, max_size=3, unique=True)):
            relation = draw(st.sampled_from(names))
            arity = arities.get(relation, 1)
            lines.append(
                template.format(
                    R=relation,
                    rest=", _" * (arity - 1),
                    rest0=", _" * (e0_arity - 1),
                    restw=", _" * (arity - 1),
                )
            )
        if draw(st.booleans()):
            lines.append(".default deny")
    if draw(st.booleans()):
        lines.append(REACH)
        edges = draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=12, unique=True))
        case.facts["G"] = edges
    if draw(st.booleans()):
        lines.append(DEMAND)
        case.facts["H"] = draw(
            st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=10, unique=True)
        )
        case.facts["Seed"] = draw(st.lists(st.tuples(st.integers(0, 5)), max_size=3, unique=True))
    rows = [(name, row) for name, table in case.facts.items() for row in table]
    order = draw(st.permutations(rows))
    cuts = sorted(draw(st.lists(st.integers(0, len(order)), max_size=4)))
    batches = []
    start = 0
    for cut in [*cuts, len(order)]:
        batches.append(order[start:cut])
        start = cut
    return "\n".join(lines) + "\n", batches


def reasons(decision) -> list:
    return sorted((r.rule, r.facts) for r in decision.reasons)


def incremental_equal_from_scratch(drawn) -> None:
    text, batches = drawn
    policy = policyc.load(text, FUNCTORS)
    plain = policyc.load(text, FUNCTORS, magic=NO_MAGIC)  # every relation in full
    session = policyc.Monitor(policy).session("s")
    seen: dict[str, list] = {}
    named: set = set()
    for batch in batches:
        grouped: dict[str, list] = {}
        for name, row in batch:
            grouped.setdefault(name, []).append(list(row))
            seen.setdefault(name, []).append(list(row))
            named.update(row)
        session.add_facts(grouped)
        scratch = policy.evaluate(seen)
        assert not scratch.errored, scratch.errors
        for action in range(-1, 6):
            if action not in named:  # no fact names it: a session refuses to decide it
                assert session.decide(action).reasons[0].rule == "policyc:unknown-action"
                continue
            mine, theirs = session.decide(action), scratch.decide(action)
            assert (mine.allowed, mine.errored) == (theirs.allowed, theirs.errored), (text, batches, action)
            assert reasons(mine) == reasons(theirs), (text, action)
            full = plain.evaluate(seen).decide(action)
            assert (full.allowed, full.errored, reasons(full)) == (
                theirs.allowed,
                theirs.errored,
                reasons(theirs),
            )


@examples(75, 300)
def test_incremental_decisions_equal_from_scratch(examples: int) -> None:
    settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))(
        given(sessions())(incremental_equal_from_scratch)
    )()
