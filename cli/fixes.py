"""`policyc check --fix` and `--diff`: the fixes the diagnostics carry, applied round after
round until none applies (compiler/fixing.py), written to the files or shown as a diff, with
what was fixed and what remains (docs/cli.md, "Fixes")."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import click

from .common import EXIT_ERRORS, EXIT_USAGE, echo_json, policy_files, rewrite


def fix_files(
    paths: tuple[str, ...],
    fmt: str,
    fail_on: str,
    stdin_filename: str | None,
    deep: tuple[int, float] | None,
    unsafe: bool,
    diff: bool,
) -> None:
    from ..compiler.diagnostics import Severity
    from ..compiler.fixing import fix_texts
    from ..compiler.formatter import unified_diff

    files, problems = policy_files(paths)
    stdin = stdin_filename or "<stdin>"
    roots, texts, raw = _read(files, stdin, problems)
    originals = dict(texts)
    checked = _Checker(roots, raw, deep)

    def read(file: str) -> str | None:
        """Another file a fix edits: one of the policy's own, not the library's."""
        from ..compiler.files import POLICY_LIMIT, read_bytes
        from ..compiler.loader import LIBRARY_PREFIX

        if file.startswith(LIBRARY_PREFIX) or file == stdin:
            return None
        try:
            text = read_bytes(file, POLICY_LIMIT).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        originals[file] = text
        return text

    done = fix_texts(texts, checked, unsafe=unsafe, read=read)
    changed = [file for file, text in done.texts.items() if text != originals.get(file, text)]
    err = "-" in files and not diff  # the fixed text of standard input goes to standard output
    if diff:
        text = "".join(unified_diff(originals[file], done.texts[file], file) for file in changed)
    else:
        text = ""
        for file in changed:
            if file == stdin and "-" in files:
                continue
            try:
                rewrite(file, done.texts[file])
            except OSError as error:
                problems.append(f"cannot write `{file}`: {error.strerror or error}")
        if "-" in files and stdin in done.texts:
            sys.stdout.write(done.texts[stdin])
            sys.stdout.flush()
    remaining = list(done.remaining)
    if fmt == "text":
        if diff:
            click.echo(text, nl=False)
            _would_fix(done, changed)
        else:
            from .check import print_text

            print_text(remaining, checked.last, err=err, before_summary=tuple(_fixed_lines(done)))
    else:
        _json(done, fmt, diff, text, changed, err)
    if not done.settled:
        click.echo(
            f"policyc: warning: the fixes did not settle after {done.rounds} rounds "
            "(fixes that undo each other, or too many): review the remaining diagnostics",
            err=True,
        )
    for problem in problems:
        click.echo(f"policyc: error: {problem}", err=True)
    if problems:
        sys.exit(EXIT_USAGE)
    errors = sum(d.severity is Severity.ERROR for d in remaining)
    if (diff and changed) or errors or (fail_on == "warning" and remaining):
        sys.exit(EXIT_ERRORS)


def _read(
    files: list[str], stdin: str, problems: list[str]
) -> tuple[list[str], dict[str, str], dict[str, bytes]]:
    """The roots to check (as the diagnostics name them), the text of each that is UTF-8, and
    the bytes of each that is not (reported as `check` reports it, and never edited)."""
    from ..compiler.files import POLICY_LIMIT, read_bytes

    roots: list[str] = []
    texts: dict[str, str] = {}
    raw: dict[str, bytes] = {}
    for path in files:
        name = stdin if path == "-" else path
        try:
            data = sys.stdin.buffer.read() if path == "-" else read_bytes(path, POLICY_LIMIT)
        except IsADirectoryError:
            problems.append(f"cannot read `{path}`: it is a directory")
            continue
        except OSError as error:
            problems.append(f"cannot read `{path}`: {error.strerror or error}")
            continue
        if path != "-" and data.lstrip().startswith(b"{"):
            problems.append(f"`{path}` is a bundle, not a policy source file: fix the policy's sources")
            continue
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            raw[name] = data
        roots.append(name)
    return roots, texts, raw


class _Checker:
    """The diagnostics of every root as the texts are now (their includes read from the texts
    first), and the last compilations (their sources show the remaining diagnostics)."""

    def __init__(self, roots: list[str], raw: dict[str, bytes], deep: tuple[int, float] | None) -> None:
        self.roots = roots
        self.raw = raw
        self.deep = deep
        self.last: dict[str, Any] = {}

    def __call__(self, texts: Mapping[str, str]) -> list[Any]:
        from ..compiler.files import POLICY_LIMIT, read_bytes
        from ..compiler.loader import load_data
        from ..compiler.pipeline import compile_program

        def read(target: str) -> bytes:
            return texts[target].encode("utf-8") if target in texts else read_bytes(target, POLICY_LIMIT)

        diagnostics: list[Any] = []
        self.last = {}
        for root in self.roots:
            data = texts[root].encode("utf-8") if root in texts else self.raw[root]
            program, found = load_data(data, root, read)
            compilation = compile_program(program, found)
            self.last[root] = compilation
            diagnostics.extend(compilation.diagnostics)
            if self.deep is not None:
                diagnostics.extend(_deep(compilation, self.deep))
        return diagnostics


def _deep(compilation: Any, deep: tuple[int, float]) -> list[Any]:
    from ..analyzer.deep import analyse
    from ..compiler.stages import Stratified

    if compilation.ok and isinstance(compilation, Stratified):
        return list(analyse(compilation, *deep).findings)
    return []


def _groups(done: Any) -> list[tuple[Any, list[Any]]]:
    """The fixes applied, each with the diagnostics it fixed, in the order they were applied."""
    groups: dict[Any, list[Any]] = {}
    for d in done.fixed:
        groups.setdefault(d.fix, []).append(d)
    return list(groups.items())


def _fixed_lines(done: Any) -> list[str]:
    groups = _groups(done)
    if not groups and not done.unsafe():
        return []
    lines = []
    for fix, fixed in groups:
        first = fixed[0]
        codes = ", ".join(dict.fromkeys(d.code for d in fixed))
        many = f" ({len(fixed)} diagnostics)" if len(fixed) > 1 else ""
        lines.append(
            f"fixed {first.span.file}:{first.span.line}:{first.span.column}: {fix.message} [{codes}]{many}"
        )
    if done.fixed:
        lines.append(f"Fixed {_problems(len(done.fixed))}.")
    else:
        lines.append("No fixes applied.")
    if done.unsafe():
        n = done.unsafe()
        it = "it" if n == 1 else "them"
        lines.append(
            f"{_fixes(n)} not safe and not applied: review {it}, or apply {it} with `--unsafe-fixes`."
        )
    return lines


def _would_fix(done: Any, changed: list[str]) -> None:
    remaining = len(done.remaining)
    if done.fixed:
        text = f"Would fix {_problems(len(done.fixed))} in {len(changed)} file{'s' * (len(changed) != 1)}"
    else:
        text = "No fixes available"
    click.echo(f"{text} ({remaining} remaining).", err=True)
    if done.unsafe():
        n = done.unsafe()
        click.echo(
            f"{_fixes(n)} not safe: `--unsafe-fixes` shows {'it' if n == 1 else 'them'} too.", err=True
        )


def _json(done: Any, fmt: str, diff: bool, text: str, changed: list[str], err: bool) -> None:
    from ..compiler import render_json
    from ..compiler.version import __version__

    if fmt == "sarif":
        from ..compiler.render_sarif import to_sarif

        _echo_json(to_sarif(list(done.remaining), __version__), err)
        return
    out: dict[str, Any] = render_json.to_json(list(done.remaining))
    out["fixed"] = [render_json.diagnostic_json(d) for d in done.fixed]
    out["settled"] = done.settled
    out["files"] = changed
    if diff:
        out["diff"] = text
    _echo_json(out, err)


def _echo_json(data: Any, err: bool) -> None:
    if not err:
        echo_json(data)
        return
    import json

    click.echo(json.dumps(data, indent=2), err=True)


def _problems(n: int) -> str:
    return f"{n} problem{'s' * (n != 1)}"


def _fixes(n: int) -> str:
    return "1 fix is" if n == 1 else f"{n} fixes are"
