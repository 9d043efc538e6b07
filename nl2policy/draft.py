"""Checking a translation: the model's rules, put after the vocabulary and compiled.

A draft is the Datalog text the translator answered. It is parsed on its own (so that every
position is a line of the model's own text), checked for what only the vocabulary may do, for
its requirement ids, and then compiled after the vocabulary exactly as ``policyc check`` would
compile the final policy. Every finding is an :class:`Issue`: the problem for the report, the
text shown to the model in a repair round (compiler diagnostics rendered as ``policyc check``
renders them), and whether the statement must be left out if no repair fixes it.

:meth:`Draft.final` keeps what can be kept: it leaves out every statement with an issue, then
compiles again and leaves out what depended on it, until the policy checks clean.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from policyc.compiler import ast, codes
from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.loader import load_source
from policyc.compiler.parser import parse
from policyc.compiler.pipeline import compile_program
from policyc.compiler.source import SourceFile
from policyc.compiler.stages import Parsed
from policyc.compiler.summary import summarize

from . import problems as P
from .requirements import Requirement
from .vocabulary import DECISIONS, Vocabulary

STEP = "translate"
RULES_FILE = "translation.dl"  # how the model's text is named in what it is shown
SEPARATOR = "\n// ---- translated rules\n\n"
INVENTING = {codes.UNDEFINED_RELATION.code, codes.UNDEFINED_FUNCTION.code}


@dataclass(frozen=True)
class Rule:
    """A translated rule as it is kept in the policy."""

    id: str
    head: str
    kind: str  # "deny", "allow" or "helper"
    requirements: tuple[str, ...]
    text: str  # its source text, annotations included
    line: int = 0  # its first line in the written policy

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "head": self.head,
            "requirements": list(self.requirements),
            "line": self.line,
            "text": self.text,
        }


@dataclass(frozen=True)
class Issue:
    problem: P.Problem
    feedback: str  # what the model is told in a repair round
    statement: int | None = None  # the statement it is about (index), if any
    drop: bool = True  # the statement is left out if this is not repaired


@dataclass(frozen=True)
class Unexpressed:
    requirement: str
    reason: str


@dataclass(frozen=True)
class Draft:
    vocabulary: Vocabulary
    requirements: tuple[Requirement, ...]
    text: str
    unexpressed: tuple[Unexpressed, ...]
    output: str
    statements: tuple[ast.Statement, ...] = ()
    issues: tuple[Issue, ...] = ()

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.requirements]

    def needs_repair(self) -> bool:
        return bool(self.issues) or bool(self.uncovered(self.kept_rules(set())))

    def feedback(self) -> str:
        lines = [issue.feedback for issue in self.issues]
        rules = self.kept_rules(set())
        for requirement in self.uncovered(rules):
            lines.append(
                f"{requirement.id} has no rule that leads to a verdict, and it is not listed under "
                f"`not_expressible`: {requirement.text}"
            )
        return "\n\n".join(lines)

    # ------------------------------------------------------------------ what is kept

    def kept_rules(self, dropped: set[int]) -> list[tuple[int, Rule]]:
        rules = []
        counts: dict[str, int] = {}
        for index, statement in enumerate(self.statements):
            if index in dropped or not isinstance(statement, ast.Rule):
                continue
            counts[statement.head.name] = counts.get(statement.head.name, 0) + 1
            rules.append((index, self._rule(statement, counts[statement.head.name])))
        return rules

    def _rule(self, statement: ast.Rule, n: int) -> Rule:
        head = statement.head.name
        kind = "deny" if head == "Deny" else "allow" if head == "Allow" else "helper"
        given = _string_arg(statement.annotation("id"))
        cited = tuple(dict.fromkeys(r for r in _ids(statement.annotation("req")) if r in self.ids))
        text = self.text[statement.span.start : statement.span.end]
        rule_id = given or (f"{head.lower()}-{n}" if kind != "helper" else f"{head}#{n}")
        if given is None and kind != "helper":
            text = f'@id("{rule_id}")\n{text}'
        return Rule(rule_id, head, kind, cited, text)

    def uncovered(self, rules: list[tuple[int, Rule]]) -> list[Requirement]:
        covered = {r for _, rule in _deciding(rules) for r in rule.requirements}
        unexpressed = {u.requirement for u in self.unexpressed}
        return [r for r in self.requirements if r.id not in covered and r.id not in unexpressed]

    def final(self) -> tuple[list[Rule], list[P.Problem]]:
        """The rules that can be kept (the policy they make checks clean), and the problems of
        what was left out."""
        dropped: set[int] = set()
        found: list[P.Problem] = []
        for issue in self.issues:
            found.append(issue.problem)
            if issue.drop and issue.statement is not None:
                dropped.add(issue.statement)
        while True:
            rules = self.kept_rules(dropped)
            text = policy_text(self.vocabulary, [rule for _, rule in rules])
            compilation = _compile(text, self.output)
            errors = [d for d in compilation.diagnostics if d.is_error]
            if not errors:
                return [rule for _, rule in rules], found
            offset = len(self.vocabulary.text + SEPARATOR)
            starts = _rule_offsets(offset, [rule for _, rule in rules])
            blamed = False
            for diagnostic in errors:
                for (index, rule), (start, end) in zip(rules, starts, strict=True):
                    if index in dropped:
                        continue
                    spans = [diagnostic.span, *(r.span for r in diagnostic.related)]
                    if any(s.file == self.output and start <= s.start < end for s in spans):
                        dropped.add(index)
                        blamed = True
                        found.append(
                            P.RULE_REJECTED(
                                STEP,
                                f"left out: once rules with problems were left out, it has an error: "
                                f"{diagnostic.message} [{diagnostic.name}]",
                                rule.id,
                            )
                        )
            if not blamed:  # an error no kept rule is at: keep no translated rule at all
                for index, rule in rules:
                    dropped.add(index)
                    found.append(
                        P.RULE_REJECTED(STEP, "left out: the policy has errors outside the rules", rule.id)
                    )


def deciding(rules: list[Rule]) -> list[Rule]:
    """The rules that lead to a verdict: decisions, and the helper rules they use."""
    return [rule for _, rule in _deciding(list(enumerate(rules)))]


def _deciding(rules: list[tuple[int, Rule]]) -> list[tuple[int, Rule]]:
    """The rules that lead to a verdict: decisions, and the helper rules they use."""
    by_head: dict[str, list[tuple[int, Rule]]] = {}
    for item in rules:
        by_head.setdefault(item[1].head, []).append(item)
    bodies: dict[int, set[str]] = {}
    for index, rule in rules:
        module, _ = parse(SourceFile(RULES_FILE, rule.text))
        names: set[str] = set()
        for statement in module.statements:
            if isinstance(statement, ast.Rule):
                names |= body_relations(statement)
        bodies[index] = names
    used: set[str] = set()
    todo = [item for item in rules if item[1].kind != "helper"]
    result = list(todo)
    while todo:
        index, _ = todo.pop()
        for name in bodies[index] - used:
            used.add(name)
            for item in by_head.get(name, []):
                result.append(item)
                todo.append(item)
    return result


def body_relations(rule: ast.Rule) -> set[str]:
    """The relations a rule's body uses, negated or inside an aggregate included."""
    return {atom.name for atom, _, _ in summarize(rule).atoms}


def policy_text(vocabulary: Vocabulary, rules: list[Rule]) -> str:
    """The vocabulary followed by the translated rules."""
    return vocabulary.text + SEPARATOR + "".join(rule.text + "\n\n" for rule in rules)


def _rule_offsets(offset: int, rules: list[Rule]) -> list[tuple[int, int]]:
    spans = []
    at = offset
    for rule in rules:
        spans.append((at, at + len(rule.text)))
        at += len(rule.text) + 2
    return spans


def _compile(text: str, output: str) -> Parsed:
    program, found = load_source(text, output)
    return compile_program(program, found)


def check(
    vocabulary: Vocabulary,
    requirements: tuple[Requirement, ...],
    text: str,
    unexpressed: tuple[Unexpressed, ...],
    output: str,
) -> Draft:
    """Every issue of a translation's text."""
    source = SourceFile(RULES_FILE, text)
    module, syntax = parse(source)
    draft = Draft(vocabulary, requirements, text, unexpressed, output, module.statements)
    sources = {RULES_FILE: source}
    issues: list[Issue] = []
    for diagnostic in syntax:
        issues.append(
            Issue(
                P.MALFORMED_DATALOG(STEP, f"{_where(diagnostic)}: {diagnostic.message}", "the translation"),
                _rendered(diagnostic, sources),
                None,
            )
        )
    defined = {s.head.name for s in draft.statements if isinstance(s, ast.Rule)}
    for index, statement in enumerate(draft.statements):
        issues.extend(_vocabulary_issues(draft, index, statement, defined))
        if isinstance(statement, ast.Rule):
            issues.extend(_requirement_issues(draft, index, statement))
    for item in unexpressed:
        if item.requirement not in draft.ids:
            issues.append(
                Issue(
                    P.UNKNOWN_REQUIREMENT(
                        STEP, f"`not_expressible` names `{item.requirement}`, which is not a requirement"
                    ),
                    f"`not_expressible` names `{item.requirement}`, which is not a requirement "
                    f"(the requirements are {_id_range(draft.ids)})",
                    None,
                    drop=False,
                )
            )
    if not syntax:
        issues.extend(_compiler_issues(draft, sources))
    return replace(draft, issues=tuple(issues))


def _vocabulary_issues(draft: Draft, index: int, statement: ast.Statement, defined: set[str]) -> list[Issue]:
    vocabulary = draft.vocabulary
    line = statement.span.line

    def issue(message: str, subject: str) -> Issue:
        return Issue(P.VOCABULARY_CHANGE(STEP, message, subject), f"line {line}: {message}", index)

    if isinstance(statement, ast.Input):
        names = ", ".join(f"`{n.name}`" for n in statement.names)
        return [
            issue(f"declares {names} an input: only the vocabulary says what facts come in", f"line {line}")
        ]
    if isinstance(statement, ast.Functor):
        return [
            issue(
                f"declares the functor `{statement.name.name}`: only the vocabulary declares functors",
                f"line {line}",
            )
        ]
    if isinstance(
        statement, ast.Include | ast.Import | ast.Default | ast.Role | ast.FieldMap | ast.ArgDecl | ast.Key
    ):
        return [
            issue(
                "has a directive only the vocabulary may give (include, import, default, roles, "
                "argument declarations, keys)",
                f"line {line}",
            )
        ]
    if isinstance(statement, ast.Decl) and statement.name.name in vocabulary.relations:
        return [
            issue(f"declares `{statement.name.name}` again: it belongs to the vocabulary", f"line {line}")
        ]
    if isinstance(statement, ast.Misplaced):
        return []
    if not isinstance(statement, ast.Rule):
        return []
    found = []
    head = statement.head.name
    subject = _subject(draft, statement)
    if head in vocabulary.relations:
        what = "an input" if head in vocabulary.inputs else "a relation"
        found.append(
            issue(
                f"adds to `{head}`, {what} of the vocabulary; define a relation of your own instead", subject
            )
        )
    invented = sorted(
        name
        for name in body_relations(statement)
        if name not in vocabulary.relations
        and name not in defined
        and name not in vocabulary.functors
        and name not in DECISIONS
    )
    for name in invented:
        found.append(
            Issue(
                P.INVENTED_NAME(
                    STEP,
                    f"uses `{name}`, which neither the vocabulary nor a translated rule defines",
                    subject,
                ),
                f"line {line}: `{name}` is not in the vocabulary and no rule of yours defines it",
                index,
            )
        )
    return found


def _requirement_issues(draft: Draft, index: int, rule: ast.Rule) -> list[Issue]:
    subject = _subject(draft, rule)
    line = rule.span.line
    cited = _ids(rule.annotation("req"))
    if not cited:
        return [
            Issue(
                P.MISSING_REQUIREMENT(STEP, "left out: it names no requirement (`@req`)", subject),
                f'line {line}: the rule has no `@req("R...")` naming the requirement it encodes',
                index,
            )
        ]
    unknown = [r for r in cited if r not in draft.ids]
    if not unknown:
        return []
    known = len(unknown) < len(cited)
    names = ", ".join(f"`{r}`" for r in unknown)
    message = f"cites {names}, which {'is' if len(unknown) == 1 else 'are'} not a requirement"
    return [
        Issue(
            P.UNKNOWN_REQUIREMENT(STEP, message if known else f"left out: {message}", subject),
            f"line {line}: {message} (the requirements are {_id_range(draft.ids)})",
            index,
            drop=not known,
        )
    ]


def _compiler_issues(draft: Draft, sources: dict[str, SourceFile]) -> list[Issue]:
    """Errors of the vocabulary and the rules compiled together, in the rules' coordinates."""
    offset = len(draft.vocabulary.text + SEPARATOR)
    text = draft.vocabulary.text + SEPARATOR + _without_includes(draft)
    compilation = _compile(text, draft.output)
    found = []
    for diagnostic in compilation.diagnostics:
        if not diagnostic.is_error:
            continue
        moved = _moved(diagnostic, draft.output, offset, sources[RULES_FILE])
        index = _statement_at(draft, moved)
        subject = _subject(draft, draft.statements[index]) if index is not None else "the translation"
        kind = P.INVENTED_NAME if diagnostic.code in INVENTING else P.RULE_REJECTED
        message = f"{_where(moved)}: {moved.message} [{moved.name}]"
        if kind is P.RULE_REJECTED:
            message = f"left out: {message}"
        rendered = _rendered(moved, {**draft.vocabulary.sources_text, **sources})
        found.append(Issue(kind(STEP, message, subject), rendered, index))
    return found


def _without_includes(draft: Draft) -> str:
    """The draft's text with its `.include` directives blanked out (lines and offsets kept): an
    answer must not make policyc read a file of this machine, let alone send its text back to the
    model in a repair round. The directive is reported as a `vocabulary-change` all the same."""
    text = draft.text
    for statement in draft.statements:
        if isinstance(statement, ast.Include):
            start, end = statement.span.start, statement.span.end
            text = text[:start] + "".join(c if c == "\n" else " " for c in text[start:end]) + text[end:]
    return text


def _moved(diagnostic: Diagnostic, output: str, offset: int, source: SourceFile) -> Diagnostic:
    """A diagnostic of the combined text, with its spans in the rules' text where they fall."""

    def move(span: Any) -> Any:
        if span.file != output or span.start < offset:
            return span
        return source.span(span.start - offset, span.end - offset)

    related = tuple(replace(r, span=move(r.span)) for r in diagnostic.related)
    return replace(diagnostic, span=move(diagnostic.span), related=related, fix=None)


def _statement_at(draft: Draft, diagnostic: Diagnostic) -> int | None:
    for span in (diagnostic.span, *(r.span for r in diagnostic.related)):
        if span.file != RULES_FILE:
            continue
        for index, statement in enumerate(draft.statements):
            if statement.span.start <= span.start < max(statement.span.end, statement.span.start + 1):
                return index
    return None


def _rendered(diagnostic: Diagnostic, sources: dict[str, SourceFile]) -> str:
    from policyc.compiler.render_text import render_one

    return render_one(diagnostic, sources.get).plain


def _where(diagnostic: Diagnostic) -> str:
    return f"{diagnostic.span.file}:{diagnostic.span.line}:{diagnostic.span.column}"


def _subject(draft: Draft, statement: ast.Statement) -> str:
    if isinstance(statement, ast.Rule):
        given = _string_arg(statement.annotation("id"))
        if given:
            return given
        return f"`{statement.head.name}` rule at line {statement.span.line} of the translation"
    return f"line {statement.span.line} of the translation"


def _string_arg(annotation: ast.Annotation | None) -> str | None:
    if annotation is None or not annotation.args:
        return None
    arg = annotation.args[0]
    return arg.value if isinstance(arg, ast.String) else arg.name if isinstance(arg, ast.Var) else None


def _ids(annotation: ast.Annotation | None) -> list[str]:
    if annotation is None:
        return []
    found = []
    for arg in annotation.args:
        if isinstance(arg, ast.String):
            found.extend(part.strip() for part in arg.value.split(",") if part.strip())
        elif isinstance(arg, ast.Var):
            found.append(arg.name)
    return found


def _id_range(ids: list[str]) -> str:
    if not ids:
        return "none"
    return f"{ids[0]} to {ids[-1]}" if len(ids) > 2 else " and ".join(ids)
