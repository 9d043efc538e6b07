"""An error refuses only the calls whose verdict needs what it touched.

A derivation that meets an error (a text compared with a number, a functor that raises) makes
the fact it would derive unknown; a decision that needs an unknown fact refuses its call,
naming the rule, the argument and its value; every other call is decided as if nothing had
failed. Checked here on the README's example, on random programs with functors that raise for
some values (a session against a from-scratch evaluation of the same facts), and on random
sessions of tool calls with arguments of the wrong type (each decision against a from-scratch
evaluation of the session as it was).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyc
from policyc.runtime.policy import Result

from .conftest import examples
from .test_incremental import reasons, sessions

ESCALATE = """
.import events
@id("large-payment") @message("a payment of {n} needs a person's approval")
Escalate(a) :- ToolCall(a, "pay"), n = tool_arg(a, "amount"), n > 1000.
"""


def call(identifier: str, tool: str, **args) -> dict:
    return {"id": identifier, "kind": "tool_call", "tool": tool, "args": args}


def test_a_text_compared_with_a_number_refuses_its_call_alone() -> None:
    session = policyc.Monitor(policyc.load(ESCALATE)).session("s")
    refused = session.authorize(call("c1", "pay", amount="5000"))
    assert not refused.allowed and refused.errored and refused.verdict == "deny"
    reason = refused.reasons[0]
    assert (
        "rule `large-payment`: argument `amount` of `pay` is the text `5000`, compared (>) with the number 1000"
        in (reason.message)
    )
    assert (
        'to_number(tool_arg(a, "amount"))' in reason.message and ".arg pay.amount: number" in reason.message
    )
    assert "Retry" not in refused.feedback and 'Send "amount" as a JSON number.' in refused.feedback
    # every later call is decided as if c1 had been refused and never ran
    assert session.authorize(call("c2", "search", q="x")).allowed
    assert session.authorize(call("c3", "pay", amount=500)).allowed
    escalated = session.authorize(call("c4", "pay", amount=5000))
    assert escalated.verdict == "escalate" and escalated.escalation is not None
    assert refused.explain().errors == (reason.message,)


def test_an_escalation_whose_decision_erred_is_refused_not_asked() -> None:
    asked = []
    monitor = policyc.Monitor(policyc.load(ESCALATE), approver=lambda request: asked.append(request) or True)
    paid = []

    @policyc.guard
    def pay(amount) -> str:
        paid.append(amount)
        return "paid"

    with policyc.use_session(monitor.session("s")):
        with pytest.raises(policyc.PolicyDenied, match="could not decide"):
            pay("5000")
        assert asked == [] and paid == []  # nobody is asked about a call that cannot run
        assert pay(5000) == "paid" and len(asked) == 1 and paid == [5000]


def test_a_raising_functor_refuses_only_the_calls_that_need_it() -> None:
    def classify(text: str) -> bool:
        if "boom" in text:
            raise RuntimeError("classifier down")
        return "secret" in text

    policy = policyc.load(
        """
        .import events
        .functor sensitive(text: symbol): bool
        Secret(e) :- Text(e, t), sensitive(t).
        Secret(e) :- DependsOn(e, d), Secret(d).
        @id("no-leak") Deny(a) :- ToolCall(a, "send"), Secret(a).
        """,
        {"sensitive": classify},
    )
    session = policyc.Monitor(policy).session("s")
    session.record({"id": "r1", "kind": "tool_result", "text": "boom"})
    after = session.authorize({**call("c1", "send"), "deps": ["r1"]})
    assert not after.allowed and after.errored and "classifier down" in after.reasons[0].message
    assert "`sensitive` has no value for a text" in after.feedback and "boom" not in after.feedback
    # a call that does not depend on r1, and one that is no send, are decided as usual
    assert session.authorize({**call("c2", "send"), "deps": []}).allowed
    assert session.authorize({**call("c3", "search"), "deps": ["r1"]}).allowed
    session.record({"id": "r2", "kind": "tool_result", "text": "a secret", "deps": []})
    denied = session.authorize({**call("c4", "send"), "deps": ["r2"]})
    assert not denied.allowed and not denied.errored and denied.reasons[0].rule == "no-leak"
    # a fact known by another derivation is known: r3 depends on the secret and on r1
    session.record({"id": "r3", "kind": "tool_result", "text": "x", "deps": ["r1", "r2"]})
    known = session.authorize({**call("c5", "send"), "deps": ["r3"]})
    assert not known.errored and known.reasons[0].rule == "no-leak"


def test_not_over_an_unknown_fact_refuses_the_call_that_reads_it() -> None:
    policy = policyc.load(
        """
        .import events
        Big(a) :- ToolCall(a, _), n = tool_arg(a, "amount"), n > 100.
        .default deny
        @id("small") Allow(a) :- Action(a), not Big(a).
        """
    )
    session = policyc.Monitor(policy).session("s")
    unknown = session.authorize(call("c1", "pay", amount="50"))
    assert (
        not unknown.allowed
        and unknown.errored
        and "compared (>) with the number 100" in unknown.reasons[0].message
    )
    assert session.authorize(call("c2", "pay", amount=50)).allowed
    assert session.authorize(call("c3", "pay", amount=500)).reasons[0].rule == "policyc:default-deny"


def test_a_batch_evaluation_decides_each_action_on_what_it_needs() -> None:
    def parse(text: str) -> int:
        return int(text)

    policy = policyc.load(
        """
        .decl Pay(a: symbol, amount: symbol)
        .input Pay
        .functor parse(x: symbol): number
        @id("big") Deny(a) :- Pay(a, x), n = parse(x), n > 1000.
        """,
        {"parse": parse},
    )
    result = policy.evaluate({"Pay": [["c1", "1e9"], ["c2", "50"], ["c3", "5000"]]})
    assert result.errored
    verdicts = {a: (d.allowed, d.errored) for a in ("c1", "c2", "c3") for d in [result.decide(a)]}
    assert verdicts == {"c1": (False, True), "c2": (True, False), "c3": (False, False)}


def test_eval_and_explain_show_what_an_error_left_unknown(cli, tmp_path) -> None:
    (tmp_path / "pay.dl").write_text(
        """
        .decl Pay(a: symbol, amount: symbol)
        .input Pay
        .functor parse(x: symbol): number
        @id("big") Deny(a) :- Pay(a, x), n = parse(x), n > 1000.
        """,
        "utf-8",
    )
    (tmp_path / "parse.py").write_text(
        "import policyc\n\n\n@policyc.functor('parse')\ndef parse(x):\n    return int(x)\n", "utf-8"
    )
    (tmp_path / "pay.json").write_text('{"Pay": [["c1", "1e9"], ["c2", "50"], ["c3", "5000"]]}', "utf-8")
    common = ("--facts", str(tmp_path / "pay.json"), "--functors", str(tmp_path / "parse.py"))
    run = cli("eval", str(tmp_path / "pay.dl"), *common)
    assert run.status == 1 and "evaluation error" in run.stderr
    lines = run.stdout.splitlines()
    assert '  Deny("c3")' in lines  # the facts no error touched, every one of them
    assert any(
        line.startswith('  unknown: Deny("c1")  (rule `big`: functor `parse` raised') for line in lines
    )
    data = cli("eval", str(tmp_path / "pay.dl"), *common, "--format", "json").json()
    assert data["relations"]["Deny"] == [["c3"]] and data["unknown"]["Deny"][0]["fact"] == ["c1"]
    explained = cli("explain", str(tmp_path / "pay.dl"), 'Deny("c1")', *common)
    assert explained.status == 0 and explained.stdout.startswith('Deny("c1") is unknown: rule `big`:')
    assert 'Deny("c3")' in cli("explain", str(tmp_path / "pay.dl"), 'Deny("c3")', *common).stdout


def test_an_unknown_value_keeps_what_was_pending_about_it() -> None:
    """`Total(t)` is unknown (the sum meets a text), so `Flag(t)` holds for an unknown `t`, but
    only for a `t` over 1: asked about 1 it does not hold, asked about 3 it is unknown, from
    scratch as in a session (which asks `Flag` with its value given)."""
    text = """
        .decl Pay(a: symbol, n: symbol)
        .input Pay
        .functor parse(x: symbol): number
        Total(t) :- t = sum n : { Pay(_, s), n = parse(s) }.
        Flag(t) :- Total(t), t > 1.
        .default deny
        Allow(a) :- Pay(a, s), k = strlen(s), !Flag(k).
    """
    policy = policyc.load(text, {"parse": lambda s: int(s)})
    facts = {"Pay": [["c1", "5"], ["c2", "x"], ["c3", "abc"]]}
    session = policyc.Monitor(policy).session("s")
    session.add_facts(facts)
    scratch = policy.evaluate(facts)
    for action, allowed in (("c1", True), ("c2", True), ("c3", False)):
        for decided in (session.decide(action), scratch.decide(action)):
            assert (decided.allowed, decided.errored) == (allowed, not allowed), (action, decided.reasons)


# ------------------------------------------------------------------ properties: programs


def raising(bad_inc: int | None, bad_small: int | None) -> dict:
    """The oracle programs' functors, raising for one value each."""

    def inc(x: int) -> int:
        if x == bad_inc:
            raise ValueError(f"inc cannot take {x}")
        return x + 1

    def small(x: int) -> bool:
        if x == bad_small:
            raise ValueError(f"small cannot take {x}")
        return x < 2

    return {"inc": inc, "small": small}


values = st.one_of(st.none(), st.integers(0, 4))


def sessions_equal_from_scratch(drawn, bad_inc, bad_small) -> None:
    text, batches = drawn
    policy = policyc.load(text, raising(bad_inc, bad_small))
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
        assert not session.sticky, session.sticky  # an error of a rule fails no session
        scratch = policy.evaluate(seen)
        for action in range(-1, 6):
            if action not in named:
                continue
            mine, theirs = session.decide(action), scratch.decide(action)
            assert (mine.verdict, mine.allowed, mine.errored) == (
                theirs.verdict,
                theirs.allowed,
                theirs.errored,
            ), (
                text,
                batches,
                action,
                mine.reasons,
                theirs.reasons,
            )
            if not mine.errored:
                assert reasons(mine) == reasons(theirs), (text, action)


@examples(25, 300)
def test_sessions_with_raising_functors_decide_as_from_scratch(examples: int) -> None:
    settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))(
        given(sessions(), values, values)(sessions_equal_from_scratch)
    )()


# ------------------------------------------------------------------ properties: tool calls

CALLS = """
.import events
.functor risky(t: symbol): bool
Flagged(e) :- Text(e, t), risky(t).
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- Flagged(e).
Tainted(e) :- DependsOn(e, d), Tainted(d).
@id("big") Escalate(a) :- ToolCall(a, "pay"), n = tool_arg(a, "amount"), n > 1000.
@id("outside") Deny(a) :- ToolCall(a, "send"), to = tool_arg(a, "to"), !contains("@corp", to).
@id("tainted") Deny(a) :- ToolCall(a, "send"), Tainted(a).
Paid(c, n) :- ToolCall(c, "pay"), n = tool_arg(c, "amount").
@id("budget") Deny(a) :- Candidate(a), ToolCall(a, "pay"), t = sum n : { Paid(_, n) }, t > 5000.
@id("twice") Deny(a) :- Candidate(a), ToolCall(a, "refund"), ToolCall(b, "refund"), b != a, !Label(b, "done").
"""


def risky(text: str) -> bool:
    if "boom" in text:
        raise RuntimeError("classifier down")
    return "attack" in text


amounts = st.one_of(st.integers(0, 3000), st.sampled_from(["5000", "12", "x"]), st.none())
recipients = st.one_of(st.sampled_from(["a@corp", "b@evil", "c@corp"]), st.integers(0, 3), st.none())


@st.composite
def calls_sessions(draw) -> list[dict]:
    events: list[dict] = []
    for n in range(draw(st.integers(1, 9))):
        identifier = f"e{n}"
        deps = None
        if events and draw(st.booleans()):
            deps = draw(st.lists(st.sampled_from([e["id"] for e in events]), max_size=3, unique=True))
        kind = draw(st.sampled_from(["result", "pay", "send", "refund", "search"]))
        if kind == "result":
            event = {
                "id": identifier,
                "kind": "tool_result",
                "text": draw(st.sampled_from(["ok", "boom", "attack", "fine"])),
                "labels": draw(st.lists(st.sampled_from(["untrusted", "done"]), max_size=1)),
            }
        else:
            args: dict = {}
            value = draw(amounts if kind == "pay" else recipients)
            if value is not None:
                args["amount" if kind == "pay" else "to"] = value
            event = {"id": identifier, "kind": "tool_call", "tool": kind, "args": args}
            if draw(st.booleans()):
                event["labels"] = ["done"]
        if deps is not None:
            event["deps"] = deps
        events.append(event)
    return events


def decided_as_from_scratch(events: list[dict]) -> None:
    policy = policyc.load(CALLS, {"risky": risky})
    session = policyc.Monitor(policy).session("s")
    for event in events:
        if event["kind"] != "tool_call":
            session.record(event)
            continue
        mine = session.authorize(event)
        theirs = Result(session.explanation(action=event["id"])).decide(event["id"])
        assert (mine.verdict, mine.allowed, mine.errored) == (
            theirs.verdict,
            theirs.allowed,
            theirs.errored,
        ), (
            events,
            event,
            mine.reasons,
            theirs.reasons,
        )
        if not mine.errored:
            assert reasons(mine) == reasons(theirs)
    assert not session.sticky


@examples(40, 300)
def test_calls_with_arguments_of_any_type_decide_as_from_scratch(examples: int) -> None:
    settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))(
        given(calls_sessions())(decided_as_from_scratch)
    )()


# ------------------------------------------------------------------ through the service

RISKY_MODULE = """
import policyc


@policyc.functor("risky")
def risky(text: str) -> bool:
    if "boom" in text:
        raise RuntimeError("classifier down")
    return "attack" in text
"""


@pytest.fixture(scope="module")
def calls_service(tmp_path_factory: pytest.TempPathFactory):
    from .support.service import Server, prepare

    folder = tmp_path_factory.mktemp("unknown")
    key = prepare(folder, CALLS, {"agent": ("agent",)})["agent"]
    (folder / "risky_functors.py").write_text(RISKY_MODULE, "utf-8")
    running = Server(folder, "--functors", str(folder / "risky_functors.py"))
    yield running, key
    running.stop()


_served = iter(range(1, 10**6))


def served_as_in_process(service, events: list[dict]) -> None:
    server, key = service
    session_id = f"u{next(_served)}"
    local = policyc.Monitor(policyc.load(server.folder / "policy.dl", {"risky": risky}))  # its rules' ids
    local = local.session(session_id, principal="agent", roles=("agent",))
    with policyc.connect(server.url, key) as monitor:
        remote = monitor.session(session_id)
        for event in events:
            if event["kind"] != "tool_call":
                local.record(event)
                remote.record(event)
                continue
            mine, theirs = local.authorize(event), remote.authorize(event)
            assert (theirs.verdict, theirs.allowed, theirs.errored) == (
                mine.verdict,
                mine.allowed,
                mine.errored,
            )
            assert [r.rule for r in theirs.reasons] == [r.rule for r in mine.reasons]
            assert theirs.feedback == mine.feedback
        assert not remote.sticky


@examples(8, 60)
def test_the_service_decides_calls_with_errors_as_in_process(examples: int, calls_service) -> None:
    settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))(
        given(calls_sessions())(lambda events: served_as_in_process(calls_service, events))
    )()


def test_the_readme_escalation_through_the_service(tmp_path) -> None:
    """The README's rule given `"amount": "5000"` refuses that call, naming the argument, and
    decides every later call as usual."""
    from .support.service import Server, prepare

    key = prepare(tmp_path, ESCALATE, {"agent": ("agent",)})["agent"]
    server = Server(tmp_path)
    with policyc.connect(server.url, key) as monitor:
        session = monitor.session(f"u{next(_served)}")
        refused = session.authorize(call("c1", "pay", amount="5000"))
        assert not refused.allowed and refused.errored
        assert (
            "argument `amount` of `pay` is the text `5000`, compared (>) with the number 1000"
            in refused.reasons[0].message
        )
        assert session.authorize(call("c2", "search")).allowed
        assert session.authorize(call("c3", "pay", amount=500)).allowed
        assert session.authorize(call("c4", "pay", amount=5000)).verdict == "escalate"
    server.stop()
