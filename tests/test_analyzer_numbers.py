"""Tool arguments that are numbers, in the analyzer's searches.

A monitor session gives `tool_arg(a, k)` the argument's JSON value (a number stays a number)
while `ToolArg(a, k, text)` holds its text. The searches of `policyc witness`, `diff` and
`check --deep` must be able to make an argument a JSON number when a policy compares it or
computes with it, and a string when it is used as one. Every witness here is checked twice:
by the command itself (it replays its witness through the evaluator before printing it), and
by a monitor session, through `policyc replay`, on the events the witness describes (built as
the translation pipeline builds its scenarios, `analyzer.sessions.to_session`).
"""

from __future__ import annotations

import json
import operator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import policyc
from policyc.analyzer.sessions import to_session

from .conftest import EXAMPLES

HEAD = ".import events\n"
COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
COMPARISONS |= {"=": operator.eq, "!=": operator.ne}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(HEAD + text, encoding="utf-8")
    return path


def witness(cli, policy: Path, query: str) -> dict:
    run = cli("witness", str(policy), query, "--format", "json")
    assert run.status == 0, run.stdout + run.stderr
    answer = json.loads(run.stdout)
    assert answer["status"] == "found", answer
    return answer


def events(facts: dict, numbers: list, action: str) -> list[dict]:
    """The witness as a session's events, the action last."""
    record = to_session(
        {n: [tuple(r) for r in rows] for n, rows in facts.items()}, action, "w", True, numbers
    )
    return record["events"]


def replay(cli, policy: Path, sessions: list[list[dict]], tmp_path: Path) -> list[dict]:
    """The monitor's decision of each session's last event."""
    trace = tmp_path / "trace.jsonl"
    lines = [json.dumps({"session": f"s{n}", "events": evs}) for n, evs in enumerate(sessions)]
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = cli("replay", "--each", str(policy), str(trace), "--format", "json")
    assert run.status == 0, run.stdout + run.stderr
    return [s["decisions"][-1] for s in json.loads(run.stdout)["sessions"]]


def denied_by(decision: dict) -> list[str]:
    assert not decision["errored"], decision
    return [] if decision["allowed"] else sorted(r["rule"] for r in decision["reasons"])


def single_number(answer: dict, key: str) -> int:
    """The number the witness gives argument `key` of its action, checked against its text."""
    a = answer["bindings"]["a"]
    ((call, name, value),) = answer["numbers"]
    assert (call, name) == (a, key)
    assert type(value) is int
    assert [a, key, str(value)] in answer["facts"]["ToolArg"]
    return value


# ------------------------------------------------------------------------- witnesses


@pytest.mark.parametrize(
    ("condition", "holds"),
    [
        ("n > 0", lambda n: n > 0),
        ("n >= 1000", lambda n: n >= 1000),
        ("n < -5", lambda n: n < -5),
        ("n <= 7, n > 4", lambda n: 4 < n <= 7),
        ("n - 2 > 10", lambda n: n - 2 > 10),
        ("n - 3 = 9", lambda n: n - 3 == 9),
        ("n = 3", lambda n: n == 3),
    ],
)
def test_a_compared_argument_is_a_json_number(cli, tmp_path: Path, condition: str, holds) -> None:
    policy = write(
        tmp_path,
        "bags.dl",
        f'@id("bags")\nDeny(a) :- Action(a), is_tool(a, "update_bags"), n = tool_arg(a, "total"), {condition}.\n',
    )
    answer = witness(cli, policy, "Deny(a)")
    n = single_number(answer, "total")
    assert holds(n)
    (decision,) = replay(
        cli, policy, [events(answer["facts"], answer["numbers"], answer["bindings"]["a"])], tmp_path
    )
    assert denied_by(decision) == ["bags"]


def test_the_witness_text_says_which_arguments_are_numbers(cli, tmp_path: Path) -> None:
    policy = write(
        tmp_path,
        "bags.dl",
        'Deny(a) :- Action(a), is_tool(a, "update_bags"), n = tool_arg(a, "total_baggages"), n > 0.\n',
    )
    answer = witness(cli, policy, "Deny(a)")
    n = single_number(answer, "total_baggages")
    text = cli("witness", str(policy), "Deny(a)").stdout
    a = answer["bindings"]["a"]
    assert f'ToolArg("{a}", "total_baggages", "{n}").' in text
    assert "tool arguments that are JSON numbers" in text
    assert f'  tool_arg("{a}", "total_baggages") = {n}' in text


def test_a_string_argument_stays_a_string(cli, tmp_path: Path) -> None:
    policy = write(
        tmp_path,
        "urls.dl",
        '@id("evil")\nDeny(a) :- Action(a), is_tool(a, "fetch"), contains("evil.com", tool_arg(a, "url")).\n'
        '@id("admin")\nDeny(a) :- Action(a), is_tool(a, "send"), tool_arg(a, "to") = "admin@corp.example".\n',
    )
    found = []
    for tool, key in (("fetch", "url"), ("send", "to")):
        answer = witness(cli, policy, f'Deny(a), is_tool(a, "{tool}")')
        assert answer["numbers"] == []
        ((call, name, text),) = answer["facts"]["ToolArg"]
        assert (call, name) == (answer["bindings"]["a"], key)
        found.append(events(answer["facts"], answer["numbers"], call))
        assert found[-1][-1]["args"] == {key: text}
    assert "evil.com" in found[0][-1]["args"]["url"]
    assert found[1][-1]["args"] == {"to": "admin@corp.example"}
    assert [denied_by(d) for d in replay(cli, policy, found, tmp_path)] == [["evil"], ["admin"]]


MIXED = """
@id("big-transfer")
Deny(a) :- Action(a), is_tool(a, "transfer"), n = tool_arg(a, "amount"), n - 2 > 10.
@id("evil-url")
Deny(a) :- Action(a), is_tool(a, "fetch"), contains("evil.com", tool_arg(a, "url")).
@id("refund-cap")
Deny(a) :- Action(a), is_tool(a, "refund"), tool_arg(a, "amount") >= 1000, tool_arg(a, "reason") != "fraud".
"""


def test_a_policy_mixing_numbers_and_strings(cli, tmp_path: Path) -> None:
    policy = write(tmp_path, "mixed.dl", MIXED)
    transfer = witness(cli, policy, 'Deny(a), is_tool(a, "transfer")')
    assert single_number(transfer, "amount") - 2 > 10
    fetch = witness(cli, policy, 'Deny(a), is_tool(a, "fetch")')
    assert fetch["numbers"] == []
    refund = witness(cli, policy, 'Deny(a), is_tool(a, "refund"), r = tool_arg(a, "reason")')
    a = refund["bindings"]["a"]
    assert [[a, "amount", n] for _, _, n in refund["numbers"]] == refund["numbers"]
    ((_, _, amount),) = refund["numbers"]
    assert amount >= 1000
    assert isinstance(refund["bindings"]["r"], str) and refund["bindings"]["r"] != "fraud"
    sessions = [events(w["facts"], w["numbers"], w["bindings"]["a"]) for w in (transfer, fetch, refund)]
    assert [denied_by(d) for d in replay(cli, policy, sessions, tmp_path)] == [
        ["big-transfer"],
        ["evil-url"],
        ["refund-cap"],
    ]
    # and no tool of it looks always allowed to the bounded search of `--deep` (its rules are
    # ones an agent slips past: amounts and reasons nothing makes present, amounts of no type)
    run = cli("check", "--deep", "--format", "json", str(policy))
    assert run.status == 0, run.stderr
    slips = {"missing-argument", "untyped-argument-comparison"}
    found = json.loads(run.stdout)["diagnostics"]
    assert [d for d in found if d["code"].startswith("PC3") and d["name"] not in slips] == []


@pytest.mark.parametrize(
    "body",
    [
        'n = tool_arg(a, "k"), n > 0, m = tool_arg(a, "k"), m = "x"',
        'n = tool_arg(a, "k"), n = "y", m = tool_arg(a, "k"), m = "x"',
    ],
)
def test_an_argument_has_one_value(cli, tmp_path: Path, body: str) -> None:
    """A call's arguments are a JSON object: `tool_arg` cannot be both 1 and "x", nor "x"
    and "y"."""
    policy = write(tmp_path, "twice.dl", f"Deny(a) :- Action(a), {body}.\n")
    run = cli("witness", str(policy), "Deny(a)", "--format", "json")
    assert run.status == 0, run.stderr
    assert (run.json()["status"], run.json()["strength"]) == ("none", "bounded")


def test_an_uninterpreted_any_functor_gets_numbers_where_it_is_compared(cli) -> None:
    """FORGE's MLS listing declares its own `tool_arg` (modelled as an uninterpreted
    function): its `level` is compared with a clearance rank, a number."""
    policy = EXAMPLES / "forge" / "mls.dl"
    answer = witness(cli, policy, 'Deny(a), is_tool(a, "list_files")')
    ((a, key, level),) = answer["functors"]["tool_arg"]
    assert (a, key) == (answer["bindings"]["a"], "level")
    assert type(level) is int
    run = cli("check", "--deep", "--format", "json", str(policy))
    assert json.loads(run.stdout)["diagnostics"] == []


# ------------------------------------------------------------------------------ diff


def test_diff_finds_a_changed_numeric_threshold(cli, tmp_path: Path) -> None:
    old = write(tmp_path, "old.dl", '@id("bags")\nDeny(a) :- Action(a), n = tool_arg(a, "total"), n > 5.\n')
    new = write(tmp_path, "new.dl", '@id("bags")\nDeny(a) :- Action(a), n = tool_arg(a, "total"), n > 0.\n')
    for first, second, verdict, direction in (
        (old, new, "less-permissive", "only-old-allows"),
        (new, old, "more-permissive", "only-new-allows"),
    ):
        run = cli("diff", str(first), str(second), "--format", "json")
        assert run.status == 0, run.stderr
        result = run.json()
        assert result["verdict"] == verdict
        (difference,) = result["witnesses"]
        assert difference["direction"] == direction
        action = difference["action"]
        ((call, key, n),) = difference["numbers"]
        assert (call, key) == (action, "total") and 0 < n <= 5
        assert [action, "total", str(n)] in difference["facts"]["ToolArg"]
        session = events(difference["facts"], difference["numbers"], action)
        (by_old,) = replay(cli, old, [session], tmp_path)
        (by_new,) = replay(cli, new, [session], tmp_path)
        assert denied_by(by_old) == [] and denied_by(by_new) == ["bags"]
    text = cli("diff", str(old), str(new)).stdout
    assert "tool arguments that are JSON numbers" in text


def test_diff_of_string_uses_finds_no_numbers(cli, tmp_path: Path) -> None:
    old = write(tmp_path, "old.dl", 'Deny(a) :- Action(a), contains("evil.com", tool_arg(a, "url")).\n')
    new = write(tmp_path, "new.dl", 'Deny(a) :- Action(a), contains("evil", tool_arg(a, "url")).\n')
    result = cli("diff", str(old), str(new), "--format", "json").json()
    assert result["verdict"] == "less-permissive"
    (difference,) = result["witnesses"]
    assert difference["numbers"] == []
    ((_, _, url),) = difference["facts"]["ToolArg"]
    assert "evil" in url and "evil.com" not in url


# -------------------------------------------------------------------- property test


@settings(max_examples=30, deadline=None)
@given(
    op=st.sampled_from(sorted(COMPARISONS)),
    bound=st.integers(-50, 50),
    offset=st.integers(1, 3),
)
def test_every_numeric_witness_is_denied_by_a_monitor(op: str, bound: int, offset: int) -> None:
    """Oracle: the monitor, given the events the witness describes, denies the action, and
    the number satisfies the comparison in Python (an integer always does). (`+` and `*` on
    `tool_arg` are type errors: a text would be joined or repeated.)"""
    from policyc.analyzer.query import Loaded
    from policyc.analyzer.witness import find_witness
    from policyc.compiler.loader import load_data

    text = (
        HEAD
        + f'@id("r")\nDeny(a) :- Action(a), is_tool(a, "t"), n = tool_arg(a, "k"), n - {offset} {op} {bound}.\n'
    )
    program, found = load_data(text.encode(), "<property>")
    answer = find_witness(Loaded(program, tuple(found), "<property>"), "Deny(a)").to_json()
    assert answer["status"] == "found"
    a = answer["bindings"]["a"]
    ((call, key, n),) = answer["numbers"]
    assert (call, key) == (a, "k") and COMPARISONS[op](n - offset, bound)
    session = policyc.Monitor(policyc.load(text)).session("w")
    evs = events(answer["facts"], answer["numbers"], a)
    for event in evs[:-1]:
        session.record(event)
    decision = session.authorize(evs[-1])
    assert not decision.allowed and [r.rule for r in decision.reasons] == ["r"]


# ---------------------------------------------------------------------- conversions
#
# A number compared after a conversion (`to_number`, `to_string`) brings its neighbours to the
# values on the other side of the conversion: `to_number(s) > 2500` tries "2499", "2500" and
# "2501" for `s`, so that the comparison can be met and missed.

CONVERTED = {
    "threshold": ("Pay(a, s), n = to_number(s), n > 2500", lambda facts: int(facts["Pay"][0][1]) > 2500),
    "arithmetic": ("Pay(a, s), to_number(s) * 3 > 1000", lambda facts: int(facts["Pay"][0][1]) * 3 > 1000),
    "text of a number": ('Code(a, n), to_string(n) = "7"', lambda facts: facts["Code"][0][1] == 7),
    "below": ("Pay(a, s), n = to_number(s), n < -20", lambda facts: int(facts["Pay"][0][1]) < -20),
    "leading": ("Pay(a, s), leading_number(s) > 2500", lambda facts: int(facts["Pay"][0][1]) > 2500),
}


@pytest.mark.parametrize("case", sorted(CONVERTED))
def test_a_witness_through_a_conversion(cli, tmp_path: Path, case: str) -> None:
    body, holds = CONVERTED[case]
    policy = tmp_path / "converted.dl"
    policy.write_text(
        ".decl Pay(a: symbol, s: symbol)\n.decl Code(a: symbol, n: number)\n.input Pay, Code\n"
        f'@id("r")\nDeny(a) :- {body}.\n',
        encoding="utf-8",
    )
    answer = witness(cli, policy, "Deny(a)")  # replayed through the evaluator by the command
    assert holds(answer["facts"]), answer["facts"]
    decision = policyc.load(policy).evaluate(answer["facts"]).decide(answer["bindings"]["a"])
    assert not decision.allowed and [r.rule for r in decision.reasons] == ["r"]


def test_a_converted_tool_argument_is_a_string_a_monitor_denies(cli, tmp_path: Path) -> None:
    policy = write(
        tmp_path, "p.dl", '@id("big")\nDeny(a) :- Action(a), n = to_number(tool_arg(a, "amount")), n > 500.\n'
    )
    answer = witness(cli, policy, "Deny(a)")
    a = answer["bindings"]["a"]
    assert answer["numbers"] == []  # `to_number` takes the argument's text: a string
    ((call, key, text),) = answer["facts"]["ToolArg"]
    assert (call, key) == (a, "amount") and int(text) > 500
    (decision,) = replay(cli, policy, [events(answer["facts"], answer["numbers"], a)], tmp_path)
    assert denied_by(decision) == ["big"]


def test_diff_through_a_conversion(cli, tmp_path: Path) -> None:
    old = tmp_path / "old.dl"
    new = tmp_path / "new.dl"
    old.write_text('.input Pay\n@id("pay")\nDeny(a) :- Pay(a, s), n = to_number(s), n > 500.\n')
    new.write_text('.input Pay\n@id("pay")\nDeny(a) :- Pay(a, s), n = to_number(s), n >= 502.\n')
    result = cli("diff", str(old), str(new), "--format", "json").json()
    assert result["verdict"] == "more-permissive"
    (difference,) = result["witnesses"]
    assert difference["direction"] == "only-new-allows"
    ((action, text),) = difference["facts"]["Pay"]
    assert action == difference["action"] and text == "501"  # the one number between the thresholds
    assert not policyc.load(old).evaluate(difference["facts"]).decide(action).allowed
    assert policyc.load(new).evaluate(difference["facts"]).decide(action).allowed


def test_no_bounded_finding_that_only_missing_neighbours_make(cli, tmp_path: Path) -> None:
    policy = tmp_path / "p.dl"
    policy.write_text(
        ".input Pay\n"
        "Deny(a) :- Pay(a, s), to_number(s) > 400, to_number(s) < 500.\n"
        "Deny(a) :- Pay(a, s), to_number(s) > 1000.\n"
    )
    run = cli("check", "--deep", "--format", "json", str(policy))
    assert run.status == 0 and [d for d in run.json()["diagnostics"] if d["code"].startswith("PC3")] == []


def test_a_scenario_is_synthesized_for_a_rule_through_a_conversion() -> None:
    """Translation's decision points: each path of a translated rule gets a scenario."""
    from policyc.compiler.pipeline import compile_source
    from policyc.nl2policy.draft import Rule
    from policyc.nl2policy.scenarios import synthesize

    rule = '@id("big-payment")\nDeny(a) :- Pay(a, s), n = to_number(s), n > 500.\n'
    text = ".decl Pay(a: symbol, s: symbol)\n.input Pay\n" + rule
    compilation = compile_source(text, "policy.dl")
    assert compilation.ok
    rules = [Rule("big-payment", "Deny", "deny", ("R1",), rule, 3)]
    synthesis = synthesize(compilation, text, rules, "policy.dl", 3, 30.0, False)
    fires = [i for i, path in enumerate(synthesis.paths) if path.kind == "fires"]
    assert fires and all(synthesis.outcomes[i] == "scenario" for i in fires), synthesis.outcomes
    (scenario,) = [s for s in synthesis.scenarios if s.path.kind == "fires"]
    facts = scenario.record["facts"]
    assert int(facts["Pay"][0][1]) > 500
    assert not policyc.load(text).evaluate(facts).decide(scenario.action).allowed
