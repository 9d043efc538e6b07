"""Predicates and invariants as users write them on the command line.

A **predicate** names a relation of the policy, optionally with a pattern and a name of its own:

* ``PendingEdit`` holds at a step when the relation has any fact;
* ``Unscanned(_, "sast_scan")`` holds when some fact matches: ``_`` matches anything, a string
  or a number must be equal;
* ``sast=Unscanned(_, "sast_scan")`` gives the predicate a name, for invariants and labels.

An **invariant** is a boolean formula over predicate names: ``not``/``!``, ``and``/``&``,
``or``/``|``, ``->`` (implication, right-associative), parentheses, ``true`` and ``false``. A
name with a prime (``Pushed'``) means its value in the next state, so a formula with primes
constrains transitions (``Pushed -> Pushed'``: once pushed, always pushed) and one without
constrains every state (``Pushed -> Edited``).

>>> [str(p) for p in parse_predicates('PendingEdit, sast=Unscanned(_, "sast_scan")')]
['PendingEdit', 'sast=Unscanned(_, "sast_scan")']
>>> formula = parse_formula("Pushed -> Pushed'")
>>> formula.names(), formula.primed()
({'Pushed'}, True)
>>> formula.holds({"Pushed": True}, {"Pushed": False})
False
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from .errors import ForecastError

GRAMMAR = r"""
predicates: predicate ("," predicate)*
predicate: (NAME "=")? NAME args?
args: "(" [arg ("," arg)*] ")"
arg: "_" -> wildcard
   | ESCAPED_STRING -> string
   | SIGNED_NUMBER -> number

?formula: implication
?implication: disjunction ("->" implication)?
?disjunction: conjunction ((OR | "|") conjunction)*
?conjunction: negation ((AND | "&") negation)*
?negation: (NOT | "!") negation -> negation
    | primary
?primary: NAME PRIME? -> variable
    | TRUE -> true
    | FALSE -> false
    | "(" formula ")"

OR.2: /or\b/
AND.2: /and\b/
NOT.2: /not\b/
TRUE.2: /true\b/
FALSE.2: /false\b/
PRIME: "'"
NAME: /[A-Za-z_][A-Za-z0-9_]*/

%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

WILDCARD = None  # a pattern argument matching any value
KEYWORDS = frozenset({"not", "and", "or", "true", "false"})  # cannot name a predicate


@dataclass(frozen=True)
class Predicate:
    """``name=Relation(args)``: ``args`` is None for "any fact"; a ``None`` argument is ``_``."""

    name: str
    relation: str
    args: tuple[str | int | float | None, ...] | None = None

    @property
    def pattern(self) -> str:
        """The relation and its arguments, as written in a policy."""
        if self.args is None:
            return self.relation
        return f"{self.relation}({', '.join(_render(a) for a in self.args)})"

    @property
    def default_name(self) -> str:
        """The name a predicate has when none is given: its relation, or its pattern."""
        return self.relation if not self.args else self.pattern

    def __str__(self) -> str:
        return self.pattern if self.name == self.default_name else f"{self.name}={self.pattern}"

    def matches(self, fact: tuple) -> bool:
        if self.args is None:
            return True
        return all(
            a is WILDCARD or (v == a and isinstance(v, str) == isinstance(a, str))
            for a, v in zip(self.args, fact, strict=True)
        )


def _render(value: str | int | float | None) -> str:
    if value is WILDCARD:
        return "_"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


# -------------------------------------------------------------------------------- formulas


@dataclass(frozen=True)
class Formula:
    """A boolean formula over predicate names; ``next`` variables read the successor state."""

    op: str  # var | not | and | or | implies | const
    args: tuple[Formula, ...] = ()
    name: str = ""
    next: bool = False
    value: bool = False

    def holds(self, now: Mapping[str, bool], after: Mapping[str, bool] | None = None) -> bool:
        op = self.op
        if op == "var":
            values = after if self.next else now
            if values is None:
                raise ForecastError(f"`{self.name}'` needs a next state")
            return values[self.name]
        if op == "const":
            return self.value
        if op == "not":
            return not self.args[0].holds(now, after)
        if op == "and":
            return self.args[0].holds(now, after) and self.args[1].holds(now, after)
        if op == "or":
            return self.args[0].holds(now, after) or self.args[1].holds(now, after)
        if op == "implies":
            return not self.args[0].holds(now, after) or self.args[1].holds(now, after)
        raise ForecastError(f"unknown formula operator {op!r}")

    def names(self) -> set[str]:
        if self.op == "var":
            return {self.name}
        return set().union(*(a.names() for a in self.args)) if self.args else set()

    def primed(self) -> bool:
        """Whether the formula reads the next state (it constrains transitions)."""
        if self.op == "var":
            return self.next
        return any(a.primed() for a in self.args)


# --------------------------------------------------------------------------------- parsing


@cache
def _parser(start: str) -> Any:
    from lark import Lark

    return Lark(GRAMMAR, start=start, parser="lalr")


def _syntax_error(kind: str, text: str, error: Exception) -> ForecastError:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

    if isinstance(error, UnexpectedEOF):
        where = "it ends too early"
    elif isinstance(error, UnexpectedToken):
        token = error.token
        where = (
            f"unexpected `{token}` at column {token.column}" if token.type != "$END" else "it ends too early"
        )
    elif isinstance(error, UnexpectedCharacters):
        where = f"unexpected `{text[error.pos_in_stream]}` at column {error.column}"
    elif isinstance(error, UnexpectedInput):
        where = f"at column {getattr(error, 'column', '?')}"
    else:
        where = str(error)
    return ForecastError(f"invalid {kind} `{text}`: {where}")


def parse_predicates(text: str) -> list[Predicate]:
    """Predicates separated by commas (commas inside parentheses belong to the pattern)."""
    from lark.exceptions import LarkError

    if not text.strip():
        raise ForecastError("no predicates given")
    try:
        tree = _parser("predicates").parse(text)
    except LarkError as error:
        raise _syntax_error("predicate list", text.strip(), error) from None
    return [_predicate(node) for node in tree.children]


def parse_predicate(text: str) -> Predicate:
    predicates = parse_predicates(text)
    if len(predicates) != 1:
        raise ForecastError(f"`{text}` names {len(predicates)} predicates; give one")
    return predicates[0]


def _predicate(node: Any) -> Predicate:
    tokens = [c for c in node.children if c is not None and getattr(c, "type", None) == "NAME"]
    args_nodes = [c for c in node.children if c is not None and getattr(c, "data", None) == "args"]
    relation = str(tokens[-1])
    args: tuple[str | int | float | None, ...] | None = None
    if args_nodes:
        args = tuple(_arg(a) for a in args_nodes[0].children if a is not None)
    predicate = Predicate("", relation, args)
    name = str(tokens[0]) if len(tokens) == 2 else predicate.default_name
    if name in KEYWORDS:
        raise ForecastError(
            f"predicate `{name}`: `{name}` is a word of the invariant language; give the predicate "
            f"another name (`{name}_={predicate.pattern}`)"
        )
    return Predicate(name, relation, args)


def _arg(node: Any) -> str | int | float | None:
    if node.data == "wildcard":
        return WILDCARD
    token = str(node.children[0])
    try:
        if node.data == "string":
            from policyc.runtime.jsonio import loads

            return loads(token)
        number = float(token)
        if math.isinf(number):
            raise ValueError("the number is too large for a float")
        if number.is_integer() and all(c not in token for c in ".eE"):
            return int(token)
        return number
    except ValueError as error:
        shown = token if len(token) <= 40 else token[:37] + "..."
        raise ForecastError(
            f"`{shown}` is not a value a predicate can match: {getattr(error, 'msg', error)}"
        ) from None


def parse_formula(text: str) -> Formula:
    from lark.exceptions import LarkError

    if not text.strip():
        raise ForecastError("an invariant cannot be empty")
    try:
        tree = _parser("formula").parse(text)
    except LarkError as error:
        raise _syntax_error("invariant", text.strip(), error) from None
    return _formula(tree)


def _formula(node: Any) -> Formula:
    data = node.data
    children = [c for c in node.children if not (hasattr(c, "type") and c.type in ("OR", "AND", "NOT"))]
    if data == "variable":
        name = str(children[0])
        return Formula("var", name=name, next=len(children) > 1)
    if data == "true":
        return Formula("const", value=True)
    if data == "false":
        return Formula("const", value=False)
    if data == "negation":
        return Formula("not", (_formula(children[-1]),))
    if data == "implication":
        return Formula("implies", (_formula(children[0]), _formula(children[1])))
    if data in ("disjunction", "conjunction"):
        op = "or" if data == "disjunction" else "and"
        parts = [_formula(c) for c in children]
        combined = parts[0]
        for part in parts[1:]:
            combined = Formula(op, (combined, part))
        return combined
    raise ForecastError(f"unexpected formula node `{data}`")
