"""The renderer of values and calls in people's text (runtime/render.py)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyc.runtime import render
from policyc.runtime.values import Adt, record

RAW = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def _raw(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in RAW]


@pytest.mark.parametrize(
    ("data", "shown"),
    [
        ("x@y.z", "`x@y.z`"),
        ('say "hi"', '`say "hi"`'),  # no JSON quoting
        ("C:\\dir", "`C:\\dir`"),  # no escaping of backslashes
        ('["b.txt"]', '`["b.txt"]`'),
        ("a`b", "`a\\u0060b`"),
        ("line\nnext\ttab\r", "`line\\nnext\\ttab\\r`"),
        ("\x00\x1b[31m", "`\\u0000\\u001b[31m`"),
        ("evil\u202egnp.exe", "`evil\\u202egnp.exe`"),  # a bidirectional override
        ("a\u200bb\ufeff", "`a\\u200bb\\ufeff`"),  # zero-width characters
        ("para\u2029graph", "`para\\u2029graph`"),
        ("x" * 101, "`" + "x" * 100 + "…`"),
        ("\U000e0041" * 2, "`\\U000e0041\\U000e0041`"),  # tag characters, outside the BMP
        ("\x7f", "`\\u007f`"),
        (5, "5"),
        (-2.5, "-2.5"),
        (True, "`true`"),
        (record((1, "a")), '`[1, "a"]`'),
        (Adt(("A", 1)), "`$A(1)`"),
        ((), "`nil`"),
        (None, "`null`"),
        (["a", 1], '`["a", 1]`'),
        ({"k": "v"}, '`{"k": "v"}`'),
    ],
)
def test_values_as_people_read_them(data: object, shown: str) -> None:
    assert render.value(data) == shown


def test_a_number_too_long_to_print_is_cut() -> None:
    assert render.value(10**5000).endswith("…") and len(render.value(10**5000)) < 200


def test_calls_show_the_tool_and_short_arguments() -> None:
    body = "Hi Bob, the quarterly figures are attached."
    assert render.call("send_email", {"to": "x@y.z", "body": body}) == (
        "send_email(to=`x@y.z`, body=`Hi Bob, the quarterly fi…`)"
    )
    assert render.call("pay", {}) == "pay()"
    assert render.call("f", {f"k{i}": i for i in range(6)}) == "f(k0=0, k1=1, k2=2, k3=3, …)"
    # a tool or an argument that does not read as a name is shown as a value
    assert render.call("rm -rf /`", {"a b": 1}) == "`rm -rf /\\u0060`(`a b`=1)"
    assert render.call(None, None) == "call()"


def test_templates_show_the_call_unless_they_ask_for_the_id() -> None:
    calls = {"c6": ("post", {"url": "https://x.example"})}
    bindings = {"a": "c6", "f": '["b.txt"]', "n": 3}
    assert render.interpolate("{a} posts {f} ({n} files)", bindings, calls) == (
        'post(url=`https://x.example`) posts `["b.txt"]` (3 files)'
    )
    assert render.interpolate("call {a.id} posts", bindings, calls) == "call `c6` posts"
    assert render.interpolate("{a} is {{not}} {unbound}", bindings, None) == "`c6` is {not} {unbound}"
    assert render.interpolate(None, bindings, calls) is None


values = st.one_of(
    st.text(),
    st.integers(),
    st.floats(),
    st.lists(st.text(max_size=5), max_size=3),
    st.builds(lambda fields: record(tuple(fields)), st.lists(st.text(max_size=5), max_size=3)),
)


@settings(max_examples=60, deadline=None)
@given(values)
def test_no_raw_control_character_and_balanced_delimiters(data: object) -> None:
    shown = render.value(data)
    assert _raw(shown) == []
    assert render.value(data) == shown  # deterministic
    if "`" in shown:
        assert shown.count("`") == 2 and shown.startswith("`") and shown.endswith("`")


@settings(max_examples=40, deadline=None)
@given(st.text(), st.dictionaries(st.text(max_size=8), values, max_size=6), st.text())
def test_calls_in_templates_never_leak_raw_text(tool: str, arguments: dict, text: str) -> None:
    shown = render.interpolate("{a} and {x}", {"a": "c1", "x": text}, {"c1": (tool, arguments)})
    assert shown is not None and _raw(shown) == []
    assert shown.count("`") % 2 == 0  # every delimiter is closed
    assert shown == render.interpolate("{a} and {x}", {"a": "c1", "x": text}, {"c1": (tool, arguments)})


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=1))
def test_a_value_keeps_its_printable_text(text: str) -> None:
    shown = render.value(text, limit=len(text))
    plain = "".join(c for c in text if c not in "`\n\t\r" and unicodedata.category(c) not in RAW)
    rest = iter(shown[1:-1])
    assert all(c in rest for c in plain)  # the printable text, in order, nothing dropped


def test_a_template_may_name_the_id_of_a_variable_of_its_rule() -> None:
    import policyc
    from policyc.runtime.errors import PolicyError

    rule = 'Deny(a) :- ToolCall(a, "post").'
    policy = policyc.load_source(f'.import events\n@id("r") @message("call {{a.id}}: {{a}}")\n{rule}')
    session = policyc.Monitor(policy).session("s")
    decision = session.authorize({"id": "c1", "kind": "tool_call", "tool": "post", "args": {"to": "x"}})
    assert decision.reasons[0].message == "call `c1`: post(to=`x`)"
    with pytest.raises(PolicyError, match=r"`\{b.id\}` in `@message` is not a variable of this rule"):
        policyc.load_source(f'.import events\n@id("r") @message("call {{b.id}}")\n{rule}')
