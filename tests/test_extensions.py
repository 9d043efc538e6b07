"""The runtime's extension point: an extension adds start facts, facts after each event, an
intervention on decisions, session queries, monitor options and a manifest section; a policy
that needs an extension which is not available is refused when it is loaded."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import policyc
from policyc.runtime import extensions as ext
from policyc.runtime.errors import PolicyError
from policyc.runtime.extensions import Attachment, Extension, SectionError
from policyc.runtime.verdict import Reason

POLICY = """
.import events
.decl Started(x: symbol)
.decl Noted(e: symbol)
.input Started, Noted
@id("not-started") @message("{a}: the session did not start")
Deny(a) :- Action(a), not Started("yes").
@id("noted") @message("{a} was noted")
Deny(a) :- Action(a), Noted(a).
"""

RISK = '.import risk\n.role target budget 0.01\n.field pay.to : target\nDeny(a) :- FieldFlagged(a, "to", "target").'

HELD = Reason("stamp:held", "held by the stamp", None, "high")


class Stamping(Attachment):
    def __init__(self, mark: str | None) -> None:
        self.mark = mark
        self.seen: list[tuple[str, int, int]] = []

    def start_facts(self, session):
        return {"Started": [["yes"]]}

    def recorded(self, session, event, position):
        self.seen.append((event["id"], position, len(session.order)))
        return {"Noted": [[event["id"]]]} if event.get("tool") == self.mark else None

    def intervene(self, session, decision):
        if decision.allowed and decision.action == "held":
            return replace(decision, allowed=False, reasons=(HELD,))
        return decision


class Stamp(Extension):
    name = "stamp"
    options = ("mark",)
    compile_options = ("stamp",)
    sections = ("stamp",)
    queries = ("stamps",)
    attribute = "stamper"

    def write(self, compilation, plan, stamp=None, **options):
        return {} if stamp is None else {"stamp": {"value": stamp}}

    def read(self, manifest, origin):
        section = manifest.get("stamp")
        if section is not None and not isinstance(section.get("value"), str):
            raise SectionError(f"{origin}: manifest stamp: expected a text value")
        return section

    def attributes(self, section):
        return {"stamp": None if section is None else section["value"]}

    def attach(self, monitor, section, mark=None, **options):
        return Stamping(mark)

    def query(self, name, session, attachment):
        return list(attachment.seen)


def call(e: str, tool: str) -> dict:
    return {"id": e, "kind": "tool_call", "tool": tool}


def test_an_extension_adds_start_facts_hooks_interventions_and_queries() -> None:
    policy = policyc.load(POLICY, extensions=[Stamp()])
    monitor = policyc.Monitor(policy, mark="rm")
    assert isinstance(monitor.stamper, Stamping) and monitor.stamper.mark == "rm"
    session = monitor.session("s")
    assert session.authorize(call("c1", "ls")).allowed  # the start fact holds
    denied = session.authorize(call("c2", "rm"))  # the hook noted it
    assert not denied.allowed and [r.rule for r in denied.reasons] == ["noted"]
    held = session.authorize(call("held", "ls"))  # allowed by the policy, denied by the extension
    assert not held.allowed and held.reasons == (HELD,)
    # the hook runs after the event joined the order, and is told the events before it
    assert session.stamps() == [("c1", 0, 1), ("c2", 1, 2), ("held", 2, 3)]


def test_without_the_extension_nothing_is_added() -> None:
    policy = policyc.load(POLICY, extensions=[])
    monitor = policyc.Monitor(policy)
    session = monitor.session("s")
    decision = session.authorize(call("held", "ls"))
    assert [r.rule for r in decision.reasons] == ["not-started"]
    with pytest.raises(AttributeError, match="stamps"):
        session.stamps()
    with pytest.raises(AttributeError, match="stamper"):
        monitor.stamper  # noqa: B018


@pytest.mark.parametrize("options", [{"colour": "red"}, {"mark": "rm", "colour": 1}])
def test_an_option_no_extension_claims_is_refused(options) -> None:
    policy = policyc.load(POLICY, extensions=[Stamp()])
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        policyc.Monitor(policy, **options)
    with pytest.raises(TypeError, match="unexpected keyword argument 'mark'"):
        policyc.Monitor(policyc.load(POLICY, extensions=[]), mark="rm")


def test_a_failing_hook_fails_closed() -> None:
    class Broken(Stamping):
        def recorded(self, session, event, position):
            raise RuntimeError("boom")

    class Failing(Stamp):
        def attach(self, monitor, section, mark=None, **options):
            return Broken(mark)

    session = policyc.Monitor(policyc.load(POLICY, extensions=[Failing()])).session("s")
    decision = session.authorize(call("c1", "ls"))
    assert not decision.allowed and decision.errored
    assert "extension `stamp` failed while recording event 'c1': RuntimeError: boom" in (
        decision.reasons[0].message
    )


def test_a_failing_intervention_denies() -> None:
    class Refusing(Stamping):
        def intervene(self, session, decision):
            raise ValueError("no verdict")

    class Failing(Stamp):
        def attach(self, monitor, section, mark=None, **options):
            return Refusing(mark)

    session = policyc.Monitor(policyc.load(POLICY, extensions=[Failing()])).session("s")
    decision = session.authorize(call("c1", "ls"))
    assert not decision.allowed and decision.errored
    assert session.authorize(call("c2", "ls")).errored  # every decision


def test_a_policy_needing_a_missing_extension_is_refused(tmp_path, monkeypatch) -> None:
    with pytest.raises(PolicyError, match=r"imports `risk`.*extension `risk` is not installed") as refused:
        policyc.load(RISK, extensions=[])
    assert refused.value.code == "missing-extension"
    # the installed extensions, without risk: as if it were not installed
    monkeypatch.setattr(ext, "installed", lambda: ((), ()))
    with pytest.raises(PolicyError, match="extension `risk` is not installed"):
        policyc.load(RISK)
    path = tmp_path / "p.dl"
    path.write_text(RISK, "utf-8")
    with pytest.raises(PolicyError, match="extension `risk` is not installed"):
        policyc.load(path)


def test_an_extension_that_fails_to_load_says_why(monkeypatch) -> None:
    monkeypatch.setattr(ext, "installed", lambda: ((), (ext.Broken("risk", "ImportError: gone"),)))
    with pytest.raises(PolicyError, match=r"extension `risk` failed to load \(ImportError: gone\)"):
        policyc.load(RISK)


def _bundle(tmp_path, text: str, **options) -> tuple[dict, object]:
    from policyc.compiler.pipeline import compile_source
    from policyc.runtime.bundle import build_bundle
    from policyc.runtime.planned import plan_of

    compilation = compile_source(text, str(tmp_path / "p.dl"))
    data = build_bundle(compilation, plan_of(compilation), **options)
    return json.loads(data), tmp_path / "p.bundle"


def test_an_extension_writes_and_reads_its_manifest_section(tmp_path) -> None:
    bundle, path = _bundle(tmp_path, POLICY, extensions=[Stamp()], stamp="blue")
    assert bundle["manifest"]["stamp"] == {"value": "blue"}
    path.write_text(json.dumps(bundle), "utf-8")
    assert policyc.load(path, extensions=[Stamp()]).stamp == "blue"
    # a section no available extension reads: refused, not run without it
    with pytest.raises(PolicyError, match="section `stamp` that no available extension reads") as refused:
        policyc.load(path)
    assert refused.value.code == "missing-extension"
    bundle["manifest"]["stamp"] = {"value": 7}
    path.write_text(json.dumps(bundle), "utf-8")
    with pytest.raises(PolicyError, match="manifest stamp: expected a text value") as invalid:
        policyc.load(path, extensions=[Stamp()])
    assert invalid.value.code == "invalid-section"


def test_a_bundle_needing_a_missing_extension_is_refused(tmp_path) -> None:
    bundle, path = _bundle(tmp_path, RISK)
    assert bundle["manifest"]["thresholds"] is None  # the risk extension's section, empty
    path.write_text(json.dumps(bundle), "utf-8")
    assert policyc.load(path).risk.role_of("pay.to") == "target"
    with pytest.raises(PolicyError, match="imports `risk`"):
        policyc.load(path, extensions=[])
    with pytest.raises(TypeError, match="unexpected keyword argument 'stamp'"):
        _bundle(tmp_path, POLICY, stamp="blue")


def test_the_installed_extensions_are_entry_points() -> None:
    found, broken = ext.installed()
    assert [e.name for e in found] == ["forecast", "risk"] and broken == ()
    assert [e.name for e in policyc.load(POLICY).extensions] == ["forecast", "risk"]
    assert policyc.Monitor(policyc.load(POLICY)).risk is None  # nothing to enforce
