"""The ``policyc`` command. Thin: parse arguments, call the library, print, choose the exit status.

Exit status: 0 when the input is fine, 1 when it has errors (or the check failed), 2 on a usage
or I/O problem. The compiler is imported inside each command so ``policyc --help`` stays fast.
"""

from __future__ import annotations

import gc
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__


class Finite(click.FloatRange):
    """A float within a range that is a number: NaN passes every comparison of
    ``click.FloatRange`` (``nan < 0`` is false), and an infinity is no duration or level."""

    name = "finite float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        if math.isinf(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


FORMATS = ("text", "json", "sarif")
SHOWABLE = ("ast", "strata", "plan")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="policyc")
def main() -> None:
    """Compile, check and enforce Datalog security policies for LLM agents."""


@main.command()
@click.argument("paths", nargs=-1, required=True, metavar="FILE...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="How to print the diagnostics.",
)
@click.option(
    "--fail-on",
    type=click.Choice(("error", "warning")),
    default="error",
    show_default=True,
    help="Exit with status 1 on errors only, or on warnings too.",
)
@click.option(
    "--show",
    type=click.Choice(SHOWABLE),
    help="Also print an intermediate form of each file: the syntax tree, the strata or the evaluation plan.",
)
@click.option("--stdin-filename", metavar="NAME", help="The file name to report for a policy read from `-`.")
@click.option(
    "--deep",
    is_flag=True,
    help="Also analyse what the policy does (clingo and z3): dead, redundant and shadowed rules, tools "
    "always denied or allowed.",
)
@click.option(
    "--bound",
    type=click.IntRange(1, 8),
    default=2,
    show_default=True,
    help="Fresh values per type the --deep searches may use.",
)
@click.option(
    "--deep-timeout",
    type=Finite(min=0.1),
    default=6.0,
    show_default=True,
    metavar="SECONDS",
    help="Time the --deep searches of a file may take together; a question left unanswered reports nothing.",
)
def check(
    paths: tuple[str, ...],
    fmt: str,
    fail_on: str,
    show: str | None,
    stdin_filename: str | None,
    deep: bool,
    bound: int,
    deep_timeout: float,
) -> None:
    """Report every syntax and semantic error of policy files.

    FILE may be a policy file, a folder (every `*.dl` file below it is checked) or `-` for
    standard input.
    """
    if show and fmt == "sarif":
        raise click.UsageError("--show cannot be combined with --format sarif")
    gc.disable()  # a short-lived process building many small objects; collection only costs time
    with _internal_errors():
        _check(paths, fmt, fail_on, show, stdin_filename, (bound, deep_timeout) if deep else None)


def _check(
    paths: tuple[str, ...],
    fmt: str,
    fail_on: str,
    show: str | None,
    stdin_filename: str | None,
    deep: tuple[int, float] | None = None,  # the bound and the time of --deep
) -> None:
    from ..compiler.diagnostics import Severity, sort_diagnostics
    from ..compiler.loader import SourceError, load_data, load_root, read_file
    from ..compiler.pipeline import compile_program
    from ..compiler.source import SourceFile

    files, problems = _expand(paths)
    compilations = {}
    for path in files:
        try:
            if path == "-":
                name = stdin_filename or "<stdin>"
                program, found = load_data(sys.stdin.buffer.read(), name)
            else:
                source = read_file(path)
                if isinstance(source, SourceFile) and source.text.lstrip().startswith("{"):
                    problems.append(
                        f"`{path}` is a bundle, not a policy source file: check the policy's sources "
                        "(witness, conditions and diff analyse a bundle once its plan is checked to be "
                        "its sources' plan)"
                    )
                    continue
                program, found = load_root(source)
        except SourceError as error:
            problems.append(str(error))
            continue
        compilations[path] = compile_program(program, found)
    deep_findings: list = []
    undecided: list[str] = []  # what --deep left undecided in the time allowed, per file and kind
    if deep is not None:
        from ..analyzer.deep import analyse

        for path, compilation in compilations.items():
            if compilation.ok:
                result = analyse(compilation, *deep)
                deep_findings.extend(result.findings)
                undecided.extend(f"{path}: {note}" for note in result.notes())
    diagnostics = sort_diagnostics(
        [*(d for c in compilations.values() for d in c.diagnostics), *deep_findings]
    )
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors

    if fmt == "text":
        _print_text(diagnostics, compilations, show)
    elif fmt == "json":
        from ..compiler.render_json import to_json

        out: dict[str, Any] = to_json(diagnostics)
        if show:
            from ..compiler.show import show_json

            out[show] = {path: show_json(show, c) for path, c in compilations.items()}
        click.echo(json.dumps(out, indent=2))
    else:
        from ..compiler.render_sarif import to_sarif

        click.echo(json.dumps(to_sarif(diagnostics, __version__), indent=2))

    for note in undecided:
        click.echo(f"policyc: note: {note} (--deep-timeout); they report nothing", err=True)
    for problem in problems:
        click.echo(f"policyc: error: {problem}", err=True)
    if problems:
        sys.exit(2)
    if errors or (fail_on == "warning" and warnings):
        sys.exit(1)


def _print_text(diagnostics: list, compilations: dict, show: str | None) -> None:
    from rich.console import Console

    from ..compiler import render_text

    console = Console(highlight=False, soft_wrap=True)
    if show:
        from ..compiler.show import show_text

        for path, compilation in compilations.items():
            if len(compilations) > 1:
                console.print(f"== {path} ==", style="bold")
            console.print(show_text(show, compilation), markup=False)
    sources: dict[str, Any] = {}
    for compilation in compilations.values():
        for module in compilation.program.modules:
            if module.source is not None:
                sources.setdefault(module.path, module.source)
    render_text.render(diagnostics, sources.get, console)
    if compilations:
        console.print(render_text.summary(diagnostics), style="bold" if diagnostics else None)


def _expand(paths: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Files to check: files as given, folders searched for `*.dl`, `-` for standard input."""
    files: list[str] = []
    problems: list[str] = []
    for path in paths:
        if path == "-" or not os.path.isdir(path):
            files.append(path)
            continue
        found = sorted(str(p) for p in Path(path).rglob("*.dl") if p.is_file())
        if not found:
            problems.append(f"no policy files (`*.dl`) in `{path}`")
        files.extend(found)
    return files, problems


class _internal_errors:
    """Turn a crash into a one-line report (set POLICYC_DEBUG=1 to see the traceback)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> bool:
        if error is None or isinstance(
            error, (SystemExit, KeyboardInterrupt, click.exceptions.Exit, click.ClickException)
        ):
            return False
        if isinstance(error, BrokenPipeError):  # the reader went away (`policyc ... | head`)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(0)
        from ..extras import MissingExtra, extra_of

        if isinstance(error, ModuleNotFoundError) and (extra := extra_of(error.name or "")):
            error = MissingExtra(extra, "this command")
        if isinstance(error, MissingExtra):
            _fail(str(error), 2)
        if os.environ.get("POLICYC_DEBUG"):
            return False
        click.echo(f"policyc: internal error: {kind.__name__}: {error}", err=True)
        click.echo(
            "this is a bug in policyc; please report it with the input that caused it "
            "(POLICYC_DEBUG=1 shows the traceback)",
            err=True,
        )
        sys.exit(2)


# ------------------------------------------------------------------------- compile and run


def _fail(message: str, status: int = 1) -> None:
    click.echo(f"policyc: error: {message}", err=True)
    sys.exit(status)


def _require(extra: str, what: str) -> None:
    """Stop with a one-line message when ``what`` needs an extra that is not installed."""
    from ..extras import MissingExtra, require

    try:
        require(extra, what)
    except MissingExtra as error:
        _fail(str(error), 2)


def _load_functors(spec: str | None) -> Any:
    """A module of functor implementations, by dotted name or file path."""
    if spec is None:
        return None
    from ..runtime.functors import load_module

    try:
        return load_module(spec)
    except ImportError as error:
        _fail(f"cannot load functors from `{spec}`: {error}", 2)


def _load_policy(path: str, functors: str | None, verify_key: str | None, limits: Any = None) -> Any:
    """A policy for a command: its errors are printed like `policyc check` prints them."""
    from ..runtime.functors import MissingFunctors
    from ..runtime.policy import PolicyError, load

    try:
        return load(Path(path), _load_functors(functors), verify_key=verify_key, limits=limits)
    except PolicyError as error:
        if error.diagnostics:
            _print_diagnostics(list(error.diagnostics))
        _fail(str(error))
    except MissingFunctors as error:
        _fail(str(error))


def _print_diagnostics(diagnostics: list, sources: Any = None) -> None:
    """Print diagnostics on standard error, their snippets from ``sources`` (a path to its
    source file) or else read from disk."""
    from rich.console import Console

    from ..compiler import render_text

    console = Console(highlight=False, soft_wrap=True, stderr=True)
    render_text.render(diagnostics, sources or _source_of, console)


def _source_of(path: str) -> Any:
    from ..compiler.files import POLICY_LIMIT, read_bytes
    from ..compiler.loader import decode

    try:
        source = decode(path, read_bytes(path, POLICY_LIMIT))
    except OSError:
        return None
    return source if hasattr(source, "text") else None


def _limits(max_facts: int | None, timeout: float | None) -> Any:
    from ..runtime.evaluator import Limits

    defaults = Limits()
    return Limits(max_facts or defaults.max_facts, timeout if timeout is not None else defaults.max_seconds)


def _read_facts(path: str, policy: Any) -> Any:
    from ..runtime.facts import FactsError, read

    try:
        return read(path, policy.plan)
    except FactsError as error:
        _fail(str(error))
    except OSError as error:
        _fail(f"cannot read facts `{path}`: {error.strerror or error}", 2)


def _sorted_rows(rows: set[tuple]) -> list[list]:
    return [list(row) for row in sorted(rows, key=lambda row: [(type(v).__name__ != "str", v) for v in row])]


POLICY = click.argument("policy", metavar="POLICY_OR_BUNDLE")
FUNCTORS = click.option(
    "--functors",
    metavar="MODULE",
    help="Python module (dotted name or .py file) whose "
    "@policyc.functor functions implement the policy's functors.",
)
VERIFY = click.option(
    "--verify-key", metavar="PUBKEY", help="Refuse a bundle not signed with this Ed25519 key."
)
FACTS = click.option(
    "--facts",
    "facts_path",
    required=True,
    metavar="FACTS",
    help='A JSON file {"Rel": [[v1, v2], ...]} or a folder of Rel.facts files.',
)
FORMAT = click.option(
    "--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True
)
MAX_FACTS = click.option(
    "--max-facts", type=click.IntRange(min=1), help="Stop (and fail closed) beyond this many facts."
)
TIMEOUT = click.option(
    "--timeout",
    type=Finite(min=0, min_open=True),
    help="Stop (and fail closed) after this many seconds.",
)


@main.command("compile")
@click.argument("path", metavar="FILE")
@click.option("-o", "--output", required=True, metavar="OUT", help="Where to write the bundle.")
@click.option("--sign-key", metavar="KEY", help="Sign the bundle with this Ed25519 private key (PEM).")
@click.option(
    "--thresholds",
    "thresholds_path",
    metavar="THRESHOLDS",
    help="Put thresholds calibrated by `policyc calibrate` in the bundle (the policy must import `risk`).",
)
def compile_command(path: str, output: str, sign_key: str | None, thresholds_path: str | None = None) -> None:
    """Compile a policy into a verified bundle (refused when it has errors)."""
    with _internal_errors():
        from ..compiler.files import replace_file
        from ..compiler.loader import SourceError, load_file
        from ..compiler.pipeline import compile_program
        from ..runtime.bundle import build_bundle
        from ..runtime.policy import PolicyError, plan_of

        try:
            program, found = load_file(path)
        except SourceError as error:
            _fail(str(error), 2)
        compilation = compile_program(program, found)
        if compilation.diagnostics:
            _print_diagnostics(list(compilation.diagnostics))
        try:
            plan = plan_of(compilation)
            thresholds = _bundle_thresholds(thresholds_path, compilation, plan)
            data = build_bundle(compilation, plan, sign_key, thresholds)
        except PolicyError as error:
            _fail(f"not compiled: {error}")
        try:
            replace_file(output, data)
        except OSError as error:
            _fail(f"cannot write `{output}`: {error.strerror or error}", 2)
        rules = len(plan.rules)
        signed = ", signed" if sign_key else ""
        if thresholds is not None:
            roles = len(thresholds.role_to_stratum)
            signed = f", thresholds for {roles} role{'s' if roles != 1 else ''}" + signed
        click.echo(
            f"wrote {output}: {rules} rule{'s' if rules != 1 else ''}, {len(plan.relations)} relations{signed}"
        )


@main.command("eval")
@POLICY
@FACTS
@click.option(
    "--query", "queries", multiple=True, metavar="REL", help="Print only this relation (repeatable)."
)
@FORMAT
@FUNCTORS
@VERIFY
@MAX_FACTS
@TIMEOUT
def eval_command(
    policy: str,
    facts_path: str,
    queries: tuple[str, ...],
    fmt: str,
    functors: str | None,
    verify_key: str | None,
    max_facts: int | None,
    timeout: float | None,
) -> None:
    """Evaluate a policy on facts and print the relations it derives."""
    with _internal_errors():
        loaded = _load_policy(policy, functors, verify_key, _limits(max_facts, timeout))
        names = {r.name: r for r in loaded.plan.relations}
        for query in queries:
            if query not in names or names[query].inline:
                _fail(f"the policy has no stored relation `{query}`", 2)
        facts = _read_facts(facts_path, loaded)
        result = _evaluate(loaded, facts, facts_path)
        derived = {rule.head for rule in loaded.plan.rules}
        wanted = list(queries) or [
            r.name for r in loaded.plan.relations if not r.inline and (r.name in derived or r.output)
        ]
        relations = {name: _sorted_rows(result.relation(name)) for name in sorted(wanted)}
        errors = [e.message for e in result.errors]
        if fmt == "json":
            out: dict[str, Any] = {"relations": relations}
            if errors:
                out["errors"] = errors
            click.echo(json.dumps(out, indent=2))
        else:
            from ..runtime.verdict import render_fact

            for name, rows in relations.items():
                click.echo(f"{name}: {len(rows)} fact{'s' if len(rows) != 1 else ''}")
                for row in rows:
                    click.echo(f"  {render_fact(name, tuple(row))}")
        for error in errors:
            click.echo(f"policyc: evaluation error: {error}", err=True)
        if errors:
            sys.exit(1)


@main.command("explain")
@POLICY
@click.argument("fact")
@FACTS
@click.option("--why-not", is_flag=True, help="Explain why the fact does not hold.")
@FORMAT
@FUNCTORS
@VERIFY
def explain_command(
    policy: str,
    fact: str,
    facts_path: str,
    why_not: bool,
    fmt: str,
    functors: str | None,
    verify_key: str | None,
) -> None:
    """Explain why FACT (like 'Deny("v6")') holds, as a derivation tree, or why it does not."""
    with _internal_errors():
        name, values = _parse_fact(fact)
        loaded = _load_policy(policy, functors, verify_key)
        values = _fact_of(loaded.plan, name, values, fact)
        facts = _read_facts(facts_path, loaded)
        result = _evaluate(loaded, facts, facts_path)
        for error in result.errors:
            click.echo(f"policyc: evaluation error: {error.message}", err=True)
        derivation = None if why_not else result.why(name, values)
        if derivation is not None:
            if fmt == "json":
                click.echo(json.dumps({"holds": True, "derivation": derivation.to_json()}, indent=2))
            else:
                click.echo("\n".join(derivation.render()))
            return
        answer = result.why_not(name, values)
        if fmt == "json":
            click.echo(json.dumps({"holds": answer.holds, "why_not": answer.to_json()}, indent=2))
        else:
            click.echo("\n".join(answer.render()))


def _evaluate(policy: Any, facts: Any, origin: str) -> Any:
    """Evaluate, stopping with the facts' problem (located in their file) when they do not fit
    the policy: nothing was evaluated, so no relation is printed as if it were empty."""
    result = policy.evaluate(facts, origin=origin)
    for error in result.errors:
        if error.kind == "facts":
            _fail(error.message)
    return result


def _fact_of(plan: Any, name: str, values: tuple, text: str) -> tuple:
    """The values of a fact to explain, checked against its relation's arity and types."""
    from ..runtime.facts import FactsError, convert

    specs = {r.name: r for r in plan.relations}
    if name not in specs:
        raise click.BadParameter(f"the policy has no relation `{name}`", param_hint="FACT")
    spec = specs[name]
    if len(values) != spec.arity:
        raise click.BadParameter(
            f"`{text}` gives {len(values)} value{'s' if len(values) != 1 else ''}, "
            f"but `{name}` has {spec.arity}",
            param_hint="FACT",
        )
    try:
        return tuple(
            convert(v, t, f"`{text}`, value {i + 1}")
            for i, (v, t) in enumerate(zip(values, spec.types, strict=True))
        )
    except FactsError as error:
        raise click.BadParameter(
            f"{error} (`{name}` takes {_types(spec.types)})", param_hint="FACT"
        ) from None


def _types(types: tuple) -> str:
    return "(" + ", ".join(t or "any" for t in types) + ")"


def _parse_fact(text: str) -> tuple[str, tuple]:
    """A ground atom written in the policy language, like `Deny("v6")`."""
    from ..runtime.facts import parse_fact

    try:
        return parse_fact(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="FACT") from None


@main.command("keygen")
@click.argument("prefix")
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing key pair (bundles signed with the old key no longer verify with the new one).",
)
def keygen_command(prefix: str, force: bool) -> None:
    """Create an Ed25519 key pair for signing bundles: PREFIX.key (owner-only) and PREFIX.pub.

    An existing PREFIX.key or PREFIX.pub is never overwritten without --force, nor written
    through a symbolic link."""
    with _internal_errors():
        from ..runtime.bundle import KeyExists, generate_keys

        try:
            private, public = generate_keys(prefix, force=force)
        except KeyExists as error:
            _fail(str(error))
        except OSError as error:
            where = f" `{error.filename}`" if error.filename else ""
            _fail(f"cannot write the keys{where}: {error.strerror or error}", 2)
        click.echo(f"wrote {private} (keep it secret) and {public}")


@main.command("test")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option(
    "--coverage", is_flag=True, help="Report which rules some test made fire, and the Deny rules none did."
)
@FORMAT
def test_command(paths: tuple[str, ...], coverage: bool, fmt: str) -> None:
    """Run the policy tests in `*_test.toml` files (PATH: files or folders, default `.`).

    Exit status 0 when every test passed, 1 when one failed or a test file could not run.
    """
    with _internal_errors():
        from ..testing.report import summary, text, to_json
        from ..testing.run import FileResult, run_file
        from ..testing.spec import SUFFIX, TestFileError, discover, read

        files, missing = discover(list(paths) or ["."])
        for name in missing:
            _fail(f"cannot read `{name}`: no such file or folder", 2)
        if not files:
            _fail(f"no test files (`*{SUFFIX}`) under {', '.join(paths) or '.'}")
        results = []
        for path in files:
            try:
                test = read(path)
            except TestFileError as error:
                results.append(FileResult(None, path, f"{error} [invalid-test-file]"))
                continue
            results.append(run_file(test, coverage))
        if fmt == "json":
            click.echo(json.dumps(to_json(results, coverage), indent=2, ensure_ascii=False, default=str))
        else:
            click.echo(text(results, coverage))
        counts = summary(results)
        if counts["failed"] or counts["errors"]:
            sys.exit(1)


@main.command("new")
@click.argument("name")
@click.option(
    "--dir", "parent", default=".", show_default=True, metavar="PARENT", help="Where to create the folder."
)
def new_command(name: str, parent: str) -> None:
    """Create a policy folder NAME with a policy, its tests and a README."""
    with _internal_errors():
        from .scaffold import ScaffoldError, scaffold

        try:
            written = scaffold(name, Path(parent))
        except ScaffoldError as error:
            _fail(str(error))
        for path in written:
            click.echo(f"wrote {path}")
        click.echo(f"next: policyc test {Path(parent) / name} --coverage")


@main.command("replay")
@POLICY
@click.argument("trace", metavar="TRACE.jsonl")
@FORMAT
@FUNCTORS
@VERIFY
@click.option(
    "--thresholds",
    "thresholds_path",
    metavar="THRESHOLDS",
    help="Risk thresholds from `policyc calibrate` (instead of those the bundle carries).",
)
def replay_command(
    policy: str,
    trace: str,
    fmt: str,
    functors: str | None,
    verify_key: str | None,
    thresholds_path: str | None = None,
) -> None:
    """Replay recorded sessions (one JSON object per line with an `events` list), deciding
    every tool call as it comes, and print each decision."""
    with _internal_errors():
        from ..runtime.replay import TraceError, replay_file

        loaded = _load_policy(policy, functors, verify_key)
        if thresholds_path is not None:
            loaded.thresholds = _monitor_thresholds(thresholds_path, loaded)
        try:
            sessions = replay_file(loaded, trace)
        except TraceError as error:
            _fail(str(error))
        except OSError as error:
            _fail(f"cannot read `{trace}`: {error.strerror or error}", 2)
        if not sessions:
            _fail(f"{trace}: no sessions (a trace holds one JSON object with an `events` list per line)")
        if fmt == "json":
            click.echo(json.dumps({"sessions": sessions}, indent=2))
            return
        for session in sessions:
            click.echo(f"session {session['session']}")
            for d in session["decisions"]:
                verdict = "allowed" if d["allowed"] else ("DENIED (error)" if d["errored"] else "DENIED")
                click.echo(f"  {d['event']} {d['tool']}: {verdict}")
                for reason in d["reasons"]:
                    click.echo(f"    [{reason['rule']}] {reason['message'] or ''}".rstrip())
            for problem in session["problems"]:
                click.echo(f"  problem: {problem} (every later decision is a denial)")


# ------------------------------------------------------------------------------ analysis

BOUND = click.option(
    "--bound",
    type=click.IntRange(1, 8),
    default=3,
    show_default=True,
    help="Fresh values per type a bounded search may use (besides the policy's constants).",
)


def _analysis(path: str) -> Any:
    """A policy loaded for analysis, or the reason it cannot be (status 1, or 2 if unreadable)."""
    from ..analyzer.query import AnalysisError, load

    try:
        return load(path)
    except AnalysisError as error:
        _fail(str(error), 2 if str(error).startswith("cannot read") else 1)


def _answer(question: Any, fmt: str) -> None:
    """Print what an analysis ``question()`` answers (its diagnostics and status 1 when the
    policy or the question cannot be analysed)."""
    from ..analyzer.query import AnalysisError

    try:
        found = question()
    except AnalysisError as error:
        if error.diagnostics:
            _print_diagnostics(list(error.diagnostics))
        _fail(str(error))
    if fmt == "json":
        click.echo(json.dumps(found.to_json(), indent=2, ensure_ascii=False))
    else:
        click.echo(found.text())


SEARCH_TIMEOUT = click.option(
    "--timeout",
    type=Finite(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Give up a search after this many seconds.",
)


@main.command("witness")
@POLICY
@click.argument("query")
@BOUND
@FORMAT
@SEARCH_TIMEOUT
def witness_command(policy: str, query: str, bound: int, fmt: str, timeout: float) -> None:
    """The smallest database on which QUERY holds, replayed through the evaluator.

    QUERY is a conjunction of literals over the policy's relations and functors, such as
    'Deny(a), is_tool(a, "send_email")'. Without a witness, says whether none exists at all
    (proved) or none within the bound. Exit status 0 when the question was answered.
    """
    with _internal_errors():
        from ..analyzer.witness import find_witness

        loaded = _analysis(policy)
        _answer(lambda: find_witness(loaded, query, bound, timeout), fmt)


@main.command("diff")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@BOUND
@FORMAT
@SEARCH_TIMEOUT
def diff_command(old: str, new: str, bound: int, fmt: str, timeout: float) -> None:
    """How NEW decides differently from OLD (policy files or bundles): equivalent,
    more-permissive, less-permissive or incomparable, with a database and action for each way
    they differ, replayed through both evaluators. Exit status 0 when the question was answered.
    """
    with _internal_errors():
        from ..analyzer.diff import diff

        before, after = _analysis(old), _analysis(new)
        _answer(lambda: diff(before, after, bound, timeout), fmt)


@main.command("conditions")
@POLICY
@click.argument("query")
@click.option(
    "--bound",
    type=click.IntRange(1, 8),
    default=2,
    show_default=True,
    help="How many times recursive relations are unfolded.",
)
@FORMAT
def conditions_command(policy: str, query: str, bound: int, fmt: str) -> None:
    """When QUERY holds, as alternatives over the input relations and functors.

    QUERY is a conjunction of literals, such as 'Allow(a)' or 'Deny(a), is_tool(a, "send_email")'.
    """
    with _internal_errors():
        from ..analyzer.conditions import conditions

        loaded = _analysis(policy)
        _answer(lambda: conditions(loaded, query, bound), fmt)


# ---------------------------------------------------------------------------- formatting


@main.command("fmt")
@click.argument("paths", nargs=-1, metavar="[FILE]...")
@click.option("--check", is_flag=True, help="Write nothing; list the files that are not formatted (exit 1).")
@click.option("--diff", is_flag=True, help="Write nothing; print the changes as a unified diff (exit 1).")
@click.option("--write", is_flag=True, help="Rewrite the files that are not formatted.")
@click.option("--stdin-filename", metavar="NAME", help="The file name to report for a policy read from `-`.")
@FORMAT
def fmt_command(
    paths: tuple[str, ...], check: bool, diff: bool, write: bool, stdin_filename: str | None, fmt: str
) -> None:
    """Format policy files in the canonical layout (docs/formatting.md).

    FILE may be a policy file, a folder (every `*.dl` file below it) or `-` for standard input
    (the default). Without a mode, the formatted text is printed on standard output.
    """
    if check + diff + write > 1:
        raise click.UsageError("choose one of --check, --diff and --write")
    mode = "check" if check else "diff" if diff else "write" if write else "print"
    with _internal_errors():
        _fmt(paths or ("-",), mode, stdin_filename or "<stdin>", fmt)


def _fmt(paths: tuple[str, ...], mode: str, stdin_name: str, fmt: str) -> None:
    from ..compiler.formatter import format_bytes, format_read
    from ..compiler.loader import SourceError, read_file

    files, problems = _expand(paths)
    results = []
    for path in files:
        if path == "-":
            result = format_bytes(sys.stdin.buffer.read(), stdin_name)
        else:
            try:
                result = format_read(read_file(path))
            except SourceError as error:
                problems.append(str(error))
                continue
        if mode == "write" and result.changed and path != "-":
            try:
                _replace(path, result.formatted or "")
            except OSError as error:
                problems.append(f"cannot write `{path}`: {error.strerror or error}")
                continue
        results.append((path, result))

    diagnostics = [d for _, result in results for d in result.diagnostics]
    failed = sum(1 for _, result in results if result.formatted is None)
    changed = [path for path, result in results if result.changed]
    if fmt == "json":
        _fmt_json(results, mode, diagnostics)
    else:
        _fmt_text(results, mode, diagnostics)
        _fmt_summary(mode, len(changed), len(results) - len(changed) - failed, failed)
    for problem in problems:
        click.echo(f"policyc: error: {problem}", err=True)
    if problems:
        sys.exit(2)
    if failed or (mode in ("check", "diff") and changed):
        sys.exit(1)


def _fmt_text(results: list, mode: str, diagnostics: list) -> None:
    if diagnostics:
        _print_diagnostics(diagnostics, {result.path: result.source for _, result in results}.get)
    for path, result in results:
        if result.formatted is None:
            continue
        if mode == "print" or (mode == "write" and path == "-"):
            click.echo(result.formatted, nl=False)
        elif mode == "check" and result.changed:
            click.echo(f"would reformat: {result.path}")
        elif mode == "diff" and result.changed:
            click.echo(result.diff(), nl=False)


def _fmt_summary(mode: str, changed: int, unchanged: int, failed: int) -> None:
    def files(n: int) -> str:
        return f"{n} file{'s' if n != 1 else ''}"

    if mode == "print":
        parts = []
    elif mode == "write":
        parts = [f"{files(changed)} reformatted", f"{files(unchanged)} left unchanged"]
    else:
        parts = [f"{files(changed)} would be reformatted", f"{files(unchanged)} already formatted"]
    if failed:
        parts.append(f"{files(failed)} with errors not formatted")
    if parts and changed + unchanged + failed:
        click.echo(", ".join(parts), err=True)


def _fmt_json(results: list, mode: str, diagnostics: list) -> None:
    from ..compiler.render_json import to_json

    files = []
    for path, result in results:
        entry: dict[str, Any] = {
            "file": result.path,
            "changed": result.changed,
            "error": result.formatted is None,
        }
        if mode == "print" or (mode == "write" and path == "-"):
            entry["text"] = result.formatted
        elif mode == "diff":
            entry["diff"] = result.diff()
        files.append(entry)
    click.echo(json.dumps({"files": files, **to_json(diagnostics)}, indent=2))


def _replace(path: str, text: str) -> None:
    """Rewrite a file through a temporary file beside it, keeping its permissions (through a
    symbolic link, the file it points to: the link stays)."""
    import shutil
    import tempfile

    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".policyc-fmt-", suffix=".dl")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text.encode("utf-8"))
        shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


# -------------------------------------------------------------------------------- editor


@main.command("lsp")
@click.option("--stdio", is_flag=True, help="Talk over standard input and output (the default and only way).")
def lsp_command(stdio: bool) -> None:
    """Run the language server for editors (LSP over standard input and output): diagnostics as
    you type and deep checks on save, hover, go to definition, references, rename, outline,
    completion, quick fixes and formatting. See docs/lsp.md."""
    with _internal_errors():
        _require("lsp", "`policyc lsp`")
        from ..lsp.server import serve

        serve(debug=bool(os.environ.get("POLICYC_DEBUG")))


# --------------------------------------------------------------------------- translation


@main.command("translate")
@click.argument("requirements", metavar="REQUIREMENTS.md")
@click.option("-o", "--output", required=True, metavar="POLICY.dl", help="Where to write the policy.")
@click.option(
    "--vocab",
    "vocabulary",
    multiple=True,
    metavar="POLICY_OR_MODULE",
    help="What the rules may use: a policy file (its Deny and Allow rules left out) or a library "
    "module such as `events` or `tools` (repeatable; default `events`).",
)
@click.option(
    "--traces", metavar="TRACES.jsonl", help="Recorded sessions (as for `policyc replay`) to judge."
)
@click.option("--report", "report_path", metavar="REPORT.json", help="Also write the report as JSON here.")
@FORMAT
@click.option(
    "--model", envvar="POLICYC_MODEL", metavar="MODEL", help="The model to ask [env: POLICYC_MODEL]."
)
@click.option(
    "--base-url",
    envvar="OPENAI_BASE_URL",
    metavar="URL",
    help="An OpenAI-compatible endpoint (default OpenAI's) [env: OPENAI_BASE_URL].",
)
@click.option(
    "--timeout",
    type=Finite(0.1, 86400),
    default=120.0,
    show_default=True,
    help="Seconds per request.",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 10),
    default=3,
    show_default=True,
    help="Further attempts after a request times out, is rate limited or meets a server error.",
)
@click.option(
    "--repair-rounds",
    type=click.IntRange(0, 10),
    default=3,
    show_default=True,
    help="Rounds of feeding the checker's diagnostics back to the translator.",
)
@click.option(
    "--bound",
    type=click.IntRange(1, 8),
    default=4,
    show_default=True,
    help="Fresh values per type for the synthesized decision points.",
)
@click.option(
    "--search-timeout",
    type=Finite(1.0, 86400),
    default=120.0,
    show_default=True,
    help="Seconds the searches for synthesized decision points may take together.",
)
@click.option(
    "--jobs", type=click.IntRange(1, 64), default=4, show_default=True, help="Requests in flight at once."
)
@FUNCTORS
@click.option(
    "--skip",
    multiple=True,
    type=click.Choice(("back-translation", "synthesis", "judge", "analysis")),
    help="Leave a validation step out (repeatable); the report says so.",
)
@click.option(
    "--no-json-mode", is_flag=True, help="Do not ask the endpoint for JSON mode (`response_format`)."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress display on standard error.")
def translate_command(
    requirements: str,
    output: str,
    vocabulary: tuple[str, ...],
    traces: str | None,
    report_path: str | None,
    fmt: str,
    model: str | None,
    base_url: str | None,
    timeout: float,
    retries: int,
    repair_rounds: int,
    bound: int,
    search_timeout: float,
    jobs: int,
    functors: str | None,
    skip: tuple[str, ...],
    no_json_mode: bool,
    quiet: bool,
) -> None:
    """Translate natural-language requirements into a checked policy, and report how far it can
    be trusted: coverage both ways, source-blind back-translation, and agreement with a judge on
    recorded and synthesized decision points.

    The model is any OpenAI-compatible chat-completions endpoint; the API key comes from
    OPENAI_API_KEY. Exit status 0 when the policy was written and nothing needs attention, 1 when
    the report lists problems, 2 when the inputs, the output or the endpoint cannot be used.
    """
    with _internal_errors():
        _require("translate", "`policyc translate`")
        from ..nl2policy.client import DEFAULT_BASE_URL, ConfigurationError, Settings
        from ..nl2policy.pipeline import InputError, Options, run
        from ..nl2policy.progress import Progress
        from ..nl2policy.vocabulary import VocabularyError

        if not model:
            _fail("no model: pass --model or set POLICYC_MODEL", 2)
        key = os.environ.get("OPENAI_API_KEY") or None
        if key is None and (base_url or DEFAULT_BASE_URL).rstrip("/") == DEFAULT_BASE_URL:
            _fail("no API key: set OPENAI_API_KEY (or pass --base-url for a local server that needs none)", 2)
        settings = Settings(model, base_url, key, timeout, retries, json_mode=not no_json_mode)
        options = Options(
            requirements,
            output,
            settings,
            vocabulary,
            traces,
            functors,
            repair_rounds,
            bound,
            search_timeout,
            jobs=jobs,
            skip=frozenset(skip),
            report=report_path,
        )
        try:
            with Progress(quiet) as progress:
                report = run(options, progress)
        except InputError as error:
            _fail(str(error), error.status)
        except VocabularyError as error:
            if error.diagnostics:
                _print_diagnostics(list(error.diagnostics))
            _fail(str(error), error.status)
        except ConfigurationError as error:
            _fail(str(error), 2)
        data = report.to_json()
        if report_path is not None:
            try:
                Path(report_path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
            except OSError as error:
                _fail(f"cannot write `{report_path}`: {error.strerror or error}", 2)
        if fmt == "json":
            click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            click.echo(report.text())
        if not report.ok:
            sys.exit(1)


# ------------------------------------------------------------------------ risk budgets


def _risk_fail(error: Any) -> None:
    """Report a :class:`~policyc.risk.errors.RiskError`: every located problem, then the summary
    (status 2 for a file that could not be read, else 1)."""
    if error.diagnostics:
        _print_diagnostics(list(error.diagnostics))
    problems = list(error.problems)
    if len(problems) > 1:
        for problem in problems:
            click.echo(problem, err=True)
    _fail(str(error), 2 if error.io else 1)


def _bundle_thresholds(path: str | None, compilation: Any, plan: Any) -> Any:
    """The thresholds `policyc compile --thresholds` puts in a bundle, checked against the policy
    (status 1 when they do not fit it)."""
    if path is None:
        return None
    from ..risk.declarations import declarations_of
    from ..risk.enforce import imports_risk
    from ..risk.errors import RiskError
    from ..risk.thresholds import read_thresholds

    try:
        thresholds = read_thresholds(path)
    except RiskError as error:
        _risk_fail(error)
    if not imports_risk(plan):
        _fail(f"not compiled: `{path}` gives thresholds, but the policy does not `.import risk`")
    problems = thresholds.problems(declarations_of(compilation))
    for problem in problems[1:]:
        click.echo(f"{path}: {problem}", err=True)
    if problems:
        _fail(f"not compiled: {path}: {problems[0]}")
    return thresholds


def _monitor_thresholds(path: str, policy: Any) -> Any:
    """Thresholds for the monitors of a loaded policy (`policyc replay --thresholds`)."""
    from ..risk.enforce import imports_risk
    from ..risk.errors import RiskError
    from ..risk.thresholds import read_thresholds

    if not imports_risk(policy.plan):
        _fail(f"`{path}` gives thresholds, but the policy does not `.import risk`")
    try:
        return read_thresholds(path)
    except RiskError as error:
        _risk_fail(error)


def _risk_policy(path: str) -> Any:
    from ..risk.declarations import read_declarations
    from ..risk.errors import RiskError

    try:
        declarations = read_declarations(path)
    except RiskError as error:
        _risk_fail(error)
    if not declarations.roles:
        _fail(f"`{path}` declares no roles (`.role NAME budget ALPHA`), so there is nothing to calibrate")
    return declarations


def _risk_records(path: str, declarations: Any, episode_level: bool = False) -> Any:
    from ..risk.errors import RiskError
    from ..risk.records import read_records

    try:
        return read_records(path, declarations, need_episodes=episode_level)
    except RiskError as error:
        _risk_fail(error)


def _risk_output(
    report: Any, fmt: str, plots: str | None, plot_format: str, calibration: Any, test: Any
) -> None:
    from ..risk.errors import RiskError

    written = []
    if plots is not None:
        from ..risk.plots import write_plots

        try:
            written = write_plots(report.thresholds, calibration or [], test, plots, plot_format)
        except RiskError as error:
            _risk_fail(error)
    if fmt == "json":
        out = report.to_json()
        out["plots"] = [str(p) for p in written]
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        click.echo(report.text())
        for path in written:
            click.echo(f"wrote {path}")


PLOTS = click.option(
    "--plots", metavar="DIR", help="Write a plot per role (violation and utility against the threshold)."
)
PLOT_FORMAT = click.option(
    "--plot-format",
    type=click.Choice(("png", "svg")),
    default="png",
    show_default=True,
    help="The plots' format.",
)


@main.command("calibrate")
@click.argument("policy", metavar="POLICY_OR_BUNDLE")
@click.option(
    "--data", "data", required=True, metavar="CALIB.jsonl", help="Calibration records, one per line."
)
@click.option("-o", "--output", required=True, metavar="THRESHOLDS", help="Where to write thresholds.json.")
@click.option(
    "--method",
    type=click.Choice(("crc", "clopper-pearson")),
    default="crc",
    show_default=True,
    help="crc: expected violation within budget per stratum (Eq. 5); clopper-pearson: every stratum "
    "within budget at once with probability 1 - delta (Theorem 2).",
)
@click.option(
    "--delta",
    type=Finite(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Failure probability of the clopper-pearson certificate, split over the strata; also the "
    "level of the test violation bounds.",
)
@click.option(
    "--episode-level", is_flag=True, help="Calibrate over episodes (the worst field of each), not fields."
)
@click.option(
    "--default-pool",
    default="high_risk",
    show_default=True,
    metavar="NAME",
    help="The pool of rare roles that declare none.",
)
@click.option(
    "--detector",
    default="lexical-provenance",
    show_default=True,
    metavar="NAME",
    help="The detector that produced the scores (the monitor must score with the same one).",
)
@click.option(
    "--test", "test_path", metavar="TEST.jsonl", help="Held-out records to report the thresholds on."
)
@click.option(
    "--test-split",
    type=Finite(0, 1, min_open=True, max_open=True),
    metavar="FRACTION",
    help="Hold out this fraction of the episodes of --data as test data.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The random seed of --test-split.")
@PLOTS
@PLOT_FORMAT
@FORMAT
def calibrate_command(
    policy: str,
    data: str,
    output: str,
    method: str,
    delta: float,
    episode_level: bool,
    default_pool: str,
    detector: str,
    test_path: str | None,
    test_split: float | None,
    seed: int,
    plots: str | None,
    plot_format: str,
    fmt: str,
) -> None:
    """Calibrate a threshold per role of POLICY from labelled calibration records, write them to
    THRESHOLDS, and report violation, floors and over-intervention per role.

    A record is a JSON object per line: {"field": "send_money.recipient" or "role": "target",
    "score": 0.42, "violated": false, "episode": "e17"}. Roles too rare for their budget
    (1/(n+1) above it) are pooled. Exit status 0 when the thresholds were written.
    """
    if test_path is not None and test_split is not None:
        raise click.UsageError("--test and --test-split cannot be combined")
    if plots is not None:
        _require("plots", "`--plots`")
    with _internal_errors():
        from ..risk.calibrate import calibrate
        from ..risk.errors import RiskError
        from ..risk.records import split_records
        from ..risk.report import Report, evaluate

        declarations = _risk_policy(policy)
        records = _risk_records(data, declarations, episode_level)
        test = None
        split = None
        try:
            if test_split is not None:
                records, test = split_records(records, test_split, seed)
                split = f"{test_split:g} of the episodes of {data}, seed {seed}"
            elif test_path is not None:
                test = _risk_records(test_path, declarations, episode_level)
                split = test_path
            from ..risk.detectors import calibration_detector

            if (note := calibration_detector(detector)) is not None:
                click.echo(f"policyc: note: {note}", err=True)
            thresholds = calibrate(
                records,
                declarations,
                method=method,
                delta=delta,
                episode_level=episode_level,
                default_pool=default_pool,
                detector=detector,
            )
            thresholds.write(output)
        except RiskError as error:
            _risk_fail(error)
        report = Report(
            thresholds,
            evaluate(records, thresholds),
            None if test is None else evaluate(test, thresholds),
            data,
            split,
            delta,
        )
        _risk_output(report, fmt, plots, plot_format, records, test)
        if fmt == "text":
            click.echo(f"wrote {output}")


@main.command("risk-report")
@click.argument("policy", metavar="POLICY_OR_BUNDLE")
@click.option(
    "--thresholds",
    "thresholds_path",
    metavar="THRESHOLDS",
    help="Thresholds to judge (default: those the bundle carries).",
)
@click.option("--data", required=True, metavar="DATA.jsonl", help="Labelled records, one per line.")
@click.option(
    "--delta",
    type=Finite(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Level of the Clopper-Pearson bounds on each violation rate.",
)
@PLOTS
@PLOT_FORMAT
@FORMAT
def risk_report_command(
    policy: str,
    thresholds_path: str | None,
    data: str,
    delta: float,
    plots: str | None,
    plot_format: str,
    fmt: str,
) -> None:
    """Judge calibrated thresholds on new labelled records (frozen thresholds under shift, or a
    recalibration check): violation per role against its budget, with its upper bound.

    Exit status 0 when every role is within its budget on the data, 1 when one is not (or the
    input has errors).
    """
    if plots is not None:
        _require("plots", "`--plots`")
    with _internal_errors():
        from ..risk.errors import RiskError
        from ..risk.report import Report, evaluate
        from ..risk.thresholds import read_thresholds

        declarations = _risk_policy(policy)
        try:
            if thresholds_path is not None:
                thresholds = read_thresholds(thresholds_path)
            else:
                from ..compiler.files import read_bytes
                from ..risk.enforce import bundle_risk
                from ..runtime.bundle import is_bundle, read_bundle
                from ..runtime.policy import PolicyError

                try:
                    source = read_bytes(policy)
                except OSError as error:
                    _fail(f"cannot read `{policy}`: {error.strerror or error}", 2)
                if not is_bundle(source):
                    _fail("give --thresholds, or a bundle compiled with `policyc compile --thresholds`", 2)
                try:
                    thresholds = bundle_risk(read_bundle(source, policy)[1], policy)[1]
                except PolicyError as error:
                    _fail(str(error))
                if thresholds is None:
                    _fail(f"`{policy}` carries no thresholds; give --thresholds")
        except RiskError as error:
            _risk_fail(error)
        problems = thresholds.problems(declarations)
        for problem in problems:
            click.echo(f"policyc: error: {problem}", err=True)
        if problems:
            sys.exit(1)
        records = _risk_records(data, declarations, thresholds.episode_level)
        report = Report(thresholds, None, evaluate(records, thresholds), data, data, delta)
        _risk_output(report, fmt, plots, plot_format, None, records)
        if report.over_budget():
            sys.exit(1)


# ---------------------------------------------------------------------------- forecasting


MAX_HORIZON = 10_000  # = forecast.errors.MAX_HORIZON (not imported: `policyc --help` stays fast)


@main.group("forecast")
def forecast_group() -> None:
    """Forecast violations: learn a DTMC over policy predicates from recorded sessions (ProbGuard).

    See docs/forecasting.md.
    """


def _forecast_fail(error: Exception) -> None:
    """A forecasting error: an unreadable file is status 2, anything else wrong with the input 1."""
    _fail(str(error), 2 if isinstance(error, OSError) else 1)


def _forecast_model(path: str) -> Any:
    from ..forecast.errors import ForecastError
    from ..forecast.model import load

    try:
        return load(path)
    except ForecastError as error:
        _forecast_fail(error)
    except OSError as error:
        _fail(f"cannot read `{path}`: {error.strerror or error}", 2)


@forecast_group.command("learn")
@POLICY
@click.argument("traces", nargs=-1, required=True, metavar="TRACES.jsonl...")
@click.option(
    "-p",
    "--predicates",
    "predicates",
    multiple=True,
    required=True,
    metavar="P1,P2,...",
    help='Policy predicates whose truth values make the states: `Rel`, `Rel(_, "x")`, `name=Rel(...)` '
    "(repeatable).",
)
@click.option(
    "--unsafe", required=True, metavar="PRED", help="The predicate that must never hold (e.g. `Deny`)."
)
@click.option(
    "--invariant",
    "invariants",
    multiple=True,
    metavar="FORMULA",
    help="A formula over predicate names every state (or, with primes `P'`, every transition) satisfies "
    "(repeatable).",
)
@click.option("-o", "--output", required=True, metavar="MODEL.json", help="Where to write the model.")
@click.option(
    "--estimator",
    type=click.Choice(("laplace", "frequency")),
    default="laplace",
    show_default=True,
    help="Laplace smoothing over valid transitions, or plain frequencies.",
)
@click.option(
    "--alpha",
    metavar="A",
    type=Finite(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Laplace's α.",
)
@click.option(
    "--horizon",
    "horizons",
    metavar="K",
    type=click.IntRange(1, MAX_HORIZON),
    multiple=True,
    default=(5, 10),
    show_default=True,
    help="Also cache P(unsafe within K steps) (repeatable).",
)
@click.option(
    "--epsilon",
    metavar="E",
    type=Finite(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="The PAC error bound ε.",
)
@click.option(
    "--delta",
    metavar="D",
    type=Finite(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="The PAC confidence parameter δ.",
)
@click.option(
    "--require-pac", is_flag=True, help="Exit with status 1 when the sessions do not meet the PAC bound."
)
@FORMAT
@FUNCTORS
@VERIFY
def forecast_learn_command(
    policy: str,
    traces: tuple[str, ...],
    predicates: tuple[str, ...],
    unsafe: str,
    invariants: tuple[str, ...],
    output: str,
    estimator: str,
    alpha: float,
    horizons: tuple[int, ...],
    epsilon: float,
    delta: float,
    require_pac: bool,
    fmt: str,
    functors: str | None,
    verify_key: str | None,
) -> None:
    """Learn a forecast model from recorded sessions (TRACES: the JSON Lines `policyc replay` reads)."""
    with _internal_errors():
        from ..forecast.build import Settings, learn_model
        from ..forecast.errors import ForecastError
        from ..forecast.patterns import parse_predicate, parse_predicates
        from ..forecast.report import learn_text
        from ..runtime.session import Monitor

        loaded = _load_policy(policy, functors, verify_key)
        try:
            chosen = tuple(p for text in predicates for p in parse_predicates(text))
            settings = Settings(
                chosen, parse_predicate(unsafe), invariants, estimator, alpha, horizons, epsilon, delta
            )
            model, _ = learn_model(Monitor(loaded), list(traces), settings, policy)
        except (ForecastError, OSError) as error:
            _forecast_fail(error)
        try:
            Path(output).write_text(model.dumps(), "utf-8")
        except OSError as error:
            _fail(f"cannot write `{output}`: {error.strerror or error}", 2)
        if fmt == "json":
            data = model.to_json()
            summary = {
                key: data[key] for key in ("predicates", "unsafe", "invariants", "estimator", "data", "pac")
            }
            click.echo(json.dumps({"output": output, "states": len(model.states), **summary}, indent=2))
        else:
            click.echo(learn_text(model, output))
        if require_pac and not model.pac.met:
            sys.exit(1)


@forecast_group.command("query")
@click.argument("model", metavar="MODEL.json")
@click.option(
    "--state",
    "spec",
    metavar="STATE",
    help="Only these states: a state id, or predicates that hold (`a,b`) and do not (`!c`).",
)
@FORMAT
def forecast_query_command(model: str, spec: str | None, fmt: str) -> None:
    """Print each state's probability of staying safe, of reaching the unsafe state (eventually
    and within each horizon), and the PAC bound; the cached probabilities are checked against
    the chain (status 1 if they disagree)."""
    with _internal_errors():
        from ..forecast.build import verify
        from ..forecast.errors import ForecastError
        from ..forecast.report import pac_text, predicates_text, select, states_table

        loaded = _forecast_model(model)
        try:
            states = select(loaded, spec)
        except ForecastError as error:
            _forecast_fail(error)
        problems = verify(loaded)
        if fmt == "json":
            data = loaded.to_json()
            wanted = {s.id for s in states}
            data["states"] = [s for s in data["states"] if s["id"] in wanted]
            data.pop("transitions")
            data["consistent"] = not problems
            click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            if spec is None:
                click.echo("\n".join([*predicates_text(loaded), *pac_text(loaded)]))
            click.echo(states_table(loaded, states) if states else "no state of the model matches")
        for problem in problems:
            click.echo(f"policyc: error: {model}: {problem}", err=True)
        if problems:
            sys.exit(1)


@forecast_group.command("show")
@click.argument("model", metavar="MODEL.json")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("dot", "svg")),
    default="dot",
    show_default=True,
    help="DOT text or SVG.",
)
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of standard output.")
@click.option(
    "--min-probability",
    metavar="P",
    type=Finite(0, 1),
    default=0.0,
    show_default=True,
    help="Leave out transitions less likely than this.",
)
def forecast_show_command(model: str, fmt: str, output: str | None, min_probability: float) -> None:
    """Draw the chain with each state's probability of reaching the unsafe state: Graphviz DOT
    text, or an SVG drawn with matplotlib (no Graphviz needed)."""
    with _internal_errors():
        from ..forecast.render import to_dot, to_svg

        if fmt != "dot":
            _require("plots", "`policyc forecast show --format svg`")
        loaded = _forecast_model(model)
        text = to_dot(loaded, min_probability) if fmt == "dot" else to_svg(loaded, min_probability)
        if output is None:
            click.echo(text, nl=False)
            return
        try:
            Path(output).write_text(text, "utf-8")
        except OSError as error:
            _fail(f"cannot write `{output}`: {error.strerror or error}", 2)
        click.echo(f"wrote {output}")


@forecast_group.command("replay")
@POLICY
@click.argument("model", metavar="MODEL.json")
@click.argument("traces", nargs=-1, required=True, metavar="TRACES.jsonl...")
@click.option(
    "--threshold",
    metavar="T",
    type=Finite(0, 1),
    required=True,
    help="Warn when the probability of staying safe is below this.",
)
@click.option(
    "--horizon",
    type=click.IntRange(1, MAX_HORIZON),
    metavar="K",
    help="Staying safe for this many steps (a learned horizon).",
)
@click.option(
    "--unseen",
    type=click.Choice(("worst", "max")),
    default="worst",
    show_default=True,
    help="A state no recorded session was in: assume the worst, or take the model's worst state.",
)
@click.option("--summary", "summary_only", is_flag=True, help="Print only the summary.")
@FORMAT
@FUNCTORS
@VERIFY
def forecast_replay_command(
    policy: str,
    model: str,
    traces: tuple[str, ...],
    threshold: float,
    horizon: int | None,
    unseen: str,
    summary_only: bool,
    fmt: str,
    functors: str | None,
    verify_key: str | None,
) -> None:
    """Replay recorded sessions with the forecast at every step: the warnings, and how many
    events ahead of the violation they came (the lead time)."""
    with _internal_errors():
        from ..forecast.errors import ForecastError
        from ..forecast.monitor import Forecaster
        from ..forecast.replay import replay, summary, summary_text
        from ..forecast.report import session_text
        from ..runtime.session import Monitor

        loaded = _load_policy(policy, functors, verify_key)
        learned = _forecast_model(model)
        try:
            monitor = Monitor(loaded, forecast=Forecaster(learned, threshold, "warn", horizon, unseen))
            reports = replay(monitor.forecaster, list(traces))
        except (ForecastError, OSError) as error:
            _forecast_fail(error)
        found = summary(reports, threshold)
        unsafe = learned.unsafe.name
        if fmt == "json":
            sessions = [] if summary_only else [r.to_json() for r in reports]
            click.echo(json.dumps({"summary": found, "sessions": sessions}, indent=2))
            return
        if not summary_only:
            for report in reports:
                click.echo(session_text(report, threshold, unsafe))
        click.echo(summary_text(found, unsafe))
