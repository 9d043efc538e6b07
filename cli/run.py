"""Running a policy: `policyc eval` (the relations it derives from facts) and `policyc explain`
(why a fact holds, or why not). `policyc replay` is in :mod:`.replay`."""

from __future__ import annotations

import sys
from typing import Any

import click

from .common import (
    EXIT_ERRORS,
    EXIT_USAGE,
    FACTS,
    FORMAT,
    FUNCTORS,
    MAX_FACTS,
    NO_MAGIC_OPTION,
    POLICY,
    TIMEOUT,
    VERIFY,
    echo_json,
    fail,
    internal_errors,
    json_failures,
    limits_of,
    load_policy,
    read_facts,
)


@click.command("eval")
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
@NO_MAGIC_OPTION
def eval_command(
    policy: str,
    facts_path: str | None,
    queries: tuple[str, ...],
    fmt: str,
    functors: str | None,
    verify_key: str | None,
    max_facts: int | None,
    timeout: float | None,
    no_magic: bool,
) -> None:
    """Evaluate a policy on facts and print the relations it derives."""
    from ..compiler.magic import NO_MAGIC, Options, is_magic

    with json_failures(fmt == "json"), internal_errors():
        # what is printed is computed in full: all derived relations, or those asked for
        magic = NO_MAGIC if no_magic or not queries else Options(observed=frozenset(queries))
        loaded = load_policy(policy, functors, verify_key, limits_of(max_facts, timeout), magic)
        names = {r.name: r for r in loaded.plan.relations}
        for query in queries:
            if query not in names or names[query].inline or is_magic(query):
                fail(f"the policy has no stored relation `{query}`", EXIT_USAGE)
            if names[query].magic is not None:  # a bundle's plan
                fail(
                    f"the bundle computes `{query}` only where its rules ask for it (demand-driven); "
                    "evaluate the policy's source to print it in full",
                    EXIT_USAGE,
                )
        facts = read_facts(facts_path, loaded)
        result = _evaluate(loaded, facts, facts_path)
        derived = {rule.head for rule in loaded.plan.rules}
        wanted = list(queries) or [
            r.name
            for r in loaded.plan.relations
            if not r.inline and (r.name in derived or r.output) and r.magic is None and not is_magic(r.name)
        ]
        known, unknown = _three_valued(result)
        relations = {name: _sorted_rows(known(name)) for name in sorted(wanted)}
        errors = [e.message for e in result.errors]
        if fmt == "json":
            from ..runtime.values import to_json

            memo: dict[int, Any] = {}  # a record met again (a field of another) converted once
            data = {
                name: [[to_json(v, memo) for v in row] for row in rows] for name, rows in relations.items()
            }
            out: dict[str, Any] = {"relations": data}
            undecided = {
                name: [
                    {"fact": [_json_value(v) for v in fact], "why": fault.message} for fact, fault in found
                ]
                for name in sorted(wanted)
                if (found := unknown(name))
            }
            if undecided:
                out["unknown"] = undecided
            if errors:
                out["errors"] = errors
            echo_json(out)
        else:
            from ..runtime.values import render_fact

            shown: dict[int, str] = {}  # a record met again (a field of another) written once
            for name, rows in relations.items():
                click.echo(f"{name}: {len(rows)} fact{'s' if len(rows) != 1 else ''}")
                for row in rows:
                    click.echo(f"  {render_fact(name, tuple(row), shown)}")
                for fact, fault in unknown(name):
                    click.echo(f"  unknown: {_render_unknown(name, fact)}  ({fault.message})")
        for error in errors:
            click.echo(f"policyc: evaluation error: {error}", err=True)
        if errors:
            sys.exit(EXIT_ERRORS)


@click.command("explain")
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
    facts_path: str | None,
    why_not: bool,
    fmt: str,
    functors: str | None,
    verify_key: str | None,
) -> None:
    """Explain why FACT (like 'Deny("v6")') holds, as a derivation tree, or why it does not."""
    with json_failures(fmt == "json"), internal_errors():
        name, values = _parse_fact(fact)
        from ..compiler.magic import NO_MAGIC

        # an explanation reads the relations it goes through in full
        loaded = load_policy(policy, functors, verify_key, magic=NO_MAGIC)
        values = _fact_of(loaded.plan, name, values, fact)
        facts = read_facts(facts_path, loaded)
        result = _evaluate(loaded, facts, facts_path)
        for error in result.errors:
            click.echo(f"policyc: evaluation error: {error.message}", err=True)
        found = _unknown_fact(result, name, values)
        if found is not None:  # an error made it unknown: why, in the policy's terms
            shown = _render_unknown(name, values)
            if fmt == "json":
                echo_json({"holds": None, "unknown": {"why": found.message, "fix": found.fix}})
            else:
                click.echo(f"{shown} is unknown: {found.message}")
                if found.fix:
                    click.echo(f"  fix: {found.fix}")
            return
        derivation = None if why_not else result.why(name, values)
        if derivation is not None:
            if fmt == "json":
                echo_json({"holds": True, "derivation": derivation.to_json()})
            else:
                click.echo("\n".join(derivation.render()))
            return
        answer = result.why_not(name, values)
        if fmt == "json":
            echo_json({"holds": answer.holds, "why_not": answer.to_json()})
        else:
            click.echo("\n".join(answer.render()))


def _three_valued(result: Any) -> tuple[Any, Any]:
    """The facts of each relation (by name) and its unknown facts with why: from the evaluation,
    or, when its errors are of rules (whose reach is the facts they touch), from the evaluation
    again that keeps the facts they touch apart (docs/runtime.md, "Errors")."""
    from ..runtime.limits import LimitExceeded
    from ..runtime.policy import CONTAINED

    if result.errors and all(e.kind in CONTAINED for e in result.errors):
        try:
            solver = result.three_valued
        except LimitExceeded:
            solver = None
        if solver is not None:
            index = solver.plan.relation_index()

            def known(name: str) -> set[tuple]:
                return solver.facts.known[index[name]].as_tuples()

            def unknown(name: str) -> list[tuple[tuple, Any]]:
                return sorted(solver.facts.unknown[index[name]].items(), key=lambda item: repr(item[0]))

            return known, unknown
    return result.relation, lambda name: []


def _json_value(value: Any) -> Any:
    from ..runtime.faults import ANY
    from ..runtime.values import to_json

    return None if value is ANY else to_json(value)


def _render_unknown(name: str, fact: tuple) -> str:
    from ..runtime.faults import ANY
    from ..runtime.values import render_value

    return f"{name}({', '.join('_' if v is ANY else render_value(v) for v in fact)})"


def _evaluate(policy: Any, facts: Any, origin: str | None) -> Any:
    """Evaluate, stopping with the facts' problem (located in their file) when they do not fit
    the policy: nothing was evaluated, so no relation is printed as if it were empty."""
    result = policy.evaluate(facts, origin=origin or "facts")
    for error in result.errors:
        if error.kind == "facts":
            fail(error.message)
    return result


def _unknown_fact(result: Any, name: str, values: tuple) -> Any:
    """The fault that makes a fact unknown (None when it holds or does not)."""
    from ..runtime.faults import Fault

    known, unknown = _three_valued(result)
    if values in known(name):
        return None
    from ..runtime.unknown import unify

    return next(
        (fault for fact, fault in unknown(name) if unify(fact, values) and isinstance(fault, Fault)), None
    )


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


def _sorted_rows(rows: set[tuple]) -> list[list]:
    return [list(row) for row in sorted(rows, key=lambda row: [(type(v).__name__ != "str", v) for v in row])]
