"""clingo as an independent oracle for the evaluator.

:func:`to_clingo` translates a checked policy and its input facts into an ASP program whose
unique answer set holds exactly the facts policyc must derive:

* relations become predicates ``p_Name``, variables ``V_name``;
* functors become clingo external functions ``@name(...)`` answered by the same Python
  implementations (a foreign predicate holds when its function returns 1);
* aggregates become clingo aggregates over every variable of their body (so each distinct
  binding counts once, as in policyc), ``min``/``max`` guarded by a non-empty ``#count``
  (policyc gives no value over nothing), and ``mean``, which clingo cannot compute, is checked
  through sum and count: ``v = mean x : {B}, v > k`` becomes ``S > k*C`` with ``C > 0``;
* inline relations are expanded where they are used: a positive use by substituting each of
  their rules, a negated one through an auxiliary predicate defined over the using rule's own
  bindings (its literals from lower strata).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import count as counter
from itertools import product
from typing import Any

from policyc.compiler import ast


class Untranslatable(Exception):
    pass


def _name(relation: str) -> str:
    return "p_" + relation


def _var(name: str) -> str:
    return "V_" + name.replace("'", "_q").replace("\u2019", "_q")


def _const(value: object) -> str:
    if isinstance(value, bool) or isinstance(value, float):
        raise Untranslatable("floats have no clingo counterpart")
    if isinstance(value, int):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Translator:
    def __init__(self, compilation: Any) -> None:
        self.symbols = compilation.symbols
        self.strata = compilation.strata
        self.program = compilation.program
        self.fresh = counter()
        self.rules_of: dict[str, list[ast.Rule]] = {}
        for _, rule in self.program.rules():
            self.rules_of.setdefault(rule.head.name, []).append(rule)
        self.extra: list[str] = []  # auxiliary rules for negated inline relations

    def inline(self, name: str) -> bool:
        return self.symbols.is_inline(name)

    def predicate(self, name: str) -> bool:
        sig = self.symbols.functors.get(name)
        return sig is not None and sig.is_predicate

    # ----------------------------------------------------------------------- terms

    def term(self, t: ast.Term, env: dict[str, str]) -> str:
        if isinstance(t, ast.Var):
            return env.get(t.name, _var(t.name))
        if isinstance(t, ast.Wildcard):
            return "_"
        if isinstance(t, ast.Integer | ast.String | ast.Float):
            return _const(t.value)
        if isinstance(t, ast.BinOp):
            op = "\\" if t.op == "%" else t.op
            return f"({self.term(t.left, env)}{op}{self.term(t.right, env)})"
        if isinstance(t, ast.Negate):
            return f"-({self.term(t.operand, env)})"
        if isinstance(t, ast.Call):
            return f"@{t.name}({','.join(self.term(a, env) for a in t.args)})"
        raise Untranslatable(f"{type(t).__name__} in a term")

    def atom(self, a: ast.Atom, env: dict[str, str], hide_wildcards: bool = False) -> str:
        if self.predicate(a.name):
            return f"@{a.name}({','.join(self.term(x, env) for x in a.args)}) = 1"
        if not a.args:
            return _name(a.name)
        args = []
        for arg in a.args:
            if hide_wildcards and isinstance(arg, ast.Wildcard):
                args.append(f"W{next(self.fresh)}")
            else:
                args.append(self.term(arg, env))
        return f"{_name(a.name)}({','.join(args)})"

    # --------------------------------------------------------------------- bodies

    def literal_alternatives(
        self, lit: ast.Literal, env: dict[str, str], head: str, body: tuple
    ) -> list[list[str]]:
        """The translations of one literal: several when a positive inline atom expands."""
        if isinstance(lit, ast.Atom) and self.inline(lit.name):
            return [self.expand(rule, lit, env) for rule in self.rules_of.get(lit.name, [])]
        if isinstance(lit, ast.Negation):
            if self.inline(lit.atom.name):
                return [[self.negated_inline(lit.atom, env, head, body)]]
            if self.predicate(lit.atom.name):
                return [[f"@{lit.atom.name}({','.join(self.term(x, env) for x in lit.atom.args)}) = 0"]]
            return [["not " + self.atom(lit.atom, env)]]
        if isinstance(lit, ast.Atom):
            return [[self.atom(lit, env)]]
        return [[f"{self.term(lit.left, env)}{lit.op}{self.term(lit.right, env)}"]]

    def expand(self, rule: ast.Rule, use: ast.Atom, env: dict[str, str]) -> list[str]:
        """An inline relation's rule, with its head's values given by the use."""
        tag = next(self.fresh)
        inner: dict[str, str] = {}
        checks = []
        for head_arg, given in zip(rule.head.args, use.args, strict=True):
            value = self.term(given, env)
            if isinstance(head_arg, ast.Var) and head_arg.name not in inner:
                inner[head_arg.name] = value
            else:
                checks.append(f"{self.term(head_arg, self.renamed(inner, tag))} = {value}")
        scope = self.renamed(inner, tag)
        literals = list(checks)
        for lit in rule.body:
            options = self.literal_alternatives(lit, scope, rule.head.name, rule.body)
            if len(options) != 1:
                raise Untranslatable("nested positive inline relations")
            literals.extend(options[0])
        return literals

    def renamed(self, given: dict[str, str], tag: int) -> dict[str, str]:
        class Scope(dict):
            def __missing__(self, name: str) -> str:
                return f"{_var(name)}_i{tag}"

            def get(self, name: str, default: Any = None) -> str:
                return self[name]

        return Scope(given)

    def negated_inline(self, use: ast.Atom, env: dict[str, str], head: str, body: tuple) -> str:
        """``not R(args)`` through ``aux(vars)`` defined by R's rules over the caller's bindings."""
        variables = sorted({v.name for arg in use.args for v in ast.term_vars(arg)})
        aux = f"aux_{next(self.fresh)}"
        args = ",".join(self.term(ast.Var(v), env) for v in variables)
        domain = self.domain(head, body, use, env)
        for rule in self.rules_of.get(use.name, []):
            literals = domain + self.expand(rule, use, env)
            self.extra.append(
                f"{aux}({args}) :- {', '.join(literals)}."
                if variables
                else f"{aux} :- {', '.join(literals)}."
            )
        return f"not {aux}({args})" if variables else f"not {aux}"

    def domain(self, head: str, body: tuple, use: ast.Atom, env: dict[str, str]) -> list[str]:
        """The caller's literals that bind its variables without depending on its own head."""
        own = self.strata.of.get(head)
        literals = []
        for lit in body:
            if lit is use or isinstance(lit, ast.Negation):
                continue
            if isinstance(lit, ast.Atom):
                if self.inline(lit.name):
                    continue
                if not self.predicate(lit.name) and self.strata.of.get(lit.name) == own:
                    continue
            if isinstance(lit, ast.Comparison) and any(
                isinstance(t, ast.Aggregate) for t in (lit.left, lit.right)
            ):
                continue
            literals.extend(self.literal_alternatives(lit, env, head, body)[0])
        return literals

    def aggregate_body(self, agg: ast.Aggregate, env: dict[str, str], head: str) -> tuple[str, list[str]]:
        parts: list[str] = []
        for lit in agg.body:
            if isinstance(lit, ast.Atom) and not self.predicate(lit.name) and not self.inline(lit.name):
                parts.append(self.atom(lit, env, hide_wildcards=True))
            else:
                options = self.literal_alternatives(lit, env, head, agg.body)
                if len(options) != 1:
                    raise Untranslatable("a positive inline relation inside an aggregate")
                parts.extend(options[0])
        condition = ", ".join(parts)
        names = sorted({tok for part in parts for tok in _variables(part)})
        return condition, names

    def rule(self, rule: ast.Rule) -> list[str]:
        env: dict[str, str] = {}
        head = rule.head.name
        fixed: list[str] = []
        choices: list[list[list[str]]] = []
        pending_mean: dict[str, tuple[str, str]] = {}
        for lit in rule.body:
            if (
                isinstance(lit, ast.Comparison)
                and lit.op == "="
                and isinstance(lit.left, ast.Var)
                and isinstance(lit.right, ast.Aggregate)
            ):
                target, agg = _var(lit.left.name), lit.right
                condition, names = self.aggregate_body(agg, env, head)
                keys = ",".join(names) if names else "0"
                if agg.op == "count":
                    fixed.append(f"{target} = #count {{ {keys} : {condition} }}")
                elif agg.op in ("sum", "min", "max"):
                    value = self.term(agg.target, env)  # type: ignore[arg-type]
                    if agg.op != "sum":
                        fixed.append(f"#count {{ {keys} : {condition} }} > 0")
                    fixed.append(f"{target} = #{agg.op} {{ {value},{keys} : {condition} }}")
                else:
                    value = self.term(agg.target, env)  # type: ignore[arg-type]
                    s, c = f"S{next(self.fresh)}", f"C{next(self.fresh)}"
                    fixed.append(f"{s} = #sum {{ {value},{keys} : {condition} }}")
                    fixed.append(f"{c} = #count {{ {keys} : {condition} }}")
                    fixed.append(f"{c} > 0")
                    pending_mean[lit.left.name] = (s, c)
                continue
            if (
                isinstance(lit, ast.Comparison)
                and isinstance(lit.left, ast.Var)
                and lit.left.name in pending_mean
                and isinstance(lit.right, ast.Integer)
            ):
                s, c = pending_mean[lit.left.name]
                fixed.append(f"{s} {lit.op} {lit.right.value}*{c}")
                continue
            options = self.literal_alternatives(lit, env, head, rule.body)
            if not options:
                return []  # a positive inline relation without rules never holds
            if len(options) == 1:
                fixed.extend(options[0])
            else:
                choices.append(options)
        if any(isinstance(a, ast.Var) and a.name in pending_mean for a in rule.head.args):
            raise Untranslatable("a mean in a rule head")
        head_text = self.atom(rule.head, env)
        translated = []
        for combination in product(*choices):
            body = fixed + [part for option in combination for part in option]
            translated.append(f"{head_text} :- {', '.join(body)}." if body else f"{head_text}.")
        return translated


def _variables(text: str) -> list[str]:
    return [m for m in re.findall(r"\b(V_[A-Za-z0-9_]+|W\d+)\b", text)]


def to_clingo(compilation: Any, facts: dict[str, list[tuple]]) -> str:
    translator = _Translator(compilation)
    lines = []
    for module in compilation.program.modules:
        for statement in module.statements:
            if isinstance(statement, ast.Rule) and not translator.inline(statement.head.name):
                lines.extend(translator.rule(statement))
    lines.extend(translator.extra)
    for name, rows in facts.items():
        for row in rows:
            lines.append(f"{_name(name)}({','.join(_const(v) for v in row)})." if row else f"{_name(name)}.")
    return "\n".join(lines) + "\n"


class _Context:
    """Answers clingo's ``@name(...)`` calls with the policy's functor implementations."""

    def __init__(self, functors: dict[str, Callable[..., Any]], predicates: set[str]) -> None:
        self.functors = functors
        self.predicates = predicates

    def __getattr__(self, name: str) -> Callable[..., Any]:
        import clingo

        fn = self.functors.get(name)
        if fn is None:
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            values = [a.number if a.type == clingo.SymbolType.Number else a.string for a in args]
            result = fn(*values)
            if name in self.predicates:
                return clingo.Number(1 if result else 0)
            if result is None:
                return []
            if isinstance(result, int):
                return clingo.Number(result)
            return clingo.String(str(result))

        return call


def clingo_model(
    program: str,
    relations: list[tuple[str, int]],
    functors: dict[str, Callable[..., Any]] | None = None,
    predicates: set[str] = frozenset(),  # type: ignore[assignment]
) -> dict[str, set[tuple]]:
    """The unique answer set of a stratified program, per relation."""
    import clingo

    control = clingo.Control(["--warn=none"])
    control.add("base", [], program)
    from policyc.stdlib.builtins import BUILTINS

    implementations = {**BUILTINS, **(functors or {})}
    control.ground([("base", [])], context=_Context(implementations, set(predicates)))
    models = []
    with control.solve(yield_=True) as handle:
        for model in handle:
            models.append(list(model.symbols(atoms=True)))
    assert len(models) == 1, f"{len(models)} answer sets: the program is not stratified"
    by_name = {_name(name): name for name, _ in relations}
    result: dict[str, set[tuple]] = {name: set() for name, _ in relations}
    for symbol in models[0]:
        name = by_name.get(symbol.name)
        if name is None:
            continue
        values: list[Any] = []
        for arg in symbol.arguments:
            if arg.type == clingo.SymbolType.Number:
                values.append(arg.number)
            elif arg.type == clingo.SymbolType.String:
                values.append(arg.string)
            else:
                raise AssertionError(f"unexpected clingo value {arg}")
        result[name].add(tuple(values))
    return result
