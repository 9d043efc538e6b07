"""Explanations: derivation trees (why) and failing literals (why not), from Python and the CLI."""

from __future__ import annotations

import json

import policyc

from .conftest import EXAMPLES

TOXIC = EXAMPLES / "forge" / "toxic_flow.dl"
FACTS = {
    "UntrustedInput": [["v3"]],
    "SensitiveInput": [["v5"]],
    # a cycle v3 -> v6 -> v3: a derivation must not lean on the fact it explains
    "DependsOn": [["v4", "v3"], ["v5", "v4"], ["v6", "v3"], ["v6", "v5"], ["v3", "v6"]],
    "ExternalSend": [["v6"], ["v7"]],
}


def leaves(derivation) -> list[str]:
    if not derivation.children:
        return [derivation.fact]
    return [leaf for child in derivation.children for leaf in leaves(child)]


def test_why_builds_a_well_founded_tree() -> None:
    result = policyc.load(TOXIC).evaluate(FACTS)
    tree = result.why("Deny", ("v6",))
    assert tree.rule == "toxic-flow" and tree.bindings == {"a": "v6"}
    assert [c.fact for c in tree.children] == ['ExternalSend("v6")', 'Tainted("v6")', 'HasSecret("v6")']
    assert set(leaves(tree)) <= {
        'ExternalSend("v6")',
        'UntrustedInput("v3")',
        'SensitiveInput("v5")',
        'DependsOn("v6", "v3")',
        'DependsOn("v6", "v5")',
        'DependsOn("v5", "v4")',
        'DependsOn("v4", "v3")',
    }
    tainted = tree.children[1]
    assert tainted.children[-1].fact == 'Tainted("v3")'  # not Tainted("v6") again, through the cycle
    assert result.why("Deny", ("v7",)) is None


def test_why_not_names_the_failing_literal() -> None:
    result = policyc.load(TOXIC).evaluate(FACTS)
    answer = result.why_not("Deny", ("v7",))
    assert not answer.holds
    (blocked,) = answer.rules
    assert blocked.rule == "toxic-flow" and blocked.literal == "Tainted(a)" and blocked.reached == 1
    assert blocked.samples == ({"a": "v7"},)
    assert result.why_not("Deny", ("v6",)).holds
    assert "not among the input facts" in result.why_not("ExternalSend", ("v9",)).note


def test_decision_explanations() -> None:
    policy = policyc.load(
        """
        .default deny
        .decl Call(a: symbol, tool: symbol)
        .decl Approved(a: symbol)
        .input Call, Approved
        @id("reads") Allow(a) :- Call(a, "read_file").
        @id("approved-sends") Allow(a) :- Call(a, "send_email"), Approved(a).
        @id("no-delete") Deny(a) :- Call(a, "delete_file").
        """
    )
    result = policy.evaluate({"Call": [["r", "read_file"], ["s", "send_email"], ["d", "delete_file"]]})
    allowed = result.decide("r").explain()
    assert allowed.allowed and allowed.derivations[0].rule == "reads"
    denied = result.decide("d").explain()
    assert not denied.allowed and denied.derivations[0].rule == "no-delete"
    default = result.decide("s").explain()
    assert "denied by the default" in default.summary
    blocked = {b.rule: b.literal for b in default.why_not.rules}
    assert blocked == {"reads": 'Call(a, "read_file")', "approved-sends": "Approved(a)"}
    assert "Approved(a)" in default.text()
    assert json.loads(json.dumps(default.to_json()))["why_not"]["fact"] == 'Allow("s")'


def test_explain_command(tmp_path, cli) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(FACTS), "utf-8")
    run = cli("explain", str(TOXIC), 'Deny("v6")', "--facts", str(facts))
    assert run.status == 0
    assert run.stdout.startswith('Deny("v6")  by rule toxic-flow [toxic_flow.dl:23]\n')
    assert 'UntrustedInput("v3")  (input fact)' in run.stdout
    run = cli("explain", str(TOXIC), 'Deny("v7")', "--facts", str(facts), "--format", "json")
    out = json.loads(run.stdout)
    assert out["holds"] is False and out["why_not"]["rules"][0]["failing_literal"] == "Tainted(a)"
    run = cli("explain", str(TOXIC), 'Deny("v6")', "--why-not", "--facts", str(facts))
    assert run.stdout.strip() == 'Deny("v6") holds.'
    bad = cli("explain", str(TOXIC), "Deny(x)", "--facts", str(facts))
    assert bad.status == 2 and "non-constant" in bad.stderr


def test_eval_command(tmp_path, cli) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(FACTS), "utf-8")
    run = cli("eval", str(TOXIC), "--facts", str(facts), "--format", "json")
    assert run.status == 0
    relations = json.loads(run.stdout)["relations"]
    assert set(relations) == {"Allow", "Deny", "Tainted", "HasSecret"}
    assert relations["Deny"] == [["v6"]] and relations["Tainted"] == [["v3"], ["v4"], ["v5"], ["v6"]]
    run = cli("eval", str(TOXIC), "--facts", str(facts), "--query", "Deny", "--query", "UntrustedInput")
    assert run.stdout.splitlines() == [
        "Deny: 1 fact",
        '  Deny("v6")',
        "UntrustedInput: 1 fact",
        '  UntrustedInput("v3")',
    ]
    assert cli("eval", str(TOXIC), "--facts", str(facts), "--query", "Nope").status == 2


def test_eval_facts_folder_and_errors(tmp_path, cli) -> None:
    folder = tmp_path / "facts"
    folder.mkdir()
    (folder / "UntrustedInput.facts").write_text("v3\n", "utf-8")
    (folder / "SensitiveInput.facts").write_text("v3\n", "utf-8")
    (folder / "ExternalSend.facts").write_text("v3\n", "utf-8")
    (folder / "DependsOn.facts").write_text("v1\tv2\n\n", "utf-8")
    run = cli("eval", str(TOXIC), "--facts", str(folder), "--query", "Deny", "--format", "json")
    assert json.loads(run.stdout)["relations"]["Deny"] == [["v3"]]
    (folder / "DependsOn.facts").write_text("v1 v2\n", "utf-8")
    run = cli("eval", str(TOXIC), "--facts", str(folder))
    assert run.status == 1 and "DependsOn.facts:1: expected 2 tab-separated values, got 1" in run.stderr
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"DependsOn": [["a", "b"]', "utf-8")
    run = cli("eval", str(TOXIC), "--facts", str(bad_json))
    assert run.status == 1 and "not valid JSON" in run.stderr and "Traceback" not in run.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"DependsOn": [["a", 3]]}', "utf-8")
    run = cli("eval", str(TOXIC), "--facts", str(wrong))
    assert run.status == 1 and "relation `DependsOn`, row 1, value 2: expected a string, got 3" in run.stderr
    assert cli("eval", str(TOXIC), "--facts", str(tmp_path / "missing.json")).status == 2


def test_eval_with_functor_module(tmp_path, cli) -> None:
    policy = tmp_path / "p.dl"
    policy.write_text(
        ".functor risky(tool: symbol): bool\n.decl Call(a: symbol, t: symbol)\n.input Call\n"
        "Deny(a) :- Call(a, t), risky(t).\n",
        "utf-8",
    )
    facts = tmp_path / "facts.json"
    facts.write_text('{"Call": [["a1", "rm"], ["a2", "ls"]]}', "utf-8")
    run = cli("eval", str(policy), "--facts", str(facts))
    assert run.status == 1 and "needs an implementation of `risky`" in run.stderr
    module = tmp_path / "impl.py"
    module.write_text(
        "import policyc\n\n@policyc.functor('risky')\ndef risky(t):\n    return t == 'rm'\n", "utf-8"
    )
    run = cli("eval", str(policy), "--facts", str(facts), "--functors", str(module), "--format", "json")
    assert run.status == 0 and json.loads(run.stdout)["relations"]["Deny"] == [["a1"]]
    module.write_text(
        "import policyc\n\n@policyc.functor('risky')\ndef risky(t):\n    raise ValueError('nope')\n"
    )
    run = cli("eval", str(policy), "--facts", str(facts), "--functors", str(module))
    assert run.status == 1 and "functor `risky` raised ValueError: nope" in run.stderr
