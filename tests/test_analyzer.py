"""The analyzer, through the installed command: `check --deep` on planted defects and on clean
policies, witnesses and diffs checked by evaluating what they return, conditions.

Planted defects are marked in the corpus (`tests/deep/planted/*.dl`) by a comment on the line
of each expected finding: `// expect: name[, name]`. Every finding must be expected and every
expectation found, at that line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import policyc

from .conftest import EXAMPLES

DEEP = Path(__file__).parent / "deep"
PLANTED = sorted((DEEP / "planted").glob("*.dl"))
CLEAN = sorted((DEEP / "clean").glob("*.dl")) + sorted(EXAMPLES.glob("*/*.dl"))
# the FORGE airline listing, as printed, has a rule that another rule covers (line 34 by 57)
KNOWN = {("forge/tau2_airline.dl", 34): ["redundant-rule"]}


def findings(cli, path: Path) -> list[tuple[int, str]]:
    """The deep findings (PC3xx) of a policy (the corpus's rules need no `@id` to plant them)."""
    run = cli("check", "--deep", "--format", "json", str(path))
    assert run.status == 0, run.stdout + run.stderr
    found = json.loads(run.stdout)["diagnostics"]
    return sorted((d["line"], d["name"]) for d in found if d["code"].startswith("PC3"))


def expected(path: Path) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        match = re.search(r"// expect: (.*)$", line)
        if match:
            found.extend((number, name.strip()) for name in match.group(1).split(","))
    return sorted(found)


@pytest.mark.parametrize("path", PLANTED, ids=lambda p: p.name)
def test_planted_defects_are_found_at_their_lines(cli, path: Path) -> None:
    assert expected(path), "a planted file marks what it plants"
    assert findings(cli, path) == expected(path)


@pytest.mark.parametrize("path", CLEAN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_clean_policies_have_no_deep_finding(cli, path: Path) -> None:
    known = sorted(
        (line, name)
        for (file, line), names in KNOWN.items()
        if file == f"{path.parent.name}/{path.name}"
        for name in names
    )
    assert findings(cli, path) == known


def test_deep_findings_state_their_strength(cli) -> None:
    run = cli("check", "--deep", "--bound", "3", "--format", "json", str(DEEP / "planted" / "shadowed.dl"))
    strengths = {(d["line"], d["strength"], d["bound"]) for d in json.loads(run.stdout)["diagnostics"]}
    assert strengths == {(13, "bounded", 3), (14, "proved", None)}
    text = cli("check", "--deep", str(DEEP / "planted" / "shadowed.dl")).stdout
    assert "strength: bounded (no counterexample with up to 2 fresh values per type)" in text
    assert "strength: proved (on every database)" in text


def test_findings_that_model_functors_say_so(cli) -> None:
    run = cli("check", "--deep", "--format", "json", str(DEEP / "planted" / "contradictions.dl"))
    found = [d for d in json.loads(run.stdout)["diagnostics"] if d["code"].startswith("PC3")]
    modelled = {d["line"]: d["uninterpreted"] for d in found}
    assert modelled[11] == ["risk"]  # proved with `risk` as an uninterpreted function
    assert all(names == [] for line, names in modelled.items() if line != 11)
    text = cli("check", "--deep", str(DEEP / "planted" / "contradictions.dl")).stdout
    assert "with `risk` modelled as an uninterpreted function of its declared types" in text
    sarif = cli("check", "--deep", "--format", "sarif", str(DEEP / "planted" / "contradictions.dl")).stdout
    properties = [r["properties"] for r in json.loads(sarif)["runs"][0]["results"] if r["ruleId"] != "PC211"]
    assert {"strength": "proved", "bound": None, "uninterpreted": ["risk"]} in properties


def test_tools_decided_by_several_rules_together(cli) -> None:
    """A tool's verdict is the same on every database: reported whichever rules name it, with
    the rules that make it so, proved when the rules split the calls on what they say of the
    call alone, bounded when only a search sees it."""

    def deep(name: str) -> dict[int, dict]:
        run = cli("check", "--deep", "--format", "json", str(DEEP / "planted" / name))
        return {d["line"]: d for d in json.loads(run.stdout)["diagnostics"]}

    split = deep("case_splits.dl")[7]
    assert (split["name"], split["strength"], split["bound"]) == ("always-deny", "proved", None)
    assert split["message"].startswith("every call of `pay_invoice` is denied: ")
    assert "the `Deny` rules at lines 7 and 8 together deny each one" in split["message"]
    assert [r["line"] for r in split["related"]] == [8]
    covered = deep("covered_calls.dl")
    assert "the `Deny` rules at lines 5 and 6 together deny each one" in covered[6]["message"]
    assert covered[6]["strength"] == "proved"
    assert "the rules at lines 5, 7, 8 and 9 together deny each one" in covered[7]["message"]
    arguments = deep("argument_splits.dl")[5]
    assert (arguments["name"], arguments["strength"], arguments["bound"]) == ("always-deny", "bounded", 2)
    assert "the `Deny` rules at lines 5, 6 and 7 together deny each one" in arguments["message"]
    allowed = deep("allowed_calls.dl")[5]
    assert (allowed["name"], allowed["strength"]) == ("always-allow", "proved")
    assert allowed["message"].startswith("no call of `search` is ever denied: ")
    assert "the `Allow` rules at lines 5 and 6 together allow each one" in allowed["message"]
    text = cli("check", "--deep", str(DEEP / "planted" / "argument_splits.dl")).stdout
    assert "= strength: bounded (no counterexample with up to 2 fresh values per type)" in text


def test_deep_skips_files_with_errors(cli, tmp_path: Path) -> None:
    policy = tmp_path / "broken.dl"
    policy.write_text('.input Send\n@id("x") @message("y") Deny(a) :- Send(a), Nope(a), 1 > 2.\n')
    run = cli("check", "--deep", "--format", "json", str(policy))
    assert run.status == 1
    assert [d["name"] for d in json.loads(run.stdout)["diagnostics"]] == ["undefined-relation"]


# ------------------------------------------------------------------------------ witness


def evaluate(policy_path: Path, answer: dict, query_rule: str) -> policyc.Result:
    """The answer's facts evaluated by a policy extended with the query as a rule, with
    functors answering from the answer's tables (and the events' functors from its facts)."""
    tables = answer.get("functors", {})
    functors = {}
    for name, rows in tables.items():
        if rows and rows[0][-1] is True:
            functors[name] = lambda *args, rows=rows: [*args, True] in rows
        else:
            functors[name] = lambda *args, rows=rows: next(
                (r[-1] for r in rows if r[:-1] == list(args)), None
            )
    source = policy_path.read_text("utf-8") + "\n" + query_rule + "\n"
    facts = answer["facts"]
    calls = {a: t for a, t in facts.get("ToolCall", [])}
    args = {(a, k): v for a, k, v in facts.get("ToolArg", [])}
    events = {
        "is_tool": lambda a, n: calls.get(a) == n,
        "tool_arg": lambda a, k: args.get((a, k)),
        "text_of": lambda e: next((t for x, t in facts.get("Text", []) if x == e), ""),
        "tool_name": lambda a: calls.get(a),
    }
    loaded = policyc.load(source, {**events, **functors})
    return loaded.evaluate(facts)


def test_witness_is_the_smallest_and_replays(cli) -> None:
    toxic = EXAMPLES / "forge" / "toxic_flow.dl"
    run = cli("witness", str(toxic), "Deny(a), not UntrustedInput(a)", "--format", "json")
    assert run.status == 0, run.stderr
    answer = json.loads(run.stdout)
    assert (answer["status"], answer["strength"], answer["bound"]) == ("found", "bounded", 3)
    a = answer["bindings"]["a"]
    # taint has to come from another event: 4 facts at least (send, sensitive, dependency, untrusted)
    assert sum(len(rows) for rows in answer["facts"].values()) == 4
    result = evaluate(toxic, answer, "Q(a) :- Deny(a), not UntrustedInput(a).")
    assert (a,) in result.relation("Q")


def test_witness_with_uninterpreted_functors(cli) -> None:
    policy = EXAMPLES / "forge" / "tau2_airline.dl"
    query = 'Deny(a), is_tool(a, "send_certificate")'
    answer = json.loads(cli("witness", str(policy), query, "--format", "json").stdout)
    assert answer["status"] == "found"
    assert ["" + answer["bindings"]["a"], "send_certificate", True] in answer["functors"]["is_tool"]
    result = evaluate(policy, answer, f"Q(a) :- {query}.")
    assert (answer["bindings"]["a"],) in result.relation("Q")


def test_no_witness_proved_or_bounded(cli) -> None:
    planted = DEEP / "planted" / "unreachable.dl"
    proved = json.loads(cli("witness", str(planted), "Flagged(a)", "--format", "json").stdout)
    assert (proved["status"], proved["strength"]) == ("none", "proved")
    assert "Flagged" in proved["reason"]
    toxic = EXAMPLES / "forge" / "toxic_flow.dl"
    bounded = json.loads(cli("witness", str(toxic), "Deny(a), not Tainted(a)", "--format", "json").stdout)
    assert (bounded["status"], bounded["strength"], bounded["bound"]) == ("none", "bounded", 3)
    text = cli("witness", str(toxic), "Deny(a), not Tainted(a)", "--bound", "2").stdout
    assert "no database with up to 2 fresh values per type" in text


def slow_to_ground(tmp_path: Path) -> Path:
    """A policy whose grounding takes long: a `sum` over chosen facts grounds every subset sum
    of the values the thresholds bring into the domain."""
    lines = [
        ".decl Amount(a: symbol, n: number)",
        ".input Amount",
        "Spent(t) :- t = sum n : { Amount(_, n) }.",
    ]
    for i in range(1, 21):
        lines += [
            f"Big{i}(a) :- Amount(a, n), n > {i * 97}.",
            f'@id("big-{i}") @message("{{a}} spends too much") Deny(a) :- Big{i}(a), Spent(t), t > {i * 1000}.',
        ]
    path = tmp_path / "slow.dl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_searches_stop_at_their_time_limit_even_while_grounding(cli, tmp_path: Path) -> None:
    policy = slow_to_ground(tmp_path)
    run = cli("witness", str(policy), "Deny(a)", "--timeout", "1")
    assert run.status == 1
    assert "policyc: error: the search did not finish in 1 s" in run.stderr
    assert "Traceback" not in run.stderr
    deep = cli("check", "--deep", "--bound", "3", "--deep-timeout", "1", "--format", "json", str(policy))
    assert deep.status == 0 and json.loads(deep.stdout)["diagnostics"] == []
    assert "bounded questions not answered within the time limit (--deep-timeout)" in deep.stderr


def test_witness_reports_bad_queries_with_positions(cli) -> None:
    toxic = str(EXAMPLES / "forge" / "toxic_flow.dl")
    run = cli("witness", toxic, "Deny(a), Taint(a)")
    assert run.status == 1
    assert "<query>:1:10: error[PC101]: relation `Taint` is not defined" in run.stderr
    assert "did you mean `Tainted`?" in run.stderr
    assert cli("witness", toxic, "Deny(a), ,").status == 1
    assert cli("witness", "missing.dl", "Deny(a)").status == 2


def test_witness_from_a_bundle(cli, tmp_path: Path) -> None:
    bundle = tmp_path / "toxic.bundle"
    assert cli("compile", str(EXAMPLES / "forge" / "toxic_flow.dl"), "-o", str(bundle)).status == 0
    answer = json.loads(cli("witness", str(bundle), "Deny(a)", "--format", "json").stdout)
    assert answer["status"] == "found"


# --------------------------------------------------------------------------------- diff


H3 = DEEP / "h3"


def test_diff_finds_the_over_restrictive_translation(cli) -> None:
    """FORGE H.3: the translation denies a cancellation the reference allows."""
    run = cli("diff", str(H3 / "reference.dl"), str(H3 / "translated.dl"), "--format", "json")
    assert run.status == 0, run.stderr
    result = json.loads(run.stdout)
    assert (result["verdict"], result["strength"]) == ("less-permissive", "bounded")
    (witness,) = result["witnesses"]
    assert witness["direction"] == "only-old-allows"
    assert ["" + witness["action"], "cancel_reservation"] in witness["facts"]["ToolCall"]
    action = witness["action"]
    reference = policyc.load(H3 / "reference.dl").evaluate(witness["facts"]).decide(action)
    translated = policyc.load(H3 / "translated.dl").evaluate(witness["facts"]).decide(action)
    assert reference.allowed and not translated.allowed
    assert translated.reasons[0].rule == "cancel-needs-reason"
    backwards = json.loads(
        cli("diff", str(H3 / "translated.dl"), str(H3 / "reference.dl"), "--format", "json").stdout
    )
    assert backwards["verdict"] == "more-permissive"


def test_diff_equivalent(cli, tmp_path: Path) -> None:
    same = cli("diff", str(H3 / "reference.dl"), str(H3 / "reference.dl"), "--format", "json").json()
    assert (same["verdict"], same["strength"], same["witnesses"]) == ("equivalent", "proved", [])
    # the same policy written differently: rules in another order, a rule split in two
    text = (H3 / "reference.dl").read_text("utf-8")
    rewritten = text.replace(
        "Eligible(r) :- BusinessCabin(r).\nEligible(r) :- BookedWithin24h(r).",
        "Fast(r) :- BookedWithin24h(r).\nEligible(r) :- Fast(r).\nEligible(r) :- BusinessCabin(r).",
    )
    assert rewritten != text
    other = tmp_path / "rewritten.dl"
    other.write_text(rewritten, "utf-8")
    result = cli("diff", str(H3 / "reference.dl"), str(other), "--format", "json").json()
    assert (result["verdict"], result["strength"]) == ("equivalent", "bounded")


def test_diff_incomparable_with_both_witnesses(cli) -> None:
    toxic = EXAMPLES / "forge" / "toxic_flow.dl"
    airline = EXAMPLES / "forge" / "tau2_airline.dl"
    result = cli("diff", str(toxic), str(airline), "--format", "json").json()
    assert (result["verdict"], result["strength"]) == ("incomparable", "proved")
    assert {w["direction"] for w in result["witnesses"]} == {"only-new-allows", "only-old-allows"}


# --------------------------------------------------------------------------- conditions


def test_conditions_unfold_to_inputs(cli) -> None:
    run = cli("conditions", str(H3 / "reference.dl"), "Deny(a)", "--format", "json")
    assert run.status == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["disjuncts"] == [
        ['ToolCall(a, "cancel_reservation")', 'ToolArg(a, "reservation_id", r_1)', "not Eligible(r_1)"],
        ['ToolCall(a, "cancel_reservation")', 'ToolArg(a, "reservation_id", _)', "not UserConfirmed()"],
    ]
    assert result["negated"]["Eligible(x1)"] == [
        ["BusinessCabin(x1)"],
        ["BookedWithin24h(x1)"],
        ["AirlineCancelled(x1)"],
        ["HasInsurance(x1)", "CoveredReason()"],
    ]


def test_conditions_mark_recursion_and_drop_contradictions(cli) -> None:
    toxic = str(EXAMPLES / "forge" / "toxic_flow.dl")
    result = cli("conditions", toxic, "Deny(a)", "--bound", "1", "--format", "json").json()
    assert result["recursive"] == ["HasSecret", "Tainted"]
    assert ["ExternalSend(a)", "UntrustedInput(a)", "SensitiveInput(a)"] in result["disjuncts"]
    assert any("Tainted(" in lit and lit.endswith("(recursive)") for d in result["disjuncts"] for lit in d)
    planted = str(DEEP / "planted" / "unreachable.dl")
    never = cli("conditions", planted, "Flagged(a)")
    assert never.status == 0 and "never holds" in never.stdout


def test_conditions_of_allow_in_a_policy_that_allows_by_default(cli) -> None:
    approval = str(EXAMPLES / "forge" / "approval.dl")
    result = cli("conditions", approval, "Allow(a)", "--format", "json").json()
    assert result["disjuncts"] == []
    assert "allows every action no `Deny` fact holds for" in result["note"]
    denied = cli("conditions", approval, "Deny(a)", "--format", "json").json()
    assert denied["disjuncts"] == [["ProtectedAPICall(a)", "not HasApproval(a)"]] and denied["note"] == ""


def test_the_tool_of_an_always_deny_or_always_allow_finding_is_a_value(cli, tmp_path: Path) -> None:
    policy = tmp_path / "p.dl"
    policy.write_text(
        '.import events\nDeny(a) :- ToolCall(a, "git.rm"), Label(a, "x").\n'
        'Deny(a) :- ToolCall(a, "git.rm"), !Label(a, "x").\n'
        'Deny(a) :- ToolCall(a, "send"), ToolCall(a, "zip").\n',
        "utf-8",
    )
    found = json.loads(cli("check", "--deep", "--format", "json", str(policy)).stdout)["diagnostics"]
    tools = sorted((d["name"], d["tool"]) for d in found if d["name"] in ("always-deny", "always-allow"))
    assert tools == [("always-allow", "send"), ("always-allow", "zip"), ("always-deny", "git.rm")]
    assert all(d["tool"] is None for d in found if d["name"] not in ("always-deny", "always-allow"))
    sarif = json.loads(cli("check", "--deep", "--format", "sarif", str(policy)).stdout)
    results = sarif["runs"][0]["results"]
    assert sorted(r["properties"]["tool"] for r in results if "tool" in r.get("properties", {})) == [
        "git.rm",
        "send",
        "zip",
    ]
