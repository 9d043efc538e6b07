"""A checked policy as an answer-set program for clingo.

The translation keeps the policy's meaning on every database: for stratified programs the
answer set of the translation together with a database's facts holds exactly the facts policyc
derives (the test suite checks this on thousands of random programs).

* Relations become predicates ``<prefix>Name`` (``p_`` by default; two policies compared side
  by side get different prefixes; the ``.`` of a component instance's relation ``g.reach``
  becomes a prime, ``p_g'reach``, which no plain name has inside it: see
  :func:`predicate_name`), variables ``V_name``.
* A functor is either **called**: a clingo external function ``@name(...)`` answered by a Python
  implementation at grounding time (a predicate holds when it returns 1); or **tabled**: an
  uninterpreted function, read from a table the search chooses — ``fv_name(args, value)`` for a
  functor with a value, ``fp_name(args)`` for a predicate. A call inside a term then becomes a
  lookup literal placed before the literal that uses it (no value: the literal fails, as in
  policyc).
* Aggregates become clingo aggregates over every variable of their body (each distinct binding
  counts once, as in policyc); ``min``/``max`` are guarded by a non-empty ``#count`` (policyc
  gives no value over nothing); ``mean`` is rewritten through sum and count when it is compared
  with an integer (``v = mean x : {B}, v > k`` becomes ``S > k*C``, ``C > 0``).
* Inline relations are expanded where they are used: a positive use by substituting each of
  their rules (inline relations they use positively expand in turn), a negated one through an
  auxiliary predicate defined over the using rule's own bindings (its literals from lower
  strata).

* ``x = range(a, b[, step])`` becomes clingo intervals (see :meth:`Translator.range_alternatives`).

Floats, a few operators (``bshr``, ``bshru``, ``land``, ``lor``, ``lxor``, ``lnot``, ``max``,
``min``; ``^`` and ``bshl`` but by a constant from 0 to :data:`MAX_EXPONENT`) and a few
combinations (a ``mean`` in a head, an inline relation with several rules inside an aggregate,
a ``range`` with a computed step inside an aggregate) have no translation:
:class:`Untranslatable` says which, and where.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from itertools import count as counter
from itertools import product
from typing import Any

from policyc.compiler import ast, scopes
from policyc.compiler.checks.rule_annotations import rule_mode
from policyc.compiler.generators import generator
from policyc.compiler.stages import Stratified

_TRANSLATORS = counter()


class Untranslatable(Exception):
    """The policy uses something clingo cannot express; the message says what."""


class UntranslatableOperator(Untranslatable):
    """An operator clingo does not have (``max``, ``bshr``, ...), at ``span``; ``what`` says
    which, without the place."""

    def __init__(self, term: ast.BinOp | ast.UnaryOp) -> None:
        self.span = term.span
        self.what = _no_counterpart(term)
        where = f"{term.span.file}:{term.span.line}:{term.span.column}"
        super().__init__(f"{self.what} (at {where})")


def var(name: str) -> str:
    # `a@1`: an aggregate's own variable renamed apart (policyc.compiler.scopes)
    return "V_" + name.replace("'", "_q").replace("\u2019", "_q").replace("@", "_l").replace("?", "_Q")


def const(value: object) -> str:
    """A policy value as a clingo term: a record ``[a, b]`` is ``rec(a,b)`` (``nil``:
    ``rec``), an ADT value ``$A(x)`` is ``c_A(x)``."""
    if isinstance(value, tuple):
        from policyc.runtime.values import Adt

        fields = [const(v) for v in (value[1:] if type(value) is Adt else value)]
        head = constructor(value[0]) if type(value) is Adt else "rec"
        return f"{head}({','.join(fields)})" if fields else head
    if isinstance(value, bool) or isinstance(value, float):
        raise Untranslatable("floating-point values have no clingo counterpart")
    if isinstance(value, int):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


COUNTERS = frozenset({"autoinc", "recursive_iteration_cnt"})  # Soufflé's counters: no clingo model


def constructor(branch: str) -> str:
    """The clingo function of an ADT branch: ``c_Leaf``; ``c_g'Leaf`` for the branch ``g.Leaf``
    of an instance (a prime inside a name stands for a ``.``, as in :func:`predicate_name`)."""
    if "?" in branch:
        raise Untranslatable(f"branch `{branch}`: clingo names cannot hold `?`")
    return "c_" + branch.replace(".", "'")


def table(functor: str) -> str:
    return "fv_" + functor


def predicate_table(functor: str) -> str:
    return "fp_" + functor


class Translator:
    """Translates the rules of one compilation; ``tabled`` names the functors to model as
    uninterpreted tables (every other functor is called)."""

    def __init__(self, compilation: Stratified, tabled: Iterable[str] = (), prefix: str = "p_") -> None:
        self.symbols = compilation.symbols
        self.strata = compilation.strata
        self.program = compilation.program
        self.prefix = prefix
        self.tabled = frozenset(tabled)
        self.fresh = counter()
        self.tag = next(_TRANSLATORS)  # keeps the auxiliary predicates of two translations apart
        self.extra: list[str] = []  # auxiliary rules for negated inline relations
        # relations with subsumption rules: their tuples dominated by others are dropped
        self.subsumed = frozenset(rule.head.name for _, rule in self.program.rules() if rule.is_subsumption)

    def name(self, relation: str) -> str:
        return predicate_name(relation, self.prefix)

    def inline(self, name: str) -> bool:
        return self.symbols.is_inline(name)

    def localized(self, rule: ast.Rule) -> ast.Rule:
        """The rule with its aggregates' own variables renamed apart, as the planner has it."""
        given = None
        if self.inline(rule.head.name):
            given = {a.name for a in rule.head.args if isinstance(a, ast.Var)}
        return scopes.localized(rule, lambda a: not self.predicate(a.name) and not self.inline(a.name), given)

    def predicate(self, name: str) -> bool:
        sig = self.symbols.functors.get(name)
        return sig is not None and sig.is_predicate

    # ----------------------------------------------------------------------- terms

    def term(self, t: ast.Term, env: dict[str, str], pre: list[str]) -> str:
        """``t`` as a clingo term; lookups of tabled functors it needs are appended to ``pre``."""
        if isinstance(t, ast.Var):
            return env.get(t.name, var(t.name))
        if isinstance(t, ast.Wildcard):
            return "_"
        if isinstance(t, ast.Integer | ast.String | ast.Float):
            return const(t.value)
        if isinstance(t, ast.BinOp):
            left, right = self.term(t.left, env, pre), self.term(t.right, env, pre)
            if t.op in _CLINGO_OPERATORS:
                return f"({left}{_CLINGO_OPERATORS[t.op]}{right})"
            count = t.right.value if isinstance(t.right, ast.Integer) else -1
            if t.op == "^" and 0 <= count <= MAX_EXPONENT:  # clingo has no value for a negative one
                return f"({left}**{count})"
            if t.op == "bshl" and 0 <= count <= MAX_EXPONENT:
                return f"({left}*{2**count})"
            raise UntranslatableOperator(t)
        if isinstance(t, ast.Negate):
            return f"-({self.term(t.operand, env, pre)})"
        if isinstance(t, ast.UnaryOp):
            if t.op == "bnot":
                return f"~({self.term(t.operand, env, pre)})"
            raise UntranslatableOperator(t)
        if isinstance(t, ast.Record | ast.Constructor | ast.Nil):
            fields = [self.term(a, env, pre) for a in t.args] if not isinstance(t, ast.Nil) else []
            head = constructor(t.name) if isinstance(t, ast.Constructor) else "rec"
            return f"{head}({','.join(fields)})" if fields else head
        if isinstance(t, ast.Call):
            if t.name in COUNTERS:
                raise Untranslatable(f"`{t.name}()` depends on the order of evaluation")
            args = [self.term(a, env, pre) for a in t.args]
            if t.name in self.tabled:
                result = f"F{next(self.fresh)}"
                pre.append(f"{table(t.name)}({','.join([*args, result])})")
                return result
            return f"@{t.name}({','.join(args)})"
        raise Untranslatable(f"{type(t).__name__} in a term")

    def hidden(self, t: ast.Term, env: dict[str, str], pre: list[str]) -> str:
        """A term whose every ``_`` (in records and constructors too) is a variable of its own:
        inside an aggregate each matched value counts."""
        if isinstance(t, ast.Wildcard):
            return f"W{next(self.fresh)}"
        if isinstance(t, ast.Record | ast.Constructor) and t.args:
            fields = [self.hidden(a, env, pre) for a in t.args]
            return f"{'rec' if isinstance(t, ast.Record) else constructor(t.name)}({','.join(fields)})"
        return self.term(t, env, pre)

    def atom(self, a: ast.Atom, env: dict[str, str], pre: list[str], hide_wildcards: bool = False) -> str:
        if self.predicate(a.name):
            args = [self.term(x, env, pre) for x in a.args]
            if a.name in self.tabled:
                return f"{predicate_table(a.name)}({','.join(args)})" if args else predicate_table(a.name)
            return f"@{a.name}({','.join(args)}) = 1"
        if not a.args:
            return self.name(a.name)
        args = []
        for arg in a.args:
            args.append(self.hidden(arg, env, pre) if hide_wildcards else self.term(arg, env, pre))
        return f"{self.name(a.name)}({','.join(args)})"

    # --------------------------------------------------------------------- bodies

    def literal_alternatives(
        self, lit: ast.Literal, env: dict[str, str], head: str, body: tuple
    ) -> list[list[str]]:
        """The translations of one literal: several when a positive inline atom expands."""
        if isinstance(lit, ast.Atom) and self.inline(lit.name):
            return [
                option for rule in self.program.rules_of(lit.name) for option in self.expand(rule, lit, env)
            ]
        pre: list[str] = []
        found = generator(lit, self.symbols.functors)
        if found is not None:
            return self.range_alternatives(found[0], found[1], env)
        if isinstance(lit, ast.Negation):
            if self.inline(lit.atom.name):
                return [[self.negated_inline(lit.atom, env, head, body)]]
            if self.predicate(lit.atom.name) and lit.atom.name not in self.tabled:
                args = ",".join(self.term(x, env, pre) for x in lit.atom.args)
                return [[*pre, f"@{lit.atom.name}({args}) = 0"]]
            text = self.atom(lit.atom, env, pre)
            return [[*pre, "not " + text]]
        if isinstance(lit, ast.Atom):
            text = self.atom(lit, env, pre)
            return [[*pre, text]]
        left = self.term(lit.left, env, pre)
        right = self.term(lit.right, env, pre)
        if lit.op in ORDERINGS and not (_numeric(lit.left) and _numeric(lit.right)):
            # clingo orders numbers before strings; the evaluator refuses to compare them
            pre.append(f"@{SAME_KIND}({left},{right}) = 1")
        return [[*pre, f"{left}{lit.op}{right}"]]

    def range_alternatives(self, target: ast.Term, call: ast.Call, env: dict[str, str]) -> list[list[str]]:
        """``x = range(a, b[, step])`` through clingo's intervals (integers only): without a
        step, the pool ``(a..b-1; b+1..a)`` (one of the two is empty); with a constant step, the
        multiples of it that fall in the range; with a computed one, one rule per sign."""
        pre: list[str] = []
        value = self.term(target, env, pre)
        start, stop = (self.term(a, env, pre) for a in call.args[:2])
        if len(call.args) == 2:
            return [[*pre, f"{value} = ({start}..{stop}-1;{stop}+1..{start})"]]
        step_term = call.args[2]
        step = self.term(step_term, env, pre)
        k = f"K{next(self.fresh)}"
        up = [f"{start} < {stop}", f"{k} = 0..({stop}-{start}-1)/({step})", f"{value} = {start}+{k}*({step})"]
        down = [
            f"{start} > {stop}",
            f"{k} = 0..({start}-{stop}-1)/(-({step}))",
            f"{value} = {start}+{k}*({step})",
        ]
        still = [f"{start} != {stop}", f"{value} = {start}"]
        constant = step_term.value if isinstance(step_term, ast.Integer) else None
        if isinstance(step_term, ast.Negate) and isinstance(step_term.operand, ast.Integer):
            constant = -step_term.operand.value
        if constant is not None:
            return [[*pre, *(up if constant > 0 else down if constant < 0 else still)]]
        return [
            [*pre, f"{step} > 0", *up],
            [*pre, f"{step} < 0", *down],
            [*pre, f"{step} = 0", *still],
        ]

    def expand(self, rule: ast.Rule, use: ast.Atom, env: dict[str, str]) -> list[list[str]]:
        """An inline relation's rule, with its head's values given by the use: one body per
        way its own positive inline literals expand."""
        tag = next(self.fresh)
        rule = self.localized(rule)
        inner: dict[str, str] = {}
        literals: list[str] = []
        checks = []
        for head_arg, given in zip(rule.head.args, use.args, strict=True):
            value = self.term(given, env, literals)
            if isinstance(head_arg, ast.Var) and head_arg.name not in inner:
                inner[head_arg.name] = value
            else:
                checks.append((head_arg, value))
        scope = self.renamed(inner, tag)
        for head_arg, value in checks:
            literals.append(f"{self.term(head_arg, scope, literals)} = {value}")
        options: list[list[list[str]]] = []
        for lit in rule.body:
            alternatives = self.literal_alternatives(lit, scope, rule.head.name, rule.body)
            if not alternatives:
                return []  # a positive inline relation without rules never holds
            options.append(alternatives)
        return [
            literals + [part for option in combination for part in option]
            for combination in product(*options)
        ]

    def renamed(self, given: dict[str, str], tag: int) -> dict[str, str]:
        class Scope(dict):
            def __missing__(self, name: str) -> str:
                return f"{var(name)}_i{tag}"

            def get(self, name: str, default: Any = None) -> str:
                return self[name]

        return Scope(given)

    def negated_inline(self, use: ast.Atom, env: dict[str, str], head: str, body: tuple) -> str:
        """``not R(args)`` through ``aux(vars)`` defined by R's rules over the caller's bindings."""
        variables = sorted({v.name for arg in use.args for v in ast.term_vars(arg)})
        aux = f"aux_{self.prefix}{self.tag}_{next(self.fresh)}"
        scratch: list[str] = []
        args = ",".join(self.term(ast.Var(v), env, scratch) for v in variables)
        domain = self.domain(head, body, use, env)
        for rule in self.program.rules_of(use.name):
            for expansion in self.expand(rule, use, env):
                literals = domain + expansion
                self.extra.append(
                    f"{aux}({args}) :- {', '.join(literals)}."
                    if variables
                    else f"{aux} :- {', '.join(literals)}."
                )
        return f"not {aux}({args})" if variables else f"not {aux}"

    def domain(self, head: str, body: tuple, use: ast.Atom, env: dict[str, str]) -> list[str]:
        """The caller's literals that bind the values ``use`` asks about, without depending on
        the caller's own head: the fewest relation atoms that bind every variable of ``use``
        when there are such (a larger domain only multiplies the ground rules), else every
        literal that can."""
        own = self.strata.of.get(head)
        needed = {v.name for arg in use.args for v in ast.term_vars(arg)}
        atoms = [
            lit
            for lit in body
            if isinstance(lit, ast.Atom)
            and lit is not use
            and not self.inline(lit.name)
            and not self.predicate(lit.name)
            and self.strata.of.get(lit.name) != own
        ]
        chosen: list[ast.Atom] = []
        missing = set(needed)
        while missing:
            best = max(atoms, key=lambda a: len(missing & _atom_vars(a)), default=None)
            if best is None or not missing & _atom_vars(best):
                break
            chosen.append(best)
            missing -= _atom_vars(best)
        literals: list[str] = []
        if not missing:
            for lit in chosen:
                literals.extend(self.literal_alternatives(lit, env, head, body)[0])
            return literals
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
            options = self.literal_alternatives(lit, env, head, body)
            if len(options) != 1:
                raise Untranslatable("a `range` with a computed step beside a negated inline relation")
            literals.extend(options[0])
        return literals

    def aggregate_body(self, agg: ast.Aggregate, env: dict[str, str], head: str) -> tuple[str, list[str]]:
        parts: list[str] = []
        for lit in agg.body:
            if isinstance(lit, ast.Atom) and not self.predicate(lit.name) and not self.inline(lit.name):
                pre: list[str] = []
                text = self.atom(lit, env, pre, hide_wildcards=True)
                parts.extend([*pre, text])
            else:
                options = self.literal_alternatives(lit, env, head, agg.body)
                if len(options) != 1 and generator(lit, self.symbols.functors) is not None:
                    raise Untranslatable("a `range` with a computed step inside an aggregate")
                if len(options) != 1:
                    raise Untranslatable("a positive inline relation inside an aggregate")
                parts.extend(options[0])
        condition = ", ".join(parts)
        names = sorted({tok for part in parts for tok in _variables(part)})
        return condition, names

    def rule(self, rule: ast.Rule, head_name: str | None = None) -> list[str]:
        """The clingo rules of a policy rule (several when a positive inline relation expands);
        ``head_name`` renames its head (to tell rules of one relation apart). A ``Deny`` rule in
        shadow mode derives a relation nothing reads, as the planner has it (it decides nothing)."""
        relation = self.symbols.relations.get(rule.head.name)
        if relation is not None and relation.choice:
            raise Untranslatable(
                f"`{rule.head.name}` has a `choice-domain`: clingo has no counterpart of the one "
                "fact per key policyc keeps"
            )
        if relation is not None and relation.limit is not None:
            raise Untranslatable(
                f"`{rule.head.name}` has a `.limitsize`: clingo has no counterpart of the first facts kept"
            )
        if rule.is_subsumption:
            raise Untranslatable(
                f"a subsumption rule of `{rule.head.name}`: clingo has no counterpart of the tuples "
                "policyc drops when others dominate them"
            )
        if rule.head.name in self.subsumed:
            raise Untranslatable(
                f"`{rule.head.name}` has a subsumption rule: clingo would hold the tuples of it that "
                "policyc drops"
            )
        if head_name is None and rule_mode(rule) == "shadow":
            head_name = SHADOW_HEAD
        rule = self.localized(rule)
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
                target, agg = var(lit.left.name), lit.right
                condition, names = self.aggregate_body(agg, env, head)
                keys = ",".join(names) if names else "0"
                if agg.op == "count":
                    fixed.append(f"{target} = #count {{ {keys} : {condition} }}")
                elif agg.op in ("sum", "min", "max"):
                    scratch: list[str] = []
                    value = self.term(agg.target, env, scratch)  # type: ignore[arg-type]
                    if scratch:
                        raise Untranslatable("an uninterpreted functor in an aggregate's target")
                    if agg.op != "sum":
                        fixed.append(f"#count {{ {keys} : {condition} }} > 0")
                    fixed.append(f"{target} = #{agg.op} {{ {value},{keys} : {condition} }}")
                else:
                    scratch = []
                    value = self.term(agg.target, env, scratch)  # type: ignore[arg-type]
                    if scratch:
                        raise Untranslatable("an uninterpreted functor in an aggregate's target")
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
        pre: list[str] = []
        head_text = self.atom(rule.head, env, pre)
        if head_name is not None:
            head_text = head_name + head_text[len(self.name(rule.head.name)) :]
        translated = []
        for combination in product(*choices):
            body = fixed + [part for option in combination for part in option] + pre
            translated.append(f"{head_text} :- {', '.join(body)}." if body else f"{head_text}.")
        return translated

    def rules(self) -> list[str]:
        """Every rule of the policy (inline relations are expanded where used)."""
        lines: list[str] = []
        for module in self.program.modules:
            for statement in module.statements:
                if isinstance(statement, ast.Rule) and not self.inline(statement.head.name):
                    lines.extend(self.rule(statement))
        return lines + self.extra


ORDERINGS = ("<", "<=", ">", ">=")
# policyc's operators that are clingo's (on the 32-bit integers clingo has, the same values)
_CLINGO_OPERATORS = {"+": "+", "-": "-", "*": "*", "/": "/", "%": "\\", "band": "&", "bor": "?", "bxor": "^"}
MAX_EXPONENT = 30  # of `^` and `bshl`: a constant from 0 to this is translated


def _no_counterpart(t: ast.BinOp | ast.UnaryOp) -> str:
    """Why a term has no translation."""
    if t.op == "^":
        what = "`^` with an exponent that is not a constant from 0 to 30"
    elif t.op == "bshl":
        what = "`bshl` with a shift that is not a constant from 0 to 30"
    else:
        what = f"`{t.op}`"
    return f"{what} has no clingo counterpart"


SHADOW_HEAD = "policyc_shadow_deny"  # the head of a rule in shadow mode (see Translator.rule)
SAME_KIND = "policyc_same_kind"  # answered by the grounding context, never a policy's functor


def _numeric(term: ast.Term) -> bool:
    """Whether a term's value is a number whatever the database (a constant or arithmetic)."""
    if isinstance(term, ast.BinOp):
        return term.op not in ast.EXTREMA
    return isinstance(term, ast.Integer | ast.Float | ast.Negate | ast.UnaryOp)


def _atom_vars(atom: ast.Atom) -> set[str]:
    """The variables an atom binds directly (its plain variable arguments)."""
    return {arg.name for arg in atom.args if isinstance(arg, ast.Var)}


def _variables(text: str) -> list[str]:
    return re.findall(r"\b(V_[A-Za-z0-9_]+|W\d+|F\d+)\b", text)


def predicate_name(relation: str, prefix: str = "p_") -> str:
    """The clingo predicate of a relation: ``p_Deny``; ``p_g'reach`` for ``g.reach`` (names
    end in primes if at all, so a prime inside one stands for a ``.`` and nothing else). A name
    with Soufflé's ``?`` has no clingo spelling: :class:`Untranslatable`."""
    if "?" in relation:
        raise Untranslatable(f"relation `{relation}`: clingo names cannot hold `?`")
    return prefix + relation.replace(".", "'")


def relation_of(predicate: str) -> str:
    """The relation a predicate names, without its prefix: :func:`predicate_name` undone."""
    return re.sub(r"'(?=[A-Za-z_])", ".", predicate)


def facts(rows: Mapping[str, Iterable[tuple]], prefix: str = "p_") -> list[str]:
    """Input facts as clingo facts."""
    lines = []
    for name, tuples in rows.items():
        predicate = predicate_name(name, prefix)
        for row in tuples:
            lines.append(f"{predicate}({','.join(const(v) for v in row)})." if row else f"{predicate}.")
    return lines


def to_clingo(compilation: Stratified, rows: dict[str, list[tuple]]) -> str:
    """The policy and a database as one program (every functor called)."""
    translator = Translator(compilation)
    return "\n".join([*translator.rules(), *facts(rows)]) + "\n"


class Context:
    """Answers clingo's ``@name(...)`` calls with Python functor implementations."""

    def __init__(self, functors: dict[str, Callable[..., Any]], predicates: set[str]) -> None:
        self.functors = functors
        self.predicates = predicates

    def __getattr__(self, name: str) -> Callable[..., Any]:
        import clingo

        if name == SAME_KIND:
            return lambda a, b: clingo.Number(int(a.type == b.type))
        fn = self.functors.get(name)
        if fn is None:
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            values = [value(a) for a in args]
            try:
                result = fn(*values)
            except Exception:  # a failing functor: the literal fails (policyc records an error)
                return []
            if name in self.predicates:
                return clingo.Number(1 if result else 0)
            if result is None or isinstance(result, bool | float):
                return []
            if isinstance(result, int):
                return clingo.Number(result)
            return clingo.String(str(result))

        return call


def value(symbol: Any) -> Any:
    """A clingo number or string as a Python value."""
    import clingo

    if symbol.type == clingo.SymbolType.Number:
        return symbol.number
    if symbol.type == clingo.SymbolType.String:
        return symbol.string
    if symbol.type == clingo.SymbolType.Function and (symbol.name == "rec" or symbol.name.startswith("c_")):
        from policyc.runtime.values import Adt

        fields = tuple(value(a) for a in symbol.arguments)
        return fields if symbol.name == "rec" else Adt((relation_of(symbol.name[2:]), *fields))
    raise Untranslatable(f"unexpected clingo value {symbol}")


def ground_context(compilation: Stratified, functors: dict[str, Callable[..., Any]] | None = None) -> Context:
    """A grounding context calling the builtins the runtime binds for the program (a policy's
    strict conversions when it has verdict rules) and the given implementations."""
    from policyc.stdlib.builtins import builtins_for

    predicates = {name for name, sig in compilation.symbols.functors.items() if sig.is_predicate}
    return Context({**builtins_for(compilation.symbols.has_verdict_rules), **(functors or {})}, predicates)


def solve_unique(
    compilation: Stratified,
    program: str,
    functors: dict[str, Callable[..., Any]] | None = None,
    prefix: str = "p_",
) -> dict[str, set[tuple]]:
    """The unique answer set of a stratified program, per relation of the policy."""
    import clingo

    control = clingo.Control(["--warn=none"])
    control.add("base", [], program)
    control.ground([("base", [])], context=ground_context(compilation, functors))
    models = []
    with control.solve(yield_=True) as handle:
        for model in handle:
            models.append(list(model.symbols(atoms=True)))
    if len(models) != 1:
        raise Untranslatable(f"{len(models)} answer sets: the program is not stratified")
    names = {predicate_name(name, prefix): name for name in compilation.symbols.relations}
    result: dict[str, set[tuple]] = {name: set() for name in compilation.symbols.relations}
    for symbol in models[0]:
        name = names.get(symbol.name)
        if name is not None:
            result[name].add(tuple(value(a) for a in symbol.arguments))
    return result
