"""Step 2: the requirements as rules over the vocabulary, repaired until they check.

The translator gets the vocabulary (every relation and functor with its doc comment, the
deployment's assumptions) and the numbered requirements, and answers Datalog text with an
``@req`` on every rule, plus the requirements it cannot express and why. The text is checked
(:mod:`~policyc.nl2policy.draft`); while it has problems, and for at most ``rounds`` rounds,
the problems are sent back — compiler diagnostics rendered as ``policyc check`` prints them,
invented names, rules without a valid requirement, requirements without a rule — and the
translator answers the whole translation again. A round whose answer cannot be used keeps the
previous draft. What is left of the last draft after :meth:`Draft.final` is the policy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import problems as P
from .answers import AnswerError, ask_json, field, optional
from .client import Chat
from .draft import Draft, Rule, Unexpressed, check
from .requirements import Requirement
from .templates import block, messages, prompt
from .vocabulary import Vocabulary

STEP = "translate"


@dataclass(frozen=True)
class Translation:
    rules: tuple[Rule, ...]
    unexpressed: tuple[Unexpressed, ...]
    problems: tuple[P.Problem, ...]
    rounds: int  # repair rounds used
    draft: Draft | None


def render_requirements(requirements: tuple[Requirement, ...]) -> str:
    return "\n".join(f"{r.id}: {r.text}" for r in requirements)


def translate(
    chat: Chat,
    vocabulary: Vocabulary,
    requirements: tuple[Requirement, ...],
    output: str,
    rounds: int = 3,
    progress: Any = None,
) -> Translation:
    base = messages(
        STEP,
        block("vocabulary", vocabulary.render()),
        block("requirements", render_requirements(requirements)),
    )
    answer, found = ask_json(chat, STEP, None, base, _shape)
    problems = list(found)
    if answer is None:
        draft = check(vocabulary, requirements, "", (), output)
        rules, left_out = draft.final()
        return Translation(tuple(rules), (), (*problems, *left_out), 0, None)
    draft = check(vocabulary, requirements, answer[0], answer[1], output)
    used = 0
    while draft.needs_repair() and used < rounds:
        used += 1
        if progress is not None:
            progress(
                f"repair round {used}: {len(draft.issues) + len(draft.uncovered(draft.kept_rules(set())))} problems"
            )
        previous = json.dumps(
            {
                "rules": draft.text,
                "not_expressible": [
                    {"requirement": u.requirement, "reason": u.reason} for u in draft.unexpressed
                ],
            }
        )
        again = [
            *base,
            {"role": "assistant", "content": previous},
            {"role": "user", "content": prompt("repair") + "\n" + block("problems", draft.feedback())},
        ]
        answer, found = ask_json(chat, "repair", f"round {used}", again, _shape)
        problems.extend(found)
        if answer is None:
            break
        draft = check(vocabulary, requirements, answer[0], answer[1], output)
    rules, left_out = draft.final()
    return Translation(tuple(rules), draft.unexpressed, (*problems, *left_out), used, draft)


def _shape(value: Any) -> tuple[str, tuple[Unexpressed, ...]]:
    rules = field(value, "rules", (str, list))
    if isinstance(rules, list):  # a list of rule texts is taken too
        if not all(isinstance(r, str) for r in rules):
            raise AnswerError("`rules` is not a string of Datalog text")
        rules = "\n\n".join(rules)
    unexpressed = []
    for i, item in enumerate(optional(value, "not_expressible", list, [])):
        where = f"`not_expressible` entry {i + 1}"
        requirement = field(item, "requirement", str, where).strip()
        unexpressed.append(Unexpressed(requirement, optional(item, "reason", str, "", where).strip()))
    return rules, tuple(unexpressed)
