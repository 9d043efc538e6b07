"""Plans to Python functions: each rule of a plan becomes straight-line code with nested
loops over index lookups, the way a hand-written evaluator would do it.

Generated code only ever contains names it makes itself (``v3`` for slot 3, ``R[5]`` for
relation 5, ``F[2]`` for functor 2) and constants written with :func:`repr` (floats that
``repr`` cannot round-trip go through a table): nothing from a plan, which may come from a
bundle, is pasted into source text.

Two kinds of function are generated:

* ``rule(R, D, out, F, I, E)`` evaluates a :class:`~policyc.compiler.plan.RulePlan`: ``R``
  are the relations, ``D`` the deltas of the current round, ``out`` the set receiving head
  tuples, ``F`` the functor wrappers, ``I`` the inline relations and ``E`` the recorder of
  arithmetic errors (division by zero), which returns :data:`FAIL`;
* ``match(R, F, I, E, V, *values)`` is a generator over the bindings of a
  :class:`~policyc.compiler.plan.BoundRule` for given head values; it yields the slots and
  the facts each scan matched (for inline relations, deny reasons and explanations). In
  *demand* mode (used by monitor sessions), a relation that is not stored is asked about
  through ``V[relation](*values)`` whenever all its arguments are known.

A failing functor or arithmetic error yields :data:`FAIL`; the literal that needed the value
fails, and the wrapper has recorded the error (evaluation fails closed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from policyc.compiler import plan as p

from .limits import MAX_RANGE, TICK, LimitExceeded
from .relations import projection
from .values import Adt, Record, kind


class _Fail:
    """The value of an expression that could not be computed."""

    _instance: _Fail | None = None

    def __new__(cls) -> _Fail:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "FAIL"


FAIL = _Fail()


def _div(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q  # truncating, like C and Soufflé
    return a / b


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a - b * _div(a, b)
    return math.fmod(a, b)


MAX_BITS = 1 << 16  # the largest integer `^` and `bshl` make: 65,536 bits (about 19,700 digits)


def _pow(a: Any, b: Any) -> Any:
    """``a ^ b``; an integer power truncates toward zero, as Soufflé's does (``2 ^ -1`` is 0).
    No value (FAIL) for 0 to a negative power, a result beyond :data:`MAX_BITS`, or a float
    power without a real value."""
    if isinstance(a, int) and isinstance(b, int):
        if b < 0:
            if a == 0:
                return FAIL
            return a if a in (1, -1) and b % 2 else 1 if a in (1, -1) else 0
        if a not in (0, 1, -1) and b * (abs(a).bit_length() - 1) > MAX_BITS:
            return FAIL
        return a**b
    try:
        return math.pow(a, b)
    except (ValueError, OverflowError):
        return FAIL


def _shl(a: int, b: int) -> Any:
    if b < 0 or b > MAX_BITS:
        return FAIL
    return a << b


def _shr(a: int, b: int) -> Any:
    return a >> b if b >= 0 else FAIL


def _shru(a: int, b: int) -> Any:
    """``a bshru b``: a logical shift; a negative ``a`` is read as 32 bits, as Soufflé's
    ``number`` is by default (``-1 bshru 28`` is 15)."""
    if b < 0:
        return FAIL
    return (a % (1 << 32) if a < 0 else a) >> b


# operators whose code is a call of a helper that may give no value (FAIL)
FALLIBLE = {"^": "_pow", "bshl": "_shl", "bshr": "_shr", "bshru": "_shru"}
# operators whose code is a Python expression of the two operands
_INFIX = {"+": "+", "-": "-", "*": "*", "band": "&", "bor": "|", "bxor": "^"}
_CALLED = {"land": "_land", "lor": "_lor", "lxor": "_lxor", "max": "_max", "min": "_min"}


def _land(a: int, b: int) -> int:
    return 1 if a != 0 and b != 0 else 0


def _lor(a: int, b: int) -> int:
    return 1 if a != 0 or b != 0 else 0


def _lxor(a: int, b: int) -> int:
    return 1 if (a != 0) != (b != 0) else 0


def _max(a: Any, b: Any) -> Any:
    return b if b > a else a


def _min(a: Any, b: Any) -> Any:
    return b if b < a else a


def _sum(values: list) -> Any:
    if all(isinstance(v, int) for v in values):
        return sum(values)
    return math.fsum(values)  # exactly rounded: the result does not depend on the order


def _range(start: Any, stop: Any, step: Any, E: Any) -> Any:
    """The values of ``range(start, stop[, step])`` as Soufflé generates them (``step`` None:
    1 upwards, -1 downwards; 0: ``start`` once unless the range is empty), or what ``E`` makes
    of the error (:data:`FAIL`) when an argument is no number or there are more than
    :data:`~.limits.MAX_RANGE` values."""
    given = (start, stop) if step is None else (start, stop, step)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in given):
        return E(f"range{_shown(given)} needs numbers")
    if not all(math.isfinite(v) for v in given):
        return E(f"range{_shown(given)} needs finite numbers")
    if step is None:
        step = 1 if start <= stop else -1
    if step == 0:
        return (start,) if start != stop else ()
    count = max(0, math.ceil((stop - start) / step))
    if count > MAX_RANGE:
        return E(f"range{_shown(given)} has {count:,} values, more than {MAX_RANGE:,} (the limit of a range)")
    if isinstance(start, int) and isinstance(stop, int) and isinstance(step, int):
        return range(start, stop, step)
    return _float_range(start, stop, step, count)


def _float_range(start: float, stop: float, step: float, count: int) -> Iterator[float]:
    """Floats from ``start`` by repeated addition of ``step``, as Soufflé adds them (at most
    ``count + 1``, rounding aside)."""
    value = start
    for _ in range(count + 1):
        if not (value < stop if step > 0 else value > stop):
            return
        yield value
        value += step


def _shown(values: tuple) -> str:
    return "(" + ", ".join(repr(v) for v in values) + ")"


def _first(values: Iterable[Any]) -> Iterable[Any]:
    """The first of ``values``, if any (an existence check's witness)."""
    return islice(values, 1)


def _ordered(values: Iterable[Any]) -> list[Any]:
    """``values`` in ascending order, as a B-tree of Soufflé holds them (numbers by value,
    texts by their text; where values do not compare, by their text); the loops of a rule
    deriving a ``choice-domain`` relation run through its facts in this order."""
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


RUNTIME: dict[str, Any] = {
    "FAIL": FAIL,
    "_first": _first,
    "_ordered": _ordered,
    "_range": _range,
    "_div": _div,
    "_mod": _mod,
    "_sum": _sum,
    **{name: globals()[name] for name in (*FALLIBLE.values(), *_CALLED.values())},
    "LimitExceeded": LimitExceeded,
    "_adt": Adt,
    "_record": Record,
    "_kind": kind,
}

COMPARISON = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


MAX_DEPTH = 40  # indentation levels one generated function uses (Python allows 100)
MAX_BLOCKS = 12  # loops (and try blocks) one generated function nests (Python allows 20)

_BLOCKS = ("for ", "while ", "try:", "with ", "except")
_ASSIGNED = re.compile(r"(\w+) [-+|&]?= ")
_LOOP = re.compile(r"for ([\w, ]+) in ")
_HANDLER = re.compile(r"except .* as (\w+):")
_NAME = re.compile(r"[A-Za-z_]\w*")


class _Helper:
    """A function continuing a body that became too deep for one function: it takes the
    names in scope where it is called (those it uses) and the loop counter ``n``, and returns
    the counter (a generator's ``return``, for ``yield from``)."""

    def __init__(self, name: str, scope: list[str], always: set[str]) -> None:
        self.name = name
        self.scope = scope
        self.always = always
        self.lines: list[str | _Call] = []
        self.params: list[str] = []
        self.generator = False


class _Call:
    """The line calling a helper (written once the helper's parameters are known)."""

    def __init__(self, indent: str, helper: _Helper) -> None:
        self.indent = indent
        self.helper = helper

    def __str__(self) -> str:
        helper = self.helper
        call = "yield from " if helper.generator else ""
        return f"{self.indent}n = {call}{helper.name}({', '.join(helper.params)})"


class _Frame:
    """A function being written: where its lines go, the depth its body starts at, the
    indentation of that depth, and the depths at which its open blocks' bodies start."""

    def __init__(self, lines: list, base: int, indent: int) -> None:
        self.lines = lines
        self.base = base
        self.indent = indent
        self.blocks: list[int] = []


class Writer:
    """Lines of Python at an indentation depth, fresh names and constants that need a table.

    Python refuses a function nested more than 100 levels deep or with more than 20 nested
    blocks, so a body deeper than :data:`MAX_DEPTH` levels or :data:`MAX_BLOCKS` loops goes on
    in a helper function (:class:`_Helper`), called where the body got too deep with the
    names in scope there that it uses; a helper may call the next. The writer follows which
    names are assigned where (a name assigned in a block is in scope in that block only), and
    ``always`` holds the names in scope in the whole function (its parameters and prologue).
    Helpers are written by :meth:`helper_source`, at ``helper_indent`` (0: module level)."""

    def __init__(self, helper_indent: int = 0) -> None:
        self.lines: list[Any] = []
        self.counter = 0
        self.constants: list[Any] = []
        self.helpers: list[_Helper] = []
        self.helper_indent = helper_indent
        self.always: set[str] = set()
        self._depth = 1
        self._frames = [_Frame(self.lines, 0, 0)]
        self._scope: list[tuple[int, str]] = []  # (depth, name), by depth

    @property
    def depth(self) -> int:
        return self._depth

    @depth.setter
    def depth(self, value: int) -> None:
        self._depth = value
        frames = self._frames
        while len(frames) > 1 and frames[-1].base > value:
            frames.pop()
        blocks = frames[-1].blocks
        while blocks and blocks[-1] > value:
            blocks.pop()
        scope = self._scope
        while scope and scope[-1][0] > value:
            scope.pop()

    def line(self, text: str) -> None:
        frame = self._frames[-1]
        frame.lines.append("    " * (frame.indent + self._depth - frame.base) + text)
        assigned = _ASSIGNED.match(text)
        if assigned:
            self._scope.append((self._depth, assigned.group(1)))

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def open(self, text: str) -> None:
        self.line(text)
        self._depth += 1
        frame = self._frames[-1]
        if text.startswith(_BLOCKS):
            frame.blocks.append(self._depth)
        bound = _LOOP.match(text) or _HANDLER.match(text)
        if bound:
            self._scope.extend((self._depth, name.strip()) for name in bound.group(1).split(","))
        if self._depth - frame.base >= MAX_DEPTH or len(frame.blocks) >= MAX_BLOCKS:
            self._split()

    def _split(self) -> None:
        """Go on in a new helper function, called here."""
        helper = _Helper(self.fresh("_h"), [name for _, name in self._scope], self.always)
        self.helpers.append(helper)
        frame = self._frames[-1]
        frame.lines.append(_Call("    " * (frame.indent + self._depth - frame.base), helper))
        self._frames.append(_Frame(helper.lines, self._depth, self.helper_indent + 1))

    def helper_source(self) -> list[str]:
        """The helpers' definitions (each helper's parameters are the names in scope where it
        is called that it, or a helper it calls, uses)."""
        bodies: list[list[str]] = []
        for helper in reversed(self.helpers):  # a helper only calls later ones
            body = [str(line) for line in helper.lines]
            used = set(_NAME.findall("\n".join(body)))
            scope = dict.fromkeys([*helper.scope, *sorted(helper.always)])
            helper.params = ["n", *(name for name in scope if name in used and name != "n")]
            helper.generator = "yield" in used
            bodies.append(body)
        indent = "    " * self.helper_indent
        lines = []
        for helper, body in zip(self.helpers, reversed(bodies), strict=True):
            lines.append(f"{indent}def {helper.name}({', '.join(helper.params)}):")
            lines.extend(body)
            lines.append(f"{indent}    return n")
        return lines

    def const(self, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise p.PlanError(f"constant of type {type(value).__name__}")
        text = repr(value)
        if isinstance(value, float) and not (math.isfinite(value) and float(text) == value):
            self.constants.append(value)
            return f"K[{len(self.constants) - 1}]"
        return text


class RuleCompiler:
    """Writes the body of one rule or bound rule. Where the facts and indexes a scan reads come
    from is decided by :meth:`facts`, :meth:`indexed` and :meth:`index`, which other code
    generators (session maintenance) override."""

    def __init__(self, plan: p.Plan, w: Writer, record: bool, demand: frozenset[int] = frozenset()) -> None:
        self.plan = plan
        self.w = w
        self.demand = demand  # relations asked about through V (not stored)
        self.record = record  # remember the tuple each scan matched (for match functions)
        self.matched: list[str] = []  # expressions naming (relation, tuple) pairs
        self.indexes: dict[tuple[str, int, tuple[int, ...]], str] = {}
        self.prologue: list[str] = []
        self.held: list[str] = []  # the sets of facts the code fills, counted by the limit on facts
        # how the code reads stored relations: (relation, positions of an index, or None for
        # a scan or a test of the facts themselves)
        self.reads: set[tuple[int, tuple[int, ...] | None]] = set()
        self.ordered = False  # run through facts in ascending order (see :func:`_ordered`)

    # ------------------------------------------------------------------ expressions

    def expr(self, e: p.Expr) -> str:
        """Code for an expression; calls and divisions are hoisted into checked temporaries."""
        if isinstance(e, p.Slot):
            return f"v{e.index}"
        if isinstance(e, p.Const):
            return self.w.const(e.value)
        if isinstance(e, p.CallExpr):
            args = ", ".join(self.expr(a) for a in e.args)
            tmp = self.w.fresh("c")
            self.w.line(f"{tmp} = F[{e.functor}]({args}{',' if len(e.args) == 1 else ''})")
            self.w.open(f"if {tmp} is not FAIL:")
            return tmp
        if isinstance(e, p.Arith):
            left, right = self.expr(e.left), self.expr(e.right)
            if e.op in ("/", "%"):
                tmp = self.w.fresh("d")
                helper = "_div" if e.op == "/" else "_mod"
                self.w.line(f"{tmp} = {helper}({left}, {right}) if {right} != 0 else E({e.op!r})")
                self.w.open(f"if {tmp} is not FAIL:")
                return tmp
            if e.op in FALLIBLE:
                tmp = self.w.fresh("d")
                self.w.line(f"{tmp} = {FALLIBLE[e.op]}({left}, {right})")
                self.w.line(f"{tmp} = {tmp} if {tmp} is not FAIL else E({e.op!r})")
                self.w.open(f"if {tmp} is not FAIL:")
                return tmp
            if e.op in _CALLED:
                return f"{_CALLED[e.op]}({left}, {right})"
            if e.op not in _INFIX:
                raise p.PlanError(f"unknown operator {e.op!r}")
            return f"({left} {_INFIX[e.op]} {right})"
        if isinstance(e, p.Neg):
            return f"(-{self.expr(e.operand)})"
        if isinstance(e, p.Pack):
            fields = [self.w.const(e.tag)] if e.tag is not None else []
            fields += [self.expr(a) for a in e.args]
            packed = self.tuple_code(fields) if fields else "()"
            if e.tag is not None:
                return f"_adt({packed})"
            return f"_record({packed})" if fields else packed  # a record keeps its hash; `nil` is ()
        if isinstance(e, p.Field):
            return f"{self.expr(e.value)}[{int(e.index)}]"
        if isinstance(e, p.Kind):
            return f"_kind({self.expr(e.value)})"
        raise p.PlanError(f"unknown expression {e!r}")

    # ------------------------------------------------------------------------ steps

    def facts(self, source: str, relation: int) -> str:
        """The set of stored facts a scan reads (``source``: ``full`` or ``delta``)."""
        if source == "full":
            self.reads.add((relation, None))
            return f"R[{relation}].tuples"
        return f"D[{relation}].tuples"

    def indexed(self, step: p.Scan) -> bool:
        """Whether a scan with some arguments known looks them up in an index (else it runs
        through the facts and compares)."""
        return True

    def index(self, source: str, relation: int, positions: tuple[int, ...]) -> str:
        """The name of the ``get`` of an index of a relation, bound once per call."""
        key = (source, relation, positions)
        if source == "full":
            self.reads.add((relation, positions))
        if key not in self.indexes:
            name = f"x{len(self.indexes)}"
            self.indexes[key] = name
            holder = f"R[{relation}]" if source == "full" else f"D[{relation}]"
            self.prologue.append(f"{name} = {holder}.index({positions!r}).get")
            self.w.always.add(name)
        return self.indexes[key]

    def tick(self) -> str:
        """The call checking the limits (every :data:`TICK` iterations of any loop)."""
        return f"E.tick({', '.join(self.held)})"

    def loop(self, text: str) -> None:
        """Open a loop whose iterations count towards the next check of the limits."""
        w = self.w
        w.open(text)
        w.line("n -= 1")
        w.line(f"if not n: n = {self.tick()}")

    @staticmethod
    def key(values: list[str]) -> str:
        return values[0] if len(values) == 1 else "(" + ", ".join(values) + ")"

    def steps(self, steps: tuple[p.Step, ...], bound: set[int]) -> None:
        for step in steps:
            self.step(step, bound)

    def step(self, step: p.Step, bound: set[int]) -> None:
        w = self.w
        if isinstance(step, p.Scan):
            self.scan(step, bound)
        elif isinstance(step, p.NotExists):
            known = [(i, a) for i, a in enumerate(step.args) if isinstance(a, p.Match)]
            values = [self.expr(a.expr) for _, a in known]
            if len(known) == len(step.args) and step.relation in self.demand:
                w.open(f"if V[{step.relation}]({', '.join(values)}) is False:")
            elif len(known) == len(step.args):
                w.open(f"if {self.stored(step.relation, values)} not in {self.facts('full', step.relation)}:")
            elif known:
                index = self.index("full", step.relation, tuple(i for i, _ in known))
                w.open(f"if not {index}({self.key(values)}):")
            else:
                w.open(f"if not {self.facts('full', step.relation)}:")
        elif isinstance(step, p.Filter):
            left, right = self.expr(step.left), self.expr(step.right)
            w.open(f"if {left} {COMPARISON[step.op]} {right}:")
        elif isinstance(step, p.Assign):
            value = self.expr(step.expr)
            w.line(f"v{step.slot} = {value}")
            bound.add(step.slot)
        elif isinstance(step, p.Range):
            start, stop = self.expr(step.start), self.expr(step.stop)
            by = "None" if step.step is None else self.expr(step.step)
            generated = w.fresh("g")
            w.line(f"{generated} = _range({start}, {stop}, {by}, E)")
            w.open(f"if {generated} is not FAIL:")
            self.loop(f"for v{step.slot} in {generated}:")
            bound.add(step.slot)
        elif isinstance(step, p.Test):
            args = ", ".join(self.expr(a) for a in step.args)
            comma = "," if len(step.args) == 1 else ""
            w.open(f"if F[{step.functor}]({args}{comma}) is {not step.negated}:")
        elif isinstance(step, p.InlineTest):
            args = ", ".join(self.expr(a) for a in step.args)
            comma = "," if len(step.args) == 1 else ""
            w.open(f"if I[{step.relation}]({args}{comma}) is {not step.negated}:")
        elif isinstance(step, p.Aggregate):
            self.aggregate(step, bound)
        else:
            raise p.PlanError(f"unknown step {step!r}")

    def stored(self, relation: int, values: list[str]) -> str:
        """A fact in its stored form: the value itself for a unary relation, else a tuple."""
        if self.plan.relations[relation].arity == 1:
            return values[0]
        return f"({', '.join(values)}{',' if len(values) == 1 else ''})"

    @staticmethod
    def tuple_code(values: list[str]) -> str:
        return f"({', '.join(values)}{',' if len(values) == 1 else ''})"

    def scan(self, step: p.Scan, bound: set[int]) -> None:
        w = self.w
        arity = len(step.args)
        known: list[tuple[int, str]] = []
        after: list[tuple[int, p.Expr]] = []
        binds: list[tuple[int, int]] = []
        binding_here = {a.slot for a in step.args if isinstance(a, p.Bind)}
        for i, arg in enumerate(step.args):
            if isinstance(arg, p.Bind):
                binds.append((i, arg.slot))
            elif isinstance(arg, p.Match):
                if slots_read(arg.expr) & binding_here:
                    after.append((i, arg.expr))
                else:
                    value = self.expr(arg.expr)
                    if self.record and not value.isidentifier():
                        temp = w.fresh("k")  # recorded facts reuse the key: compute it once
                        w.line(f"{temp} = {value}")
                        value = temp
                    known.append((i, value))
        if len(known) == arity:  # every argument known: a membership test
            values = [v for _, v in known]
            if step.relation in self.demand:
                w.open(f"if V[{step.relation}]({', '.join(values)}) is True:")
            else:
                w.open(
                    f"if {self.stored(step.relation, values)} in {self.facts(step.source, step.relation)}:"
                )
            if self.record:
                self.matched.append(f"({step.relation}, {self.tuple_code(values)})")
            return
        # binding nothing, the scan is an existence check: the rest of the body runs once, for
        # the first fact that matches, not once per fact (a match function, which finds every
        # derivation, still goes through them all)
        exists = not binds and not self.record
        if arity == 1 or not known or not self.indexed(step):  # run through the facts
            value_of = self.names(step, range(arity), bound)
            facts = self.facts(step.source, step.relation)
            names = self.target(list(value_of.values()), arity == 1)
            tests = " and ".join(f"{value_of[i]} == {v}" for i, v in known)
            if exists and known:
                self.loop(f"for {names} in _first(({names}) for {names} in {facts} if {tests}):")
            elif exists:
                self.loop(f"for {names} in _first({facts}):")
            else:
                self.loop(f"for {names} in {f'_ordered({facts})' if self.ordered else facts}:")
                if known:
                    w.open(f"if {tests}:")
        else:
            positions = tuple(i for i, _ in known)
            rest = projection(arity, positions)
            index = self.index(step.source, step.relation, positions)
            value_of = self.names(step, rest, bound)
            lookup = f"{index}({self.key([v for _, v in known])}, ())"
            if exists:
                lookup = f"_first({lookup})"
            elif self.ordered:
                lookup = f"_ordered({lookup})"
            self.loop(f"for {self.target(list(value_of.values()), len(rest) == 1)} in {lookup}:")
        value_of.update(known)
        agree = []  # the same variable twice in one atom: the second must agree (one test)
        for i, slot in binds:
            if value_of[i] == f"v{slot}" and slot not in bound:  # bound by the loop itself
                bound.add(slot)
            elif slot in bound:
                agree.append(f"{value_of[i]} == v{slot}")
            else:
                w.line(f"v{slot} = {value_of[i]}")
                bound.add(slot)
        if agree:
            w.open(f"if {' and '.join(agree)}:")
        for i, expr in after:
            w.open(f"if {value_of[i]} == {self.expr(expr)}:")
        if self.record:
            self.matched.append(f"({step.relation}, {self.tuple_code([value_of[i] for i in range(arity)])})")

    def names(self, step: p.Scan, positions: Iterable[int], bound: set[int]) -> dict[int, str]:
        """What a loop over facts calls the values at ``positions``: the slot a variable seen
        for the first time binds, else a fresh name (compared or bound after)."""
        names: dict[int, str] = {}
        taken: set[int] = set()
        for i in positions:
            arg = step.args[i]
            if isinstance(arg, p.Bind) and arg.slot not in bound and arg.slot not in taken:
                names[i] = f"v{arg.slot}"
                taken.add(arg.slot)
            else:
                names[i] = self.w.fresh("a")
        return names

    @staticmethod
    def target(names: list[str], single: bool) -> str:
        """The target of a loop over values (``single``) or tuples of ``names``' length."""
        return names[0] if single else ", ".join(names)

    def aggregate(self, step: p.Aggregate, bound: set[int]) -> None:
        w = self.w
        acc = w.fresh("acc")
        w.line(f"{acc} = set()")
        depth = w.depth
        record, self.record = self.record, False
        self.held.append(acc)
        inner = set(bound)
        self.steps(step.body, inner)
        parts = [f"v{k}" for k in step.keys]
        if step.target is not None:
            parts.append(self.expr(step.target))
        w.line(f"{acc}.add(({', '.join(parts)}{',' if len(parts) == 1 else ''}))")
        w.depth = depth
        self.held.pop()
        self.record = record
        slot = f"v{step.slot}"
        if step.op == "count":
            w.line(f"{slot} = len({acc})")
        else:
            values = f"[a[-1] for a in {acc}]"
            if step.op == "sum":
                w.line(f"{slot} = _sum({values})")
            else:
                w.open(f"if {acc}:")
                if step.op == "min":
                    w.line(f"{slot} = min({values})")
                elif step.op == "max":
                    w.line(f"{slot} = max({values})")
                else:
                    w.line(f"{slot} = _sum({values}) / len({acc})")
        bound.add(step.slot)


def slots_read(expr: p.Expr) -> set[int]:
    """The slots an expression reads (the variables it needs bound before it is computed).

    >>> sorted(slots_read(p.Arith("+", p.Slot(0), p.CallExpr(2, (p.Slot(3), p.Const(1))))))
    [0, 3]
    >>> slots_read(p.Neg(p.Const(4)))
    set()
    """
    if isinstance(expr, p.Slot):
        return {expr.index}
    if isinstance(expr, p.CallExpr):
        return set().union(*(slots_read(a) for a in expr.args)) if expr.args else set()
    if isinstance(expr, p.Arith):
        return slots_read(expr.left) | slots_read(expr.right)
    if isinstance(expr, p.Neg):
        return slots_read(expr.operand)
    if isinstance(expr, p.Pack):
        return set().union(*(slots_read(a) for a in expr.args)) if expr.args else set()
    if isinstance(expr, p.Field | p.Kind):
        return slots_read(expr.value)
    return set()


def _counts(plan: p.Plan, rule: p.RulePlan) -> bool:
    """Whether a rule calls ``autoinc()``: its loops then run in Soufflé's order (the numbers
    follow the order of evaluation)."""
    counters = {i for i, spec in enumerate(plan.functors) if spec.name == "autoinc"}
    if not counters:
        return False
    stack: list[Any] = [rule.head_args, rule.steps]
    while stack:
        item = stack.pop()
        if isinstance(item, p.CallExpr) and item.functor in counters:
            return True
        if isinstance(item, tuple | list):
            stack.extend(item)
        elif hasattr(item, "__dataclass_fields__"):
            stack.extend(getattr(item, f) for f in item.__dataclass_fields__)
    return False


def _finish(
    w: Writer, compiler: RuleCompiler, header: str, name: str, prologue: list[str]
) -> tuple[str, Callable]:
    helpers = w.helper_source()  # first: it settles the calls of helpers in the body
    lines = (
        [header]
        + ["    " + line for line in [*prologue, *compiler.prologue]]
        + [str(line) for line in w.lines]
    )
    source = "\n".join(lines + helpers) + "\n"
    namespace: dict[str, Any] = dict(RUNTIME)
    namespace["K"] = tuple(w.constants)
    exec(compile(source, f"<policyc {name}>", "exec"), namespace)
    return source, namespace[name]


def compile_rule(
    plan: p.Plan,
    rule: p.RulePlan,
    name: str = "rule",
    reads: set[tuple[int, tuple[int, ...] | None]] | None = None,
) -> tuple[str, Callable]:
    """The source and function ``rule(R, D, out, F, I, E)`` evaluating one rule plan. How it
    reads stored relations is added to ``reads`` when given: ``(relation, positions)`` for an
    index lookup, ``(relation, None)`` for a scan or a test of the facts themselves."""
    w = Writer()
    w.always.update(("R", "D", "out", "F", "I", "E", "emit", "n"))
    compiler = RuleCompiler(plan, w, record=False)
    spec = plan.relations[rule.head]
    compiler.ordered = bool(spec.choice) or spec.limit is not None or _counts(plan, rule)
    compiler.held.append("out")
    bound: set[int] = set()
    compiler.steps(rule.steps, bound)
    head = [compiler.expr(e) for e in rule.head_args]
    if len(head) == plan.relations[rule.head].arity:
        w.line(f"emit({compiler.stored(rule.head, head)})")
    else:  # a subsumption rule: the dominated tuple and the dominating one, as one tuple
        w.line(f"emit({compiler.tuple_code(head)})")
    if reads is not None:
        reads |= compiler.reads
    return _finish(w, compiler, f"def {name}(R, D, out, F, I, E):", name, ["emit = out.add", f"n = {TICK}"])


def compile_bound_rule(
    plan: p.Plan,
    rule: p.BoundRule,
    name: str = "match",
    upto: int | None = None,
    demand: frozenset[int] = frozenset(),
) -> tuple[str, Callable]:
    """The source and generator ``match(R, F, I, E, V, *values)`` over the bindings of a rule
    whose head values are given: it yields ``(slots, matched)``, the slot values and the
    ``(relation, tuple)`` facts the scans matched. With ``upto``, only the first ``upto``
    steps run (explanations use it to find the step at which every binding fails). The
    relations in ``demand`` are asked about through ``V`` (and must only be used with every
    argument known). Each call counts once towards the next check of the limits."""
    w = Writer()
    compiler = RuleCompiler(plan, w, record=True, demand=demand)
    params = [f"h{i}" for i in range(len(rule.head.args))]
    w.always.update(("R", "F", "I", "E", "V", "n", *params))
    bound: set[int] = set()
    deferred = []
    for i, arg in enumerate(rule.head.args):
        if isinstance(arg, p.Bind):
            if arg.slot in bound:
                w.open(f"if h{i} == v{arg.slot}:")
            else:
                w.line(f"v{arg.slot} = h{i}")
                bound.add(arg.slot)
        elif slots_read(arg.expr) <= bound:
            w.open(f"if h{i} == {compiler.expr(arg.expr)}:")
        else:
            deferred.append((i, arg.expr))
    steps = rule.steps if upto is None else rule.steps[:upto]
    compiler.steps(steps, bound)
    if upto is None or upto >= len(rule.steps):
        for i, expr in deferred:
            w.open(f"if h{i} == {compiler.expr(expr)}:")
    slots = ", ".join(f"v{s}" if s in bound else "None" for s in range(rule.slots))
    matched = ", ".join(compiler.matched)
    w.line(
        f"yield ({slots}{',' if rule.slots == 1 else ''}), ({matched}{',' if len(compiler.matched) == 1 else ''})"
    )
    header = f"def {name}(R, F, I, E, V{''.join(', ' + x for x in params)}):"
    prologue = ["E.calls -= 1", "if not E.calls: E.tick()", f"n = {TICK}"]
    return _finish(w, compiler, header, name, prologue)
