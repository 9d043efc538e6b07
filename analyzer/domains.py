"""The finite domains of a bounded search: which values each input position may take.

A bounded search looks for a database over finitely many values. Giving every position every
constant of the policy makes the search space explode (a tool table names dozens of tools), and
most constants can never meet most positions. So positions are grouped into **classes**: two
positions are in one class when a rule can carry a value from one to the other — a variable
occurring at both, an equality between them, a functor's result used at a position. A class's
domain is the policy's constants that occur in it (and, for numbers, their neighbours, so that
``x > 1000`` can be met and missed), plus ``K`` fresh values per type shared by every class (so
that values can flow between classes, as event ids do). ``K`` is the bound a bounded finding
reports.

Positions are ``("rel", name, i)`` for argument ``i`` of a relation, ``("arg", functor, i)``
for a functor's parameter and ``("ret", functor)`` for its result. A functor that returns
``any`` has a result position per constant it is called with last, ``("ret", functor, key)``:
``tool_arg(a, "total") > 0`` and ``contains("x", tool_arg(a, "url"))`` ask for values of
different types (a number, a string), which one class could not give both.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from policyc.compiler import ast
from policyc.compiler.stages import Stratified
from policyc.compiler.symbols import FunctorSig

Node = tuple


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Node, Node] = {}

    def find(self, node: Node) -> Node:
        parent = self.parent.setdefault(node, node)
        if parent != node:
            root = self.find(parent)
            self.parent[node] = root
            return root
        return node

    def union(self, a: Node, b: Node) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


@dataclass
class Domains:
    """Values per class, and the class of every position."""

    bound: int
    classes: dict[Node, Node]  # position -> class
    constants: dict[Node, set[Any]]  # class -> the policy's constants in it
    types: dict[Node, set[str]]  # class -> the types its positions have ("symbol", "number")
    fresh_symbols: tuple[str, ...] = ()
    fresh_numbers: tuple[int, ...] = ()
    exact: dict[Node, set[int]] = field(default_factory=dict)  # class -> numbers tried without neighbours
    uses: dict[int, dict[Node, int]] = field(default_factory=dict)  # rule number -> its variables per class

    @functools.cached_property
    def width(self) -> dict[Node, int]:
        """Class -> the most variables of it in one rule."""
        found: dict[Node, int] = {}
        for counts in self.uses.values():
            for cls, n in counts.items():
                found[cls] = max(found.get(cls, 0), n)
        return found

    def fresh(self, cls: Node) -> int:
        """How many fresh values a class gets: the bound, or as many as one rule has variables
        of the class, if more (so that every rule can fire with distinct values)."""
        return max(self.bound, self.width.get(cls, 0))

    names: dict[Node, str] = field(default_factory=dict)  # class -> its ASP predicate

    def of(self, position: Node) -> Node:
        return self.classes.get(position, position)

    def values(self, position: Node) -> list[Any]:
        """Every value of a position's class, constants first."""
        cls = self.of(position)
        types = self.types.get(cls) or {"symbol", "number"}
        found: list[Any] = []
        for value in sorted(self.constants.get(cls, ()), key=lambda v: (isinstance(v, str), v)):
            if isinstance(value, bool) or isinstance(value, float):
                continue
            if isinstance(value, int) and "number" in types:
                found.extend(n for n in (value - 1, value, value + 1) if n not in found)
            elif isinstance(value, str) and "symbol" in types and value not in found:
                found.append(value)
        if "number" in types:
            found.extend(n for n in sorted(self.exact.get(cls, ())) if n not in found)
        if "symbol" in types:
            found.extend(s for s in self.fresh_symbols[: self.fresh(cls)] if s not in found)
        if "number" in types:
            found.extend(n for n in self.fresh_numbers[: self.fresh(cls)] if n not in found)
        return found

    def numbers(self, position: Node) -> list[int]:
        """The numbers among the values of a position's class."""
        return [v for v in self.values(position) if type(v) is int]

    def results(self, functor: str) -> list[Node]:
        """The result positions of a functor: ``("ret", functor)`` and, for one that returns
        ``any``, ``("ret", functor, key)`` per constant it is called with last."""
        return sorted(
            (node for node in self.classes if node[0] == "ret" and node[1] == functor),
            key=lambda node: (len(node), repr(node)),
        )

    def predicate(self, position: Node) -> str:
        """The ASP predicate holding the domain of a position's class."""
        cls = self.of(position)
        if cls not in self.names:
            self.names[cls] = f"dom{len(self.names)}"
        return self.names[cls]


@dataclass(frozen=True)
class Vocabulary:
    """What domains are computed over: rules, the functors' signatures and the relations'
    attribute types: a policy's (:meth:`of`), or two policies' seen as one (``policyc diff``:
    their positions are shared by name)."""

    rules: tuple[ast.Rule, ...]
    functors: Mapping[str, FunctorSig]
    types: Mapping[str, tuple[str | None, ...]]

    @classmethod
    def of(cls, compilation: Stratified) -> Vocabulary:
        rules = tuple(rule for _, rule in compilation.program.rules())
        return cls(rules, compilation.symbols.functors, compilation.types)


def compute(
    vocabulary: Vocabulary,
    bound: int,
    extra: Iterable[ast.Rule] = (),
    links: Iterable[tuple[Node, Node]] = (),
    feeds: Iterable[tuple[Node, Node]] = (),
) -> Domains:
    """The domains for a search with ``bound`` fresh values per type, over the policy's rules
    and ``extra`` rules (a query); ``links`` are more pairs of positions that share values
    (a functor answered from a relation); ``feeds`` pairs whose first position's constants the
    second's class also gets (a result's tool must be a tool one can call); in a feed,
    ``("ret", f)`` stands for every result position of ``f``."""
    uf = _UnionFind()
    for a, b in links:
        uf.union(a, b)
    constants: dict[Node, set[Any]] = {}
    exact: dict[Node, set[int]] = {}
    functors = vocabulary.functors
    rules = [*vocabulary.rules, *extra]

    wildcards = itertools.count()
    inside: list[bool] = []  # whether an aggregate's body is being visited
    for number, rule in enumerate(rules):
        key = ("rule", number)

        def var_node(name: str, key: tuple = key) -> Node:
            return ("var", key, name)

        def term(t: ast.Term, var_node: Any = var_node) -> Node | None:
            """The node a term's value sits at (``None`` for computed values)."""
            if isinstance(t, ast.Var):
                return var_node(t.name)
            if isinstance(t, ast.Call):
                for i, arg in enumerate(t.args):
                    place(arg, ("arg", t.name, i), var_node)
                _link_builtin(t.name, len(t.args), uf)
                return result_position(t, functors)
            for child in ast.term_children(t):
                term(child, var_node)
            if isinstance(t, ast.Aggregate):
                inside.append(True)  # an aggregate may range over nothing: its `_` need no value
                for literal in t.body:
                    visit(literal, var_node)
                inside.pop()
            return None

        def place(t: ast.Term, position: Node, var_node: Any = var_node) -> None:
            if isinstance(t, ast.String | ast.Integer):
                constants.setdefault(position, set()).add(t.value)
                uf.find(position)
                return
            if isinstance(t, ast.Wildcard):  # a value of its own: counts towards the class's width
                if not inside:
                    uf.union(position, var_node(f"_{next(wildcards)}"))
                return
            node = term(t, var_node)
            if node is not None:
                uf.union(position, node)
            else:
                uf.find(position)

        def visit(literal: ast.Literal, var_node: Any = var_node) -> None:
            if isinstance(literal, ast.Negation):
                literal = literal.atom
            if isinstance(literal, ast.Atom):
                kind = "arg" if literal.name in functors else "rel"
                if kind == "arg":
                    _link_builtin(literal.name, len(literal.args), uf)
                for i, arg in enumerate(literal.args):
                    place(arg, (kind, literal.name, i), var_node)
            elif isinstance(literal, ast.Comparison):
                left, right = literal.left, literal.right
                for a, b in ((left, right), (right, left)):
                    # `total = sum size : {...}`: values of the target are what makes the total
                    if (
                        isinstance(b, ast.Aggregate)
                        and b.op in ("sum", "min", "max", "mean")
                        and b.target is not None
                    ):
                        node, inner = term(a, var_node), term(b.target, var_node)
                        if node is not None and inner is not None:
                            uf.union(node, inner)
                constant = [t for t in (left, right) if isinstance(t, ast.String | ast.Integer)]
                terms = [
                    term(t, var_node) for t in (left, right) if not isinstance(t, ast.String | ast.Integer)
                ]
                nodes = [n for n in terms if n is not None]
                if literal.op == "=" and len(nodes) == 2:
                    uf.union(nodes[0], nodes[1])
                for c in constant:
                    for n in nodes:
                        constants.setdefault(n, set()).add(c.value)
                        uf.find(n)
                    # `t + n > 5405`: the values inside the arithmetic must reach the constant
                    # (the constant alone, not its neighbours: a `sum` over chosen facts grounds
                    # every subset sum of its values)
                    for t in (left, right):
                        if isinstance(t, ast.BinOp | ast.Negate) and isinstance(c.value, int):
                            for v in ast.term_vars(t):
                                exact.setdefault(var_node(v.name), set()).add(c.value)
                                uf.find(var_node(v.name))
                            # `n * 2 > 11`, `n - 3 = 9`: the values around the solution too
                            # (for `n`, or for a call's value: `to_number(s) * 3 > 1000`)
                            solved = _solve(t, c.value)
                            if solved is not None:
                                operand, around = solved
                                node = (
                                    var_node(operand.name)
                                    if isinstance(operand, ast.Var)
                                    else result_position(operand, functors)
                                )
                                exact.setdefault(node, set()).update(around)
                                uf.find(node)

        visit(rule.head, var_node)
        for literal in rule.body:
            visit(literal, var_node)

    classes = {node: uf.find(node) for node in list(uf.parent) if node[0] != "var"}
    by_class: dict[Node, set[Any]] = {}
    for node, values in constants.items():
        by_class.setdefault(uf.find(node), set()).update(values)

    def every(node: Node) -> list[Node]:
        """The positions a feed's end stands for (none when no rule uses it)."""
        if node[0] == "ret" and len(node) == 2:
            return [n for n in uf.parent if n[0] == "ret" and n[1] == node[1]]
        return [node] if node in uf.parent else []

    def feed() -> None:
        for source, target in feeds:
            for s in every(source):
                for t in every(target):
                    by_class.setdefault(uf.find(t), set()).update(by_class.get(uf.find(s), ()))

    exact_by_class: dict[Node, set[int]] = {}
    for node, numbers in exact.items():
        exact_by_class.setdefault(uf.find(node), set()).update(numbers)

    def tried(cls: Node, constants: dict[Node, set[Any]]) -> set[Any]:
        """The values a search tries in a class, as far as conversions care: its constants,
        the neighbours of its numbers, the numbers its arithmetic solves for, the fresh numbers."""
        found: set[Any] = set(range(bound)) | exact_by_class.get(cls, set())
        for value in constants.get(cls, ()):
            if type(value) is int:
                found.update((value - 1, value, value + 1))
            elif isinstance(value, str):
                found.add(value)
        return found

    feed()
    # builtins that compute values of another type: the search tries what they compute from
    # (or into) the values it tries, `to_string(3)` = "3", `to_number(s) > 500` tries "499" to
    # "501" for `s`, `url_host("https://h/")` = "h" (from the values before any conversion, so
    # that a conversion and its inverse do not widen each other's neighbours)
    before = {cls: set(values) for cls, values in by_class.items()}
    for source, target, convert in CONVERSIONS:
        if source in uf.parent and target in uf.parent:
            made = {convert(v) for v in tried(uf.find(source), before)} - {None}
            by_class.setdefault(uf.find(target), set()).update(made)
    feed()  # what the conversions made reaches the positions their classes feed
    # a class has the types its typed positions agree on; untyped positions (`any`, undeclared)
    # accept whatever the others say
    definite: dict[Node, set[str]] = {}
    for node, cls in classes.items():
        kinds = _types(vocabulary, node)
        if kinds != {"symbol", "number"}:
            definite[cls] = definite[cls] & kinds if cls in definite else set(kinds)
    types = {cls: definite.get(cls, {"symbol", "number"}) for cls in set(classes.values())}
    uses: dict[int, dict[Node, int]] = {}
    for node in list(uf.parent):
        if node[0] == "var":
            counts = uses.setdefault(node[1][1], {})  # node[1] is ("rule", number)
            cls = uf.find(node)
            counts[cls] = counts.get(cls, 0) + 1
    most = max([bound, *(n for counts in uses.values() for n in counts.values())])
    return Domains(
        bound,
        classes,
        by_class,
        types,
        tuple(_fresh_symbols(most, by_class)),
        tuple(range(most)),
        exact=exact_by_class,
        uses=uses,
    )


# Builtins whose arguments are best tried with each other's constants: `contains("PASS", out)`
# holds when `out` is "PASS"; `lower(x) = "a"` when `x` is "a".
SAME_VALUES = {"contains": (0, 1), "startswith": (0, 1), "endswith": (0, 1)}
SAME_AS_RESULT = {"lower", "upper"}


def _text(value: Any) -> str | None:
    """The decimal text of a number (``to_string``; what ``to_number`` reads)."""
    return str(value) if type(value) is int else None


def _number(value: Any) -> int | None:
    """The number Soufflé's ``to_number`` (``leading_number``) reads in a text (None when it
    reads none; a policy's ``to_number`` reads fewer: the values are only tried)."""
    from policyc.stdlib.builtins import to_number

    if not isinstance(value, str):
        return None
    try:
        return to_number(value)
    except ValueError:
        return None


# the conversions of the builtins (stdlib/builtins.dl): (from, to, what the values become)
CONVERSIONS: list[tuple[Node, Node, Any]] = [
    (("arg", "to_string", 0), ("ret", "to_string"), _text),
    (("ret", "to_string"), ("arg", "to_string", 0), _number),
    (("ret", "to_number"), ("arg", "to_number", 0), _text),
    (("arg", "to_number", 0), ("ret", "to_number"), _number),
    (("ret", "leading_number"), ("arg", "leading_number", 0), _text),
    (("arg", "leading_number", 0), ("ret", "leading_number"), _number),
    (("ret", "url_host"), ("arg", "url_host", 0), lambda v: f"https://{v}/" if isinstance(v, str) else None),
]


def _solve(t: ast.Term, c: int) -> tuple[ast.Var | ast.Call, set[int]] | None:
    """For ``t`` one variable (or call) and a constant under ``+``, ``-``, ``*`` or a negation:
    that operand and the integers around the value that makes ``t`` equal ``c`` (so that ``t``
    can be made smaller than, equal to or greater than ``c``); else ``None``."""
    operands = ast.Var | ast.Call
    if isinstance(t, ast.Negate) and isinstance(t.operand, operands):
        return t.operand, {-c - 1, -c, -c + 1}
    if not isinstance(t, ast.BinOp):
        return None
    if isinstance(t.left, operands) and isinstance(t.right, ast.Integer):
        operand, k, var_first = t.left, t.right.value, True
    elif isinstance(t.left, ast.Integer) and isinstance(t.right, operands):
        operand, k, var_first = t.right, t.left.value, False
    else:
        return None
    if t.op == "+":
        roots = {c - k}
    elif t.op == "-":
        roots = {c + k} if var_first else {k - c}
    elif t.op == "*" and k != 0:
        roots = {c // k, -(-c // k)}
    else:
        return None
    return operand, {n for r in roots for n in (r - 1, r, r + 1)}


def result_position(call: ast.Call, functors: Any) -> Node:
    """The position of a call's value: ``("ret", f, key)`` for a functor returning ``any``
    called with a constant ``key`` last, else ``("ret", f)``."""
    sig = functors.get(call.name)
    last = call.args[-1] if call.args else None
    if sig is not None and sig.returns == "any" and isinstance(last, ast.String | ast.Integer):
        return ("ret", call.name, last.value)
    return ("ret", call.name)


def _link_builtin(name: str, arity: int, uf: _UnionFind) -> None:
    if name in SAME_VALUES and arity == 2:
        uf.union(("arg", name, 0), ("arg", name, 1))
    elif name in SAME_AS_RESULT and arity == 1:
        uf.union(("arg", name, 0), ("ret", name))


def _types(vocabulary: Vocabulary, node: Node) -> set[str]:
    kind = node[0]
    declared: str | None = None
    if kind == "rel":
        found = vocabulary.types.get(node[1])
        if found is not None and node[2] < len(found):
            declared = found[node[2]]
    elif kind == "arg":
        sig = vocabulary.functors.get(node[1])
        if sig is not None and node[2] < len(sig.params):
            declared = sig.params[node[2]]
    elif kind == "ret":
        sig = vocabulary.functors.get(node[1])
        declared = sig.returns if sig is not None else None
    if declared in ("symbol",):
        return {"symbol"}
    if declared in ("number",):
        return {"number"}
    if declared == "bool":
        return set()
    return {"symbol", "number"}  # undeclared, `any` (and float, which searches cannot use)


def _fresh_symbols(bound: int, constants: dict[Node, set[Any]]) -> Iterator[str]:
    taken = {v for values in constants.values() for v in values if isinstance(v, str)}
    n = 0
    made = 0
    while made < bound:
        n += 1
        name = f"v{n}"
        if name not in taken:
            made += 1
            yield name
