"""Source-blind back-translation (FORGE H.1), and its comparison with the source.

For each translated ``Deny`` or ``Allow`` rule, a model that never sees the requirements
describes what the rule does. It gets the vocabulary, the rule with its id and the ids of the
requirements it cites, and the translated helper rules it uses; not the ``@message`` or
``@suggest`` texts, which the translator wrote from the requirement and would give its intent
away, nor the comments in the rules' text. A second request then compares the description with
the cited requirements and says whether they impose the same conditions. A difference is a
``back-translation-discrepancy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policyc.compiler import ast
from policyc.compiler.parser import parse
from policyc.compiler.source import SourceFile

from . import problems as P
from .answers import AnswerError, ask_json, field, optional
from .client import Chat
from .draft import Rule, body_relations
from .requirements import Requirement
from .templates import block, messages
from .vocabulary import Vocabulary

STEP = "back-translate"
HIDDEN = ("message", "suggest")
SAME = {"same": "same", "equivalent": "same", "consistent": "same", "match": "same", "matches": "same"}
DIFFERENT = {
    "different": "different",
    "differs": "different",
    "mismatch": "different",
    "inconsistent": "different",
}


@dataclass(frozen=True)
class BackTranslation:
    rule: str
    requirements: tuple[str, ...]
    description: str | None
    verdict: str | None  # "same", "different", or None when a request failed
    difference: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "requirements": list(self.requirements),
            "description": self.description,
            "verdict": self.verdict,
            "difference": self.difference,
        }


def blind_text(rule: Rule) -> str:
    """The rule's text without what would tell its intent: the annotations the translator wrote
    from the requirement, and its comments (which may quote the requirement)."""
    source = SourceFile("rule.dl", rule.text)
    module, _ = parse(source)
    cuts = [(c.span.start, c.span.end) for c in module.comments]
    for statement in module.statements:
        if isinstance(statement, ast.Rule):
            cuts.extend((a.span.start, a.span.end) for a in statement.annotations if a.name in HIDDEN)
    text = rule.text
    for start, end in sorted(cuts, reverse=True):
        text = text[:start] + text[end:]
    return "\n".join(line for line in text.splitlines() if line.strip())


def helpers_of(rule: Rule, rules: list[Rule]) -> list[Rule]:
    """The translated helper rules a rule uses, directly or through each other."""
    by_head: dict[str, list[Rule]] = {}
    for other in rules:
        if other.kind == "helper":
            by_head.setdefault(other.head, []).append(other)
    found: list[Rule] = []
    todo = [rule]
    seen: set[str] = set()
    while todo:
        current = todo.pop()
        module, _ = parse(SourceFile("rule.dl", current.text))
        for statement in module.statements:
            if not isinstance(statement, ast.Rule):
                continue
            for name in sorted(body_relations(statement)):
                if name in seen or name not in by_head:
                    continue
                seen.add(name)
                found.extend(by_head[name])
                todo.extend(by_head[name])
    return found


def back_translate(
    chat: Chat,
    vocabulary: Vocabulary,
    rule: Rule,
    rules: list[Rule],
    requirements: tuple[Requirement, ...],
) -> tuple[BackTranslation, list[P.Problem]]:
    cited = ", ".join(rule.requirements)
    shown = [f"id: {rule.id}\nrequirement id: {cited}\n\n{blind_text(rule)}"]
    helpers = helpers_of(rule, rules)
    blocks = [block("vocabulary", vocabulary.render()), block("rule", "\n".join(shown))]
    if helpers:
        blocks.append(block("helpers", "\n\n".join(blind_text(h) for h in helpers)))
    description, found = ask_json(chat, STEP, rule.id, messages("backtranslate", *blocks), _description)
    problems = list(found)
    if description is None:
        return BackTranslation(rule.id, rule.requirements, None, None), problems
    texts = {r.id: r for r in requirements}
    source = "\n".join(f"{r}: {texts[r].text}" for r in rule.requirements if r in texts)
    verdict, more = ask_json(
        chat,
        "compare",
        rule.id,
        messages("compare", block("requirement", source), block("description", description)),
        _verdict,
    )
    problems.extend(more)
    if verdict is None:
        return BackTranslation(rule.id, rule.requirements, description, None), problems
    said, difference = verdict
    if said == "different":
        problems.append(
            P.BACK_TRANSLATION_DISCREPANCY(
                STEP,
                f"the rule, described without its requirement, differs from {cited}: {difference}",
                rule.id,
            )
        )
    return BackTranslation(rule.id, rule.requirements, description, said, difference), problems


def _description(value: Any) -> str:
    text = field(value, "description", str).strip()
    if not text:
        raise AnswerError("`description` is empty")
    return " ".join(text.split())


def _verdict(value: Any) -> tuple[str, str]:
    said = field(value, "verdict", str).strip().lower()
    verdict = SAME.get(said) or DIFFERENT.get(said)
    if verdict is None:
        raise AnswerError(f'`verdict` is {said!r}; it must be "same" or "different"')
    difference = optional(value, "difference", str, "").strip()
    if verdict == "different" and not difference:
        raise AnswerError('`difference` must say what differs when the verdict is "different"')
    return verdict, difference
