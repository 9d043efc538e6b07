"""The translation report: what was translated, how, and what needs a human's attention.

One object, written as JSON (``--report``, ``--format json``) and as readable text. Its sections
follow the pipeline: the requirements, the rules and the requirements each encodes (coverage
both ways), the back-translations, the decision points (recorded and synthesized) with the
judge's verdicts, the static analysis of the policy, and every problem met on the way.
``docs/translate.md`` describes each field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policyc.compiler.diagnostics import Diagnostic

from . import problems as P
from .backtranslate import BackTranslation
from .draft import Rule
from .judge import Judgment, render_session
from .requirements import Context, Requirement
from .scenarios import Path

FORMAT_VERSION = 1


@dataclass
class Report:
    requirements_file: str
    output: str
    vocabulary: tuple[str, ...]
    traces: str | None
    model: str
    base_url: str
    written: bool = False
    steps: dict[str, str] = field(default_factory=dict)  # step -> "done", "skipped" or "failed"
    requirements: tuple[Requirement, ...] = ()
    context: tuple[Context, ...] = ()
    rules: tuple[Rule, ...] = ()
    deciding: frozenset[str] = frozenset()  # the ids of the rules that lead to a verdict
    unexpressed: dict[str, str] = field(default_factory=dict)  # requirement -> why it has no rule
    repair_rounds: int = 0
    back_translations: list[BackTranslation] = field(default_factory=list)
    recorded: list[Judgment] = field(default_factory=list)
    synthesized: list[Judgment] = field(default_factory=list)
    paths: list[tuple[Path, str]] = field(default_factory=list)  # every path and what became of it
    bound: int = 0
    findings: list[Diagnostic] = field(default_factory=list)
    problems: list[P.Problem] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)

    # ------------------------------------------------------------------ derived facts

    def coverage(self) -> dict[str, list[str]]:
        """Each requirement with the rules that cite it and lead to a verdict (decisions, and
        the helper rules decisions use)."""
        covered: dict[str, list[str]] = {r.id: [] for r in self.requirements}
        for rule in self.rules:
            if rule.id not in self.deciding:
                continue
            for req in rule.requirements:
                if req in covered and rule.id not in covered[req]:
                    covered[req].append(rule.id)
        return covered

    @property
    def uncovered(self) -> list[str]:
        return [r for r, rules in self.coverage().items() if not rules]

    @property
    def errors(self) -> int:
        return sum(p.severity == P.ERROR for p in self.problems)

    @property
    def complete(self) -> bool:
        return all(state != "failed" for state in self.steps.values())

    @property
    def ok(self) -> bool:
        return self.written and self.complete and self.errors == 0

    def agreement(self, judgments: list[Judgment]) -> dict[str, Any]:
        judged = [j for j in judgments if j.agrees is not None]
        agreed = sum(bool(j.agrees) for j in judged)
        return {
            "points": len(judgments),
            "judged": len(judged),
            "agreed": agreed,
            "disagreed": len(judged) - agreed,
            "rate": round(agreed / len(judged), 4) if judged else None,
        }

    def summary(self) -> dict[str, Any]:
        decisions = [r for r in self.rules if r.kind != "helper"]
        return {
            "requirements": len(self.requirements),
            "covered": len(self.requirements) - len(self.uncovered),
            "uncovered": len(self.uncovered),
            "rules": len(self.rules),
            "decision_rules": len(decisions),
            "unjustified": sum(
                p.name in ("missing-requirement", "unknown-requirement") for p in self.problems
            ),
            "rejected": sum(p.name == "rule-rejected" for p in self.problems),
            "back_translation_discrepancies": sum(b.verdict == "different" for b in self.back_translations),
            "recorded": self.agreement(self.recorded),
            "synthesized": {**self.agreement(self.synthesized), "paths": len(self.paths)},
            "findings": len(self.findings),
            **{f"{severity}s": n for severity, n in P.counts(self.problems).items()},
        }

    # ------------------------------------------------------------------------- JSON

    def to_json(self) -> dict[str, Any]:
        from policyc.compiler.render_json import diagnostic_json

        coverage = self.coverage()
        uncovered = self.uncovered
        return {
            "format": FORMAT_VERSION,
            "status": "ok" if self.ok else "problems",
            "complete": self.complete,
            "requirements_file": self.requirements_file,
            "output": self.output if self.written else None,
            "vocabulary": list(self.vocabulary),
            "traces": self.traces,
            "model": self.model,
            "base_url": self.base_url,
            "steps": self.steps,
            "summary": self.summary(),
            "requirements": [
                {
                    **r.to_json(),
                    "rules": coverage.get(r.id, []),
                    "covered": r.id not in uncovered,
                    "not_expressible": self.unexpressed.get(r.id),
                }
                for r in self.requirements
            ],
            "context": [c.to_json() for c in self.context],
            "rules": [rule.to_json() for rule in self.rules],
            "uncovered": [
                {"requirement": r, "reason": self.unexpressed.get(r) or "no rule encodes it"}
                for r in uncovered
            ],
            "unjustified": [
                p.to_json() for p in self.problems if p.name in ("missing-requirement", "unknown-requirement")
            ],
            "repair_rounds": self.repair_rounds,
            "back_translation": [b.to_json() for b in self.back_translations],
            "decision_points": {
                "bound": self.bound,
                "recorded": [j.to_json() for j in self.recorded],
                "synthesized": [j.to_json() for j in self.synthesized],
                "paths": [{**path.to_json(), "outcome": outcome} for path, outcome in self.paths],
            },
            "disagreements": [j.to_json() for j in [*self.recorded, *self.synthesized] if j.agrees is False],
            "findings": [diagnostic_json(d) for d in self.findings],
            "problems": [p.to_json() for p in self.problems],
            "usage": self.usage,
        }

    # ------------------------------------------------------------------------- text

    def text(self) -> str:
        out: list[str] = []
        add = out.append
        add(
            f"policyc translate: {self.requirements_file} -> {self.output if self.written else '(no policy written)'}"
        )
        add(f"model {self.model} at {self.base_url}; vocabulary: {', '.join(self.vocabulary)}")
        coverage = self.coverage()
        uncovered = set(self.uncovered)
        add("")
        add(
            f"Requirements: {len(self.requirements)} ({len(self.requirements) - len(uncovered)} covered, {len(uncovered)} uncovered)"
        )
        for r in self.requirements:
            where = line_ranges(r.lines)
            if r.id in uncovered:
                why = self.unexpressed.get(r.id)
                state = f"UNCOVERED ({'not expressible: ' + why if why else 'no rule encodes it'})"
            else:
                state = "covered by " + ", ".join(coverage[r.id])
            add(f"  {r.id:<4} {where:<12} {P.shorten(r.text, 90)}")
            add(f"       {state}")
        decisions = [r for r in self.rules if r.kind != "helper"]
        add("")
        add(
            f"Rules: {len(self.rules)} kept ({len(decisions)} decisions, {len(self.rules) - len(decisions)} helpers)"
        )
        for rule in self.rules:
            add(f"  {rule.id} ({rule.kind}, line {rule.line}): {', '.join(rule.requirements)}")
        left = [
            p
            for p in self.problems
            if p.name in ("rule-rejected", "missing-requirement", "unknown-requirement")
        ]
        for p in left:
            add(f"  {p.subject}: {p.message}")
        if "back-translate" in self.steps:
            add("")
            if self.steps["back-translate"] == "skipped":
                add("Back-translation: skipped")
            else:
                same = sum(b.verdict == "same" for b in self.back_translations)
                different = [b for b in self.back_translations if b.verdict == "different"]
                failed = sum(b.verdict is None for b in self.back_translations)
                add(
                    f"Back-translation: {len(self.back_translations)} rules, {same} same, {len(different)} different"
                    + (f", {failed} not done" if failed else "")
                )
                for b in different:
                    add(f"  {b.rule} ({', '.join(b.requirements)}): {b.difference}")
                    add(f"    described as: {P.shorten(b.description or '', 200)}")
        add("")
        recorded = f"Recorded decisions ({self.traces})" if self.traces else "Recorded decisions"
        if self.traces is not None and self.steps.get("judge") == "skipped":
            add(f"{recorded}: skipped")
        elif self.traces is not None and "judge" not in self.steps:
            add(f"{recorded}: not judged (no policy)")
        else:
            add(_rate_line(recorded, self.agreement(self.recorded), self.traces is not None))
        scenarios = sum(outcome == "scenario" for _, outcome in self.paths)
        judged = self.agreement(self.synthesized)
        if self.steps.get("synthesize") == "skipped":
            add("Synthesized decisions: skipped")
        elif "synthesize" not in self.steps:
            add("Synthesized decisions: not searched (no policy)")
        else:
            add(
                f"Synthesized decisions: {len(self.paths)} paths, {scenarios} with a scenario (bound {self.bound}), "
                + _rate(judged)
            )
        disagreements = [j for j in [*self.recorded, *self.synthesized] if j.agrees is False]
        if disagreements:
            add("")
            add(f"Disagreements: {len(disagreements)}")
            for j in disagreements:
                add(_disagreement(j))
        if self.findings:
            add("")
            add(f"Static analysis: {len(self.findings)} finding{'s' if len(self.findings) != 1 else ''}")
            for d in self.findings:
                add(
                    f"  {d.span.file}:{d.span.line}:{d.span.column}: {d.severity.value}[{d.code}]: {d.message} [{d.name}]"
                )
        shown = [p for p in self.problems if p.severity != P.NOTE]
        counts = P.counts(self.problems)
        add("")
        add(f"Problems: {counts['error']} errors, {counts['warning']} warnings, {counts['note']} notes")
        for p in shown:
            add(f"  {p.text()}")
        add("")
        if self.ok:
            add(f"Result: {self.output} written; every requirement is covered and every check agrees.")
        elif self.written:
            add(
                f"Result: {self.output} written (it checks clean); {counts['error']} problem{'s' if counts['error'] != 1 else ''} need attention."
            )
        else:
            add("Result: no policy was written.")
        return "\n".join(out)


def _rate(agreement: dict[str, Any]) -> str:
    rate = agreement["rate"]
    shown = f"{rate:.0%}" if rate is not None else "n/a"
    return f"{agreement['judged']} judged, {agreement['agreed']} agree ({shown})"


def _rate_line(title: str, agreement: dict[str, Any], given: bool) -> str:
    if not given:
        return f"{title}: none (no --traces)"
    return f"{title}: {agreement['points']} points, {_rate(agreement)}"


def _disagreement(j: Judgment) -> str:
    point = j.point
    policy = (
        "allowed"
        if point.allowed
        else "DENIED" + (f" by {', '.join(point.reasons)}" if point.reasons else "")
    )
    lines = [f"  {point.origin} {point.id}" + (f": {point.path.description}" if point.path else "")]
    lines.append(f"    policy: {policy}; judge: {j.verdict} ({P.shorten(j.reason, 200)})")
    session, call = render_session(point)
    lines.append("    session:")
    lines.extend(f"      {line}" for line in session.splitlines())
    from policyc.runtime.values import render_fact

    facts = point.record.get("facts") or {}
    for name, rows in sorted(facts.items()):
        for row in rows:
            lines.append(f"      fact {render_fact(name, tuple(row))}")
    lines.append(f"      -> {call}")
    return "\n".join(lines)


def line_ranges(lines: tuple[int, ...]) -> str:
    if not lines:
        return ""
    if len(lines) == 1:
        return f"line {lines[0]}"
    parts = []
    for n in lines:
        if parts and n == parts[-1][1] + 1:
            parts[-1] = (parts[-1][0], n)
        else:
            parts.append((n, n))
    return "lines " + ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in parts)
