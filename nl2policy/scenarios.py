"""Decision points synthesized by the analyzer, for every path of every translated rule.

Recorded executions only show the branches they happened to take (FORGE H.3: three recorded
cancellations, all rightly denied, could not tell a rule that denies every cancellation from a
correct one). So each translated decision rule is also asked, of the analyzer, for a smallest
execution on each of its paths:

* **fires** — the rule fires and no other ``Deny`` rule does, so it alone decides (when it never
  fires alone, a database where it fires at all); then the same once per alternative rule of
  each relation it uses positively, and once per way each other rule that applies to the same
  action is kept from firing (a negated relation of it holding by one particular rule: the
  business-class path of ``CancelEligible``, say).
* **blocked** — the rule is kept from firing by one of its conditions failing, and nothing else
  decides instead (a blocked ``Deny`` leaves the action allowed): for a negated relation, once
  per rule that derives it; for a comparison, its opposite; for a positive atom, its absence.
  The literals that say what kind of action it is (``ToolCall(a, "t")``, ``is_tool(a, "t")``,
  ``Action(a)``) are not negated: that would only be another kind of action.

For an ``Allow`` rule of a policy that denies by default, the roles swap. Each path is a rule
added to the policy (``PolicycPath1x3(a) :- ...``). Rules that cannot apply to the same action
(they name different tools) are searched in separate programs, each keeping only the rules its
paths can reach, side by side; the paths of one program share one grounding
(:class:`policyc.analyzer.witness.WitnessSearch`), and each witness is replayed through the
evaluator. A witness becomes a session (:mod:`.sessions`), decided by a real monitor: that
verdict, not the search's, is the policy's verdict at the decision point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policyc.analyzer.sessions import to_session
from policyc.compiler import ast
from policyc.compiler.loader import load_source
from policyc.compiler.pipeline import compile_program
from policyc.compiler.stages import Stratified

from . import problems as P
from .draft import Rule
from .vocabulary import one_line

STEP = "synthesize"
KIND_LITERALS = ("ToolCall", "Action", "Candidate", "is_tool")


@dataclass(frozen=True)
class Path:
    rule: str  # the translated rule's id
    kind: str  # "fires" or "blocked"
    description: str
    expected: str  # the verdict the path leads to: "deny" or "allow"
    goal: tuple[str, ...]  # the path relations to search, in order

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "kind": self.kind,
            "description": self.description,
            "expected": self.expected,
        }


@dataclass(frozen=True)
class Scenario:
    path: Path
    action: Any
    record: dict[str, Any]  # a `policyc replay` session record, the decided call last
    functors: dict[str, list[list[Any]]]  # values the search chose for uninterpreted functors


@dataclass
class Synthesis:
    scenarios: list[Scenario] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    outcomes: dict[int, str] = field(default_factory=dict)  # path index -> what became of it
    problems: list[P.Problem] = field(default_factory=list)


class _Group:
    """Translated decision rules whose paths are searched together, and the decision rules
    that can apply to the same actions (the others are left out of the search's program)."""

    def __init__(self, targets: list[ast.Rule], scope: list[ast.Rule]) -> None:
        self.targets = targets
        self.scope = scope


def _groups(compilation: Stratified, rules: list[Rule]) -> list[_Group]:
    """One group per set of decision rules that can apply to the same actions: a rule that
    names the tools it is about (``ToolCall(a, "t")``, ``is_tool(a, "t")``, or ``ToolCall(a, t)``
    with ``t`` from a relation of facts) cannot apply to a call of another tool."""
    translated = {rule.id for rule in rules}
    program = compilation.program
    decisions = [r for r in (*program.rules_of("Deny"), *program.rules_of("Allow")) if len(r.head.args) == 1]
    tools = {id(rule): _tools(compilation, rule) for rule in decisions}

    def compatible(a: ast.Rule, b: ast.Rule) -> bool:
        x, y = tools[id(a)], tools[id(b)]
        return x is None or y is None or bool(x & y)

    groups: dict[tuple[int, ...], _Group] = {}
    for rule in decisions:
        if _rule_id(rule, translated) is None or _head_var(rule) is None:
            continue
        scope = [other for other in decisions if compatible(rule, other)]
        key = tuple(sorted(id(other) for other in scope))
        groups.setdefault(key, _Group([], scope)).targets.append(rule)
    return list(groups.values())


def _tools(compilation: Stratified, rule: ast.Rule) -> frozenset[str] | None:
    """The tools a decision rule's action can call (``None``: any)."""
    var = _head_var(rule)
    found: set[str] = set()
    named = False
    for lit in rule.body:
        if not (isinstance(lit, ast.Atom) and lit.name in ("ToolCall", "is_tool") and len(lit.args) == 2):
            continue
        first, second = lit.args
        if not (isinstance(first, ast.Var) and first.name == var):
            continue
        if isinstance(second, ast.String):
            found.add(second.value)
            named = True
        elif isinstance(second, ast.Var):
            constants = _fact_constants(compilation, rule, second.name)
            if constants is not None:
                found |= constants
                named = True
    return frozenset(found) if named else None


def _fact_constants(compilation: Stratified, rule: ast.Rule, var: str) -> set[str] | None:
    """The values a variable can take from a positive atom over a relation of string facts."""
    for lit in rule.body:
        if not isinstance(lit, ast.Atom):
            continue
        for position, arg in enumerate(lit.args):
            if not (isinstance(arg, ast.Var) and arg.name == var):
                continue
            facts = compilation.program.rules_of(lit.name)
            if facts and all(f.is_fact and isinstance(f.head.args[position], ast.String) for f in facts):
                return {f.head.args[position].value for f in facts}  # type: ignore[union-attr]
    return None


def _head_var(rule: ast.Rule) -> str | None:
    args = rule.head.args
    return args[0].name if len(args) == 1 and isinstance(args[0], ast.Var) else None


class _Builder:
    """The path rules of one group, as Datalog text added to the policy."""

    def __init__(self, compilation: Stratified, rules: list[Rule], group: _Group, tag: int) -> None:
        self.compilation = compilation
        self.translated = {rule.id for rule in rules}
        self.group = group
        self.tag = tag
        self.lines: list[str] = []
        self.paths: list[Path] = []
        self.count = 0
        self.symbols = compilation.symbols
        self.default = self.symbols.default
        self.fires: dict[int, str] = {}
        self.copies: dict[str, list[tuple[str, str]]] = {}
        self.ways: dict[int, list[tuple[str, str]]] = {}
        self.denies = [r for r in group.scope if r.head.name == "Deny"]
        self.allows = [r for r in group.scope if r.head.name == "Allow"]
        self.denied = f"PolicycDenied{tag}"
        self.allowed = f"PolicycAllowed{tag}"

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"Policyc{prefix}{self.tag}x{self.count}"

    def slice(self, node: Any) -> str:
        source = self.compilation.program.source(node.span.file)
        assert source is not None
        return source.text[node.span.start : node.span.end]

    def literal_texts(self, rule: ast.Rule) -> list[str]:
        return [self.slice(lit) for lit in rule.body]

    def fires_rule(self, rule: ast.Rule) -> str:
        """A relation that holds for the action a decision rule decides (for a rule about one
        constant, ``Deny("x") :- ...``, that constant)."""
        if id(rule) not in self.fires:
            name = self.fresh("Fires")
            var = _head_var(rule)
            body = self.literal_texts(rule)
            if var is None:
                var = "policyc_action"
                body = [f"{var} = {self.slice(rule.head.args[0])}", *body]
            self.lines.append(f"{name}({var}) :- {', '.join(body)}.")
            self.fires[id(rule)] = name
        return self.fires[id(rule)]

    def alternatives(self, name: str) -> list[tuple[str, str]]:
        """Copies of the rules of a derived relation under fresh names (one per rule), with a
        description of each; none for an input, a functor or a relation with one rule."""
        if name in self.copies:
            return self.copies[name]
        copies = []
        rules = self.compilation.program.rules_of(name)
        if name not in self.symbols.functors and name not in self.symbols.inputs and len(rules) > 1:
            for n, rule in enumerate(rules, 1):
                alias = self.fresh("Alt")
                head = alias + self.slice(rule.head)[len(rule.head.name) :]
                body = ", ".join(self.literal_texts(rule))
                self.lines.append(f"{head} :- {body}." if body else f"{head}.")
                copies.append((alias, f"its rule {n} of {len(rules)} (`{one_line(self.slice(rule))}`)"))
        self.copies[name] = copies
        return copies

    def block_ways(self, rule: ast.Rule) -> list[tuple[str, str]]:
        """Relations that hold for an action when ``rule`` applies to it but for one negated
        condition, which holds by one alternative rule of its relation (one per alternative)."""
        if id(rule) in self.ways:
            return self.ways[id(rule)]
        ways = []
        var = _head_var(rule)
        rule_id = _rule_id(rule, self.translated) or f"the rule at line {rule.span.line}"
        body = self.literal_texts(rule)
        for i, lit in enumerate(rule.body):
            if var is None or not isinstance(lit, ast.Negation):
                continue
            inner = self.slice(lit.atom)
            for alias, said in self.alternatives(lit.atom.name):
                name = self.fresh("Blocked")
                parts = [*body[:i], alias + inner[len(lit.atom.name) :], *body[i + 1 :]]
                self.lines.append(f"{name}({var}) :- {', '.join(parts)}.")
                ways.append((name, f"`{rule_id}` is kept from firing by `{inner}` holding by {said}"))
        self.ways[id(rule)] = ways
        return ways

    def add(
        self, rule_id: str, kind: str, description: str, expected: str, bodies: list[str], var: str
    ) -> None:
        names = []
        for body in bodies:
            name = self.fresh("Path")
            self.lines.append(f"{name}({var}) :- {body}.")
            names.append(name)
        self.paths.append(Path(rule_id, kind, description, expected, tuple(names)))

    def build(self) -> None:
        for rule in self.denies:
            self.lines.append(
                f"{self.denied}({_head_var(rule)}) :- {self.fires_rule(rule)}({_head_var(rule)})."
            )
        if self.default == "deny":
            for rule in self.allows:
                var = _head_var(rule)
                self.lines.append(f"{self.allowed}({var}) :- {self.fires_rule(rule)}({var}).")
        for rule in self.group.targets:
            rule_id = _rule_id(rule, self.translated)
            var = _head_var(rule)
            assert rule_id is not None and var is not None
            if rule.head.name == "Deny":
                if self.default == "deny" and not self.allows:
                    continue  # nothing is ever allowed: no path of a deny rule changes a verdict
                self.deny_paths(rule_id, rule, var)
            elif self.default == "deny":
                self.allow_paths(rule_id, rule, var)

    def deny_paths(self, rule_id: str, rule: ast.Rule, var: str) -> None:
        others = [f"not {self.fires_rule(r)}({var})" for r in self.denies if r is not rule]
        allowed = [f"{self.allowed}({var})"] if self.default == "deny" else []
        body = self.literal_texts(rule)
        self.add(
            rule_id,
            "fires",
            f"`{rule_id}` fires and no other rule denies",
            "deny",
            [", ".join([*body, *others, *allowed]), ", ".join([*body, *allowed])],
            var,
        )
        for i, lit in enumerate(rule.body):
            if isinstance(lit, ast.Atom) and not self.is_kind(lit, var):
                for alias, said in self.alternatives(lit.name):
                    replaced = [*body[:i], alias + self.slice(lit)[len(lit.name) :], *body[i + 1 :]]
                    self.add(
                        rule_id,
                        "fires",
                        f"`{rule_id}` fires with `{lit.name}` holding by {said}, and no other rule denies",
                        "deny",
                        [", ".join([*replaced, *others, *allowed])],
                        var,
                    )
        for other in self.denies:
            if other is rule:
                continue
            for name, said in self.block_ways(other):
                self.add(
                    rule_id,
                    "fires",
                    f"`{rule_id}` fires and no other rule denies, while {said}",
                    "deny",
                    [", ".join([*body, *others, f"{name}({var})", *allowed])],
                    var,
                )
        verdict = [f"not {self.denied}({var})", *allowed]
        self.blocked_paths(rule_id, rule, var, verdict, "allow", "nothing denies")

    def allow_paths(self, rule_id: str, rule: ast.Rule, var: str) -> None:
        body = self.literal_texts(rule)
        denied = [f"not {self.denied}({var})"] if self.denies else []
        self.add(
            rule_id,
            "fires",
            f"`{rule_id}` fires and nothing denies",
            "allow",
            [", ".join([*body, *denied])],
            var,
        )
        self.blocked_paths(rule_id, rule, var, [f"not {self.allowed}({var})"], "deny", "no other rule allows")

    def blocked_paths(
        self, rule_id: str, rule: ast.Rule, var: str, verdict: list[str], expected: str, rest: str
    ) -> None:
        body = self.literal_texts(rule)
        for i, lit in enumerate(rule.body):
            others = [*body[:i], *body[i + 1 :]]
            text = self.slice(lit)
            if isinstance(lit, ast.Negation):
                inner = self.slice(lit.atom)
                alternatives = self.alternatives(lit.atom.name)
                for alias, said in alternatives:
                    self.add(
                        rule_id,
                        "blocked",
                        f"`{rule_id}` is kept from firing by `{inner}` holding by {said}; {rest}",
                        expected,
                        [", ".join([*others, alias + inner[len(lit.atom.name) :], *verdict])],
                        var,
                    )
                if not alternatives:
                    self.add(
                        rule_id,
                        "blocked",
                        f"`{rule_id}` is kept from firing by `{inner}` holding; {rest}",
                        expected,
                        [", ".join([*others, inner, *verdict])],
                        var,
                    )
            elif isinstance(lit, ast.Atom):
                if self.is_kind(lit, var):
                    continue
                self.add(
                    rule_id,
                    "blocked",
                    f"`{rule_id}` is kept from firing by `{text}` not holding; {rest}",
                    expected,
                    [", ".join([*others, f"not {text}", *verdict])],
                    var,
                )
            elif isinstance(lit, ast.Comparison):
                opposite = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}[lit.op]
                left, right = self.slice(lit.left), self.slice(lit.right)
                self.add(
                    rule_id,
                    "blocked",
                    f"`{rule_id}` is kept from firing by `{text}` not holding; {rest}",
                    expected,
                    [", ".join([*others, f"{left} {opposite} {right}", *verdict])],
                    var,
                )

    def is_kind(self, lit: ast.Atom, var: str) -> bool:
        """Whether the literal says what kind of action ``var`` is."""
        first = lit.args[0] if lit.args else None
        return lit.name in KIND_LITERALS and isinstance(first, ast.Var) and first.name == var


def _rule_id(rule: ast.Rule, translated: set[str]) -> str | None:
    annotation = rule.annotation("id")
    if annotation is None or not annotation.args or not isinstance(annotation.args[0], ast.String):
        return None
    value = annotation.args[0].value
    return value if value in translated else None


def _sliced(compilation: Stratified, text: str, lines: list[str]) -> str:
    """The policy's text without the rules of its own file that the path rules cannot reach
    (the search grounds every rule it is given)."""
    from policyc.compiler.parser import parse
    from policyc.compiler.source import SourceFile

    from .draft import body_relations

    module, _ = parse(SourceFile("<paths>", "\n".join(lines)))
    wanted: set[str] = set()
    todo = [s for s in module.statements if isinstance(s, ast.Rule)]
    program = compilation.program
    while todo:
        rule = todo.pop()
        for name in body_relations(rule):
            if name not in wanted:
                wanted.add(name)
                todo.extend(program.rules_of(name))
    root = next(m for m in program.modules if m.path in program.roots)
    dropped = [s for s in root.statements if isinstance(s, ast.Rule) and s.head.name not in wanted]
    for rule in sorted(dropped, key=lambda r: -r.span.start):
        text = text[: rule.span.start] + text[rule.span.end :]
    return text


def path_program(
    text: str, lines: list[str], paths: list[Path], output: str
) -> tuple[Stratified, list[Path], list[P.Problem]]:
    """The policy with a rule per path (paths whose rule does not check are left out)."""
    found: list[P.Problem] = []
    header = text + "\n// ---- decision paths (added for the search)\n"
    first = header.count("\n") + 1  # the line of lines[0]
    while True:
        full = header + "\n".join(lines) + "\n"
        program, diagnostics = load_source(full, output)
        analysed = compile_program(program, diagnostics)
        errors = [d for d in analysed.diagnostics if d.is_error]
        if not errors:
            return analysed, paths, found
        bad_lines = {d.span.line for d in errors if d.span.file == output and d.span.start >= len(header)}
        if not bad_lines:
            raise ValueError(f"the paths of the policy do not check: {errors[0].message}")
        bad_names = {lines[n - first].split("(")[0] for n in bad_lines if 0 <= n - first < len(lines)}
        kept_paths = []
        for path in paths:
            goal = tuple(name for name in path.goal if name not in bad_names)
            if not goal:
                found.append(
                    P.NO_SCENARIO(
                        STEP,
                        f"no search for this path: it cannot be written as a query ({path.description})",
                        path.rule,
                    )
                )
                continue
            kept_paths.append(Path(path.rule, path.kind, path.description, path.expected, goal))
        paths = kept_paths
        used = {name for path in paths for name in path.goal}
        lines = [
            line
            for line in lines
            if line.split("(")[0] not in bad_names
            and (not line.startswith("PolicycPath") or line.split("(")[0] in used)
        ]


def synthesize(
    compilation: Stratified,
    text: str,
    rules: list[Rule],
    output: str,
    bound: int,
    timeout: float,
    uses_events: bool,
) -> Synthesis:
    """A scenario for each path of each translated decision rule that has one within the bound."""
    import time

    from policyc.analyzer.query import AnalysisError
    from policyc.analyzer.witness import Witness

    result = Synthesis()
    deadline = time.monotonic() + timeout
    planned = []
    for tag, group in enumerate(_groups(compilation, rules), 1):
        builder = _Builder(compilation, rules, group, tag)
        builder.build()
        planned.append(builder)
    searched = _search_groups([b for b in planned if b.paths], compilation, text, output, bound, deadline)
    for paths, witnesses, problems in searched:
        result.problems.extend(problems)
        for path, witness in zip(paths, witnesses, strict=True):
            index = len(result.paths)
            result.paths.append(path)
            if witness is None:
                result.outcomes[index] = "not answered in time"
                result.problems.append(
                    P.SCENARIO_FAILED(
                        STEP, f"not answered within the search time: {path.description}", path.rule
                    )
                )
            elif isinstance(witness, AnalysisError):
                result.outcomes[index] = "not searched"
                result.problems.append(P.SCENARIO_FAILED(STEP, f"{witness} ({path.description})", path.rule))
            elif isinstance(witness, Witness) and witness.status == "none":
                how = (
                    "proved"
                    if witness.strength == "proved"
                    else f"none with up to {bound} fresh values per type"
                )
                result.outcomes[index] = f"no scenario ({how})"
                result.problems.append(
                    P.NO_SCENARIO(
                        STEP, f"no execution takes this path ({how}): {path.description}", path.rule
                    )
                )
            else:
                if (
                    path.kind == "fires"
                    and len(path.goal) > 1
                    and not witness.query.startswith(path.goal[0] + "(")
                ):
                    path = Path(
                        path.rule,
                        path.kind,
                        f"`{path.rule}` fires (within the bound it never fires alone: another rule denies too)",
                        path.expected,
                        path.goal,
                    )
                    result.paths[index] = path
                variable = next(iter(witness.bindings), None)
                action = witness.bindings.get(variable) if variable else None
                record = to_session(
                    witness.facts, action, f"scenario-{index + 1}", uses_events, witness.numbers
                )
                result.outcomes[index] = "scenario"
                tables = {k: [list(r) for r in v] for k, v in witness.functors.items()}
                result.scenarios.append(Scenario(path, action, record, tables))
    return result


def _search_groups(
    builders: list[_Builder], compilation: Stratified, text: str, output: str, bound: int, deadline: float
) -> list[tuple[list[Path], list[Any], list[P.Problem]]]:
    """Each group's paths and witnesses. Everything that runs in this process is prepared
    first, in this thread (z3, which the proofs use, must not run in two threads at once); the
    searches then run side by side, one child process each, as many at once as there are
    processors."""
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor

    from policyc.analyzer.query import AnalysisError
    from policyc.analyzer.witness import WitnessSearch

    prepared: list[tuple[Any, list[Path], list[P.Problem]]] = []
    for builder in builders:
        try:
            sliced = _sliced(compilation, text, builder.lines)
            analysed, paths, found = path_program(sliced, builder.lines, builder.paths, output)
            search: Any = WitnessSearch(analysed, [path.goal for path in paths], bound) if paths else None
        except ValueError as error:
            search, paths, found = None, [], [P.SCENARIO_FAILED(STEP, str(error))]
        except AnalysisError as error:
            search, found = error, [*found]
        prepared.append((search, paths, found))

    def run(index: int) -> tuple[list[Path], list[Any], list[P.Problem]]:
        search, paths, found = prepared[index]
        if isinstance(search, AnalysisError):
            return paths, [search] * len(paths), found
        if search is None:
            return [], [], found
        return paths, search.run(max(0.0, deadline - time.monotonic())), found

    order = sorted(range(len(prepared)), key=lambda i: -len(prepared[i][1]))
    workers = max(1, min(len(order), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(order, pool.map(run, order), strict=True))
    return [done[i] for i in range(len(prepared))]
