"""`policyc diff OLD NEW`: how two versions of a policy decide differently.

Both policies are translated side by side (prefixes ``o_`` and ``n_``) over **one** chosen
database: the facts of every input relation either declares, the tables of the functors they
share, and one action being decided (``Candidate`` holds for it and nothing else, if a policy
reads ``Candidate``). A search then asks, in each direction, for the smallest database on which
one policy allows the action and the other denies it (the verdict as the runtime gives it:
deny-overrides, then ``Allow`` or the default). Each witness found is replayed through both
policies' evaluators before it is shown.

* no witness either way: ``equivalent`` — ``proved`` when the two policies have the same rules
  (up to the order of rules and of literals, and the names of variables), else ``bounded``;
* only new-allows witnesses: ``more-permissive``; only old-allows: ``less-permissive`` (bounded:
  the other direction was searched within the bound);
* both: ``incomparable`` (``proved``: both witnesses are real).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policyc.compiler import ast
from policyc.compiler.stages import Stratified
from policyc.compiler.symbols import Symbols

from . import asp
from .domains import Vocabulary, compute
from .query import AnalysisError, Loaded, compile_loaded, ensure_clean
from .replay import evaluate, shown_tables
from .search import EVENT_LINKS, Model, Problem, Shown, event_feeds, event_id_links
from .unsat import atom_shape, shape


@dataclass
class Difference:
    direction: str  # "only-new-allows" or "only-old-allows"
    action: Any
    facts: dict[str, list[tuple]]
    functors: dict[str, list[tuple]]
    numbers: list[tuple] = field(default_factory=list)  # tool arguments that are JSON numbers

    def to_json(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "action": self.action,
            "facts": {n: [list(r) for r in rows] for n, rows in sorted(self.facts.items())},
            "functors": {n: [list(r) for r in rows] for n, rows in sorted(self.functors.items())},
            "numbers": [list(row) for row in self.numbers],
        }


@dataclass
class DiffResult:
    verdict: str
    strength: str
    bound: int
    witnesses: list[Difference] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "strength": self.strength,
            "bound": self.bound,
            "witnesses": [w.to_json() for w in self.witnesses],
        }

    def text(self) -> str:
        from .witness import render, render_numbers, render_tables

        other = "difference" if self.verdict == "equivalent" else "other difference"
        strength = (
            f"bounded: no {other} with up to {self.bound} fresh values per type"
            if self.strength == "bounded"
            else "proved"
        )
        lines = [f"{self.verdict} ({strength})"]
        for w in self.witnesses:
            who = (
                "the new policy allows it and the old one denies it"
                if w.direction == "only-new-allows"
                else "the old policy allows it and the new one denies it"
            )
            lines.append(f"\n{w.direction}: action {render(w.action)} — {who}; facts:")
            if not w.facts:
                lines.append("  (none)")
            for name, rows in sorted(w.facts.items()):
                lines.extend(f"  {name}({', '.join(render(v) for v in row)})." for row in rows)
            lines.extend(render_tables(w.functors))
            lines.extend(render_numbers(w.numbers))
        return "\n".join(lines)


def same_rules(old: Stratified, new: Stratified) -> bool:
    def rules(c: Stratified) -> list[str]:
        found = []
        for _, rule in c.program.rules():
            names: dict[str, str] = {}
            found.append(
                (
                    _canonical(rule.head, names),
                    tuple(sorted(repr(_canonical_literal(x, names)) for x in rule.body)),
                )
            )
        return sorted(map(repr, found))

    return rules(old) == rules(new) and old.symbols.default == new.symbols.default


def _canonical(atom: ast.Atom, names: dict[str, str]) -> Any:
    name, args = atom_shape(atom)
    return (name, tuple(_rename(a, names) for a in args))


def _canonical_literal(lit: ast.Literal, names: dict[str, str]) -> Any:
    if isinstance(lit, ast.Atom):
        return _canonical(lit, names)
    if isinstance(lit, ast.Negation):
        return ("not", _canonical(lit.atom, names))
    return (lit.op, _rename(shape(lit.left), names), _rename(shape(lit.right), names))


def _rename(s: Any, names: dict[str, str]) -> Any:
    if isinstance(s, tuple) and s and s[0] == "_":
        return ("_",)
    if isinstance(s, tuple) and s and s[0] == "var":
        return ("var", names.setdefault(s[1], f"v{len(names)}"))
    if isinstance(s, tuple):
        return tuple(_rename(x, names) for x in s)
    return s


def diff(old_loaded: Loaded, new_loaded: Loaded, bound: int = 3, timeout: float = 60.0) -> DiffResult:
    old = ensure_clean(compile_loaded(old_loaded), "the old policy")
    new = ensure_clean(compile_loaded(new_loaded), "the new policy")
    if same_rules(old, new):
        return DiffResult("equivalent", "proved", bound)
    try:
        witnesses = [
            w
            for direction in ("only-new-allows", "only-old-allows")
            if (w := _search(old, new, direction, bound, timeout)) is not None
        ]
    except asp.Untranslatable as error:
        raise AnalysisError(f"cannot search these policies: {error}") from None
    except TimeoutError as error:
        raise AnalysisError(str(error)) from None
    directions = {w.direction for w in witnesses}
    if not directions:
        return DiffResult("equivalent", "bounded", bound)
    if directions == {"only-new-allows"}:
        return DiffResult("more-permissive", "bounded", bound, witnesses)
    if directions == {"only-old-allows"}:
        return DiffResult("less-permissive", "bounded", bound, witnesses)
    return DiffResult("incomparable", "proved", bound, witnesses)


def _search(
    old: Stratified, new: Stratified, direction: str, bound: int, timeout: float
) -> Difference | None:
    domains = compute(
        Vocabulary(
            (*(rule for _, rule in old.program.rules()), *(rule for _, rule in new.program.rules())),
            {**new.symbols.functors, **old.symbols.functors},
            {**new.types, **old.types},
        ),
        bound,
        (),
        [link for links in EVENT_LINKS.values() for link in links]
        + event_id_links(new)
        + event_id_links(old),
        event_feeds(new) + event_feeds(old),
    )
    p_old = Problem(old, bound, domains=domains, prefix="o_")
    p_new = Problem(new, bound, domains=domains, prefix="n_")
    symbols = {"o_": old.symbols, "n_": new.symbols}
    inputs = sorted((set(p_old.inputs()) | set(p_new.inputs())) - {"Candidate"})
    lines = p_old.rules(p_old.translator()) + p_new.rules(p_new.translator())
    for name in inputs:
        n = _arity(old.symbols, new.symbols, name)
        xs = ",".join(f"X{i}" for i in range(n))
        guards = ", ".join(f"{domains.predicate(('rel', name, i))}(X{i})" for i in range(n))
        chosen = asp.predicate_name(name, "in_")
        head = f"{chosen}({xs})" if n else chosen
        lines.append(f"{{ {head} : {guards} }}." if guards else f"{{ {head} }}.")
        for prefix, own in symbols.items():
            if name in own.relations:
                given = asp.predicate_name(name, prefix)
                lines.append(f"{given}({xs}) :- {head}." if n else f"{given} :- {head}.")
        lines.append(f"#minimize {{ 1,{asp.const(name)},{xs or '0'} : {head} }}.")
    used: set[str] = set()
    for name in sorted(p_old.tabled | p_new.tabled):
        lines.extend((p_old if name in p_old.tabled else p_new).table_rules(name, used))
    for problem in (p_old, p_new):
        lines.extend(problem.event_functor_rules() + problem.vocabulary_rules())
    lines.append(f"1 {{ policyc_action(A) : {domains.predicate(('rel', 'Deny', 0))}(A) }} 1.")
    for prefix, own in symbols.items():
        if "Candidate" in own.relations:
            lines.append(f"{prefix}Candidate(A) :- policyc_action(A).")
        verdict = f"not {prefix}Deny(A)" if "Deny" in own.relations else "#true"
        if own.default == "deny":
            verdict += f", {prefix}Allow(A)" if "Allow" in own.relations else ", #false"
        lines.append(f"{prefix}allowed(A) :- policyc_action(A), {verdict}.")
    first, second = ("n_", "o_") if direction == "only-new-allows" else ("o_", "n_")
    lines.append(f"policyc_goal(A) :- policyc_action(A), {first}allowed(A), not {second}allowed(A).")
    for cls, predicate in sorted(domains.names.items(), key=lambda item: item[1]):
        lines.extend(f"{predicate}({asp.const(value)})." for value in domains.values(cls))
    p_old.read_inputs = set(inputs)
    p_old.read_tables = p_old.tabled | p_new.tabled
    shown: Shown = {"goal": ("policyc_goal", ("a",))}
    model = p_old.solve_text("\n".join(lines) + "\n", [":- not policyc_goal(_)."], timeout, shown)
    if model is None:
        return None
    act = model.bindings.get("a")
    for compilation, problem, allows in ((old, p_old, first == "o_"), (new, p_new, first == "n_")):
        its = Model(
            {n: r for n, r in model.facts.items() if n in compilation.symbols.relations},
            model.tables,
            numbers=model.numbers,
        )
        if "Candidate" in compilation.symbols.relations:
            its.facts["Candidate"] = [(act,)]
        result = evaluate(compilation, its, problem.tabled)
        if result.errored or result.decide(act).allowed != allows:
            raise AnalysisError(
                "internal error: the evaluator does not confirm the difference the search found; please report it"
            )
    sigs = {**new.symbols.functors, **old.symbols.functors}
    return Difference(direction, act, model.facts, shown_tables(model.tables, sigs), model.numbers)


def _arity(a: Symbols, b: Symbols, name: str) -> int:
    for symbols in (a, b):
        relation = symbols.relations.get(name)
        if relation is not None and relation.arity is not None:
            return relation.arity
    return 0
