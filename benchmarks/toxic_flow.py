"""The toxic-flow policy of DESIGN.md as the benchmarks state it: over the event vocabulary
(events recorded), and over its own input relations (facts given, the way FORGE's listings and
Soufflé programs are written). The rules are the same in both."""

RULES = """\
Tainted(e) :- UntrustedInput(e).
Tainted(e) :- DependsOn(e, e'), Tainted(e').
HasSecret(e) :- SensitiveInput(e).
HasSecret(e) :- DependsOn(e, e'), HasSecret(e').
@id("toxic-flow")
Deny(a) :- ExternalSend(a), Tainted(a), HasSecret(a).
"""

EVENTS_POLICY = (
    """\
.import events
UntrustedInput(e) :- Label(e, "untrusted").
SensitiveInput(e) :- Label(e, "sensitive").
ExternalSend(a) :- Action(a), Label(a, "external").
"""
    + RULES
)

INPUTS_POLICY = (
    """\
.decl UntrustedInput(e: symbol)
.decl SensitiveInput(e: symbol)
.decl DependsOn(e: symbol, d: symbol)
.decl ExternalSend(a: symbol)
.input UntrustedInput, SensitiveInput, DependsOn, ExternalSend
"""
    + RULES
)
