"""clingo as an independent oracle for the evaluator.

:func:`to_clingo` translates a checked policy (its AST) and its input facts into an ASP
program whose unique answer set holds exactly the facts policyc must derive: relations become
predicates ``p_Name``, variables ``V_name``, aggregates clingo aggregates over every variable
of their body (so that each distinct binding counts once, as in policyc), ``min``/``max``
guarded by a non-empty ``#count`` (policyc gives no value over nothing), and ``mean``, which
clingo cannot compute, by comparing sum and count: ``v = mean x : {B}, v > k`` becomes
``S = #sum{...}, C = #count{...}, C > 0, S > k*C``.
"""

from __future__ import annotations

from itertools import count as counter

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
    def __init__(self) -> None:
        self.fresh = counter()

    def term(self, t: ast.Term) -> str:
        if isinstance(t, ast.Var):
            return _var(t.name)
        if isinstance(t, ast.Wildcard):
            return "_"
        if isinstance(t, ast.Integer | ast.String | ast.Float):
            return _const(t.value)
        if isinstance(t, ast.BinOp):
            op = "\\" if t.op == "%" else t.op
            return f"({self.term(t.left)}{op}{self.term(t.right)})"
        if isinstance(t, ast.Negate):
            return f"-({self.term(t.operand)})"
        raise Untranslatable(f"{type(t).__name__} in a term")

    def atom(self, a: ast.Atom, hide_wildcards: bool = False) -> str:
        if not a.args:
            return _name(a.name)
        args = []
        for arg in a.args:
            if hide_wildcards and isinstance(arg, ast.Wildcard):
                args.append(f"W{next(self.fresh)}")
            else:
                args.append(self.term(arg))
        return f"{_name(a.name)}({','.join(args)})"

    def literal(self, lit: ast.Literal, hide_wildcards: bool = False) -> str:
        if isinstance(lit, ast.Atom):
            return self.atom(lit, hide_wildcards)
        if isinstance(lit, ast.Negation):
            return "not " + self.atom(lit.atom)
        op = "=" if lit.op == "=" else lit.op
        return f"{self.term(lit.left)}{op}{self.term(lit.right)}"

    def aggregate_body(self, agg: ast.Aggregate) -> tuple[str, list[str]]:
        """The condition of a clingo aggregate, and the variables it binds."""
        parts = [self.literal(lit, hide_wildcards=True) for lit in agg.body]
        condition = ", ".join(parts)
        names = sorted({tok for part in parts for tok in _variables(part)})
        return condition, names

    def rule(self, rule: ast.Rule) -> str:
        body: list[str] = []
        pending_mean: dict[str, tuple[str, str]] = {}
        for lit in rule.body:
            if (
                isinstance(lit, ast.Comparison)
                and lit.op == "="
                and isinstance(lit.left, ast.Var)
                and isinstance(lit.right, ast.Aggregate)
            ):
                target, agg = _var(lit.left.name), lit.right
                condition, names = self.aggregate_body(agg)
                keys = ",".join(names) if names else "0"
                if agg.op == "count":
                    body.append(f"{target} = #count {{ {keys} : {condition} }}")
                elif agg.op in ("sum", "min", "max"):
                    value = self.term(agg.target)  # type: ignore[arg-type]
                    element = f"{value},{keys}"
                    if agg.op != "sum":
                        body.append(f"#count {{ {keys} : {condition} }} > 0")
                    body.append(f"{target} = #{agg.op} {{ {element} : {condition} }}")
                else:
                    value = self.term(agg.target)  # type: ignore[arg-type]
                    s, c = f"S{next(self.fresh)}", f"C{next(self.fresh)}"
                    body.append(f"{s} = #sum {{ {value},{keys} : {condition} }}")
                    body.append(f"{c} = #count {{ {keys} : {condition} }}")
                    body.append(f"{c} > 0")
                    pending_mean[lit.left.name] = (s, c)
                continue
            if (
                isinstance(lit, ast.Comparison)
                and isinstance(lit.left, ast.Var)
                and lit.left.name in pending_mean
                and isinstance(lit.right, ast.Integer)
            ):
                s, c = pending_mean[lit.left.name]
                body.append(f"{s} {lit.op} {lit.right.value}*{c}")
                continue
            body.append(self.literal(lit))
        if any(isinstance(a, ast.Var) and a.name in pending_mean for a in rule.head.args):
            raise Untranslatable("a mean in a rule head")
        head = self.atom(rule.head)
        return f"{head} :- {', '.join(body)}." if body else f"{head}."


def _variables(text: str) -> list[str]:
    import re

    return [m for m in re.findall(r"\b(V_[A-Za-z0-9_]+|W\d+)\b", text)]


def to_clingo(program_modules: list[ast.Module], facts: dict[str, list[tuple]]) -> str:
    translator = _Translator()
    lines = []
    for module in program_modules:
        for statement in module.statements:
            if isinstance(statement, ast.Rule):
                lines.append(translator.rule(statement))
    for name, rows in facts.items():
        for row in rows:
            lines.append(f"{_name(name)}({','.join(_const(v) for v in row)})." if row else f"{_name(name)}.")
    return "\n".join(lines) + "\n"


def clingo_model(program: str, relations: list[tuple[str, int]]) -> dict[str, set[tuple]]:
    """The unique answer set of a stratified program, per relation."""
    import clingo

    control = clingo.Control(["--warn=none"])
    control.add("base", [], program)
    control.ground([("base", [])])
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
        values = []
        for arg in symbol.arguments:
            if arg.type == clingo.SymbolType.Number:
                values.append(arg.number)
            elif arg.type == clingo.SymbolType.String:
                values.append(arg.string)
            else:
                raise AssertionError(f"unexpected clingo value {arg}")
        result[name].add(tuple(values))
    return result
