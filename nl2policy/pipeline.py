"""`policyc translate`: the whole pipeline, in one place (FORGE §3.4 and Appendix H.1).

==================  ==========================================================================
step                what it does
==================  ==========================================================================
``normalize``       the document as numbered atomic requirements, each citing its lines;
                    every line accounted for (:mod:`.requirements`)
``translate``       rules over the vocabulary, each with ``@req``; parsed and checked, the
                    rendered diagnostics fed back for at most ``repair_rounds`` rounds; what
                    still has errors is left out, so the written policy checks clean
                    (:mod:`.translate`, :mod:`.draft`)
``coverage``        both ways: every requirement has a rule that leads to a verdict (or a
                    reason it cannot have one), every rule a requirement that exists
``back-translate``  each decision rule described by a model that never sees the requirements,
                    and the description compared with the requirement (:mod:`.backtranslate`)
``synthesize``      a smallest execution for every path of every translated decision rule —
                    fires alone, or is blocked by each of its conditions — found by the
                    analyzer and replayed by a monitor (:mod:`.scenarios`)
``judge``           an independent judge's verdict at every recorded decision point
                    (``--traces``) and every synthesized one, compared with the policy's
                    (:mod:`.judge`)
``analyze``         the checks of ``policyc check --deep`` on the translated rules
==================  ==========================================================================

Nothing is read from the model before the inputs are known to be usable: the document, the
vocabulary (which must check clean) and the traces are read first.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path as FilePath
from typing import Any, TypeVar

from policyc.compiler.stages import Stratified

from . import problems as P
from .client import Chat, Settings
from .draft import Rule, deciding, policy_text
from .progress import Progress
from .report import Report, line_ranges
from .requirements import Document, Requirement, normalize
from .vocabulary import Vocabulary, load_vocabulary

T = TypeVar("T")
R = TypeVar("R")
SKIPPABLE = ("back-translation", "synthesis", "judge", "analysis")


class InputError(Exception):
    """An input or output file that cannot be used; ``status`` is the exit status."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Options:
    requirements: str
    output: str
    settings: Settings
    vocabulary: tuple[str, ...] = ()
    traces: str | None = None
    functors: str | None = None  # a module implementing the vocabulary's own functors
    repair_rounds: int = 3
    bound: int = 4  # fresh values per type for the synthesized scenarios
    search_timeout: float = 120.0  # for every scenario search together
    deep_timeout: float = 6.0
    jobs: int = 4  # requests in flight at once
    skip: frozenset[str] = frozenset()
    report: str | None = None  # where the JSON report goes, checked before any request


@dataclass(frozen=True)
class Inputs:
    document: Document
    vocabulary: Vocabulary
    sessions: list[dict[str, Any]] | None


def prepare(options: Options) -> Inputs:
    """Read everything the pipeline needs before any request is made."""
    from policyc.compiler.files import POLICY_LIMIT, read_bytes
    from policyc.runtime.replay import TraceError

    from .decisions import read_traces

    try:
        data = read_bytes(options.requirements, POLICY_LIMIT)
    except OSError as error:
        raise InputError(f"cannot read `{options.requirements}`: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"`{options.requirements}` is not UTF-8 text (byte {error.start})", 1) from None
    if not text.strip():
        raise InputError(f"`{options.requirements}` is empty", 1)
    folder = os.path.dirname(os.path.abspath(options.output))
    if not os.path.isdir(folder):
        raise InputError(f"cannot write `{options.output}`: the folder `{folder}` does not exist")
    if not os.access(folder, os.W_OK) or os.path.isdir(options.output):
        raise InputError(f"cannot write `{options.output}`")
    _check_report(options)
    inputs = [options.requirements, *options.vocabulary, *([options.traces] if options.traces else [])]
    _not_an_input(options.output, inputs)
    vocabulary = load_vocabulary(list(options.vocabulary), options.output)
    # the files the vocabulary includes (its own text is compiled under the output's name)
    included = [path for path in vocabulary.sources_text if path != options.output]
    _not_an_input(options.output, included)
    sessions = None
    if options.traces is not None:
        try:
            sessions = read_traces(options.traces)
        except OSError as error:
            raise InputError(f"cannot read `{options.traces}`: {error.strerror or error}") from None
        except TraceError as error:
            raise InputError(str(error), 1) from None
    return Inputs(Document(options.requirements, text), vocabulary, sessions)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _not_an_input(output: str, inputs: list[str]) -> None:
    """Writing the policy must not overwrite the requirements, the vocabulary or the traces."""
    for path in inputs:
        if os.path.isfile(path) and _same_file(output, path):
            raise InputError(f"cannot write the policy to `{output}`: it is an input (`{path}`)")


def _check_report(options: Options) -> None:
    """The report's path is checked before any request is made, so that a run is not lost."""
    report = options.report
    if report is None:
        return
    folder = os.path.dirname(os.path.abspath(report))
    if not os.path.isdir(folder):
        raise InputError(f"cannot write `{report}`: the folder `{folder}` does not exist")
    if (
        not os.access(folder, os.W_OK)
        or os.path.isdir(report)
        or (os.path.exists(report) and not os.access(report, os.W_OK))
    ):
        raise InputError(f"cannot write `{report}`")
    inputs = [options.requirements, *options.vocabulary, *([options.traces] if options.traces else [])]
    for path in [options.output, *inputs]:
        if _same_file(report, path):
            raise InputError(f"cannot write the report to `{report}`: it is also `{path}`")


def run(options: Options, progress: Progress | None = None) -> Report:
    """Translate, validate, write the policy, and report (:class:`InputError`,
    :class:`~.vocabulary.VocabularyError` or :class:`~.client.ConfigurationError` when it cannot
    start)."""
    progress = progress or Progress(quiet=True)
    inputs = prepare(options)
    settings = options.settings
    report = Report(
        options.requirements,
        options.output,
        inputs.vocabulary.sources,
        options.traces,
        settings.model,
        settings.url,
    )
    chat = Chat(settings)
    try:
        _run(options, inputs, chat, report, progress)
    finally:
        report.usage = chat.usage.to_json()
    return report


def _run(options: Options, inputs: Inputs, chat: Chat, report: Report, progress: Progress) -> None:
    document, vocabulary = inputs.document, inputs.vocabulary

    progress.step("normalize")
    normalized = normalize(chat, document)
    report.requirements, report.context = normalized.requirements, normalized.context
    report.problems.extend(normalized.problems)
    report.steps["normalize"] = "done" if normalized.answered else "failed"
    progress.finish(_count(len(normalized.requirements), "requirement"))
    if not normalized.requirements:
        return

    from .translate import translate

    progress.step("translate")
    translation = translate(
        chat, vocabulary, normalized.requirements, options.output, options.repair_rounds, progress.note
    )
    report.steps["translate"] = "done" if translation.draft is not None else "failed"
    report.problems.extend(translation.problems)
    report.repair_rounds = translation.rounds
    report.unexpressed = {u.requirement: u.reason or "(no reason given)" for u in translation.unexpressed}
    progress.finish(f"{_count(len(translation.rules), 'rule')}, {_count(translation.rounds, 'repair round')}")
    if not translation.rules:
        _coverage(report)
        return
    text, rules, compilation = _write(
        options.output, document, normalized.requirements, vocabulary, list(translation.rules)
    )
    report.written = True
    report.rules = tuple(rules)
    report.deciding = frozenset(rule.id for rule in deciding(rules))
    _coverage(report)

    decisions = [rule for rule in rules if rule.kind != "helper"]
    if "back-translation" in options.skip:
        report.steps["back-translate"] = "skipped"
    else:
        from .backtranslate import back_translate

        progress.step("back-translate", len(decisions))
        results = _each(
            decisions,
            lambda rule: back_translate(chat, vocabulary, rule, rules, normalized.requirements),
            options.jobs,
            progress,
        )
        for done, found in results:
            report.back_translations.append(done)
            report.problems.extend(found)
        failed = sum(b.verdict is None for b in report.back_translations)
        report.steps["back-translate"] = "failed" if failed else "done"
        different = sum(b.verdict == "different" for b in report.back_translations)
        progress.finish(f"{different} of {_count(len(decisions), 'rule')} differ from their requirements")

    points = _decision_points(options, inputs, report, compilation, text, rules, progress)

    if "judge" in options.skip:
        report.steps["judge"] = "skipped"
    elif points:
        from .judge import judge_point

        progress.step("judge", len(points))
        results = _each(
            points, lambda point: judge_point(chat, document.text, vocabulary, point), options.jobs, progress
        )
        for judgment, found in results:
            (report.recorded if judgment.point.origin == "recorded" else report.synthesized).append(judgment)
            report.problems.extend(found)
        failed = sum(j.verdict is None for j in [*report.recorded, *report.synthesized])
        report.steps["judge"] = "failed" if failed or report.steps.get("judge") == "failed" else "done"
        disagreements = sum(j.agrees is False for j in [*report.recorded, *report.synthesized])
        progress.finish(_count(disagreements, "disagreement"))
    else:
        report.steps.setdefault("judge", "done")

    if "analysis" in options.skip:
        report.steps["analyze"] = "skipped"
    else:
        progress.step("analyze")
        report.findings = _findings(
            compilation, len(text) - len("".join(r.text + "\n\n" for r in rules)), options
        )
        report.steps["analyze"] = "done"
        progress.finish(_count(len(report.findings), "finding"))


def _coverage(report: Report) -> None:
    report.steps["coverage"] = "done"
    uncovered = report.uncovered
    for requirement in report.requirements:
        if requirement.id not in uncovered:
            continue
        why = report.unexpressed.get(requirement.id)
        message = (
            f"no rule encodes it; the translator says it cannot be expressed with this vocabulary: {why}"
            if why
            else "no rule that leads to a verdict encodes it"
        )
        report.problems.append(P.UNCOVERED_REQUIREMENT("coverage", message, requirement.id))


def _write(
    output: str,
    document: Document,
    requirements: tuple[Requirement, ...],
    vocabulary: Vocabulary,
    rules: list[Rule],
) -> tuple[str, list[Rule], Stratified]:
    """Write the policy; its text, its rules with their lines, and its compilation."""
    from policyc.compiler.loader import load_source
    from policyc.compiler.pipeline import compile_program

    name = json.dumps(os.path.basename(document.path), ensure_ascii=False)[1:-1]  # no line breaks
    header = [
        f"// Translated by `policyc translate` from `{name}`. Each translated rule",
        "// names in `@req` the requirements it encodes:",
        "//",
    ]
    for requirement in requirements:
        wrapped = textwrap.wrap(
            f"{requirement.id} ({line_ranges(requirement.lines)}): {requirement.text}", 96
        )
        header.append(f"// {wrapped[0]}")
        header.extend(f"//     {line}" for line in wrapped[1:])
    text = "\n".join(header) + "\n\n" + policy_text(vocabulary, rules)
    program, found = load_source(text, output)
    compilation = compile_program(program, found)
    if not compilation.ok or not isinstance(compilation, Stratified):
        # the rules checked clean after the vocabulary: comments cannot break them
        errors = [d for d in compilation.diagnostics if d.is_error]
        raise AssertionError(f"the written policy does not check: {errors[0].message}")
    placed = []
    at = 0
    for rule in rules:
        at = text.index(rule.text, at)
        placed.append(
            Rule(rule.id, rule.head, rule.kind, rule.requirements, rule.text, text.count("\n", 0, at) + 1)
        )
        at += len(rule.text)
    try:
        FilePath(output).write_text(text, encoding="utf-8")
    except OSError as error:
        raise InputError(f"cannot write `{output}`: {error.strerror or error}") from None
    return text, placed, compilation


def _decision_points(
    options: Options,
    inputs: Inputs,
    report: Report,
    compilation: Stratified,
    text: str,
    rules: list[Rule],
    progress: Progress,
) -> list[Any]:
    from policyc.compiler.planner import build_plan

    from .decisions import recorded, synthesized

    plan = build_plan(compilation)
    program = compilation.program
    uses_events = any(program.is_library(m.path) and m.path.endswith("/events.dl") for m in program.modules)
    points: list[Any] = []
    if inputs.sessions is not None and "judge" not in options.skip:
        progress.step("replay the traces")
        policy = _policy(plan, options.functors, report)
        if policy is not None:
            found, problems = recorded(policy, inputs.sessions)
            points.extend(found)
            report.problems.extend(problems)
        progress.finish(_count(len(points), "decision point"))
    if "synthesis" in options.skip or "judge" in options.skip:
        report.steps["synthesize"] = "skipped"
        return points
    from .scenarios import synthesize

    progress.step("synthesize")
    synthesis = synthesize(
        compilation, text, rules, options.output, options.bound, options.search_timeout, uses_events
    )
    report.bound = options.bound
    report.paths = [
        (path, synthesis.outcomes.get(i, "not searched")) for i, path in enumerate(synthesis.paths)
    ]
    report.problems.extend(synthesis.problems)
    points.extend(synthesized(plan, synthesis.scenarios, uses_events))
    failed = any(p.name == "scenario-failed" and p.subject is None for p in synthesis.problems)
    report.steps["synthesize"] = "failed" if failed else "done"
    progress.finish(
        f"{len(synthesis.scenarios)} scenarios for {len(synthesis.paths)} paths (bound {options.bound})"
    )
    return points


def _policy(plan: Any, functors: str | None, report: Report) -> Any:
    from policyc.runtime.functors import MissingFunctors, load_module
    from policyc.runtime.policy import Policy

    try:
        module = load_module(functors) if functors else None
        return Policy(plan, module)
    except (ImportError, MissingFunctors) as error:
        report.problems.append(P.TRACE_PROBLEM("judge", f"the recorded sessions cannot be replayed: {error}"))
        report.steps["judge"] = "failed"
        return None


def _findings(compilation: Stratified, start: int, options: Options) -> list[Any]:
    """The warnings and deep findings of the translated rules (not of the vocabulary)."""
    from policyc.analyzer.deep import analyse
    from policyc.compiler.diagnostics import sort_diagnostics

    found = list(compilation.diagnostics)
    found.extend(analyse(compilation, 2, options.deep_timeout).findings)
    return [d for d in sort_diagnostics(found) if d.span.file == options.output and d.span.start >= start]


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _each(items: list[T], work: Callable[[T], R], jobs: int, progress: Progress) -> list[R]:
    """``work`` on every item, ``jobs`` at a time, results in the items' order."""

    def one(item: T) -> R:
        try:
            return work(item)
        finally:
            progress.advance()

    if jobs <= 1 or len(items) <= 1:
        return [one(item) for item in items]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, items))
