"""Which relations of a policy can never lose a fact as a session grows, and why.

A session only ever adds facts: events append to the event graph, and domain facts are added,
never retracted. A relation is

* **fixed** when the policy alone determines it: it is not an input, and its rules read only
  fixed relations (``Scanner("sast_scan", ...)`` facts, lookup tables);
* **monotone** when it can only gain facts: an input relation (other than ``Candidate``), a
  fixed relation, or a relation whose every rule joins monotone relations (recursion among
  relations of its own stratum included), compares and calls functors, and uses negation,
  aggregates or negated inline relations only over *fixed* relations — a negation or an
  aggregate over a relation that can still grow can turn a fact false later;
* **volatile** otherwise: ``Candidate`` (it holds for the action under decision only), and any
  relation with a rule that negates or aggregates over a relation that can grow, or that reads
  a volatile relation.

A predicate over a monotone relation, once true, stays true for the rest of the session: the
DTMC learned over predicates gives no probability to a transition that turns it false.

>>> from policyc.compiler.pipeline import compile_source
>>> from policyc.runtime.planned import plan_of
>>> plan = plan_of(compile_source('''
... .input Edit, Scan
... Scanned(e) :- Edit(e), Scan(s), s > e.
... Pending(e) :- Edit(e), not Scanned(e).
... ''', "p.dl"))
>>> found = derive(plan)
>>> [(found[n].monotone, found[n].why) for n in ("Scanned", "Pending")][1]
(False, 'rule `Pending@p.dl:4` negates `Scanned`, which can grow')
"""

from __future__ import annotations

from dataclasses import dataclass

from policyc.compiler import plan as p

CANDIDATE = "Candidate"


@dataclass(frozen=True)
class Derivation:
    """Whether a relation can only gain facts as a session grows, and the reason, in words."""

    relation: str
    monotone: bool
    fixed: bool
    why: str


def derive(plan: p.Plan) -> dict[str, Derivation]:
    """The derivation for every relation of the plan, by name."""
    relations = plan.relations
    rules = rules_of(plan)

    found: dict[int, Derivation] = {}
    for stratum in plan.strata:
        members = set(stratum.relations)
        names = [relations[r].name for r in stratum.relations]
        # fixed: not input, reads only fixed relations (or relations of its own stratum)
        fixed = all(
            not relations[r].input
            and relations[r].name != CANDIDATE
            and all(
                read in members or found[read].fixed for _, steps in rules[r] for read, _ in p.reads(steps)
            )
            for r in stratum.relations
        )
        if fixed:
            for r in stratum.relations:
                found[r] = Derivation(
                    relations[r].name, True, True, "fixed by the policy's own facts and rules"
                )
            continue
        problem = None
        for r in stratum.relations:
            if relations[r].name == CANDIDATE:
                problem = "it holds for the action under decision only"
                break
            problem = _problem(plan, rules[r], members, found)
            if problem:
                break
        for r in stratum.relations:
            spec = relations[r]
            if problem is not None:
                why = problem if len(names) == 1 else f"{problem} (recursive with {_list(names, spec.name)})"
                found[r] = Derivation(spec.name, False, False, why)
            elif not rules[r]:
                found[r] = Derivation(spec.name, True, False, "an input relation: a session only adds facts")
            else:
                grows = sorted(
                    {
                        relations[read].name
                        for _, steps in rules[r]
                        for read, how in p.reads(steps)
                        if how == "scan"
                    }
                )
                source = f"from relations that only grow: {_list(grows, '')}" if grows else "from no relation"
                prefix = "input facts and rules" if spec.input else "derived"
                found[r] = Derivation(
                    spec.name,
                    True,
                    False,
                    f"{prefix} without negation or aggregates over growing relations, {source}",
                )
    return {d.relation: d for d in found.values()}


def rules_of(plan: p.Plan) -> dict[int, list[tuple[int, tuple[p.Step, ...]]]]:
    """Every rule of every relation (inline ones included), by head: its index and its body.

    Read from the rules planned with the head given, which hold every rule once; a recursive
    stratum's ``rules`` hold only its base rules (the others are planned as delta variants)."""
    return {r: [(b.rule, b.steps) for b in bound] for r, bound in enumerate(plan.bound_rules)}


def _list(names: list[str], leave_out: str) -> str:
    return ", ".join(f"`{n}`" for n in names if n != leave_out) or "itself"


def _problem(
    plan: p.Plan, rules: list[tuple[int, tuple[p.Step, ...]]], members: set[int], found: dict[int, Derivation]
) -> str | None:
    """Why a relation with these rules is volatile, or None when it is monotone."""
    relations = plan.relations
    for rule, steps in rules:
        where = _rule_name(plan, rule)
        for read, how in p.reads(steps):
            if read in members:
                if how in ("scan", "inline"):
                    continue
                return f"rule {where} uses `{relations[read].name}` of its own stratum under {how}"
            known = found[read]
            name = relations[read].name
            if how in ("scan", "inline"):
                if not known.monotone:
                    return f"rule {where} reads `{name}`, which can lose facts ({known.why})"
            elif not known.fixed:
                verb = {"negation": "negates", "aggregate": "aggregates over", "inline-negated": "negates"}[
                    how
                ]
                return f"rule {where} {verb} `{name}`, which can grow"
    return None


def _rule_name(plan: p.Plan, rule: int) -> str:
    info = plan.rules[rule]
    return f"`{info.id}`"
