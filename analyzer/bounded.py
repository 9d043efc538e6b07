"""The bounded questions of ``policyc check --deep``: whether a database within the bound
exists on which a rule derives what no other rule does (``redundant-rule``), an `Allow` rule
fires for an action no `Deny` denies (``shadowed-allow``), or a call of a tool is allowed, or
denied (``always-deny``, ``always-allow``).

The questions share one grounding: the policy is translated twice (``p_`` and ``q_``, the
second with a switch per rule that removes it), every question is an integrity constraint
behind an ``#external`` switch, and each is solved under assumptions, for at most a third
(:data:`QUESTION_SHARE`) of the time allowed. For a tool no database has a call of allowed (or
denied), the rules that make it so are an unsat core of one more translation (``r_``), in
which each rule deciding verdicts can be removed. A rule the domains have too few values for
(:class:`_Width`), or that counts beyond the bound, is asked nothing: "no database" would
not be believed of it.

>>> from policyc.compiler.pipeline import compile_source
>>> searches = Searches(compile_source("Deny(a) :- Send(a).\\n.input Send"), 2, 6.0)
>>> searches.questions
[]
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policyc.compiler import ast, codes
from policyc.compiler.diagnostics import Diagnostic
from policyc.compiler.stages import Stratified
from policyc.compiler.symbols import ESCALATE, is_verdict

from . import asp
from .calls import rule_span
from .deadline import Deadline, within
from .search import Problem, uninterpreted_functors
from .unsat import atom_shape, shape
from .verdicts import Question as ToolQuestion
from .verdicts import finding

QUESTION_SHARE = 1 / 3  # of the time allowed, what one bounded question may take


@dataclass(frozen=True, eq=False)
class PlacedRule:
    """A rule and its module, compared by identity."""

    rule: ast.Rule
    module: ast.Module

    @functools.cached_property
    def signature(self) -> Any:
        """The rule without positions: two rules with one signature are duplicates."""
        return (atom_shape(self.rule.head), tuple(_lit(x) for x in self.rule.body))


def _lit(lit: ast.Literal) -> Any:
    if isinstance(lit, ast.Atom):
        return atom_shape(lit)
    if isinstance(lit, ast.Negation):
        return ("not", atom_shape(lit.atom))
    return (lit.op, shape(lit.left), shape(lit.right))


class Modelled:
    """Which of the functors the analysis models as uninterpreted functions a finding rests on."""

    def __init__(self, compilation: Stratified) -> None:
        self.modelled = uninterpreted_functors(compilation)
        self.program = compilation.program

    def of(self, rules: tuple[ast.Rule, ...] = (), relations: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The modelled functors ``rules`` use, and those the rules of ``relations`` use, with
        the rules of every relation either reads, transitively."""
        found: set[str] = set()
        seen: set[str] = set()
        stack = list(rules) + [r for name in relations for r in self.program.rules_of(name)]
        seen.update(relations)
        while stack:
            summary = self.program.summary(stack.pop())
            for name in {atom.name for atom, _, _ in summary.atoms} | {call.name for call in summary.calls}:
                if name in self.modelled:
                    found.add(name)
                elif name not in seen:
                    seen.add(name)
                    stack.extend(self.program.rules_of(name))
        return tuple(sorted(found))


@dataclass
class _Question:
    switch: str  # the #external that turns its constraint on
    assume: tuple[str, ...]  # more externals it needs on
    kind: str  # "redundant", "shadowed", "always-deny", "always-allow"
    rule: PlacedRule | None = None
    tool: ToolQuestion | None = None
    found: bool | None = None  # whether a database was found; None: not answered
    core: tuple[int, ...] | None = None  # for a tool without a database: the rules it needs (switches)


class Searches:
    """Every bounded question about one policy, over one grounding."""

    def __init__(self, compilation: Stratified, bound: int, timeout: float) -> None:
        self.compilation = compilation
        self.bound = bound
        self.timeout = timeout
        self.questions: list[_Question] = []
        self.lines: list[str] = []
        self.switched: dict[int, ast.Rule] = {}  # for the cores: switch -> the rule it removes
        # the rules a tool's finding names when its core was not found in time
        self.fallback: Callable[[ToolQuestion], list[ast.Rule]] = lambda question: []

    def plan(
        self,
        rules: list[PlacedRule],
        redundant: dict[PlacedRule, PlacedRule],
        shadowed: dict[PlacedRule, PlacedRule],
        tools: list[ToolQuestion],
        switched: list[ast.Rule],
    ) -> None:
        symbols = self.compilation.symbols
        self.problem = problem = Problem(self.compilation, self.bound)
        width = _Width(self.compilation, problem.domains)
        # redundancy: a second translation where rule i can be switched off
        by_head: dict[str, list[PlacedRule]] = {}
        for r in rules:
            by_head.setdefault(r.rule.head.name, []).append(r)
        signatures = Counter(r.signature for r in rules)
        candidates = [
            r
            for group in by_head.values()
            if len(group) > 1
            for r in group
            if r not in redundant
            and signatures[r.signature] == 1
            and not _counts_beyond(r.rule, self.bound)
            and width.fits(r.rule, r.rule.head.name)
        ]
        switch_of = {id(r.rule): n for n, r in enumerate(candidates)}
        self.switched = dict(enumerate(switched))
        translator = problem.translator("q_")
        for module in self.compilation.program.modules:
            for statement in module.statements:
                if not isinstance(statement, ast.Rule) or translator.inline(statement.head.name):
                    continue
                for line in translator.rule(statement):
                    n = switch_of.get(id(statement))
                    self.lines.append(line if n is None else _guard(line, f"policyc_skip({n})"))
        for rule in problem.extra:
            self.lines.extend(translator.rule(rule))
        self.lines.extend(translator.extra)
        for r, n in ((r, switch_of[id(r.rule)]) for r in candidates):
            head = r.rule.head
            xs = ",".join(f"X{i}" for i in range(len(head.args)))
            p, q = (asp.predicate_name(head.name), asp.predicate_name(head.name, "q_"))
            if xs:
                p, q = f"{p}({xs})", f"{q}({xs})"
            self.lines += [
                f"#external policyc_skip({n}). [free]",
                f"#external policyc_ask_redundant({n}). [free]",
                f"policyc_differs({n}) :- {p}, not {q}.",
                f":- policyc_ask_redundant({n}), not policyc_differs({n}).",
            ]
            self.questions.append(
                _Question(f"policyc_ask_redundant({n})", (f"policyc_skip({n})",), "redundant", rule=r)
            )
        # shadowed allows: the rule fires for an action no Deny denies (nor Escalate escalates)
        p_translator = problem.translator()
        unless = "".join(f", not p_{name}(A)" for name in _stronger(symbols) if name != "Deny")
        if "Deny" in symbols.relations:
            allows = [x for x in rules if x.rule.head.name == "Allow" and x not in shadowed]
            for n, r in enumerate(
                x for x in allows if not _counts_beyond(x.rule, self.bound) and width.fits(x.rule, "Deny")
            ):
                self.lines.extend(p_translator.rule(r.rule, head_name=f"policyc_fires{n}"))
                self.lines += [
                    f"#external policyc_ask_shadow({n}). [free]",
                    f"policyc_wins({n}) :- policyc_fires{n}(A), not p_Deny(A){unless}.",
                    f":- policyc_ask_shadow({n}), not policyc_wins({n}).",
                ]
                self.questions.append(_Question(f"policyc_ask_shadow({n})", (), "shadowed", rule=r))
        self.lines.extend(p_translator.extra)
        # tools: a call of it allowed, or denied
        if tools and ("Deny" in symbols.relations or "Allow" in symbols.relations):
            beyond = any(
                _counts_beyond(r.rule, self.bound) or not width.fits(r.rule, "Deny")
                for r in rules
                if r.rule.head.name in ("Allow", *_stronger(symbols))
            )
            for n, tool in enumerate(tools if not beyond else ()):
                asked = self._tool_lines(n, tool, "p_")
                if asked:
                    self.lines += asked
                    self.questions.append(_Question(f"policyc_ask_tool({n})", (), tool.kind, tool=tool))

    def _tool_lines(self, n: int, tool: ToolQuestion, prefix: str) -> list[str]:
        """The question whether a call of the tool is allowed (or denied), over the
        translation of ``prefix``; none when the policy's ways of naming it have none."""
        symbols = self.compilation.symbols
        problem = self.problem
        name = asp.const(tool.tool)
        calls = []
        for form in tool.forms:
            if form == ("events",):
                if "ToolCall" in problem.inputs():
                    calls.append(f"{prefix}ToolCall(A,{name})")
            elif form[0] == "rel" and not symbols.is_inline(form[1]):
                calls.append(f"{asp.predicate_name(form[1], prefix)}(A,{name})")
            elif form[0] == "pred" and form[1] in problem.tabled:
                calls.append(f"{asp.predicate_table(form[1])}(A,{name})")
            elif form[0] == "fun" and form[1] in problem.tabled:
                calls.append(f"{asp.table(form[1])}(A,{name})")
        if not calls:
            return []
        verdict = f"not {prefix}Deny(A)" if "Deny" in symbols.relations else "#true"
        verdict += "".join(f", not {prefix}{name}(A)" for name in _stronger(symbols) if name != "Deny")
        if symbols.default == "deny":
            verdict += f", {prefix}Allow(A)" if "Allow" in symbols.relations else ", #false"
        lines = [f"policyc_call({n},A) :- {call}." for call in calls]
        lines += [
            f"policyc_allowed({n},A) :- policyc_call({n},A), {verdict}.",
            f"#external policyc_ask_tool({n}). [free]",
        ]
        if tool.kind == "always-deny":
            lines.append(f"policyc_some_allowed({n}) :- policyc_allowed({n},A).")
            lines.append(f":- policyc_ask_tool({n}), not policyc_some_allowed({n}).")
        else:
            lines.append(f"policyc_some_denied({n}) :- policyc_call({n},A), not policyc_allowed({n},A).")
            lines.append(f":- policyc_ask_tool({n}), not policyc_some_denied({n}).")
        return lines

    def run(self, deadline: Deadline) -> None:
        """Answer the questions by the deadline (grounding included); then, for each tool no
        database has a call of allowed (or denied), the rules that make it so."""
        if not self.questions or deadline.passed():
            return  # every question stays unanswered
        try:
            answers = within(deadline.left(), lambda: self._answer(deadline))
        except (TimeoutError, RuntimeError):
            return
        for question, found in zip(self.questions, answers, strict=True):
            question.found = found
        uniform = [q for q in self.questions if q.tool is not None and q.found is False]
        if uniform and not deadline.passed():
            try:
                cores = within(deadline.left(), lambda: self._cores(uniform, deadline))
            except (TimeoutError, RuntimeError):
                return  # the findings name the rules that may apply instead
            for question, core in zip(uniform, cores, strict=True):
                question.core = core

    def _answer(self, deadline: Deadline) -> list[bool | None]:
        """Whether a database was found for each question (``None``: not answered in time)."""
        import clingo

        if deadline.passed():
            return [None] * len(self.questions)  # grounding cannot be stopped: not begun
        try:
            # the switches first: the grounder must know them before it meets them in a body
            declared = [line for line in self.lines if line.startswith("#external")]
            rest = [line for line in self.lines if not line.startswith("#external")]
            text = "\n".join(declared) + "\n" + self.problem.program(also=("q_",)) + "\n".join(rest) + "\n"
            # two solver threads, configured differently: answers come sooner and vary less
            control = clingo.Control(["--warn=none", "--opt-mode=ignore", "--parallel-mode=2"])
            control.add("base", [], text)
            control.ground([("base", [])], context=asp.ground_context(self.compilation))
        except (asp.Untranslatable, RuntimeError):
            return [None] * len(self.questions)
        switches = [
            clingo.parse_term(line.split()[1].rstrip("."))
            for line in self.lines
            if line.startswith("#external")
        ]
        answers: list[bool | None] = []
        for question in self.questions:
            answers.append(None)
            if deadline.passed():
                continue
            on = {clingo.parse_term(question.switch), *(clingo.parse_term(a) for a in question.assume)}
            limit = min(self.timeout * QUESTION_SHARE, deadline.left())
            answers[-1] = solve(control, switches, on, limit)[0]
        return answers

    def _cores(self, questions: list[_Question], deadline: Deadline) -> list[tuple[int, ...] | None]:
        """For each tool question without a database: the rules (switches of
        :attr:`switched`) it needs, from a translation in which each can be removed (``r_``):
        clingo's core of the assumptions, then made smaller while no database appears."""
        import clingo

        lines = [f"#external policyc_drop({n}). [free]" for n in self.switched]
        number = {id(rule): n for n, rule in self.switched.items()}
        translator = self.problem.translator("r_")
        rules = []
        for module in self.compilation.program.modules:
            for statement in module.statements:
                if not isinstance(statement, ast.Rule) or translator.inline(statement.head.name):
                    continue
                for line in translator.rule(statement):
                    n = number.get(id(statement))
                    rules.append(line if n is None else _guard(line, f"policyc_drop({n})"))
        asks = []
        for n, question in enumerate(questions):
            assert question.tool is not None
            asked = self._tool_lines(n, question.tool, "r_")
            asks += [line for line in asked if line.startswith("#external")]
            rules += [line for line in asked if not line.startswith("#external")]
        text = "\n".join(lines + asks) + "\n" + self.problem.program(also=("r_",))
        text += "\n".join(rules + translator.extra) + "\n"
        if deadline.passed():
            return [None] * len(questions)  # grounding cannot be stopped: not begun
        control = clingo.Control(["--warn=none", "--opt-mode=ignore", "--parallel-mode=2"])
        control.add("base", [], text)
        control.ground([("base", [])], context=asp.ground_context(self.compilation))
        switches = [clingo.parse_term(line.split()[1].rstrip(".")) for line in lines + asks]
        drops = {n: clingo.parse_term(f"policyc_drop({n})") for n in self.switched}
        literal = {n: a.literal for n, a in ((n, control.symbolic_atoms[d]) for n, d in drops.items()) if a}
        cores: list[tuple[int, ...] | None] = []
        for n in range(len(questions)):
            cores.append(None)
            if deadline.passed():
                continue
            on = {clingo.parse_term(f"policyc_ask_tool({n})")}
            limit = min(self.timeout * QUESTION_SHARE, deadline.left())
            found, core = solve(control, switches, on, limit)
            if found is not False:
                continue
            # the rules whose presence the core assumes; then fewer, while no database appears
            # with the others removed
            needed = [m for m in sorted(literal) if -literal[m] in core]
            for m in list(needed):
                if deadline.passed():
                    break
                rest = [k for k in needed if k != m]
                limit = min(self.timeout * QUESTION_SHARE, deadline.left())
                if (
                    solve(control, switches, on | {drops[k] for k in literal if k not in rest}, limit)[0]
                    is False
                ):
                    needed = rest
            cores[-1] = tuple(needed)
        return cores

    def findings(self, modelled: Modelled) -> list[Diagnostic]:
        found = []
        k = self.bound
        within = f"on no database with up to {k} fresh values per type"
        for q in self.questions:
            if q.found is not False:
                continue  # a database was found, or the question was not answered in time
            if q.kind == "redundant" and q.rule is not None:
                found.append(
                    codes.REDUNDANT_RULE(
                        rule_span(q.rule.rule),
                        f"this rule looks redundant: {within} does it derive a `{q.rule.rule.head.name}` fact "
                        "the other rules do not",
                        help="remove it, or make it say something the other rules do not",
                        strength="bounded",
                        bound=k,
                        uninterpreted=modelled.of(relations=(q.rule.rule.head.name,)),
                    )
                )
            elif q.kind == "shadowed" and q.rule is not None:
                found.append(
                    codes.SHADOWED_ALLOW(
                        rule_span(q.rule.rule),
                        f"this `Allow` looks shadowed: {within} does it fire for an action that no `Deny` denies",
                        help="deny wins over allow: narrow the `Deny` rules or drop this one",
                        strength="bounded",
                        bound=k,
                        uninterpreted=modelled.of((q.rule.rule,), ("Deny",)),
                    )
                )
            elif q.tool is not None:
                if q.core is not None:
                    q.tool.core = [self.switched[n] for n in q.core]
                else:  # not found in time: the rules that may apply, which together do
                    q.tool.core = self.fallback(q.tool)
                found.append(
                    finding(
                        q.tool, self.compilation.symbols.default, k, modelled.of(relations=("Allow", "Deny"))
                    )
                )
        return found


class _Width:
    """Whether a search's domains have values enough for a rule to fire: the rule's variables
    of each class, plus what deriving each relation it reads needs (an action, the result it
    depends on, the call that result answers...). A bounded "no database" is only believed of
    rules that fit; the others are asked nothing."""

    def __init__(self, compilation: Stratified, domains: Any) -> None:
        self.domains = domains
        self.program = compilation.program
        # the domains count each rule's variables by the rule's place in the program
        self.number = {id(rule): n for n, (_, rule) in enumerate(self.program.rules())}
        self.memo: dict[int, dict[Any, int]] = {}

    def fits(self, rule: ast.Rule, against: str | None = None) -> bool:
        """Whether ``rule`` can fire within the domains, and (with ``against``, a relation) the
        relations the other rules of ``against`` negate can hold besides: a question asks
        that those rules do not fire, which may take their negated relations' witnesses."""
        need = dict(self._need(rule, frozenset()))
        for other in self.program.rules_of(against) if against else ():
            if other is rule:
                continue
            for lit in other.body:
                if isinstance(lit, ast.Negation):
                    _add(need, self._relation(lit.atom.name, frozenset()))
        return all(n <= len(self.domains.values(cls)) for cls, n in need.items())

    def _relation(self, name: str, visiting: frozenset[str]) -> dict[Any, int]:
        """What deriving a fact of ``name`` needs, by its most demanding rule."""
        most: dict[Any, int] = {}
        for rule in self.program.rules_of(name):
            for cls, k in self._need(rule, visiting).items():
                most[cls] = max(most.get(cls, 0), k)
        return most

    def _need(self, rule: ast.Rule, visiting: frozenset[str]) -> dict[Any, int]:
        if not visiting and id(rule) in self.memo:
            return self.memo[id(rule)]
        total = dict(self.domains.uses.get(self.number[id(rule)], {}))
        inside = visiting | {rule.head.name}
        for lit in rule.body:
            if isinstance(lit, ast.Atom) and lit.name not in inside:
                _add(total, self._relation(lit.name, inside))
        if not visiting:
            self.memo[id(rule)] = total
        return total


def _add(total: dict[Any, int], more: dict[Any, int]) -> None:
    for cls, k in more.items():
        total[cls] = total.get(cls, 0) + k


def _stronger(symbols: Any) -> tuple[str, ...]:
    """The verdicts that win over `Allow`: `Deny`, and a unary `Escalate` when the policy has it
    (an escalated call is not allowed as it is)."""
    relation = symbols.relations.get(ESCALATE)
    return ("Deny", ESCALATE) if relation is not None and is_verdict(ESCALATE, relation.arity) else ("Deny",)


def _counts_beyond(rule: ast.Rule, bound: int) -> bool:
    """Whether a rule compares a ``count`` with a threshold a database within the bound may
    not reach (``count : {...} > 14`` needs 15 facts): a bounded search would miss the rule
    firing, so it is asked no bounded question."""
    counted = {
        lit.left.name
        for lit in rule.body
        if isinstance(lit, ast.Comparison)
        and isinstance(lit.left, ast.Var)
        and isinstance(lit.right, ast.Aggregate)
        and lit.right.op in ("count", "sum", "mean")
    }
    for lit in rule.body:
        if isinstance(lit, ast.Comparison):
            for a, b in ((lit.left, lit.right), (lit.right, lit.left)):
                if (
                    isinstance(a, ast.Var)
                    and a.name in counted
                    and isinstance(b, ast.Integer)
                    and b.value >= bound
                ):
                    return True
    return False


def solve(control: Any, switches: list[Any], on: set[Any], limit: float) -> tuple[bool | None, set[int]]:
    """Whether a database exists with the switches ``on`` (the others off) within ``limit``
    seconds (``None``: not answered), and when none does, the literals of the assumptions that
    rule one out."""
    assumptions = [(atom, atom in on) for atom in switches]
    with control.solve(assumptions=assumptions, async_=True) as handle:
        if not handle.wait(limit):
            handle.cancel()
            return None, set()
        result = handle.get()
        if result.satisfiable is None:
            return None, set()
        return bool(result.satisfiable), set() if result.satisfiable else set(handle.core())


def _guard(line: str, condition: str) -> str:
    """A translated rule that only applies while ``condition`` does not hold."""
    text = line.rstrip()
    assert text.endswith(".")
    if ":-" in text:
        return f"{text[:-1]}, not {condition}."
    return f"{text[:-1]} :- not {condition}."
