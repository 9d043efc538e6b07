"""What `policyc test` prints: each case passed or failed with expected against actual, a
summary, and with ``--coverage`` which rules some case made fire and the `Deny` rules none did."""

from __future__ import annotations

import os
from typing import Any

from .run import FileResult


def coverage(results: list[FileResult]) -> dict[str, Any]:
    """Every rule of the tested policies' own files, whether some case made it fire (``None``
    for rules of inline relations, which are evaluated on demand and not tracked), and the
    `Deny` rules no case made fire."""
    fired: dict[tuple[str, int, int], bool | None] = {}
    infos: dict[tuple[str, int, int], Any] = {}
    for result in results:
        for key, value in result.fired.items():
            before = fired.get(key)
            fired[key] = value if before is None else (before or bool(value))
            infos[key] = result.rules[key]
    rules = []
    for key in sorted(fired):
        info = infos[key]
        rules.append(
            {
                "file": _relative(key[0]),
                "line": key[1],
                "column": key[2],
                "id": info.id,
                "head": info.head,
                "fired": fired[key],
            }
        )
    unexercised = [
        {k: rule[k] for k in ("file", "line", "column", "id")}
        for rule in rules
        if rule["head"] == "Deny" and rule["fired"] is False
    ]
    return {"rules": rules, "unexercised_deny_rules": unexercised}


def to_json(results: list[FileResult], with_coverage: bool) -> dict[str, Any]:
    files = []
    for result in results:
        files.append(
            {
                "file": str(result.path),
                "policy": str(result.file.policy) if result.file else None,
                "error": result.error,
                "cases": [
                    {
                        "name": c.case.name,
                        "line": c.case.line,
                        "passed": c.passed,
                        "failures": [f.to_json() for f in c.failures],
                    }
                    for c in result.cases
                ],
            }
        )
    out: dict[str, Any] = {"files": files, "summary": summary(results)}
    if with_coverage:
        out["coverage"] = coverage(results)
    return out


def summary(results: list[FileResult]) -> dict[str, int]:
    cases = [c for r in results for c in r.cases]
    passed = sum(c.passed for c in cases)
    return {
        "tests": len(cases),
        "passed": passed,
        "failed": len(cases) - passed,
        "errors": sum(r.error is not None for r in results),
    }


def text(results: list[FileResult], with_coverage: bool) -> str:
    lines: list[str] = []
    for result in results:
        lines.append(str(result.path))
        if result.error is not None:
            lines.append(f"  ERROR  {result.error}")
            continue
        for c in result.cases:
            if c.passed:
                lines.append(f"  ok     {c.case.name}")
                continue
            lines.append(f"  FAIL   {c.case.name}  ({result.path}:{c.case.line})")
            for f in c.failures:
                lines.append(f"         {f.check} {f.subject}: expected {f.expected}, got {f.actual}")
    counts = summary(results)
    tail = f"{_count(counts['tests'], 'test')}, {counts['passed']} passed, {counts['failed']} failed"
    if counts["errors"]:
        tail += f", {_count(counts['errors'], 'test file')} could not run"
    lines.append(tail)
    if with_coverage:
        found = coverage(results)
        tracked = [r for r in found["rules"] if r["fired"] is not None]
        done = sum(bool(r["fired"]) for r in tracked)
        lines.append("")
        lines.append(
            f"coverage: {done} of {_count(len(tracked), 'rule')} fired"
            + (
                f" ({_count(len(found['rules']) - len(tracked), 'rule')} of inline relations not tracked)"
                if len(tracked) < len(found["rules"])
                else ""
            )
        )
        for rule in found["rules"]:
            state = "fired    " if rule["fired"] else "NOT FIRED" if rule["fired"] is False else "inline   "
            lines.append(f"  {state}  {rule['file']}:{rule['line']}:{rule['column']}  {rule['id']}")
        if found["unexercised_deny_rules"]:
            lines.append("Deny rules no test exercises:")
            for rule in found["unexercised_deny_rules"]:
                lines.append(f"  {rule['file']}:{rule['line']}:{rule['column']}  {rule['id']}")
        else:
            lines.append("every Deny rule is exercised")
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    """``1 test``, ``2 tests``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _relative(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative
