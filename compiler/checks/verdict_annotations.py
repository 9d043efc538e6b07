"""``missing-verdict-annotation``: a ``Deny`` or ``Escalate`` rule names itself and says why.

A decision's reasons carry each rule's ``@id`` and ``@message``: the agent reads the message in
its feedback, a person approving an escalated call reads it in the prompt, the audit log and
``policyc replay`` count denials by id, and ``policyc test`` expects them by id. A rule without
``@id`` is reported as ``Deny@policy.dl:12``, an id that changes whenever a line above it moves;
one without ``@message`` tells the agent (and whoever approves an escalated call) which rule
decided, not why. ``Allow`` rules decide
nothing anyone reads, and a program without verdicts (a Soufflé program) is not a policy: neither
is reported. There is no fix: an id and a message are the author's words.

>>> from policyc.compiler.pipeline import check_source
>>> [d.message for d in check_source('.input Send\\nDeny(a) :- Send(a).')]
['`Deny` rule without `@id` and `@message`']
"""

from __future__ import annotations

import os

from .. import ast, codes
from ..diagnostics import Diagnostic
from ..verdict_names import is_verdict
from . import Context

WANTED = ("id", "message")
EXAMPLES = {"id": '`@id("no-...")`', "message": '`@message("{a} ...")`'}


def check(context: Context) -> list[Diagnostic]:
    diagnostics: list[Diagnostic] = []
    seen: set[object] = set()  # a rule written once: its instances and alternatives warn once
    relations = context.symbols.relations
    roots = sorted(context.program.roots)
    folder = os.path.dirname(roots[0]) if roots else ""
    for module, rule in context.user_rules():
        head = rule.head.name
        arity = relations[head].arity if head in relations else len(rule.head.args)
        if head == "Allow" or not is_verdict(head, arity) or rule.span in seen:
            continue
        seen.add(rule.span)
        missing = [name for name in WANTED if rule.annotation(name) is None]
        if missing:
            place = f"{head}@{os.path.relpath(module.path, folder or os.curdir)}:{rule.head.span.line}"
            diagnostics.append(_diagnostic(rule, missing, place))
    return diagnostics


def _diagnostic(rule: ast.Rule, missing: list[str], place: str) -> Diagnostic:
    head = rule.head.name
    given = rule.annotation("id")
    named = (
        f" `{given.args[0].value}`" if given and given.args and isinstance(given.args[0], ast.String) else ""
    )
    problems = []
    if "id" in missing:
        problems.append(f"its reasons name it `{place}`, which changes when a line above it moves")
    if "message" in missing:
        problems.append(
            "the agent's feedback says which rule denied the call, not why"
            if head == "Deny"
            else "the approval prompt and the agent's feedback say which rule escalated the call, not why"
        )
    write = " and ".join(EXAMPLES[name] for name in missing)
    return codes.MISSING_VERDICT_ANNOTATION(
        rule.head.span,
        f"`{head}` rule{named} without " + " and ".join(f"`@{name}`" for name in missing),
        help="; ".join(problems) + f": write {write} before the rule",
    )
