"""What the commands share: exit statuses, errors, options, and reading their inputs.

Exit status: 0 when the input is fine, 1 when it has errors (or the check failed), 2 on a usage
or I/O problem. A command runs inside :class:`internal_errors`, stops with :func:`fail`, and
imports the library inside its function, so ``policyc --help`` stays fast. Every way a command
opens a policy, a bundle, functors, facts or thresholds is here, once.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..compiler.plan import Plan
    from ..compiler.stages import Parsed

EXIT_OK = 0
EXIT_ERRORS = 1  # the input has errors, or the check failed
EXIT_USAGE = 2  # a usage or I/O problem


# --------------------------------------------------------------------------------- errors


_JSON_FAILURES: contextvars.ContextVar[bool] = contextvars.ContextVar("json_failures", default=False)


@contextlib.contextmanager
def json_failures(enabled: bool) -> Iterator[None]:
    """With ``--format json``, a command that stops on an error prints it on standard output
    too, as ``{"errors": [message], "diagnostics": [...]}`` (the policy's error diagnostics, as
    `policyc check --format json` has them): a reader of the output sees every error."""
    token = _JSON_FAILURES.set(enabled)
    try:
        yield
    finally:
        _JSON_FAILURES.reset(token)


def fail(message: str, status: int = EXIT_ERRORS, diagnostics: Any = ()) -> None:
    """Stop the command: ``message`` on standard error (and as JSON on standard output under
    :func:`json_failures`), and the exit status."""
    if _JSON_FAILURES.get():
        from ..compiler.render_json import diagnostic_json

        echo_json({"errors": [message], "diagnostics": [diagnostic_json(d) for d in diagnostics]})
    click.echo(f"policyc: error: {message}", err=True)
    sys.exit(status)


class internal_errors:
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
            sys.exit(EXIT_OK)
        from .extras import MissingExtra, extra_of

        if isinstance(error, ModuleNotFoundError) and (extra := extra_of(error.name or "")):
            error = MissingExtra(extra, "this command")
        if isinstance(error, MissingExtra):
            fail(str(error), EXIT_USAGE)
        if os.environ.get("POLICYC_DEBUG"):
            return False
        if _JSON_FAILURES.get():
            echo_json({"errors": [f"internal error: {kind.__name__}: {error}"], "diagnostics": []})
        click.echo(f"policyc: internal error: {kind.__name__}: {error}", err=True)
        click.echo(
            "this is a bug in policyc; please report it with the input that caused it "
            "(POLICYC_DEBUG=1 shows the traceback)",
            err=True,
        )
        sys.exit(EXIT_USAGE)


def require_extra(extra: str, what: str) -> None:
    """Stop with a one-line message when ``what`` needs an extra that is not installed."""
    from .extras import MissingExtra, require

    try:
        require(extra, what)
    except MissingExtra as error:
        fail(str(error), EXIT_USAGE)


def risk_fail(error: Any) -> None:
    """Report a :class:`~policyc.risk.errors.RiskError`: every located problem, then the summary
    (status 2 for a file that could not be read, else 1)."""
    if error.diagnostics:
        print_diagnostics(list(error.diagnostics))
    problems = list(error.problems)
    if len(problems) > 1:
        for problem in problems:
            click.echo(problem, err=True)
    fail(str(error), EXIT_USAGE if error.io else EXIT_ERRORS)


# -------------------------------------------------------------------------------- options


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
    metavar="FACTS",
    help='A JSON file {"Rel": [[v1, v2], ...]} or a folder of Rel.facts files; without it, no facts '
    "are given (the policy's own facts and rules only).",
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


# ------------------------------------------------------------------------------- printing


def echo_json(data: Any, **options: Any) -> None:
    """Print ``data`` as indented JSON (``options`` go to :func:`json.dumps`); data nested
    too deep for it (a record of thousands of nested records) on one line, without recursion."""
    import json  # not at the top: `policyc --help` stays fast

    text = _deep_json(data) if _deeper_than(data, 200) else json.dumps(data, indent=2, **options)
    click.echo(text)


def _deeper_than(data: Any, limit: int) -> bool:
    """Whether lists and dicts nest in ``data`` more than ``limit`` levels (a list met again,
    shared, is looked at once)."""
    depth: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        item, ready = stack.pop()
        if not isinstance(item, list | dict) or id(item) in depth:
            continue
        inner = list(item.values()) if isinstance(item, dict) else item
        if not ready:
            stack.append((item, True))
            stack.extend((v, False) for v in inner if isinstance(v, list | dict) and id(v) not in depth)
            continue
        depth[id(item)] = 1 + max(
            (depth.get(id(v), 0) for v in inner if isinstance(v, list | dict)), default=0
        )
        if depth[id(item)] > limit:
            return True
    return False


def _deep_json(data: Any) -> str:
    """``data`` (dicts, lists, and JSON's scalars) as one line of JSON, however deep it nests."""
    import json

    parts: list[str] = []
    stack: list[Any] = [data]
    close = object()  # a marker: the text under it on the stack is written as it is
    done = object()  # a marker: the list or dict under it is written; keep its text
    written: dict[int, tuple[str, Any]] = {}  # a list met again (shared) is written once
    while stack:
        item = stack.pop()
        if item is close:
            parts.append(stack.pop())
        elif item is done:
            value, start = stack.pop()
            text = "".join(parts[start:])
            del parts[start:]
            parts.append(text)
            written[id(value)] = (text, value)
        elif isinstance(item, list | dict) and id(item) in written:
            parts.append(written[id(item)][0])
        elif isinstance(item, list | dict):
            stack.extend(((item, len(parts)), done))
            stack.append(_Opened(item))
        elif isinstance(item, _Opened):
            item = item.value
            _open(item, stack, parts, close)
        else:
            parts.append(json.dumps(item))
    return "".join(parts)


class _Opened:
    """A list or dict of :func:`_deep_json` whose text starts now."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _open(item: Any, stack: list[Any], parts: list[str], close: object) -> None:
    import json

    if isinstance(item, dict):
        stack.extend(("}", close))
        entries = list(item.items())
        for i, (key, value) in enumerate(reversed(entries)):
            stack.append(value)
            stack.extend((json.dumps(str(key)) + ": ", close))
            if i < len(entries) - 1:
                stack.extend((", ", close))
        parts.append("{")
    else:
        stack.extend(("]", close))
        for i, value in enumerate(reversed(item)):
            stack.append(value)
            if i < len(item) - 1:
                stack.extend((", ", close))
        parts.append("[")


def print_diagnostics(diagnostics: list, sources: Any = None) -> None:
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


# ------------------------------------------------------------------- reading the inputs


def policy_files(paths: tuple[str, ...]) -> tuple[list[str], list[str]]:
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


def load_functors(spec: str | None) -> Any:
    """A module of functor implementations, by dotted name or file path."""
    if spec is None:
        return None
    from ..runtime.functors import load_module

    try:
        return load_module(spec)
    except ImportError as error:
        fail(f"cannot load functors from `{spec}`: {error}", EXIT_USAGE)


def load_policy(
    path: str, functors: str | None, verify_key: str | None, limits: Any = None, magic: Any = None
) -> Any:
    """A policy for a command: its errors are printed like `policyc check` prints them
    (``magic``: the demand-driven relations a policy planned from source may have)."""
    from ..runtime.opener import load

    with policy_failures():
        return load(Path(path), load_functors(functors), verify_key=verify_key, limits=limits, magic=magic)


NO_MAGIC_OPTION = click.option(
    "--no-magic",
    is_flag=True,
    help="Evaluate every relation in full: no demand-driven evaluation (magic sets) of a policy planned "
    "from source.",
)


@contextlib.contextmanager
def policy_failures() -> Iterator[None]:
    """A policy that cannot be used ends the command: its diagnostics printed like `policyc
    check` prints them, then its error (status 1); a functor without implementation likewise."""
    from ..runtime.errors import PolicyError
    from ..runtime.functors import MissingFunctors

    try:
        yield
    except PolicyError as error:
        if error.diagnostics:
            print_diagnostics(list(error.diagnostics))
        fail(str(error), diagnostics=error.diagnostics)
    except MissingFunctors as error:
        fail(str(error))


def limits_of(max_facts: int | None, timeout: float | None) -> Any:
    """The evaluation limits of `--max-facts` and `--timeout` (the defaults where not given)."""
    from ..runtime.evaluator import Limits

    defaults = Limits()
    return Limits(max_facts or defaults.max_facts, timeout if timeout is not None else defaults.max_seconds)


def read_facts(path: str | None, policy: Any) -> Any:
    """The facts of `--facts`, checked against the policy's input relations (none without it)."""
    from ..runtime.facts import FactsError, read

    if path is None:
        return {}
    try:
        return read(path, policy.plan)
    except FactsError as error:
        fail(str(error))
    except OSError as error:
        fail(f"cannot read facts `{path}`: {error.strerror or error}", EXIT_USAGE)


def load_for_analysis(path: str) -> Any:
    """A policy loaded for analysis, or the reason it cannot be (status 1, or 2 if unreadable)."""
    from ..analyzer.query import AnalysisError, load

    try:
        return load(path)
    except AnalysisError as error:
        fail(str(error), EXIT_USAGE if str(error).startswith("cannot read") else EXIT_ERRORS)


def risk_declarations(path: str) -> Any:
    """The roles and budgets a policy or bundle declares (status 1 when it declares none)."""
    from ..risk.declarations import read_declarations
    from ..risk.errors import RiskError

    try:
        declarations = read_declarations(path)
    except RiskError as error:
        risk_fail(error)
    if not declarations.roles:
        fail(f"`{path}` declares no roles (`.role NAME budget ALPHA`), so there is nothing to calibrate")
    return declarations


def thresholds_for_bundle(path: str | None, compilation: Parsed, plan: Plan) -> Any:
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
        risk_fail(error)
    if not imports_risk(plan):
        fail(f"not compiled: `{path}` gives thresholds, but the policy does not `.import risk`")
    problems = thresholds.problems(declarations_of(compilation))
    for problem in problems[1:]:
        click.echo(f"{path}: {problem}", err=True)
    if problems:
        fail(f"not compiled: {path}: {problems[0]}")
    return thresholds


def thresholds_for_monitor(path: str, policy: Any) -> Any:
    """Thresholds for the monitors of a loaded policy (`policyc replay --thresholds`)."""
    from ..risk.enforce import imports_risk
    from ..risk.errors import RiskError
    from ..risk.thresholds import read_thresholds

    if not imports_risk(policy.plan):
        fail(f"`{path}` gives thresholds, but the policy does not `.import risk`")
    try:
        return read_thresholds(path)
    except RiskError as error:
        risk_fail(error)


def thresholds_in_bundle(path: str) -> Any:
    """The thresholds a bundle carries (`policyc risk-report` without `--thresholds`)."""
    from ..risk.extension import RiskSection
    from ..runtime.bundle import Bundle
    from ..runtime.errors import PolicyError
    from ..runtime.opener import UNREADABLE, open_path

    try:
        opened = open_path(path)
        if not isinstance(opened, Bundle):
            fail("give --thresholds, or a bundle compiled with `policyc compile --thresholds`", EXIT_USAGE)
        section = opened.sections().get("risk")
    except PolicyError as error:
        fail(str(error), EXIT_USAGE if error.code == UNREADABLE else EXIT_ERRORS)
    thresholds = section.thresholds if isinstance(section, RiskSection) else None
    if thresholds is None:
        fail(f"`{path}` carries no thresholds; give --thresholds")
    return thresholds


class StartGroup(click.Group):
    """A group of commands whose first argument, when it names none of them, goes to its hidden
    ``start`` command: ``policyc serve POLICY ...`` beside ``policyc serve keygen ...``. Its
    help shows ``usages`` and the options of ``start``."""

    usages: tuple[str, ...] = ()

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for n, usage in enumerate((*self.usages, "COMMAND [ARGS]...")):
            formatter.write_usage(ctx.command_path, usage, prefix="Usage: " if n == 0 else "   or: ")

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        start = self.commands["start"]
        start.format_options(click.Context(start, info_name=ctx.info_name, parent=ctx.parent), formatter)
        self.format_commands(ctx, formatter)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] != "start" and self.get_command(ctx, args[0]) is not None:
            return super().resolve_command(ctx, args)
        return "start", self.commands["start"], args


def rewrite(path: str, text: str) -> None:
    """Rewrite a file through a temporary file beside it, keeping its permissions (through a
    symbolic link, the file it points to: the link stays)."""
    import shutil
    import tempfile

    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".policyc-", suffix=".dl")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(text.encode("utf-8"))
        shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
