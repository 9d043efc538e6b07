"""`policyc conditions POLICY 'Allow(a)'`: when does a query hold, in terms of the inputs.

The query's literals are **unfolded**: a positive literal on a derived relation is replaced by
the body of each of its rules (renamed apart, its head matched with the literal's arguments),
one conjunction per combination, until only input relations, functors, comparisons and negated
derived relations are left. A negated derived relation stays as it is, and its own conditions
are listed after the answer. A recursive relation is unfolded ``bound`` times; a literal left
after that is marked ``(recursive)``: it stands for the relation's own conditions.

Then it is simplified: duplicate literals go, a conjunction that contradicts itself (``P`` and
``not P``, a variable equal to two constants, comparisons z3 refutes) is dropped, and a
conjunction implied by a smaller one (every literal of the smaller one appears in it) is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count
from typing import Any

from policyc.compiler import ast
from policyc.compiler.stages import Stratified

from .query import AnalysisError, Loaded, ensure_clean, with_query
from .unsat import contradiction, render_term

MAX_CONJUNCTIONS = 200


@dataclass
class Conditions:
    query: str
    disjuncts: list[list[str]]
    bound: int
    recursive: list[str] = field(default_factory=list)  # relations cut at the bound
    negated: dict[str, list[list[str]]] = field(default_factory=dict)  # conditions of negated relations
    truncated: bool = False
    note: str = ""  # what to ask instead, when the question is not the one meant

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "disjuncts": self.disjuncts,
            "bound": self.bound,
            "recursive": self.recursive,
            "negated": self.negated,
            "truncated": self.truncated,
            "note": self.note,
        }

    def text(self) -> str:
        if not self.disjuncts:
            return f"`{self.query}` never holds" + (f"\n({self.note})" if self.note else "")
        lines = [f"`{self.query}` holds when" + (" one of these holds:" if len(self.disjuncts) > 1 else ":")]
        lines.extend(_numbered(self.disjuncts))
        for name, disjuncts in self.negated.items():
            lines.append(
                f"\nwhere `{name}` holds when" + (" one of these holds:" if len(disjuncts) > 1 else ":")
            )
            lines.extend(_numbered(disjuncts) if disjuncts else ["  never"])
        if self.recursive:
            names = ", ".join(f"`{n}`" for n in self.recursive)
            times = "once" if self.bound == 1 else f"{self.bound} times"
            lines.append(f"\n(recursive: {names}, unfolded {times})")
        if self.truncated:
            lines.append(f"\n(more than {MAX_CONJUNCTIONS} cases: the first {MAX_CONJUNCTIONS} are shown)")
        return "\n".join(lines)


def _numbered(disjuncts: list[list[str]]) -> list[str]:
    return [f"  {n}. " + (", ".join(d) if d else "always") for n, d in enumerate(disjuncts, 1)]


class _Unfolder:
    def __init__(self, compilation: Stratified, bound: int) -> None:
        self.compilation = compilation
        self.symbols = compilation.symbols
        self.bound = bound
        self.program = compilation.program
        self.fresh = count(1)
        self.recursive: set[str] = set()
        self.truncated = False
        self.negated: set[str] = set()

    def derived(self, name: str) -> bool:
        return bool(self.program.rules_of(name)) and name not in self.symbols.functors

    def unfold(self, body: list[ast.Literal], depth: dict[str, int]) -> list[list[ast.Literal]]:
        """Every conjunction of non-derived literals the body unfolds into."""
        for i, lit in enumerate(body):
            if isinstance(lit, ast.Atom) and self.derived(lit.name) and lit.name not in self.symbols.inputs:
                used = depth.get(lit.name, 0)
                if used >= self.bound:
                    self.recursive.add(lit.name)
                    continue
                results = []
                for rule in self.program.rules_of(lit.name):
                    replaced = self._apply(rule, lit, body[:i], body[i + 1 :])
                    if replaced is None:
                        continue
                    for done in self.unfold(replaced, {**depth, lit.name: used + 1}):
                        results.append(done)
                        if len(results) > MAX_CONJUNCTIONS:
                            self.truncated = True
                            return results[:MAX_CONJUNCTIONS]
                return results
            if (
                isinstance(lit, ast.Atom)
                and not self.program.rules_of(lit.name)
                and lit.name not in self.symbols.inputs
                and lit.name not in self.symbols.functors
            ):
                return []  # a relation no rule derives and no input gives: never holds
            if isinstance(lit, ast.Negation) and self.derived(lit.atom.name):
                self.negated.add(lit.atom.name)
        return [body]

    def _apply(
        self, rule: ast.Rule, use: ast.Atom, before: list[ast.Literal], after: list[ast.Literal]
    ) -> list[ast.Literal] | None:
        """The body with ``use`` replaced by ``rule``'s body (``None`` when the head cannot match)."""
        tag = next(self.fresh)
        renamed: dict[str, ast.Term] = {}

        def rename(t: ast.Term) -> ast.Term:
            return _substitute(t, renamed, tag)

        theta: dict[str, ast.Term] = {}
        extra: list[ast.Literal] = []
        for head_arg, given in zip(rule.head.args, use.args, strict=True):
            if isinstance(head_arg, ast.Var) and head_arg.name not in renamed:
                renamed[head_arg.name] = given
            elif isinstance(head_arg, ast.String | ast.Integer) and isinstance(
                given, ast.String | ast.Integer
            ):
                if head_arg.value != given.value or type(head_arg) is not type(given):
                    return None
            elif isinstance(head_arg, ast.String | ast.Integer) and isinstance(given, ast.Var):
                theta[given.name] = head_arg
            else:
                extra.append(ast.Comparison("=", rename(head_arg), given))
        body = [_literal(lit, rename) for lit in rule.body]
        combined = before + extra + body + after
        if theta:
            combined = [_literal(lit, lambda t: _substitute(t, theta, None)) for lit in combined]
        return combined


def _substitute(t: ast.Term, mapping: dict[str, ast.Term], tag: int | None) -> ast.Term:
    if isinstance(t, ast.Var):
        if t.name in mapping:
            return mapping[t.name]
        if tag is None:
            return t
        fresh = ast.Var(f"{t.name}_{tag}")
        mapping[t.name] = fresh
        return fresh
    if isinstance(t, ast.Aggregate):
        return ast.Aggregate(
            t.op,
            None if t.target is None else _substitute(t.target, mapping, tag),
            tuple(_literal(lit, lambda x: _substitute(x, mapping, tag)) for lit in t.body),
        )
    return ast.map_children(t, lambda x: _substitute(x, mapping, tag))


def _literal(lit: ast.Literal, f: Any) -> ast.Literal:
    if isinstance(lit, ast.Atom):
        return ast.Atom(lit.name, tuple(f(a) for a in lit.args))
    if isinstance(lit, ast.Negation):
        return ast.Negation(ast.Atom(lit.atom.name, tuple(f(a) for a in lit.atom.args)))
    return ast.Comparison(lit.op, f(lit.left), f(lit.right))


def render_literal(lit: ast.Literal) -> str:
    if isinstance(lit, ast.Atom):
        return f"{lit.name}({', '.join(render_term(a) for a in lit.args)})"
    if isinstance(lit, ast.Negation):
        return "not " + render_literal(lit.atom)
    return f"{render_term(lit.left)} {lit.op} {render_term(lit.right)}"


def _simplify(
    compilation: Stratified,
    conjunctions: list[list[ast.Literal]],
    head: ast.Atom,
    cut: set[str] = frozenset(),  # type: ignore[assignment]
) -> list[list[str]]:
    kept: list[tuple[list[str], set[str]]] = []
    for conjunction in conjunctions:
        texts = list(
            dict.fromkeys(
                render_literal(lit)
                + (" (recursive)" if isinstance(lit, ast.Atom) and lit.name in cut else "")
                for lit in conjunction
            )
        )
        if contradiction(compilation, ast.Rule(head, tuple(conjunction))) is not None:
            continue
        kept.append((texts, set(texts)))
    result = []
    for i, (texts, literals) in enumerate(kept):
        implied = any(
            other < literals or (other == literals and j < i) for j, (_, other) in enumerate(kept) if j != i
        )
        if not implied:
            result.append(texts)
    return result


def conditions(loaded: Loaded, text: str, bound: int = 2) -> Conditions:
    compiled, query = with_query(loaded, text)
    compilation = ensure_clean(compiled, "the policy or the query")
    if bound < 1:
        raise AnalysisError("the bound is at least 1")
    unfolder = _Unfolder(compilation, bound)
    found = unfolder.unfold(list(query.rule.body), {})
    disjuncts = _simplify(compilation, found, query.rule.head, unfolder.recursive)
    negated = {}
    for name in sorted(unfolder.negated):
        rule = compilation.program.rules_of(name)[0]
        pattern = ast.Atom(name, tuple(ast.Var(f"x{i + 1}") for i in range(len(rule.head.args))))
        inner = _Unfolder(compilation, bound)
        unfolded = inner.unfold([pattern], {})
        negated[render_literal(pattern)] = _simplify(compilation, unfolded, pattern, inner.recursive)
        unfolder.recursive |= inner.recursive
    note = ""
    if not disjuncts and compilation.symbols.default == "allow" and not compilation.program.rules_of("Allow"):
        if any(isinstance(lit, ast.Atom) and lit.name == "Allow" for lit in query.rule.body):
            note = (
                "no rule derives `Allow`: this policy allows every action no `Deny` fact holds for; "
                "the conditions of `Deny(a)` are those under which an action is denied"
            )
    return Conditions(text, disjuncts, bound, sorted(unfolder.recursive), negated, unfolder.truncated, note)
