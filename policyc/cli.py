"""The ``policyc`` command. Thin: parse arguments, call the library, print, choose the exit status.

Exit status: 0 when the input is fine, 1 when it has errors (or the check failed), 2 on a usage
or I/O problem. The compiler is imported inside each command so ``policyc --help`` stays fast.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from . import __version__

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
    type=click.FloatRange(min=0.1),
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
    from .compiler.diagnostics import Severity, sort_diagnostics
    from .compiler.loader import SourceError, load_data, load_file
    from .compiler.pipeline import compile_program

    files, problems = _expand(paths)
    compilations = {}
    for path in files:
        try:
            if path == "-":
                name = stdin_filename or "<stdin>"
                program, found = load_data(sys.stdin.buffer.read(), name)
            else:
                program, found = load_file(path)
        except SourceError as error:
            problems.append(str(error))
            continue
        compilations[path] = compile_program(program, found)
    deep_findings: list = []
    unanswered = 0
    if deep is not None:
        from .analyzer.deep import analyse

        for compilation in compilations.values():
            if compilation.ok:
                result = analyse(compilation, *deep)
                deep_findings.extend(result.findings)
                unanswered += result.unanswered
    diagnostics = sort_diagnostics(
        [*(d for c in compilations.values() for d in c.diagnostics), *deep_findings]
    )
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors

    if fmt == "text":
        _print_text(diagnostics, compilations, show)
    elif fmt == "json":
        from .compiler.render_json import to_json

        out: dict[str, Any] = to_json(diagnostics)
        if show:
            from .compiler.show import show_json

            out[show] = {path: show_json(show, c) for path, c in compilations.items()}
        click.echo(json.dumps(out, indent=2))
    else:
        from .compiler.render_sarif import to_sarif

        click.echo(json.dumps(to_sarif(diagnostics, __version__), indent=2))

    if unanswered:
        click.echo(
            f"policyc: note: {unanswered} bounded question{'s' if unanswered != 1 else ''} of --deep "
            "could not be answered in the time allowed; they report nothing",
            err=True,
        )
    for problem in problems:
        click.echo(f"policyc: error: {problem}", err=True)
    if problems:
        sys.exit(2)
    if errors or (fail_on == "warning" and warnings):
        sys.exit(1)


def _print_text(diagnostics: list, compilations: dict, show: str | None) -> None:
    from rich.console import Console

    from .compiler import render_text

    console = Console(highlight=False, soft_wrap=True)
    if show:
        from .compiler.show import show_text

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


def _load_functors(spec: str | None) -> Any:
    """A module of functor implementations, by dotted name or file path."""
    if spec is None:
        return None
    from .runtime.functors import load_module

    try:
        return load_module(spec)
    except ImportError as error:
        _fail(f"cannot load functors from `{spec}`: {error}", 2)


def _load_policy(path: str, functors: str | None, verify_key: str | None, limits: Any = None) -> Any:
    """A policy for a command: its errors are printed like `policyc check` prints them."""
    from .runtime.functors import MissingFunctors
    from .runtime.policy import PolicyError, load

    try:
        return load(Path(path), _load_functors(functors), verify_key=verify_key, limits=limits)
    except PolicyError as error:
        if error.diagnostics:
            _print_diagnostics(list(error.diagnostics))
        _fail(str(error))
    except MissingFunctors as error:
        _fail(str(error))


def _print_diagnostics(diagnostics: list) -> None:
    from rich.console import Console

    from .compiler import render_text

    console = Console(highlight=False, soft_wrap=True, stderr=True)
    render_text.render(diagnostics, lambda path: _source_of(path), console)


def _source_of(path: str) -> Any:
    from .compiler.loader import decode

    try:
        source = decode(path, Path(path).read_bytes())
    except OSError:
        return None
    return source if hasattr(source, "text") else None


def _limits(max_facts: int | None, timeout: float | None) -> Any:
    from .runtime.evaluator import Limits

    defaults = Limits()
    return Limits(max_facts or defaults.max_facts, timeout if timeout is not None else defaults.max_seconds)


def _read_facts(path: str, policy: Any) -> Any:
    from .runtime.facts import FactsError, read

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
MAX_FACTS = click.option("--max-facts", type=int, help="Stop (and fail closed) beyond this many facts.")
TIMEOUT = click.option("--timeout", type=float, help="Stop (and fail closed) after this many seconds.")


@main.command("compile")
@click.argument("path", metavar="FILE")
@click.option("-o", "--output", required=True, metavar="OUT", help="Where to write the bundle.")
@click.option("--sign-key", metavar="KEY", help="Sign the bundle with this Ed25519 private key (PEM).")
def compile_command(path: str, output: str, sign_key: str | None) -> None:
    """Compile a policy into a verified bundle (refused when it has errors)."""
    with _internal_errors():
        from .compiler.loader import SourceError, load_file
        from .compiler.pipeline import compile_program
        from .runtime.bundle import build_bundle
        from .runtime.policy import PolicyError, plan_of

        try:
            program, found = load_file(path)
        except SourceError as error:
            _fail(str(error), 2)
        compilation = compile_program(program, found)
        if compilation.diagnostics:
            _print_diagnostics(list(compilation.diagnostics))
        try:
            plan = plan_of(compilation)
            data = build_bundle(compilation, plan, sign_key)
        except PolicyError as error:
            _fail(f"not compiled: {error}")
        try:
            Path(output).write_bytes(data)
        except OSError as error:
            _fail(f"cannot write `{output}`: {error.strerror or error}", 2)
        rules = len(plan.rules)
        signed = ", signed" if sign_key else ""
        click.echo(f"wrote {output}: {rules} rules, {len(plan.relations)} relations{signed}")


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
        facts = _read_facts(facts_path, loaded)
        result = loaded.evaluate(facts)
        names = {r.name: r for r in loaded.plan.relations}
        for query in queries:
            if query not in names or names[query].inline:
                _fail(f"the policy has no stored relation `{query}`", 2)
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
            from .runtime.verdict import render_fact

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
        facts = _read_facts(facts_path, loaded)
        result = loaded.evaluate(facts)
        if name not in {r.name for r in loaded.plan.relations}:
            _fail(f"the policy has no relation `{name}`", 2)
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


def _parse_fact(text: str) -> tuple[str, tuple]:
    """A ground atom written in the policy language, like `Deny("v6")`."""
    from .runtime.facts import parse_fact

    try:
        return parse_fact(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="FACT") from None


@main.command("keygen")
@click.argument("prefix")
def keygen_command(prefix: str) -> None:
    """Create an Ed25519 key pair for signing bundles: PREFIX.key and PREFIX.pub."""
    with _internal_errors():
        from .runtime.bundle import generate_keys

        try:
            private, public = generate_keys(prefix)
        except OSError as error:
            _fail(f"cannot write the keys: {error.strerror or error}", 2)
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
        from .testing.report import summary, text, to_json
        from .testing.run import FileResult, run_file
        from .testing.spec import SUFFIX, TestFileError, discover, read

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
def replay_command(policy: str, trace: str, fmt: str, functors: str | None, verify_key: str | None) -> None:
    """Replay recorded sessions (one JSON object per line with an `events` list), deciding
    every tool call as it comes, and print each decision."""
    with _internal_errors():
        from .runtime.replay import TraceError, replay_file

        loaded = _load_policy(policy, functors, verify_key)
        try:
            sessions = replay_file(loaded, trace)
        except TraceError as error:
            _fail(str(error))
        except OSError as error:
            _fail(f"cannot read `{trace}`: {error.strerror or error}", 2)
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
    from .analyzer.query import AnalysisError, load

    try:
        return load(path)
    except AnalysisError as error:
        _fail(str(error), 2 if str(error).startswith("cannot read") else 1)


def _answer(question: Any, fmt: str) -> None:
    """Print what an analysis ``question()`` answers (its diagnostics and status 1 when the
    policy or the question cannot be analysed)."""
    from .analyzer.query import AnalysisError

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
    type=float,
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
        from .analyzer.witness import find_witness

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
        from .analyzer.diff import diff

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
        from .analyzer.conditions import conditions

        loaded = _analysis(policy)
        _answer(lambda: conditions(loaded, query, bound), fmt)


# ---------------------------------------------------------------------------- formatting


# -------------------------------------------------------------------------------- editor


# --------------------------------------------------------------------------- translation


# ------------------------------------------------------------------------ risk budgets


# ---------------------------------------------------------------------------- forecasting
