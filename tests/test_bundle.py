"""Bundles: compiled with `policyc compile`, loaded from Python and the CLI, refused when
truncated, tampered with, foreign, newer, or not signed with the expected key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import policyc
from policyc.runtime.errors import PolicyError

from .conftest import EXAMPLES, ROOT

TOXIC = EXAMPLES / "forge" / "toxic_flow.dl"
FACTS = {
    "UntrustedInput": [["v3"]],
    "SensitiveInput": [["v5"]],
    "DependsOn": [["v4", "v3"], ["v5", "v4"], ["v6", "v3"], ["v6", "v5"]],
    "ExternalSend": [["v6"], ["v7"]],
}


@pytest.fixture
def bundle(tmp_path, cli) -> Path:
    out = tmp_path / "toxic.bundle"
    run = cli("compile", str(TOXIC), "-o", str(out))
    assert run.status == 0, run.stderr
    assert "wrote" in run.stdout and out.exists()
    return out


def test_bundle_round_trip(bundle: Path) -> None:
    data = json.loads(bundle.read_text("utf-8"))
    manifest = data["manifest"]
    assert data["format"] == "policyc-bundle" and data["format_version"] == 2
    assert manifest["entrypoints"] == ["Allow", "Deny"]
    assert {i["name"] for i in manifest["inputs"]} == {
        "UntrustedInput",
        "SensitiveInput",
        "DependsOn",
        "ExternalSend",
    }
    assert [s["path"] for s in manifest["sources"]] == ["<stdlib>/builtins.dl", "toxic_flow.dl"]
    assert len(manifest["plan_sha256"]) == 64
    from_bundle = policyc.load(bundle).evaluate(FACTS)
    from_source = policyc.load(TOXIC).evaluate(FACTS)
    assert from_bundle.relations == from_source.relations
    assert from_bundle.decide("v6").reasons == from_source.decide("v6").reasons


def test_compile_refuses_errors(tmp_path, cli) -> None:
    bad = tmp_path / "bad.dl"
    bad.write_text(".input S\nDeny(a) :- S(a), T(a).\n", "utf-8")
    run = cli("compile", str(bad), "-o", str(tmp_path / "out.bundle"))
    assert run.status == 1
    assert "undefined-relation" in run.stderr and "not compiled" in run.stderr
    assert not (tmp_path / "out.bundle").exists()


def test_compile_counts_one_rule_in_the_singular(tmp_path, cli) -> None:
    one = tmp_path / "one.dl"
    one.write_text(".input S\nDeny(a) :- S(a).\n", "utf-8")
    run = cli("compile", str(one), "-o", str(tmp_path / "one.bundle"))
    assert run.status == 0 and ": 1 rule, " in run.stdout, run.stdout


def _rewrite(bundle: Path, change) -> Path:
    data = json.loads(bundle.read_text("utf-8"))
    change(data)
    bundle.write_text(json.dumps(data), "utf-8")
    return bundle


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b.write_bytes(b.read_bytes()[: len(b.read_bytes()) // 2]), "truncated or is not JSON"),
        (lambda b: b.write_text('{"hello": "world"}', "utf-8"), "not a policyc bundle"),
        (lambda b: _rewrite(b, lambda d: d.update(format_version=3)), "bundle format 3 is newer"),
        (
            lambda b: _rewrite(b, lambda d: d["plan"]["strata"].reverse()),
            "integrity check failed: the plan does not match its hash",
        ),
        (
            lambda b: _rewrite(
                b, lambda d: d["sources"].update({k: v + "\n" for k, v in d["sources"].items()})
            ),
            "does not match its hash",
        ),
        (lambda b: _rewrite(b, lambda d: d.pop("plan")), "plan: missing"),
    ],
    ids=["truncated", "foreign", "newer", "tampered-plan", "tampered-source", "corrupt"],
)
def test_bad_bundles_are_refused(bundle: Path, damage, reason: str, cli) -> None:
    damage(bundle)
    with pytest.raises(PolicyError, match=reason):
        policyc.load(bundle)
    facts = bundle.parent / "facts.json"
    facts.write_text(json.dumps(FACTS), "utf-8")
    run = cli("eval", str(bundle), "--facts", str(facts))
    assert run.status == 1
    lines = [line for line in run.stderr.splitlines() if line]
    assert len(lines) == 1 and reason.split(":")[0] in lines[0] and "Traceback" not in run.stderr


def _compiled(tmp_path: Path, cli, text: str, format_version: int) -> Path:
    source = tmp_path / "policy.dl"
    source.write_text(text, "utf-8")
    out = tmp_path / "policy.bundle"
    run = cli("compile", str(source), "-o", str(out))
    assert run.status == 0, run.stderr
    return _rewrite(out, lambda d: d.update(format_version=format_version))


def test_a_format_1_bundle_that_calls_contains_is_refused(tmp_path, cli) -> None:
    """Format 1 bundles were compiled when `contains` took the text first: run with the
    part first they would mean the opposite, so they are refused, saying how to fix them."""
    old = _compiled(tmp_path, cli, '.input Fetch\nDeny(a) :- Fetch(a, u), contains("evil", u).\n', 1)
    with pytest.raises(
        PolicyError, match=r"format 1 was compiled when `contains` took `\(text, part\)`"
    ) as refused:
        policyc.load(old)
    assert "compile it again" in str(refused.value)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"Fetch": [["a1", "https://evil.example"]]}), "utf-8")
    run = cli("eval", str(old), "--facts", str(facts))
    assert run.status == 1 and "`contains`" in run.stderr and "Traceback" not in run.stderr
    current = _rewrite(old, lambda d: d.update(format_version=2))  # compiled now: the part first
    assert policyc.load(current).evaluate(json.loads(facts.read_text("utf-8"))).relation("Deny") == {("a1",)}


def test_a_format_1_bundle_without_contains_still_loads(tmp_path, cli) -> None:
    old = _compiled(tmp_path, cli, '.input Fetch\nDeny(a) :- Fetch(a, u), startswith(u, "http:").\n', 1)
    result = policyc.load(old).evaluate({"Fetch": [["a1", "http://x"], ["a2", "https://x"]]})
    assert result.relation("Deny") == {("a1",)}


def test_plan_tampering_that_keeps_the_hash_is_still_checked(bundle: Path) -> None:
    """A hand-made bundle whose plan is malformed (and whose hash matches it) is refused."""
    from policyc.runtime.bundle import canonical, sha256

    def break_plan(data: dict) -> None:
        data["plan"]["strata"][0]["rules"] = [{"rule": 999}]
        data["manifest"]["plan_sha256"] = sha256(canonical(data["plan"]))

    _rewrite(bundle, break_plan)
    with pytest.raises(PolicyError, match=r"\.bundle:1: plan\.strata\[0\]\.rules\[0\]\.slots: missing"):
        policyc.load(bundle)


def test_code_in_a_plan_constant_stays_a_constant(bundle: Path) -> None:
    """Constants from a bundle are embedded with repr: a string that looks like code is data."""
    from policyc.runtime.bundle import canonical, sha256

    payload = '"); import os; os.system("touch /tmp/pwned"); ("'

    def inject(data: dict) -> None:
        for stratum in data["plan"]["strata"]:
            for rule in stratum["rules"]:
                if rule["steps"] and rule["steps"][0][0] == "scan":
                    rule["steps"].insert(0, ["filter", "!=", ["const", payload], ["const", "x"]])
        data["manifest"]["plan_sha256"] = sha256(canonical(data["plan"]))

    _rewrite(bundle, inject)
    result = policyc.load(bundle).evaluate(FACTS)
    assert result.relation("Deny") == {("v6",)}
    assert not Path("/tmp/pwned").exists()


def test_signed_bundles(tmp_path, cli) -> None:
    assert cli("keygen", str(tmp_path / "team")).status == 0
    assert cli("keygen", str(tmp_path / "other")).status == 0
    assert (tmp_path / "team.key").stat().st_mode & 0o777 == 0o600
    signed = tmp_path / "signed.bundle"
    run = cli("compile", str(TOXIC), "-o", str(signed), "--sign-key", str(tmp_path / "team.key"))
    assert run.status == 0 and "signed" in run.stdout
    assert policyc.load(signed, verify_key=tmp_path / "team.pub").evaluate(FACTS).relation("Deny") == {
        ("v6",)
    }
    with pytest.raises(PolicyError, match="signature verification failed"):
        policyc.load(signed, verify_key=tmp_path / "other.pub")
    unsigned = tmp_path / "unsigned.bundle"
    assert cli("compile", str(TOXIC), "-o", str(unsigned)).status == 0
    with pytest.raises(PolicyError, match="not signed"):
        policyc.load(unsigned, verify_key=tmp_path / "team.pub")
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(FACTS), "utf-8")
    run = cli("eval", str(signed), "--facts", str(facts), "--verify-key", str(tmp_path / "other.pub"))
    assert run.status == 1 and "signature verification failed" in run.stderr
    # changing the manifest breaks the signature even when the plan is untouched
    _rewrite(signed, lambda d: d["manifest"].update(default="deny"))
    with pytest.raises(PolicyError, match="signature verification failed"):
        policyc.load(signed, verify_key=tmp_path / "team.pub")


def test_a_bundle_is_the_same_whatever_the_hash_seed_and_the_path(tmp_path, cli) -> None:
    """Compiling twice gives the same bundle: neither string hashing, which Python randomizes
    per process, nor how the policy's path is written may decide the numbering of relations."""
    policy = EXAMPLES / "copilot" / "copilot.dl"
    outputs = []
    for seed, path in (("1", str(policy)), ("2", str(policy)), ("3", str(policy.relative_to(ROOT)))):
        out = tmp_path / f"copilot-{seed}.bundle"
        run = cli("compile", path, "-o", str(out), env={"PYTHONHASHSEED": seed})
        assert run.status == 0, run.stderr
        outputs.append(json.loads(out.read_bytes())["plan"])
    assert outputs[0] == outputs[1] == outputs[2]


def test_a_verification_key_with_source_text_is_refused(tmp_path, cli) -> None:
    """Source text carries no signature: a key given with it is refused, never ignored."""
    assert cli("keygen", str(tmp_path / "team")).status == 0
    with pytest.raises(PolicyError, match="carries no signature"):
        policyc.load(".input S\nDeny(a) :- S(a).", verify_key=tmp_path / "team.pub")
    with pytest.raises(PolicyError, match="carries no signature"):
        policyc.load(source=".input S\nDeny(a) :- S(a).", verify_key=tmp_path / "team.pub")


def test_paths_are_told_from_text_without_guessing(tmp_path, monkeypatch) -> None:
    """`./policy.dl` and `../x.bundle` are paths (a missing one cannot be read, it is not
    compiled as text); a `Path` is always a path; text is explicit with `source=`."""
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    (tmp_path / "sub" / "policy.dl").write_text(".input S\nDeny(a) :- S(a).\n", "utf-8")
    assert policyc.load("./policy.dl").evaluate({"S": [["x"]]}).relation("Deny") == {("x",)}
    for missing in ("./nope.dl", "../x.bundle", "facts.json", "sub dir/p.dl"):
        with pytest.raises(PolicyError, match="cannot read"):
            policyc.load(missing)
    # an existing file is a path, whatever its name
    (tmp_path / "sub" / "rules").write_text(".input S\nDeny(a) :- S(a).\n", "utf-8")
    assert policyc.load("rules").evaluate({"S": [["y"]]}).relation("Deny") == {("y",)}
    # a Path never is text, even when it reads like a policy
    with pytest.raises(PolicyError, match="cannot read"):
        policyc.load(Path("Deny(a) :- S(a)."))
    # text, given as such: the same text is never looked up as a file
    text = ".input S\nDeny(a) :- S(a)."
    assert policyc.load(source=text).evaluate({"S": [["z"]]}).relation("Deny") == {("z",)}
    assert policyc.load_source(text).evaluate({"S": [["z"]]}).relation("Deny") == {("z",)}
    (tmp_path / "sub" / "policy.dl").write_text(".input T\nDeny(a) :- T(a).\n", "utf-8")
    for explicit in (lambda: policyc.load(source="policy.dl"), lambda: policyc.load_source("policy.dl")):
        with pytest.raises(PolicyError, match="<source>:1:"):
            explicit()  # compiled as text (and so wrong), not read from the file of that name
    with pytest.raises(TypeError):
        policyc.load("policy.dl", source=text)
    # text given positionally, as the docs show, still works
    assert policyc.load(".input S\nDeny(a) :- S(a).").evaluate({"S": [["w"]]}).relation("Deny") == {("w",)}
    assert policyc.load("Deny(1).").evaluate({}).relation("Deny") == {(1,)}


def test_keygen_never_overwrites_a_key(tmp_path, cli) -> None:
    """A second keygen to the same prefix is refused and leaves the key pair as it was (every
    bundle signed with it still verifies); `--force` replaces it with a new owner-only key."""
    prefix = str(tmp_path / "team")
    assert cli("keygen", prefix).status == 0
    private, public = (tmp_path / "team.key").read_bytes(), (tmp_path / "team.pub").read_bytes()
    run = cli("keygen", prefix)
    assert run.status == 1 and "exists" in run.stderr and "--force" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert (tmp_path / "team.key").read_bytes() == private and (tmp_path / "team.pub").read_bytes() == public
    (tmp_path / "team.key").chmod(0o644)
    run = cli("keygen", "--force", prefix)
    assert run.status == 0, run.stderr
    assert (tmp_path / "team.key").read_bytes() != private and (tmp_path / "team.pub").read_bytes() != public
    assert (tmp_path / "team.key").stat().st_mode & 0o777 == 0o600
    # only the public key there: still refused, and nothing is written
    (tmp_path / "solo.pub").write_text("mine", "utf-8")
    run = cli("keygen", str(tmp_path / "solo"))
    assert run.status == 1 and "solo.pub" in run.stderr
    assert not (tmp_path / "solo.key").exists() and (tmp_path / "solo.pub").read_text("utf-8") == "mine"


def test_keygen_does_not_follow_symlinks(tmp_path, cli) -> None:
    """A symbolic link at PREFIX.key is not written through (the private key would land in the
    target, with its loose permissions); with --force the link itself is replaced."""
    target = tmp_path / "shared.txt"
    target.write_text("world readable\n", "utf-8")
    target.chmod(0o644)
    (tmp_path / "team.key").symlink_to(target)
    (tmp_path / "dangling.key").symlink_to(tmp_path / "nowhere")
    for prefix in ("team", "dangling"):
        run = cli("keygen", str(tmp_path / prefix))
        assert run.status == 1 and "exists" in run.stderr, run.stderr
    assert target.read_text("utf-8") == "world readable\n" and not (tmp_path / "nowhere").exists()
    run = cli("keygen", "--force", str(tmp_path / "team"))
    assert run.status == 0, run.stderr
    key = tmp_path / "team.key"
    assert not key.is_symlink() and key.stat().st_mode & 0o777 == 0o600
    assert b"PRIVATE KEY" in key.read_bytes()
    assert target.read_text("utf-8") == "world readable\n" and target.stat().st_mode & 0o777 == 0o644


def _without_deny_rule(data: dict) -> None:
    """Drop the Deny rule from the plan and recompute its hash: the integrity check passes,
    the sources still say `Deny(a) :- ...`, but the runtime never denies."""
    from policyc.runtime.bundle import canonical, sha256

    deny = {i for i, rule in enumerate(data["plan"]["rules"]) if rule["head"] == "Deny"}
    for stratum in data["plan"]["strata"]:
        for part in ("rules", "delta_rules", "insert_rules"):
            stratum[part] = [r for r in stratum[part] if r["rule"] not in deny]
    data["manifest"]["plan_sha256"] = sha256(canonical(data["plan"]))


def test_analysis_refuses_a_bundle_whose_plan_is_not_its_sources(bundle: Path, tmp_path, cli) -> None:
    """The analyses read a bundle's sources, the runtime runs its plan: an unsigned bundle
    whose plan was changed (and its hash recomputed) must not be analysed as if its sources
    said what runs."""
    pristine = tmp_path / "pristine.bundle"
    pristine.write_bytes(bundle.read_bytes())
    _rewrite(bundle, _without_deny_rule)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(FACTS), "utf-8")
    ran = cli("eval", str(bundle), "--facts", str(facts), "--query", "Deny", "--format", "json")
    assert ran.status == 0 and ran.json()["relations"]["Deny"] == []  # what the runtime does
    for command in (
        ("witness", str(bundle), "Deny(a)"),
        ("conditions", str(bundle), "Deny(a)"),
        ("diff", str(pristine), str(bundle)),
        ("diff", str(bundle), str(TOXIC)),
        ("check", "--deep", str(bundle)),
    ):
        run = cli(*command)
        assert run.status in (1, 2), (command, run.stdout, run.stderr)
        assert "plan" in run.stderr and "sources" in run.stderr, (command, run.stderr)
        assert "Traceback" not in run.stderr and "internal error" not in run.stderr
        assert run.stdout == "", (command, run.stdout)
    # an untouched bundle is still analysed
    run = cli("witness", str(pristine), "Deny(a)")
    assert run.status == 0, run.stderr


def test_analysis_writes_no_source_outside_its_folder(bundle: Path, tmp_path, cli) -> None:
    """A bundle's source names are the attacker's to choose: `../x` or an absolute path is
    refused before anything is written."""
    from policyc.runtime.bundle import sha256

    for name in (f"../../{tmp_path.name}/escaped.dl", str(tmp_path / "absolute.dl")):

        def add(data: dict, name: str = name) -> None:
            data["sources"][name] = "// written\n"
            data["sources"]["toxic_flow.dl"] += f'.include "{name}"\n'
            data["manifest"]["sources"] = [
                {"path": path, "sha256": sha256(text.encode())}
                for path, text in sorted(data["sources"].items())
            ]

        copy = tmp_path / "evil.bundle"
        copy.write_bytes(bundle.read_bytes())
        _rewrite(copy, add)
        run = cli("witness", str(copy), "Deny(a)")
        assert run.status == 1 and "outside its own folder" in run.stderr, run.stderr
    assert not (tmp_path / "escaped.dl").exists() and not (tmp_path / "absolute.dl").exists()
