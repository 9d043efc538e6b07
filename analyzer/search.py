"""Bounded model finding: the smallest database on which something holds, with clingo.

A search chooses the facts of the policy's input relations over finite domains
(:mod:`~policyc.analyzer.domains`), derives everything the policy derives from them (the
translation of :mod:`~policyc.analyzer.asp`), and asks for a model where the goal holds, with as
few facts as possible. Functors are handled as follows:

* the builtins (``contains``, ``lower``, ...) are called: their meaning is known;
* the event functors (``is_tool``, ``tool_name``, ``tool_arg``, ``text_of``) answer from the
  chosen facts of the event vocabulary (``ToolCall``, ``ToolArg``, ``Text``), as a monitor
  session answers them from its events. A tool argument is a JSON string or a JSON number:
  ``ToolArg`` holds its text, and ``tool_arg`` gives the string, or the number (the search
  chooses which, for arguments whose text is a number the policy's uses of ``tool_arg`` ask
  for: ``tool_arg(a, "n") > 3`` tries 2, 3 and 4, as numbers and as strings);
* every other functor is **uninterpreted**: the search also chooses its table (a value, or
  none, for each argument tuple of the domain; a predicate's truth). A finding that relies on
  this says so, and a witness lists the table entries it used.

A search is bounded: "no model" means none over these domains, for the bound ``K``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from policyc.compiler import ast
from policyc.compiler.stages import Stratified
from policyc.stdlib.events import EVENT_ID

from . import asp
from .deadline import within
from .domains import Domains, Node, Vocabulary, compute

# what a model shows: a key -> the clingo predicate and the names of its arguments
Shown = dict[str, tuple[str, tuple[str, ...]]]

# the positions an event functor's arguments and result share with its relation
EVENT_LINKS: dict[str, list[tuple[Node, Node]]] = {
    "is_tool": [
        (("arg", "is_tool", 0), ("rel", "ToolCall", 0)),
        (("arg", "is_tool", 1), ("rel", "ToolCall", 1)),
    ],
    "tool_name": [
        (("arg", "tool_name", 0), ("rel", "ToolCall", 0)),
        (("ret", "tool_name"), ("rel", "ToolCall", 1)),
    ],
    "tool_arg": [
        (("arg", "tool_arg", 0), ("rel", "ToolArg", 0)),
        (("arg", "tool_arg", 1), ("rel", "ToolArg", 1)),
        (("rel", "ToolArg", 2), ("rel", "ToolArg", 2)),  # its value: see ARGUMENT_FEEDS
    ],
    "text_of": [(("arg", "text_of", 0), ("rel", "Text", 0)), (("ret", "text_of"), ("rel", "Text", 1))],
}


def _vocabulary_positions(compilation: Stratified, positions: list[tuple[str, int]]) -> list[Node]:
    relations = compilation.symbols.relations
    return [
        ("rel", name, i)
        for name, i in positions
        if name in relations and from_events(compilation, relations[name].home)
    ]


def event_id_positions(compilation: Stratified) -> list[Node]:
    """The positions that hold event ids: the attributes declared of type ``EventId`` (the event
    vocabulary's, and any other relation's that uses the type)."""
    return [
        ("rel", name, i)
        for name, relation in sorted(compilation.symbols.relations.items())
        for i, declared in enumerate(relation.types)
        if declared == EVENT_ID
    ]


def event_id_links(compilation: Stratified) -> list[tuple[Node, Node]]:
    """Links between the positions that hold event ids: one type of values, so that a search
    has as many distinct events as a rule needs (an action, the result it depends on, the call
    that result answers)."""
    present = event_id_positions(compilation)
    return [(present[0], other) for other in present[1:]]


def event_feeds(compilation: Stratified) -> list[tuple[Node, Node]]:
    """A result answers a call of its own tool: the tools results name are tools calls name
    (their constants only; linking the positions would give results every tool). And a tool
    argument's strings are the same in ``ToolArg`` and from ``tool_arg``."""
    present = _vocabulary_positions(compilation, [("ToolResult", 2), ("ToolCall", 1)])
    feeds = [(present[0], present[1])] if len(present) == 2 else []
    return feeds + ARGUMENT_FEEDS


# `tool_arg(a, k)` is not linked with `ToolArg(a, k, text)`: its value may be a number whose
# text `ToolArg` holds. Their classes share their strings; the numbers are offered per key (each
# use of `tool_arg` with a constant key has a class of its own), see `Problem._arguments`.
ARGUMENT_FEEDS = [(("rel", "ToolArg", 2), ("ret", "tool_arg")), (("ret", "tool_arg"), ("rel", "ToolArg", 2))]


EVENT_FUNCTORS = {
    "is_tool": ("ToolCall",),
    "tool_name": ("ToolCall",),
    "tool_arg": ("ToolArg",),
    "text_of": ("Text",),
}


@dataclass
class Model:
    """What a search found: input facts, functor tables, and the goal's variable bindings;
    ``numbers`` are the tool arguments that are JSON numbers, ``(call, key, number)`` rows
    (their ``ToolArg`` fact holds the number's decimal text)."""

    facts: dict[str, list[tuple]]
    tables: dict[str, list[tuple]]  # functor -> (args..., value) rows; predicates: (args...) rows
    bindings: dict[str, Any] = field(default_factory=dict)
    cost: int = 0
    numbers: list[tuple] = field(default_factory=list)

    def arguments(self) -> dict[tuple[Any, Any], Any]:
        """Each tool argument's value as a call carries it: ``(call, key) -> value``, a
        number for the arguments in ``numbers``, else the text of its ``ToolArg`` fact."""
        found: dict[tuple[Any, Any], Any] = {(a, k): v for a, k, v in self.facts.get("ToolArg", [])}
        found.update({(a, k): n for a, k, n in self.numbers})
        return found


@dataclass
class Problem:
    """A search over one compilation (which may hold extra rules, say a query's)."""

    compilation: Stratified
    bound: int
    extra: tuple[ast.Rule, ...] = ()
    prefix: str = "p_"
    domains: Domains | None = None
    tabled: frozenset[str] = frozenset()  # functors given a chosen table
    read_inputs: set[str] | None = None  # what a model's facts are read from (default: the inputs)
    read_tables: frozenset[str] | None = None  # and its tables (default: the tabled functors)

    def __post_init__(self) -> None:
        self.event_functors = event_functors(self.compilation)
        if self.domains is None:
            links = [link for name in self.event_functors for link in EVENT_LINKS[name]]
            links += event_id_links(self.compilation)
            self.domains = compute(
                Vocabulary.of(self.compilation), self.bound, self.extra, links, event_feeds(self.compilation)
            )
        self.tabled = uninterpreted_functors(self.compilation)

    # ------------------------------------------------------------------ the program

    def inputs(self) -> list[str]:
        """The input relations a rule reads (the others cannot matter)."""
        symbols = self.compilation.symbols
        read: set[str] = set()
        for _, rule in self.compilation.program.rules():
            for literal in rule.body:
                for atom in _atoms(literal):
                    read.add(atom.name)
        for name in self.event_functors:
            read.update(EVENT_FUNCTORS[name])
        return sorted(n for n in symbols.inputs if n in read and symbols.relations[n].arity is not None)

    def arity(self, name: str) -> int:
        return self.compilation.symbols.relations[name].arity or 0

    def translator(self, prefix: str | None = None) -> asp.Translator:
        return asp.Translator(self.compilation, self.tabled | self.event_functors, prefix or self.prefix)

    def rules(self, translator: asp.Translator, skip: ast.Rule | None = None) -> list[str]:
        """The policy's rules (but ``skip``) and the extra rules, through ``translator``."""
        lines: list[str] = []
        for module in self.compilation.program.modules:
            for statement in module.statements:
                if (
                    isinstance(statement, ast.Rule)
                    and statement is not skip
                    and not translator.inline(statement.head.name)
                ):
                    lines.extend(translator.rule(statement))
        for rule in self.extra:
            lines.extend(translator.rule(rule))
        return lines + translator.extra

    def program(self, translator: asp.Translator | None = None, also: tuple[str, ...] = ()) -> str:
        """The choice of a database, the policy's rules and the functor tables; ``also`` names
        more prefixes the chosen facts are given under (for a second translation)."""
        d = self.domains
        assert d is not None
        lines = self.rules(translator or self.translator())
        used: set[str] = set()
        for name in self.inputs():
            n = self.arity(name)
            xs = [f"X{i}" for i in range(n)]
            guards = [f"{d.predicate(('rel', name, i))}(X{i})" for i in range(n)]
            used.update(g.split("(")[0] for g in guards)
            chosen = asp.predicate_name(name, "in_")
            head = f"{chosen}({','.join(xs)})" if n else chosen
            lines.append(f"{{ {head} : {', '.join(guards)} }}." if guards else f"{{ {head} }}.")
            for prefix in (self.prefix, *also):
                given = asp.predicate_name(name, prefix)
                lines.append(f"{given}({','.join(xs)}) :- {head}." if n else f"{given} :- {head}.")
            lines.append(f"#minimize {{ 1,{asp.const(name)},{','.join(xs) or '0'} : {head} }}.")
        for name in sorted(self.tabled):
            lines.extend(self.table_rules(name, used))
        lines.extend(self.event_functor_rules())
        lines.extend(self.vocabulary_rules())
        for cls, predicate in sorted(d.names.items(), key=lambda item: item[1]):
            lines.extend(f"{predicate}({asp.const(value)})." for value in d.values(cls))
        return "\n".join(lines) + "\n"

    def vocabulary_rules(self) -> list[str]:
        """What every recorded session satisfies, for the input relations the search chooses:
        the keys of their facts (``.key``: a call has one tool, an event one kind, text and
        position, an argument one value, a result one call; and the policy's own keys), and of
        the event relations, that a tool call is an action, a result answers a call of its
        tool, a message is not a call or a result, and nothing depends on itself."""
        relations = self.compilation.symbols.relations
        inputs = self.inputs()
        lines = [line for n in inputs for line in key_constraints(n, self.arity(n), relations[n].keys)]
        chosen = {n for n in inputs if from_events(self.compilation, relations[n].home)}
        if {"ToolCall", "Action"} <= chosen:
            lines.append(":- in_ToolCall(A,_), not in_Action(A).")
            lines.append(":- in_Action(A), not in_ToolCall(A,_).")
        if {"ToolCall", "Event"} <= chosen:
            lines.append(':- in_ToolCall(A,_), not in_Event(A,"tool_call").')
        if "DependsOn" in chosen:
            lines.append(":- in_DependsOn(E,E).")
        if "ToolResult" in chosen:
            lines.append(":- in_ToolResult(R,R,_).")
            if "ToolCall" in chosen:
                lines.append(":- in_ToolResult(_,C,T), not in_ToolCall(C,T).")
                lines.append(":- in_ToolResult(R,_,_), in_ToolCall(R,_).")
        if "Message" in chosen:
            if "ToolCall" in chosen:
                lines.append(":- in_Message(E,_), in_ToolCall(E,_).")
            if "ToolResult" in chosen:
                lines.append(":- in_Message(E,_), in_ToolResult(E,_,_).")
        return lines

    def table_rules(self, name: str, used: set[str]) -> list[str]:
        """The rules choosing the table of the uninterpreted functor ``name`` (its argument
        domains are added to ``used``)."""
        d = self.domains
        assert d is not None
        sig = self.compilation.symbols.functors[name]
        n = len(sig.params)
        xs = [f"X{i}" for i in range(n)]
        guards = [f"{d.predicate(('arg', name, i))}(X{i})" for i in range(n)]
        used.update(g.split("(")[0] for g in guards)
        body = f" :- {', '.join(guards)}" if guards else ""
        if sig.is_predicate:
            head = f"{asp.predicate_table(name)}({','.join(xs)})" if n else asp.predicate_table(name)
            return [
                f"{{ {head} }}{body}.",
                f"#minimize {{ 1,{asp.const(name)},{','.join(xs) or '0'} : {head} }}.",
            ]
        entry = f"{asp.table(name)}({','.join([*xs, 'Y'])})"
        minimize = f"#minimize {{ 1,{asp.const(name)},{','.join([*xs, 'Y'])} : {entry} }}."
        keyed = [node for node in d.results(name) if len(node) == 3]
        if not keyed:
            result = d.predicate(("ret", name))
            used.add(result)
            return [f"{{ {entry} : {result}(Y) }} 1{body}.", minimize]
        # a result position per constant last argument: `f(k)`'s value is one of its own
        # class's values (or of the other calls', which may ask for `k` too)
        values = f"fr_{name}"
        general = d.values(("ret", name)) if ("ret", name) in d.classes else []
        lines = []
        for node in keyed:
            key = asp.const(node[2])
            own = d.values(node)
            lines.append(f"fk_{name}({key}).")
            lines.extend(
                f"{values}({key},{asp.const(v)})." for v in [*own, *(g for g in general if g not in own)]
            )
        if general:
            result = d.predicate(("ret", name))
            used.add(result)
            keys = d.predicate(("arg", name, n - 1))
            lines.append(f"{values}(K,Y) :- {keys}(K), not fk_{name}(K), {result}(Y).")
        return [*lines, f"{{ {entry} : {values}(X{n - 1},Y) }} 1{body}.", minimize]

    def event_functor_rules(self) -> list[str]:
        """The rules giving the event vocabulary's functors (``is_tool``, ``tool_name``,
        ``tool_arg``, ``text_of``) their values from the chosen facts."""
        p = self.prefix
        lines = []
        if "is_tool" in self.event_functors:
            lines.append(f"{asp.predicate_table('is_tool')}(A,N) :- {p}ToolCall(A,N).")
        if "tool_name" in self.event_functors:
            lines.append(f"{asp.table('tool_name')}(A,N) :- {p}ToolCall(A,N).")
        if "tool_arg" in self.event_functors:
            lines.extend(self._arguments())
        if "text_of" in self.event_functors:
            d = self.domains
            assert d is not None
            dom = d.predicate(("arg", "text_of", 0))
            lines.append(f"{asp.table('text_of')}(E,T) :- {p}Text(E,T).")
            lines.append(f'{asp.table("text_of")}(E,"") :- {dom}(E), not {p}Text(E,_).')
        return lines

    def _arguments(self) -> list[str]:
        """``tool_arg`` from the ``ToolArg`` facts: the text, or for an argument the search
        makes a JSON number (``policyc_number(A,K)``), the number whose decimal text it is.

        The numbers are offered per key: those of the class of the key's uses of ``tool_arg``
        (``policyc_numeral(K,T,N)``: argument ``K`` may be the number ``N``, of text ``T``);
        their texts are values of ``ToolArg`` for that key only, so that the other relations
        of its class do not grow."""
        d = self.domains
        assert d is not None
        p, fv = self.prefix, asp.table("tool_arg")
        numerals: list[str] = []
        for node in d.results("tool_arg"):
            # a use with a constant key offers its numbers to that key, one without to every key
            key = asp.const(node[2]) if len(node) == 3 else "K"
            body = "" if len(node) == 3 else f" :- {d.predicate(('arg', 'tool_arg', 1))}(K)"
            numerals.extend(f'policyc_numeral({key},"{n}",{n}){body}.' for n in d.numbers(node))
        lines = [f"{fv}(A,K,V) :- {p}ToolArg(A,K,V), not policyc_number(A,K)."]
        if numerals:
            calls = d.predicate(("rel", "ToolArg", 0))
            lines += [
                *numerals,
                f"{{ in_ToolArg(A,K,T) : policyc_numeral(K,T,_) }} :- {calls}(A).",
                "{ policyc_number(A,K) } :- in_ToolArg(A,K,T), policyc_numeral(K,T,_).",
                "#minimize { 1,policyc_number,A,K : policyc_number(A,K) }.",
                f"{fv}(A,K,N) :- {p}ToolArg(A,K,T), policyc_number(A,K), policyc_numeral(K,T,N).",
            ]
        return lines

    # --------------------------------------------------------------------- solving

    def solve(
        self,
        goal: Iterable[str],
        show: Shown | None = None,
        timeout: float = 30.0,
        minimal: bool = True,
    ) -> Model | None:
        """The smallest model (any model, unless ``minimal``) of the program and the ``goal``
        rules and constraints (clingo text); ``show`` maps a name to a clingo predicate and the
        variable names of its arguments, whose first atom gives the model's bindings (name
        ``goal``)."""
        return self.solve_text(self.program(), goal, timeout, show, minimal)

    def solve_text(
        self,
        program: str,
        goal: Iterable[str],
        timeout: float = 30.0,
        show: Shown | None = None,
        minimal: bool = True,
    ) -> Model | None:
        """:meth:`solve` over a program text built from :meth:`program` (and more rules);
        :class:`TimeoutError` if grounding and solving take more than ``timeout`` seconds
        without a model (with one, the best found so far)."""
        return within(timeout, lambda: self._solve(program, goal, timeout, show, minimal))

    def _solve(
        self,
        program: str,
        goal: Iterable[str],
        timeout: float,
        show: Shown | None,
        minimal: bool,
    ) -> Model | None:
        import clingo

        deadline = time.monotonic() + timeout
        control = clingo.Control(
            ["--warn=none", "--opt-mode=" + ("opt" if minimal else "ignore"), "--opt-strategy=usc"]
        )
        control.add("base", [], program + "\n".join(goal) + "\n")
        control.ground([("base", [])], context=asp.ground_context(self.compilation))
        best: list[Any] = []
        cost: list[int] = []

        def on_model(model: Any) -> None:
            best[:] = list(model.symbols(atoms=True))
            cost[:] = list(model.cost)

        with control.solve(on_model=on_model, async_=True) as handle:
            while not handle.wait(0.1):
                if time.monotonic() > deadline:
                    handle.cancel()
                    break
            result = handle.get()
        if not best:
            if result.unsatisfiable or result.satisfiable is False:
                return None
            if not result.exhausted and time.monotonic() > deadline:
                raise TimeoutError(f"the search did not finish in {timeout:g} s")
            return None
        return self.read_model(best, sum(cost), show or {})

    def read_model(self, atoms: list[Any], cost: int, show: Shown) -> Model:
        """The model a solver's answer describes (its shown ``atoms``, at ``cost``). ``show``
        maps a key to a predicate and its variables, which the first such atom binds; the
        bindings of ``goal`` are the model's."""
        facts: dict[str, list[tuple]] = {}
        tables: dict[str, list[tuple]] = {}
        bindings: dict[str, Any] = {}
        numbered: set[tuple] = set()
        inputs = self.read_inputs if self.read_inputs is not None else set(self.inputs())
        tabled = self.read_tables if self.read_tables is not None else self.tabled
        for atom in atoms:
            name = atom.name
            values = tuple(asp.value(a) for a in atom.arguments)
            if name.startswith("in_") and asp.relation_of(name[3:]) in inputs:
                facts.setdefault(asp.relation_of(name[3:]), []).append(values)
            elif name.startswith("fv_") and name[3:] in tabled:
                tables.setdefault(name[3:], []).append(values)
            elif name.startswith("fp_") and name[3:] in tabled:
                tables.setdefault(name[3:], []).append(values)
            elif name == "policyc_number":
                numbered.add(values)
            for key, (shown, variables) in show.items():
                if name == shown and len(values) == len(variables):
                    bindings.setdefault(key, dict(zip(variables, values, strict=True)))
        numbers = [(a, k, int(t)) for a, k, t in facts.get("ToolArg", []) if (a, k) in numbered]
        for rows in (*facts.values(), *tables.values(), numbers):
            rows.sort(key=lambda row: tuple((isinstance(v, str), v) for v in row))
        return Model(facts, tables, bindings.get("goal", {}), cost, numbers)


def key_constraints(name: str, arity: int, keys: tuple[tuple[int, ...], ...]) -> list[str]:
    """The constraints saying the chosen facts of ``name`` keep its keys: two facts that agree
    on a key's positions agree on the others.

    >>> key_constraints("ToolArg", 3, ((0, 1),))
    [':- in_ToolArg(K0,K1,X2), in_ToolArg(K0,K1,Y2), (X2,) != (Y2,).']
    """
    chosen = asp.predicate_name(name, "in_")
    lines = []
    for key in keys:
        first = [f"K{i}" if i in key else f"X{i}" for i in range(arity)]
        second = [f"K{i}" if i in key else f"Y{i}" for i in range(arity)]
        rest = [i for i in range(arity) if i not in key]
        lines.append(
            f":- {chosen}({','.join(first)}), {chosen}({','.join(second)}), "
            f"({','.join(f'X{i}' for i in rest)},) != ({','.join(f'Y{i}' for i in rest)},)."
        )
    return lines


def event_functors(compilation: Stratified) -> frozenset[str]:
    """The event vocabulary's functors a policy uses, answered from the event facts."""
    symbols = compilation.symbols
    return frozenset(
        name
        for name, needs in EVENT_FUNCTORS.items()
        if name in symbols.functors
        and from_events(compilation, symbols.functors[name].span.file)
        and all(n in symbols.relations for n in needs)
    )


def uninterpreted_functors(compilation: Stratified) -> frozenset[str]:
    """The functors the analyzer models as uninterpreted functions of their declared types:
    all but the builtins (computed) and the event functors (answered from the event facts)."""
    from policyc.stdlib.builtins import BUILTINS

    events = event_functors(compilation)
    return frozenset(
        name for name in compilation.symbols.functors if name not in BUILTINS and name not in events
    )


def from_events(compilation: Stratified, path: str) -> bool:
    """Whether a declaration comes from the shipped event vocabulary (``.import events``)."""
    return compilation.program.is_library(path) and path.endswith("/events.dl")


def _atoms(literal: ast.Literal) -> Iterable[ast.Atom]:
    if isinstance(literal, ast.Negation):
        yield literal.atom
    elif isinstance(literal, ast.Atom):
        yield literal
    for t in ast.literal_terms(literal):
        for inner in ast.walk_term(t):
            if isinstance(inner, ast.Aggregate):
                for lit in inner.body:
                    yield from _atoms(lit)
