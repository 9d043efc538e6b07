"""`policyc check --deep` within its time limit, on policies of thousands of rules.

Every phase of the deep analysis (the proofs of unsatisfiable bodies, containment for redundant
rules and shadowed `Allow` rules, the proofs of tools always denied or allowed, the bounded
searches) stops at one deadline, gives z3 no more than the time left, and says what it left
undecided; the rules a rule may be contained in are found through an index, not by trying every
pair. No test here asserts a tight time: the machine running them may be loaded.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import pytest

from policyc.analyzer import bounded as bounded_module
from policyc.analyzer import contain
from policyc.analyzer import deep as deep_module
from policyc.analyzer import slips as slips_module
from policyc.analyzer.deadline import Deadline
from policyc.analyzer.deep import analyse
from policyc.compiler.pipeline import compile_source

from .conftest import policyc_command

PREAMBLE = """\
.functor is_tool(a: symbol, name: symbol): bool
.functor tool_arg(a: symbol, key: symbol): any
.decl Actions(a: symbol)
.decl DependsOn(e: symbol, d: symbol)
.decl Untrusted(e: symbol)
.decl Sensitive(e: symbol)
.decl Amount(a: symbol, n: number)
.input Actions, DependsOn, Untrusted, Sensitive, Amount
"""
TOOLS = ("send_email", "send_money", "read_file", "get_webpage", "create_file", "delete_file")


def generate(rules: int) -> str:
    """A policy of ``rules`` rules and facts shaped like the FORGE listings (as the benchmarks
    generate them): groups of recursive provenance, a fact, and `Deny` rules over tool calls
    with comparisons, functor calls, negation and aggregates, each group with relations of its
    own."""
    out = [PREAMBLE]
    for g in range(rules // 10 + 1):
        tool = TOOLS[g % len(TOOLS)]
        out += [
            f"Tainted{g}(e) :- Untrusted(e).",
            f"Tainted{g}(e) :- DependsOn(e, d), Tainted{g}(d).",
            f"Secret{g}(e) :- Sensitive(e).",
            f"Secret{g}(e) :- DependsOn(e, d), Secret{g}(d).",
            f'Known{g}("ops@example.com").',
            f'Deny(a) :- Actions(a), is_tool(a, "{tool}"), Tainted{g}(a), Secret{g}(a).',
            f'Deny(a) :- Actions(a), is_tool(a, "{tool}"), to = tool_arg(a, "to"), to != "", not Known{g}(to).',
            f"Spent{g}(t) :- t = sum n : {{ Amount(_, n) }}.",
            f"Deny(a) :- Actions(a), Amount(a, n), Spent{g}(t), t + n > {100 + 37 * g}.",
            f"Deny(a) :- Actions(a), n = count : {{ DependsOn(a, _) }}, n > {5 + g % 40}, not Secret{g}(a).",
        ]
    return "\n".join(out[: rules + 1]) + "\n"


def crowded(rules: int) -> str:
    """`Deny` rules that read the same relations and differ only in their comparisons, over the
    relations of :func:`generate`: every pair may be a containment, which only z3 can decide,
    and every body has comparisons for z3 to check."""
    return "\n".join(
        f"Deny(a) :- Actions(a), Amount(a, n), n > {i * 7}, n < {i * 7 + 5 + i % 3}." for i in range(rules)
    )


def test_deep_check_of_thousands_of_rules_returns_about_its_time_limit(tmp_path: Path) -> None:
    policy = tmp_path / "large.dl"
    policy.write_text(generate(2500) + crowded(500) + "\n")
    started = time.monotonic()
    done = subprocess.run(
        [*policyc_command(), "check", "--deep", "--deep-timeout", "2", "--format", "json", str(policy)],
        capture_output=True,
        text=True,
        timeout=120,  # all pairs of the crowded rules through z3 would take hours
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    json.loads(done.stdout)
    # what was left undecided is said, not dropped
    assert "not checked within the time limit (--deep-timeout)" in done.stderr
    assert elapsed < 60, elapsed  # a generous multiple of the 2 s (and the parsing) asked for


def test_what_is_not_decided_in_time_is_said() -> None:
    compilation = compile_source(generate(200) + crowded(400) + "\n", "crowded.dl")
    started = time.monotonic()
    result = analyse(compilation, 2, 1.0)
    assert time.monotonic() - started < 30
    names = {name for u in result.unchecked for name in u.names}
    assert "redundant-rule" in names  # 400 rules, all candidates of each other: not in 1 s
    assert result.unanswered == sum(u.count for u in result.unchecked) > 0
    notes = result.notes()
    assert notes and all("within the time limit" in note for note in notes)
    assert any(note.startswith("`redundant-rule`: ") and " rules not checked " in note for note in notes)


# every phase stops at the deadline: a deadline that passes at its n-th check, for every n

PHASES = """\
.import events
.default deny
.decl Amount(a: symbol, n: number)
.input Amount

Never(a) :- Amount(a, n), n > 10, n < 5.
Deny(a) :- ToolCall(a, "send_email"), Never(a).
Deny(a) :- ToolCall(a, "wire"), Amount(a, n), n > 5, n < 3.
Deny(a) :- ToolCall(a, "send_email"), Amount(a, n), n > 100.
Deny(a) :- ToolCall(a, "send_email"), Amount(a, n), n > 500, Label(a, "external").
Allow(a) :- ToolCall(a, "read_file").
Allow(a) :- ToolCall(a, "send_email"), Label(a, "reviewed").
Deny(a) :- ToolCall(a, "send_email"), Label(a, "reviewed").
Deny(a) :- ToolCall(a, "pay"), Label(a, "ok").
Deny(a) :- ToolCall(a, "pay"), not Label(a, "ok").
Allow(a) :- ToolCall(a, "pay"), Amount(a, n), n < 10.
Deny(a) :- ToolCall(a, "delete_file"), ToolCall(a, "read_file").
Allow(a) :- ToolCall(a, "delete_file"), Label(a, "approved").
Risky(a) :- Label(a, "pii"), Label(a, "public").
Risky(a) :- Label(a, "pii"), not Label(a, "public").
Risky(a) :- Label(a, "pii"), Label(a, "export").
Deny(a) :- ToolCall(a, "post"), Risky(a).
Allow(a) :- ToolCall(a, "post").
"""


class Expiring(Deadline):
    """A deadline that passes at its ``after``-th check, whatever the clock says."""

    def __init__(self, after: float) -> None:
        super().__init__(3600.0)
        self.after = after
        self.checks = 0
        self.gone = False

    def passed(self) -> bool:
        self.checks += 1
        self.gone = self.gone or self.checks > self.after
        return self.gone

    def left(self) -> float:
        return 0.0 if self.gone else 60.0


def run_expiring(monkeypatch, compilation, after: float) -> tuple[Expiring, deep_module.DeepResult]:
    import clingo
    import z3

    expiring = Expiring(after)
    check, ground, solve = z3.Solver.check, clingo.Control.ground, bounded_module.solve

    def checked(self, *args, **kwargs):
        assert not expiring.gone, "z3 was asked something after the deadline had passed"
        return check(self, *args, **kwargs)

    def grounded(self, *args, **kwargs):
        assert not expiring.gone, "clingo grounded after the deadline had passed"
        return ground(self, *args, **kwargs)

    def solved(*args, **kwargs):
        assert not expiring.gone, "clingo was asked something after the deadline had passed"
        return solve(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(z3.Solver, "check", checked)
        patch.setattr(clingo.Control, "ground", grounded)
        patch.setattr(bounded_module, "solve", solved)
        patch.setattr(deep_module, "Deadline", lambda seconds: expiring)
        # the searches in this process, so that their checks are counted here
        patch.setattr(bounded_module, "within", lambda seconds, work: work())
        result = analyse(compilation, 2, 6.0)
    return expiring, result


def test_every_phase_stops_at_the_deadline(monkeypatch) -> None:
    compilation = compile_source(PHASES, "phases.dl")
    assert compilation.ok
    whole, full = run_expiring(monkeypatch, compilation, float("inf"))
    assert not full.unchecked and full.unanswered == 0
    kinds = {d.name for d in full.findings}
    assert {
        "unsatisfiable-rule",
        "unreachable-rule",
        "redundant-rule",
        "shadowed-allow",
        "always-deny",
    } <= kinds
    everything = {(d.code, d.span.line, d.strength) for d in full.findings}
    cut: set[str] = set()
    bounded = False
    for after in range(whole.checks):
        expired, result = run_expiring(monkeypatch, compilation, after)
        assert expired.gone
        found = {(d.code, d.span.line, d.strength) for d in result.findings}
        assert found <= everything, (after, found - everything)
        # what the deadline cut off is said; a finding whose rules (a core) were not made
        # smaller in time names more rules, and is still reported
        assert result.unchecked or found == everything, after
        assert result.unanswered == sum(u.count for u in result.unchecked)
        cut.update(name for u in result.unchecked for name in u.names)
        bounded = bounded or any(u.what == "bounded questions" for u in result.unchecked)
    # each phase was cut at some point, and said so
    assert {
        "unsatisfiable-rule",
        "unreachable-rule",
        "redundant-rule",
        "shadowed-allow",
        "always-deny",
        "always-allow",
    } <= cut
    assert bounded


# the index


def shadowing(pairs: int) -> str:
    """`Allow` and `Deny` rules about distinct tools and labels."""
    lines = [
        ".decl Label(a: symbol, l: symbol)",
        ".input Label",
    ]
    for i in range(pairs):
        lines.append(f'Allow(a) :- Actions(a), is_tool(a, "tool{i}"), Label(a, "ok{i}").')
        lines.append(f'Deny(a) :- Actions(a), is_tool(a, "tool{i}"), Label(a, "bad{i}").')
    return "\n".join(lines) + "\n"


def test_rules_to_compare_are_found_through_an_index(monkeypatch) -> None:
    calls = {"redundant": 0, "shadowed": 0}

    def counted(compilation, general, specific, heads=True, **kwargs):
        calls["redundant" if heads else "shadowed"] += 1
        return contain.covers(compilation, general, specific, heads, **kwargs)

    monkeypatch.setattr(deep_module, "covers", counted)
    # the findings of what an agent slips past replay calls through a monitor of the whole
    # policy, one session each (tests/test_slips.py); this test counts comparisons of rules
    monkeypatch.setattr(
        slips_module, "slip_findings", lambda compilation, deadline, replayer: slips_module.Slips([])
    )
    rules = 2000
    compilation = compile_source(generate(rules) + shadowing(300), "indexed.dl")
    result = analyse(compilation, 2, 600.0)
    assert not [u for u in result.unchecked if {"redundant-rule", "shadowed-allow"} & set(u.names)]
    # all pairs would be 800 `Deny` rules squared, and 300 `Allow` rules times 1,100 `Deny` rules
    assert calls["redundant"] < 4 * rules, calls
    assert calls["shadowed"] < 4 * 300, calls


VARIABLES = ("x", "y", "z")
CONSTANTS = ('"a"', '"b"', "1")
RELATIONS = {"P": 1, "Q": 2, "R": 2}


def random_rule(rng: random.Random, head: str) -> str:
    """A safe rule over P/1, Q/2 and R/2, with constants, negations and comparisons."""
    positives = []
    bound: set[str] = set()
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(sorted(RELATIONS))
        args = [rng.choice(VARIABLES + CONSTANTS[:2]) for _ in range(RELATIONS[name])]
        bound.update(a for a in args if a in VARIABLES)
        positives.append(f"{name}({', '.join(args)})")
    if not bound:
        positives.append("P(x)")
        bound.add("x")
    variables = sorted(bound)
    body = list(positives)
    if rng.random() < 0.4:
        name = rng.choice(sorted(RELATIONS))
        args = [rng.choice(variables + list(CONSTANTS[:2])) for _ in range(RELATIONS[name])]
        body.append(f"not {name}({', '.join(args)})")
    if rng.random() < 0.3:
        body.append(f'{rng.choice(variables)} != "{rng.choice("ab")}"')
    rng.shuffle(body)
    subject = rng.choice([*variables, '"a"'])
    return f"{head}({subject}) :- {', '.join(body)}."


@pytest.mark.parametrize("seed", range(6))
def test_the_index_finds_every_rule_that_covers_another(seed: int) -> None:
    rng = random.Random(seed)
    lines = [
        ".decl P(x: symbol)",
        ".decl Q(x: symbol, y: symbol)",
        ".decl R(x: symbol, y: symbol)",
        ".input P, Q, R",
    ]
    lines += [random_rule(rng, rng.choice(("Deny", "Allow", "H"))) for _ in range(60)]
    compilation = compile_source("\n".join(lines) + "\n", "random.dl")
    assert not [d for d in compilation.diagnostics if d.is_error]
    rules = [rule for _, rule in compilation.program.rules() if not rule.is_fact]
    covered = 0
    for heads in (True, False):
        index = contain.Candidates(compilation, rules, heads=heads)
        for specific in rules:
            candidates = set(index.of(specific))
            for n, general in enumerate(rules):
                if heads and general.head.name != specific.head.name:
                    continue
                if contain.covers(compilation, general, specific, heads=heads):
                    covered += 1
                    assert n in candidates, (str(general), str(specific))
    assert covered > len(rules) * 2  # each rule covers itself, and the seeds give more
