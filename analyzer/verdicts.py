"""Tools whose verdict is the same on every database: ``always-deny`` and ``always-allow``.

**Mentions.** A rule names a tool through the event vocabulary (``is_tool(a, "t")``,
``ToolCall(a, "t")``, ``tool_name(a) = "t"``) or through a relation, predicate or function of
the policy's own whose name says it holds tools (``Tool(a, "t")``, ``uses_tool(a, "t")``),
where ``a`` is the action the rule is about: the head's first argument, in an `Allow` or
`Deny` rule or in a rule of a relation they read with their action there (``Risky(a)`` in
``Deny(a) :- Risky(a)``). A rule reached from `Deny` names it on the *deny side*, one reached
from `Allow` on the *allow side*. A unary `Escalate` counts as `Deny` throughout: an escalated
call cannot run as it is, so "always denied" means never allowed without a person's approval.

**Which tools are asked about.** Every tool named on either side, both ways, except when the
uniform verdict is what one rule says on purpose: a tool one `Deny` rule denies whatever the
call (``Deny(a) :- is_tool(a, "rm").``, or through a relation defined so) is not asked whether
it is always denied, unless the allow side names it or ``deliberate`` is asked for (the MCP
gateway hides such a tool like every tool always denied); a tool is only asked whether it is always
allowed when the deny side names it, or the policy denies by default, the allow side names it
and no single `Allow` rule allows it whatever the call.

**Proofs.** For a call of the tool, each verdict rule's body is encoded as a z3 formula over
what it says of the call alone: an atom whose arguments are the action and constants is a
proposition (one of a relation with rules is replaced by the disjunction of its rules'
bodies, a few levels deep), a comparison a z3 constraint (functors as uninterpreted functions,
as in :mod:`unsat`), the tool's own mention is true and a mention of another tool false where
the call has one tool: through the event vocabulary (``.key ToolCall(a)``), a relation of the
policy's own whose first attribute is a key (``.key Tool(a)``), or a function. A body that needs other values (a variable
besides the action, an aggregate) is a proposition of its own, and so is anything z3 cannot
express. Each formula is then the rule's truth for the call under some valuation of the
propositions, so what holds for every valuation holds on every database: ``always-deny`` is
proved when "the call is allowed" is unsatisfiable, ``always-allow`` when "the call is denied"
is, and the unsat core names the rules that make it so. What the proofs cannot show is left to
the bounded search of :mod:`deep`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyc.compiler import ast, codes
from policyc.compiler.diagnostics import Diagnostic, Related
from policyc.compiler.stages import Stratified
from policyc.compiler.symbols import ESCALATE, is_verdict

from .calls import rule_span
from .deadline import Deadline
from .search import event_functors, from_events
from .unsat import Encoder, comparison_shape

EVENTS = ("events",)  # the form of the event vocabulary's mentions (`ToolCall`, `is_tool`, `tool_name`)
ACTION = "policyc_action"  # the action's name in the formulas
DEPTH = 3  # how many levels of relations a proof unfolds
NOT_TOOLS = ("ToolArg", "ToolResult")  # of the event vocabulary, named like tools but about calls
SOLVER_TIMEOUT = 1.0  # seconds z3 may take over one proof


@dataclass(frozen=True, eq=False)
class Mention:
    """A rule names ``tool`` in ``form``: ``("events",)``, ``("rel", R)``, ``("pred", p)`` or
    ``("fun", f)``; ``side`` is ``"Deny"`` or ``"Allow"`` (or both) as the rule is reached."""

    tool: str
    form: tuple[str, ...]
    rule: ast.Rule
    span: Any
    sides: frozenset[str]


@dataclass
class Question:
    """Whether every call of ``tool`` is denied (``always-deny``) or none is (``always-allow``)."""

    kind: str
    tool: str
    forms: tuple[tuple[str, ...], ...]
    mentions: list[Mention]
    strength: str = ""  # "proved" once a proof is found
    core: list[ast.Rule] = field(default_factory=list)  # the rules that make it so
    expired: bool = False  # the time allowed ran out before the proof was decided


class Verdicts:
    """The tools a policy names and what can be proved of their verdicts.

    ``rules`` are the rules that may fire (dead ones left out), ``user`` those of the files the
    user wrote; with ``escalations_deny`` false, `Escalate` rules are not counted as denying;
    with ``deliberate``, a tool one `Deny` rule denies whatever the call is asked about too."""

    def __init__(
        self,
        compilation: Stratified,
        rules: list[ast.Rule],
        user: list[ast.Rule],
        *,
        escalations_deny: bool = True,
        deliberate: bool = False,
    ) -> None:
        self.compilation = compilation
        self.deliberate = deliberate
        self.symbols = compilation.symbols
        self.events = event_functors(compilation)
        relations = self.symbols.relations
        self.tool_calls = "ToolCall" in relations and from_events(compilation, relations["ToolCall"].home)
        # what the keys say of a call (`.key ToolCall(a)`: one tool; `.key Event(e)`: one kind)
        self.keyed = {name for name in ("ToolCall", "Event") if (0,) in self.symbols.keys_of(name)}
        # what a tool call of the event vocabulary is besides: an action, an event of its kind
        self.calls_are = {
            name
            for name in ("Action", "Event")
            if name in relations and from_events(compilation, relations[name].home)
        }
        self.by_head: dict[str, list[ast.Rule]] = {}
        for rule in rules:
            if not rule.is_fact:
                self.by_head.setdefault(rule.head.name, []).append(rule)
        self.facts = {rule.head.name for rule in rules if rule.is_fact}
        escalate = relations.get(ESCALATE)
        escalating = escalations_deny and escalate is not None and is_verdict(ESCALATE, escalate.arity)
        # an escalated call is not allowed as it is: `Escalate` rules decide like `Deny` rules
        self.denies = self.by_head.get("Deny", []) + (self.by_head.get(ESCALATE, []) if escalating else [])
        self.allows = self.by_head.get("Allow", [])
        deny_side = self._reached("Deny") | (self._reached(ESCALATE) if escalating else set())
        self.sides = {"Deny": deny_side, "Allow": self._reached("Allow")}
        self.mentions: dict[str, list[Mention]] = {}
        self.unasked: list[str] = []  # the tools the time allowed ran out before (see questions)
        self._reach: dict[int, frozenset[str]] = {}
        self._opaque: dict[int, bool] = {}
        for rule in user:
            sides = frozenset(side for side, names in self.sides.items() if rule.head.name in names)
            if not sides:
                continue
            for tool, form, span in self._named(rule):
                self.mentions.setdefault(tool, []).append(Mention(tool, form, rule, span, sides))

    # ------------------------------------------------------------------ mentions

    def _reached(self, verdict: str) -> set[str]:
        """``verdict`` and the relations its rules read with their action first, transitively."""
        found = {verdict}
        stack = [verdict]
        while stack:
            for rule in self.by_head.get(stack.pop(), []):
                x = _action(rule)
                for lit in rule.body:
                    atom = lit.atom if isinstance(lit, ast.Negation) else lit
                    if (
                        isinstance(atom, ast.Atom)
                        and atom.name in self.by_head
                        and atom.name not in found
                        and atom.args
                        and isinstance(atom.args[0], ast.Var)
                        and atom.args[0].name == x
                    ):
                        found.add(atom.name)
                        stack.append(atom.name)
        return found

    def _named(self, rule: ast.Rule) -> list[tuple[str, tuple[str, ...], Any]]:
        """The tools ``rule``'s positive literals name for its action, with form and place."""
        x = _action(rule)
        if x is None:
            return []
        found = []
        for lit in rule.body:
            named = self._mention(lit, x)
            if named is not None:
                found.append(named)
        return found

    def one_tool(self, form: tuple[str, ...]) -> bool:
        """Whether a call names one tool in ``form``, so that naming another is false: through
        the event vocabulary when its key says so, a relation whose first attribute is a key, a
        function (one value)."""
        if form == EVENTS:
            return "ToolCall" in self.keyed
        if form[0] == "rel":
            return (0,) in self.symbols.keys_of(form[1])
        return form[0] == "fun"

    def _mention(self, lit: ast.Literal, x: str) -> tuple[str, tuple[str, ...], Any] | None:
        """``(tool, form, span)`` when ``lit`` (positive) names a tool for action ``x``."""
        functors = self.symbols.functors
        if isinstance(lit, ast.Atom) and len(lit.args) == 2:
            subject, tool = lit.args
            if not (isinstance(subject, ast.Var) and subject.name == x and isinstance(tool, ast.String)):
                return None
            if (lit.name == "ToolCall" and self.tool_calls) or (
                lit.name == "is_tool" and "is_tool" in self.events
            ):
                return tool.value, EVENTS, tool.span
            if "tool" not in lit.name.lower() or lit.name in NOT_TOOLS:
                return None
            sig = functors.get(lit.name)
            if sig is not None:
                return (tool.value, ("pred", lit.name), tool.span) if sig.is_predicate else None
            return tool.value, ("rel", lit.name), tool.span
        if isinstance(lit, ast.Comparison) and lit.op == "=":
            for call, tool in ((lit.left, lit.right), (lit.right, lit.left)):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(tool, ast.String)
                    and len(call.args) == 1
                    and isinstance(call.args[0], ast.Var)
                    and call.args[0].name == x
                    and "tool" in call.name.lower()
                    and call.name in functors
                    and functors[call.name].returns in ("symbol", "any")
                ):
                    form = (
                        EVENTS
                        if call.name == "tool_name" and "tool_name" in self.events
                        else ("fun", call.name)
                    )
                    return tool.value, form, tool.span
        return None

    # ------------------------------------------------------------------ questions

    def questions(self, deadline: Deadline | None = None) -> list[Question]:
        """What to ask of each tool, with the proofs found (see the module's doc). The tools
        ``deadline`` passes before are not asked about (:attr:`unasked`); a question whose
        proof it cuts short is ``expired``."""
        asked = []
        default_deny = self.symbols.default == "deny"
        encodings: dict[tuple[str, ...], _Encoding] = {}
        for tool in sorted(self.mentions):
            if deadline is not None and deadline.passed():
                self.unasked.append(tool)
                continue
            mentions = self.mentions[tool]
            forms = tuple(dict.fromkeys(m.form for m in mentions))
            for form in forms:
                encodings.setdefault(form, _Encoding(self, form))
            mine = [encodings[form] for form in forms]
            deny_side = any("Deny" in m.sides for m in mentions)
            allow_side = any("Allow" in m.sides for m in mentions)
            if allow_side or self.deliberate or not self._one_rule(tool, mine, self.denies):
                asked.append(self._prove(Question("always-deny", tool, forms, mentions), mine, deadline))
            if deny_side or (default_deny and allow_side and not self._one_rule(tool, mine, self.allows)):
                asked.append(self._prove(Question("always-allow", tool, forms, mentions), mine, deadline))
        return asked

    def reach(self, rule: ast.Rule) -> frozenset[str]:
        """The tools ``rule`` names for its action, itself or through the rules of the relations
        it reads about it (a rule that names none may apply to any tool)."""
        if id(rule) not in self._reach:
            self._reach[id(rule)] = frozenset()  # while visiting: recursion adds nothing new
            found = {tool for tool, _, _ in self._named(rule)}
            x = _action(rule)
            for lit in rule.body:
                atom = lit.atom if isinstance(lit, ast.Negation) else lit
                if isinstance(atom, ast.Atom) and atom.args and _argument(atom.args[0], x) == "action":
                    for other in self.by_head.get(atom.name, []):
                        found |= self.reach(other)
            self._reach[id(rule)] = frozenset(found)
        return self._reach[id(rule)]

    def _about(self, tool: str, rules: list[ast.Rule]) -> list[ast.Rule]:
        """Of ``rules``, those that may apply to a call of ``tool``: the rules that name it, and
        those that name no tool."""
        return [r for r in rules if tool in self.reach(r) or not self.reach(r)]

    def _one_rule(self, tool: str, encodings: list[_Encoding], rules: list[ast.Rule]) -> bool:
        """Whether one of ``rules`` says nothing of a call of the tool but that it is one (or
        through relations whose rules do)."""
        return any(all(e.unconditional(r, tool) for e in encodings) for r in self._about(tool, rules))

    def opaque(self, rule: ast.Rule) -> bool:
        """Whether a proof sees ``rule`` as a proposition of its own: it is about more than its
        action (another variable, an aggregate)."""
        if id(rule) not in self._opaque:
            x = _action(rule)
            own = {v.name for lit in rule.body for t in ast.literal_terms(lit) for v in ast.term_vars(t)}
            aggregates = any(
                isinstance(inner, ast.Aggregate)
                for lit in rule.body
                for t in ast.literal_terms(lit)
                for inner in ast.walk_term(t)
            )
            self._opaque[id(rule)] = x is None or len(rule.head.args) != 1 or bool(own - {x}) or aggregates
        return self._opaque[id(rule)]

    def splits(self, rule: ast.Rule, depth: int = 0) -> bool:
        """Whether ``rule`` (or a rule it reads about its action) has a condition that may split
        the calls in two: a negation or a comparison. Without one, rules can only cover every
        call of a tool together if one of them does alone."""
        if self.opaque(rule) or depth > DEPTH:
            return False
        x = _action(rule)
        for lit in rule.body:
            if isinstance(lit, ast.Negation) or (
                isinstance(lit, ast.Comparison) and x is not None and self._mention(lit, x) is None
            ):
                return True
            if isinstance(lit, ast.Atom) and lit.args and _argument(lit.args[0], x) == "action":
                if any(self.splits(r, depth + 1) for r in self.by_head.get(lit.name, [])):
                    return True
        return False

    def _prove(self, question: Question, encodings: list[_Encoding], deadline: Deadline | None) -> Question:
        z3 = _z3()

        def expired() -> bool:
            question.expired = deadline is not None and deadline.passed()
            return question.expired

        tool = question.tool
        core: dict[int, ast.Rule] = {}
        if question.kind == "always-deny":
            # what may deny a call of the tool: without a condition that splits the calls, and
            # without an `Allow` the `Deny` rules must cover, only a rule alone could
            about = self._about(tool, self.denies)
            if (
                self.symbols.default != "deny"
                and not any(self.splits(r) for r in about)
                and not self._one_rule(tool, encodings, about)
            ):
                return question
        elif any(self.opaque(r) for r in self.denies if tool in self.reach(r)):
            return question  # a `Deny` rule about the tool the proof cannot see never fire
        for encoding in encodings:
            if question.kind == "always-deny":
                # no call allowed; the `Deny` rules about other tools left out (fewer ways to
                # deny: what is proved without them holds with them)
                denies = [encoding.rule(r, tool) for r in self._about(tool, self.denies)]
            else:
                # no call denied: one `Deny` rule about the tool that can fire is enough to
                # give up; else all of them, as any could apply
                for r in self.denies:
                    if tool in self.reach(r):
                        if expired() or _satisfiable(encoding.rule(r, tool), deadline):
                            return question
                denies = [encoding.rule(r, tool) for r in self.denies]
            denied = z3.Or(*denies)
            if self.symbols.default == "deny":
                allows = self.allows if question.kind == "always-deny" else self._about(tool, self.allows)
                denied = z3.Or(denied, z3.Not(z3.Or(*(encoding.rule(r, tool) for r in allows))))
            if expired():
                return question
            solver = z3.Solver()
            solver.set("timeout", _timeout(deadline))
            solver.set("core.minimize", True)
            solver.add(z3.Not(denied) if question.kind == "always-deny" else denied)
            answer = solver.check(*(present for present, _ in encoding.present.values()))
            if answer != z3.unsat:
                if answer == z3.unknown:
                    expired()  # not decided, maybe for want of time
                return question
            chosen = {str(b) for b in solver.unsat_core()}
            core.update(
                (id(rule), rule) for present, rule in encoding.present.values() if str(present) in chosen
            )
        question.strength = "proved"
        question.core = _in_order(self.compilation, core.values())
        return question

    def may_decide(self, question: Question) -> list[ast.Rule]:
        """The verdict rules that may decide the calls of the question's tool (those that make
        its verdict the same are among them)."""
        if question.kind == "always-deny":
            return self._about(question.tool, self.denies)
        return self._about(question.tool, self.allows) if self.symbols.default == "deny" else []

    def side_rules(self) -> list[ast.Rule]:
        """The rules of `Allow`, `Deny` and the relations they read about their action."""
        names = self.sides["Deny"] | self.sides["Allow"]
        return [rule for name in sorted(names) for rule in self.by_head.get(name, [])]


class _Encoding:
    """Rule bodies as z3 formulas about one call of a tool named in ``form``. A rule that does
    not name the tool has the same formula for every such tool, and is encoded once."""

    def __init__(self, verdicts: Verdicts, form: tuple[str, ...]) -> None:
        self.verdicts = verdicts
        self.form = form
        self.z3 = _z3()
        # one encoder for every rule: a functor is one uninterpreted function in all of them
        self.encoder = Encoder(verdicts.compilation, ast.Rule(ast.Atom("_", ()), ()))
        self.encoder.types = {ACTION: "symbol"}
        self.propositions: dict[Any, Any] = {}
        self.memo: dict[tuple[int, int, str | None], Any] = {}
        # a rule's formula holds only while the rule is there: the unsat core names the rules
        self.present: dict[int, tuple[Any, ast.Rule]] = {}

    def proposition(self, key: Any) -> Any:
        if key not in self.propositions:
            self.propositions[key] = self.z3.Bool(f"policyc_p{len(self.propositions)}")
        return self.propositions[key]

    def rule(
        self, rule: ast.Rule, tool: str | None, depth: int = 0, visiting: frozenset[str] = frozenset()
    ) -> Any:
        """Whether ``rule`` fires for a call of ``tool`` (its head's first argument)."""
        if tool not in self.verdicts.reach(rule):
            tool = None  # the same formula for every tool it does not name
        key = (id(rule), depth, tool)
        if key in self.memo:
            return self.memo[key]
        if id(rule) not in self.present:
            self.present[id(rule)] = (self.z3.Bool(f"policyc_rule{len(self.present)}"), rule)
        present = self.present[id(rule)][0]
        x = _action(rule)
        if x is None or self.verdicts.opaque(rule):
            found = self.proposition(("rule", id(rule)))
        else:
            inside = visiting | {rule.head.name}
            found = self.z3.And(*(self.literal(lit, x, tool, depth, inside) for lit in rule.body))
        found = self.z3.And(present, found)
        self.memo[key] = found
        return found

    def unconditional(self, rule: ast.Rule, tool: str, depth: int = 0) -> bool:
        """Whether each literal of ``rule`` holds of every call of ``tool``: its mention, what
        every call is, a relation one of whose rules is unconditional in turn."""
        verdicts = self.verdicts
        x = _action(rule)
        if x is None or depth > DEPTH or verdicts.opaque(rule):
            return False
        for lit in rule.body:
            if not isinstance(lit, ast.Atom | ast.Comparison):
                return False
            named = verdicts._mention(lit, x)
            if named is not None:
                if named[0] != tool or named[1] != self.form:
                    return False
            elif not isinstance(lit, ast.Atom) or [_argument(a, x) for a in lit.args[:1]] != ["action"]:
                return False
            elif self.form == EVENTS and lit.name in verdicts.calls_are:
                kinds = [a.value for a in lit.args[1:] if isinstance(a, ast.String)]
                if len(lit.args) != (1 if lit.name == "Action" else 2) or kinds not in ([], ["tool_call"]):
                    return False
                if lit.name == "Event" and not kinds:
                    return False
            elif len(lit.args) != 1 or not any(
                self.unconditional(r, tool, depth + 1) for r in verdicts.by_head.get(lit.name, [])
            ):
                return False
        return True

    def literal(
        self, lit: ast.Literal, x: str, tool: str | None, depth: int, visiting: frozenset[str]
    ) -> Any:
        z3 = self.z3
        if isinstance(lit, ast.Negation):
            return z3.Not(self.literal(lit.atom, x, tool, depth, visiting))
        named = self.verdicts._mention(lit, x)
        if named is not None:
            other, form, _ = named
            if form == self.form and other == tool:
                return z3.BoolVal(True)
            if form == self.form and self.verdicts.one_tool(form):
                return z3.BoolVal(False)  # a call has one tool (its key); a function one value
            return self.proposition(("mention", form, other))
        if isinstance(lit, ast.Atom):
            if self.form == EVENTS and lit.name in self.verdicts.calls_are:
                kind = _argument(lit.args[1], x) if len(lit.args) == 2 else None
                if lit.name == "Action" and len(lit.args) == 1 and _argument(lit.args[0], x) == "action":
                    return z3.BoolVal(True)  # a call is an action
                if lit.name == "Event" and _argument(lit.args[0], x) == "action" and kind != "_":
                    if isinstance(kind, tuple) and kind[0] == "String" and "Event" in self.verdicts.keyed:
                        return z3.BoolVal(kind[1] == "tool_call")  # of one kind (its key)
            return self.atom(lit, x, tool, depth, visiting)
        renamed = ast.Comparison(lit.op, _rename(lit.left, x), _rename(lit.right, x))
        before = len(self.encoder.formulas)
        self.encoder.literal(renamed)
        if len(self.encoder.formulas) > before:
            return self.encoder.formulas.pop()
        return self.proposition(("comparison", comparison_shape(renamed)))

    def atom(self, atom: ast.Atom, x: str, tool: str | None, depth: int, visiting: frozenset[str]) -> Any:
        z3 = self.z3
        verdicts = self.verdicts
        key = (atom.name, tuple(_argument(a, x) for a in atom.args))
        rules = verdicts.by_head.get(atom.name)
        if (
            atom.name not in verdicts.symbols.functors
            and atom.name not in verdicts.symbols.inputs
            and atom.name not in verdicts.facts
            and atom.name not in visiting
            and depth < DEPTH
            and key[1] == ("action",)
        ):
            if not rules:
                # every rule of a relation that has rules is dead (a relation without rules is
                # `empty-relation`'s business): it never holds
                return z3.BoolVal(False) if atom.name in verdicts.symbols.defined else self.proposition(key)
            return z3.Or(*(self.rule(r, tool, depth + 1, visiting) for r in rules))
        return self.proposition(key)


def _satisfiable(formula: Any, deadline: Deadline | None) -> bool:
    z3 = _z3()
    solver = z3.Solver()
    solver.set("timeout", _timeout(deadline))
    solver.add(formula)
    return solver.check() == z3.sat


def _timeout(deadline: Deadline | None) -> int:
    """z3's timeout for one proof: :data:`SOLVER_TIMEOUT`, or less when the deadline is nearer."""
    return deadline.solver_timeout(SOLVER_TIMEOUT) if deadline is not None else int(SOLVER_TIMEOUT * 1000)


def _action(rule: ast.Rule) -> str | None:
    """The variable a rule is about: its head's first argument."""
    head = rule.head
    return head.args[0].name if head.args and isinstance(head.args[0], ast.Var) else None


def _argument(term: ast.Term, x: str | None) -> Any:
    if isinstance(term, ast.Var):
        return "action" if term.name == x else ("var", term.name)
    if isinstance(term, ast.Wildcard):
        return "_"  # `P(a, _)` and `not P(a, _)`: one proposition, "some value", and its negation
    if isinstance(term, ast.String | ast.Integer | ast.Float):
        return (type(term).__name__, term.value)
    return ("term", id(term))


def _rename(term: ast.Term, x: str) -> ast.Term:
    if isinstance(term, ast.Var):
        return ast.Var(ACTION) if term.name == x else term
    return ast.map_children(term, lambda t: _rename(t, x))


def _z3() -> Any:
    import z3

    return z3


def _in_order(compilation: Stratified, rules: Any) -> list[ast.Rule]:
    order = {id(rule): n for n, (_, rule) in enumerate(compilation.program.rules())}
    return sorted(rules, key=lambda r: order.get(id(r), 0))


# ---------------------------------------------------------------------- messages


def finding(
    question: Question, default: str, bound: int | None, uninterpreted: tuple[str, ...]
) -> Diagnostic:
    """The diagnostic of a question answered: every call denied, or none."""
    tool, core = question.tool, question.core
    if question.kind == "always-deny":
        allowing = [m for m in question.mentions if "Allow" in m.sides]
        site = (allowing or [m for m in question.mentions if m.rule in core] or question.mentions)[0]
        here = site.span.file
        if core:
            reason = f"{_which(core, here)} {'together deny' if len(core) > 1 else 'denies'} each one"
            if allowing:
                reason += f" that {_which([allowing[0].rule], here)} allows"
            elif default == "deny":
                reason += " that an `Allow` rule allows"
        else:
            reason = "no `Allow` rule allows one, and the policy denies by default"
        message = f"every call of `{tool}` is denied: {reason}"
        if bound is not None:
            message += f" (on no database with up to {bound} fresh values per type is one allowed)"
        if allowing:
            help = "deny wins over allow: narrow the `Deny` rules for it, or drop the `Allow` rule"
        else:
            help = f"to deny every call of `{tool}`, say so in one rule; else correct the conditions of these rules"
        related = [Related(rule_span(r), _role(r, tool)) for r in core if r is not site.rule]
        code = codes.ALWAYS_DENY
    else:
        naming = list(dict.fromkeys(m.rule for m in question.mentions if "Deny" in m.sides))
        site = (
            [m for m in question.mentions if "Deny" in m.sides]
            or [m for m in question.mentions if m.rule in core]
            or question.mentions
        )[0]
        here = site.span.file
        if core:
            together = "together allow" if len(core) > 1 else "allows"
            reason = f"{_which(core, here)} {together} each one, and no `Deny` rule denies one"
        else:
            reason = "no `Deny` rule denies one"
        message = f"no call of `{tool}` is ever denied: {reason}"
        if bound is not None:
            message += f" (on no database with up to {bound} fresh values per type is one denied)"
        if naming:
            names = "name it" if len(naming) > 1 else "names it"
            message += f", although {_which(naming, here, short=True)} {names}"
            help = "the conditions of the `Deny` rules naming it can never hold together"
        else:
            help = f"to allow every call of `{tool}`, say so in one rule; else correct the conditions of these rules"
        related = [Related(rule_span(r), _role(r, tool)) for r in core if r is not site.rule]
        related += [
            Related(rule_span(r), f"names `{tool}`, and never denies a call of it")
            for r in naming
            if r is not site.rule
        ]
        code = codes.ALWAYS_ALLOW
    return code(
        site.span,
        message,
        related=tuple(related),
        help=help,
        strength="bounded" if bound is not None else "proved",
        bound=bound,
        uninterpreted=uninterpreted,
        tool=tool,
    )


def _role(rule: ast.Rule, tool: str) -> str:
    if rule.head.name == "Deny":
        return f"denies calls of `{tool}`"
    if rule.head.name == "Allow":
        return f"allows calls of `{tool}`"
    if rule.head.name == ESCALATE:
        return f"escalates calls of `{tool}`"
    return f"derives `{rule.head.name}` for calls of `{tool}`"


def _which(rules: list[ast.Rule], here: str, short: bool = False) -> str:
    """``the `Deny` rules at lines 7 and 8``, ``the rules at lines 3, 5 and 9`` (rules of
    several relations), ``the one at line 3`` (``short``)."""
    places = [
        f"{r.head.span.line}" if r.span.file == here else f"{r.head.span.line} of {Path(r.span.file).name}"
        for r in rules
    ]
    lines = places[0] if len(places) == 1 else ", ".join(places[:-1]) + " and " + places[-1]
    at = f"at {'line' if len(places) == 1 else 'lines'} {lines}"
    if short:
        return f"the {'one' if len(rules) == 1 else 'ones'} {at}"
    heads = {r.head.name for r in rules}
    kind = f"`{heads.pop()}` " if len(heads) == 1 else ""
    return f"the {kind}{'rule' if len(rules) == 1 else 'rules'} {at}"
