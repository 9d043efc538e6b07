"""Resolution: the symbol table of a program.

Collects what the directives declare (relations with their attributes, inputs, outputs,
functors, roles, field roles, the default verdict) and what the rules use, and reports
declarations that are malformed or contradict each other (``invalid-directive``) and names
used both as a relation and as a functor (``name-conflict``). A builtin functor (or one of an
imported library module) declared again with the signature it has, as Soufflé policies
declare the functors they use, is only a warning (``redeclared-builtin``) whose fix removes the
declaration.

Names are resolved by kind: an atom whose name is a declared functor is a foreign predicate
call; any other atom refers to a relation. ``Allow`` and ``Deny`` are always known, unary
and outputs; ``Escalate``, the third verdict, is one too where a policy has it unary (a
binary ``Escalate(a, why)``, as the risk library declares, is an ordinary relation).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ast, codes
from .arguments import ARG_TYPES, PRESENCES, Argument, of_declaration
from .diagnostics import Diagnostic, Related, removal, replace_name
from .loader import LIBRARY_PREFIX, PRELUDE, Program
from .source import Span
from .syntax_errors import did_you_mean
from .typedefs import TypeTable, collect, unknown_type
from .verdict_names import ESCALATE, VERDICTS, has_verdict_rules, is_verdict

TYPES = ("symbol", "number", "unsigned", "float")
FUNCTOR_PARAMS = (*TYPES, "any")
FUNCTOR_RESULTS = (*TYPES, "any", "bool")
DEFAULTS = ("allow", "deny")


@dataclass(frozen=True)
class Relation:
    """A relation of the policy: arity, attribute types and names, where it is declared, and
    whether it is an input, an output or inline, an equivalence relation (``eqrel``), its
    choice domains and its keys (attribute positions), and whether only the host states it
    (``.host``)."""

    name: str
    arity: int | None
    types: tuple[str | None, ...]  # declared attribute types (None: not declared)
    attributes: tuple[str, ...]  # declared attribute names ('' when undeclared)
    span: Span  # where it is declared, or first defined or used
    declared: bool
    is_input: bool
    is_output: bool
    home: str  # the file of ``span``
    inline: bool = False  # evaluated on demand, arguments bound by the caller
    eqrel: bool = False  # reflexive, symmetric and transitive (closure rules are added)
    choice: tuple[tuple[int, ...], ...] = ()  # `choice-domain`: each a key, by attribute position
    # `.key`: the attribute positions that determine the others (each sorted); the facts given
    # for the relation keep them, which the runtime checks
    keys: tuple[tuple[int, ...], ...] = ()
    # `.host`: only the host states its facts (the fronts refuse them from those they serve)
    host: bool = False
    # `.limitsize R(n=N)`: the relation stops growing at N facts (None: no limit)
    limit: int | None = None

    @property
    def qualifiers(self) -> tuple[str, ...]:
        """What the declaration says of it, as written there (for hovers and outlines)."""
        found = [q for q, on in (("inline", self.inline), ("eqrel", self.eqrel)) if on]
        if self.choice:
            domains = [
                self.attributes[d[0]] if len(d) == 1 else "(" + ", ".join(self.attributes[i] for i in d) + ")"
                for d in self.choice
            ]
            found.append("choice-domain " + ", ".join(domains))
        found.extend(self.key_meaning(key) for key in self.keys)
        if self.host:
            found.append("stated by the host only")
        return tuple(found)

    def key_text(self, key: tuple[int, ...]) -> str:
        """The directive of one of its keys: ``.key ToolArg(a, key)``."""
        return f".key {self.name}({', '.join(self.attributes[i] for i in key)})"

    def key_meaning(self, key: tuple[int, ...]) -> str:
        """What one of its keys says: ``one `tool` per `a```, ``at most one fact``."""
        if not key:
            return "at most one fact"
        rest = [f"`{name}`" for i, name in enumerate(self.attributes) if i not in key]
        per = ", ".join(f"`{self.attributes[i]}`" for i in key)
        return f"one {', '.join(rest)} per {per if len(key) == 1 else '(' + per + ')'}"


@dataclass(frozen=True)
class FunctorSig:
    """A functor's signature: parameter types and names, its result, and whether the
    standard library provides it."""

    name: str
    params: tuple[str | None, ...]
    param_names: tuple[str | None, ...]
    returns: str | None
    span: Span
    library: bool

    @property
    def is_predicate(self) -> bool:
        return self.returns == "bool"


@dataclass(frozen=True)
class RoleInfo:
    """``.role NAME budget B pool P``: a role's risk budget and the pool it draws from."""

    name: str
    budget: float
    pool: str | None
    span: Span


@dataclass(frozen=True)
class Symbols:
    """Every name a policy defines: relations, functors, roles, field roles, the default
    verdict."""

    relations: dict[str, Relation]
    functors: dict[str, FunctorSig]
    roles: dict[str, RoleInfo]
    fields: dict[tuple[str, str], str]
    default: str
    default_span: Span | None
    inputs: frozenset[str]
    outputs: frozenset[str]
    defined: frozenset[str] = field(default=frozenset())  # relations with a rule or fact
    typedefs: TypeTable = field(default_factory=TypeTable)  # the `.type` declarations
    # the `.arg` declarations, by (tool, argument), in the order written
    arguments: dict[tuple[str, str], Argument] = field(default_factory=dict)

    def is_inline(self, name: str) -> bool:
        relation = self.relations.get(name)
        return relation is not None and relation.inline

    @property
    def has_verdict_rules(self) -> bool:
        """Whether the program has a rule or fact of a verdict (:func:`has_verdict_rules`)."""
        relations = self.relations
        return has_verdict_rules((n, relations[n].arity if n in relations else None) for n in self.defined)

    def keys_of(self, name: str) -> tuple[tuple[int, ...], ...]:
        """The keys every fact of a relation keeps: its declared keys when no rule or fact of
        the policy derives into it (the runtime checks the facts given, not those derived)."""
        relation = self.relations.get(name)
        return relation.keys if relation is not None and name not in self.defined else ()


def resolve(program: Program) -> tuple[Symbols, list[Diagnostic]]:
    return _Resolver(program).run()


class _Resolver:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.diagnostics: list[Diagnostic] = []
        self.decls: dict[str, ast.Decl] = {}
        self.functors: dict[str, FunctorSig] = {}
        self.functor_nodes: dict[str, ast.Functor] = {}
        self.roles: dict[str, RoleInfo] = {}
        self.role_nodes: dict[str, ast.Role] = {}
        self.fields: dict[tuple[str, str], str] = {}
        self.field_nodes: dict[tuple[str, str], ast.FieldMap] = {}
        self.arguments: dict[tuple[str, str], Argument] = {}
        self.default: ast.Default | None = None
        self.inputs: dict[str, Span] = {}
        self.outputs: dict[str, Span] = {}
        self.typedefs = TypeTable()
        self.keys: list[ast.Key] = []
        self.hosts: set[str] = set()  # `.host` (an unknown name: checks/undefined.py)
        self.limits: dict[str, int] = {}  # `.limitsize` (checks/evaluation_order.py reports it)

    def run(self) -> tuple[Symbols, list[Diagnostic]]:
        self.typedefs, problems = collect(statement for _, statement in self.program.statements())
        self.diagnostics.extend(problems)
        for module, statement in self.program.statements():
            library = self.program.is_library(module.path)
            if isinstance(statement, ast.Misplaced):
                self.diagnostics.append(
                    codes.INVALID_ANNOTATION(
                        statement.annotations[0].span,
                        "annotations can only precede a rule",
                        help="move the annotations to the rule they describe, or remove them",
                    )
                )
                statement = statement.statement
            self._directive(statement, library)
        for field_map in self.field_nodes.values():
            self._check_field_role(field_map)
        relations, defined = self._relations()
        self._conflicts(relations)
        symbols = Symbols(
            relations=relations,
            functors=self.functors,
            roles=self.roles,
            fields=self.fields,
            default=self.default.verdict.name if self.default else "allow",
            default_span=self.default.span if self.default else None,
            inputs=frozenset(self.inputs),
            outputs=frozenset(self.outputs)
            | frozenset(VERDICTS)
            | frozenset(n for n in (ESCALATE,) if n in relations and is_verdict(n, relations[n].arity)),
            defined=frozenset(defined),
            typedefs=self.typedefs,
            arguments=self.arguments,
        )
        return symbols, self.diagnostics

    # ---------------------------------------------------------------- directives

    def _directive(self, statement: ast.Statement, library: bool) -> None:
        error = codes.INVALID_DIRECTIVE
        if isinstance(statement, ast.Decl):
            name = statement.name.name
            if name in self.decls:
                self.diagnostics.append(
                    error(
                        statement.name.span,
                        f"relation `{name}` is declared twice",
                        related=[Related(self.decls[name].name.span, "first declared here")],
                    )
                )
                return
            if name in VERDICTS and len(statement.attributes) != 1:
                self.diagnostics.append(
                    error(statement.span, f"`{name}` takes exactly one argument, the action")
                )
            seen: dict[str, ast.Attribute] = {}
            for attribute in statement.attributes:
                problem = unknown_type(self.typedefs, attribute.type)
                if problem is not None:
                    self.diagnostics.append(problem)
                if attribute.name in seen:
                    self.diagnostics.append(
                        error(
                            attribute.span,
                            f"attribute `{attribute.name}` appears twice in `{name}`",
                            related=[Related(seen[attribute.name].span, "first here")],
                        )
                    )
                seen[attribute.name] = attribute
            self.decls[name] = statement
            for qualifier in statement.io:  # Soufflé's older `input`, `output`, `printsize`
                read = self.inputs if qualifier.name == "input" else self.outputs
                read.setdefault(name, qualifier.span)
        elif isinstance(statement, ast.Input):
            for ident in statement.names:
                self.inputs.setdefault(ident.name, ident.span)
        elif isinstance(statement, ast.Output):
            for ident in statement.names:
                self.outputs.setdefault(ident.name, ident.span)
        elif isinstance(statement, ast.Key):
            self.keys.append(statement)  # checked by checks/keys.py
        elif isinstance(statement, ast.Host):
            self.hosts.update(ident.name for ident in statement.names)
        elif isinstance(statement, ast.LimitSize):
            self.limits[statement.relation.name] = statement.size
        elif isinstance(statement, ast.Functor):
            self._functor(statement, library)
        elif isinstance(statement, ast.Default):
            verdict = statement.verdict.name
            if verdict not in DEFAULTS:
                self.diagnostics.append(
                    error(statement.verdict.span, f"`.default` is `allow` or `deny`, not `{verdict}`")
                )
            elif self.default is not None:
                self.diagnostics.append(
                    error(
                        statement.span,
                        "`.default` is given twice",
                        related=[Related(self.default.span, "first given here")],
                        help="a policy has one default verdict",
                    )
                )
            else:
                self.default = statement
        elif isinstance(statement, ast.Role):
            self._role(statement)
        elif isinstance(statement, ast.FieldMap):
            key = (statement.tool, statement.argument)
            if not statement.tool or not statement.argument:
                return  # reported by the parser
            if key in self.field_nodes:
                first = self.field_nodes[key]
                self.diagnostics.append(
                    error(
                        statement.path_span,
                        f"field `{statement.tool}.{statement.argument}` is mapped twice",
                        related=[Related(first.path_span, "first mapped here")],
                        help="a field has one role",
                    )
                )
                return
            self.field_nodes[key] = statement
            self.fields[key] = statement.role.name
        elif isinstance(statement, ast.ArgDecl):
            self._argument(statement)

    def _check_type(self, ident: ast.Ident, allowed: tuple[str, ...]) -> bool:
        if ident.name in allowed:
            return True
        close = did_you_mean(ident.name, allowed)
        self.diagnostics.append(
            codes.INVALID_DIRECTIVE(
                ident.span,
                f"unknown type `{ident.name}`",
                help=(f"did you mean `{close}`? " if close else "")
                + "the types are "
                + ", ".join(f"`{t}`" for t in allowed),
                fix=replace_name(ident.span, ident.name, close),
            )
        )
        return False

    def _functor(self, statement: ast.Functor, library: bool) -> None:
        name = statement.name.name
        if name in self.functor_nodes:
            first = self.functor_nodes[name]
            if self.functors[name].library and not library:
                self._redeclared(statement, first)
                return
            self.diagnostics.append(
                codes.INVALID_DIRECTIVE(
                    statement.name.span,
                    f"functor `{name}` is declared twice",
                    related=[Related(first.name.span, "first declared here")],
                )
            )
            return
        params = tuple(
            p.type.name if self._check_type(p.type, FUNCTOR_PARAMS) else None for p in statement.params
        )
        returns = statement.returns.name if self._check_type(statement.returns, FUNCTOR_RESULTS) else None
        self.functor_nodes[name] = statement
        self.functors[name] = FunctorSig(
            name, params, tuple(p.name for p in statement.params), returns, statement.name.span, library
        )

    def _redeclared(self, statement: ast.Functor, first: ast.Functor) -> None:
        """A functor of the library declared again: as it is (parameter names aside), or with
        a parameter of one type where the library's takes `any` (`to_number(t: symbol)`, as
        the conversions were declared before they took every type), a warning whose fix
        removes the declaration; with another signature, an error."""
        name = statement.name.name
        module = first.span.file.removeprefix(LIBRARY_PREFIX).removesuffix(".dl")
        what = "a builtin functor" if module == PRELUDE else f"a functor of `.import {module}`"
        related = [Related(first.name.span, "declared here")]
        if _fits(statement, first):
            repeats = (
                "repeats its signature" if _types(statement) == _types(first) else "needs nothing of its own"
            )
            self.diagnostics.append(
                codes.REDECLARED_BUILTIN(
                    statement.span,
                    f"`{name}` is {what}; this declaration {repeats}",
                    related=related,
                    help=f"remove it: `{name}` needs no declaration (it is `{_signature(first)}`)",
                    fix=removal(self.program.source(statement.span.file), statement.span),
                )
            )
            return
        self.diagnostics.append(
            codes.INVALID_DIRECTIVE(
                statement.name.span,
                f"`{name}` is {what}, `{_signature(first)}`; it cannot be declared with another signature",
                related=related,
                help=f"remove this declaration to use `{name}` as it is, or give your functor another name",
            )
        )

    def _role(self, statement: ast.Role) -> None:
        error = codes.INVALID_DIRECTIVE
        name = statement.name.name
        budget = float(statement.budget.value)
        if name in self.role_nodes:
            self.diagnostics.append(
                error(
                    statement.name.span,
                    f"role `{name}` is declared twice",
                    related=[Related(self.role_nodes[name].name.span, "first declared here")],
                )
            )
            return
        if not 0 < budget <= 1:
            self.diagnostics.append(
                error(
                    statement.budget.span,
                    f"the budget of role `{name}` is {statement.budget.value}, outside (0, 1]",
                    help="a budget is the tolerated risk, a probability greater than 0 and at most 1",
                )
            )
        self.role_nodes[name] = statement
        self.roles[name] = RoleInfo(
            name, budget, statement.pool.name if statement.pool else None, statement.span
        )

    def _argument(self, statement: ast.ArgDecl) -> None:
        """An ``.arg``: a known type and presence, and one declaration per argument (the same
        one repeated has a fix that removes it; another one contradicts it)."""
        error = codes.INVALID_ARGUMENT_DECLARATION
        if not statement.tool or not statement.argument:
            return  # reported by the parser
        valid = True
        for ident, allowed, what in (
            (statement.type, ARG_TYPES, "argument type"),
            (statement.presence, PRESENCES, "presence"),
        ):
            if ident is None or ident.name in allowed:
                continue
            valid = False
            close = did_you_mean(ident.name, allowed)
            listed = " or ".join(f"`{t}`" for t in allowed) if len(allowed) == 2 else None
            self.diagnostics.append(
                error(
                    ident.span,
                    f"unknown {what} `{ident.name}`",
                    help=(f"did you mean `{close}`? " if close else "")
                    + (
                        f"after the type comes {listed} (the default)"
                        if listed
                        else "the types are " + ", ".join(f"`{t}`" for t in allowed)
                    ),
                    fix=replace_name(ident.span, ident.name, close),
                )
            )
        if not valid:
            return
        argument = of_declaration(statement)
        key = (statement.tool, statement.argument)
        first = self.arguments.get(key)
        if first is None:
            self.arguments[key] = argument
            return
        if first.span == statement.span:
            return  # one declaration of a component, in each of its instances
        name = f"{statement.tool}.{statement.argument}"
        related = [Related(first.path_span, "first declared here")]
        if (first.type, first.required) == (argument.type, argument.required):
            self.diagnostics.append(
                error(
                    statement.path_span,
                    f"argument `{name}` is declared twice",
                    related=related,
                    help="an argument is declared once: remove this declaration",
                    fix=removal(self.program.source(statement.span.file), statement.span),
                )
            )
            return
        self.diagnostics.append(
            error(
                statement.path_span,
                f"argument `{name}` is declared `{_shown(argument)}` here and `{_shown(first)}` before",
                related=related,
                help="an argument has one type and presence: keep the declaration that says what the tool takes",
            )
        )

    def _check_field_role(self, statement: ast.FieldMap) -> None:
        role = statement.role.name
        if role in self.roles:
            return
        close = did_you_mean(role, self.roles)
        declared = ", ".join(f"`{r}`" for r in sorted(self.roles)) or "none"
        self.diagnostics.append(
            codes.INVALID_DIRECTIVE(
                statement.role.span,
                f"unknown role `{role}`",
                help=(f"did you mean `{close}`? " if close else "")
                + f"declare it with `.role {role} budget ALPHA`; declared roles: {declared}",
                fix=replace_name(statement.role.span, role, close),
            )
        )

    # ----------------------------------------------------------------- relations

    def _relations(self) -> tuple[dict[str, Relation], set[str]]:
        """Every relation: declared, input, output, defined by a rule or fact, or used."""
        first_seen: dict[str, tuple[Span, int]] = {}
        defined: set[str] = set()
        for _, rule in self.program.rules():
            head = rule.head
            defined.add(head.name)
            first_seen.setdefault(head.name, (head.name_span, len(head.args)))
            for atom, _, _ in self.program.summary(rule).atoms:
                if atom.name not in self.functors:
                    first_seen.setdefault(atom.name, (atom.name_span, len(atom.args)))
        relations: dict[str, Relation] = {}
        names = set(first_seen) | set(self.decls) | set(self.inputs) | set(self.outputs) | set(VERDICTS)
        for name in sorted(names):  # one numbering of the relations, whatever the hash seed
            decl = self.decls.get(name)
            if decl is not None:
                arity: int | None = len(decl.attributes)
                types = tuple(
                    a.type.name if self.typedefs.representation(a.type.name) else None
                    for a in decl.attributes
                )
                attributes = tuple(a.name for a in decl.attributes)
                span = decl.name.span
            else:
                seen = first_seen.get(name)
                if seen is not None:
                    span, arity = seen
                elif name in self.inputs:
                    span, arity = self.inputs[name], None
                elif name in self.outputs:
                    span, arity = self.outputs[name], None
                else:
                    span, arity = ast.NO_SPAN, 1
                if name in VERDICTS:
                    arity = 1
                types = (None,) * (arity or 0)
                attributes = ("",) * (arity or 0)
            relations[name] = Relation(
                name=name,
                arity=arity,
                types=types,
                attributes=attributes,
                span=span,
                declared=decl is not None,
                is_input=name in self.inputs,
                is_output=name in self.outputs or is_verdict(name, arity),
                home=span.file,
                inline=decl is not None and decl.inline,
                eqrel=decl is not None and decl.eqrel,
                choice=self._choice(decl) if decl is not None else (),
                keys=key_positions(decl, [k for k in self.keys if k.relation.name == name])
                if decl is not None
                else (),
                host=name in self.hosts,
                limit=self.limits.get(name),
            )
            if decl is not None and decl.inline:
                self._check_inline(decl)
            if decl is not None and (decl.eqrel or decl.choice):
                self._check_qualifiers(decl)
        return relations, defined

    @staticmethod
    def _choice(decl: ast.Decl) -> tuple[tuple[int, ...], ...]:
        """The choice domains of a declaration, by attribute position (unknown names left out:
        :meth:`_check_qualifiers` reports them)."""
        names = [a.name for a in decl.attributes]
        found = []
        for domain in decl.choice:
            positions = tuple(names.index(n.name) for n in domain if n.name in names)
            if len(positions) == len(domain) and positions not in found:
                found.append(positions)
        return tuple(found)

    def _check_qualifiers(self, decl: ast.Decl) -> None:
        """``eqrel`` takes two attributes of one type; ``choice-domain`` names attributes;
        neither goes with ``inline``, nor one with the other."""
        name = decl.name.name
        problems: list[tuple[Span, str, str]] = []
        if decl.eqrel:
            types = {a.type.name for a in decl.attributes}
            if len(decl.attributes) != 2 or len(types) != 1:
                problems.append(
                    (
                        decl.span,
                        f"`eqrel` relation `{name}` must have two attributes of one type",
                        "an equivalence relation relates values of one type: `.decl R(a: T, b: T) eqrel`",
                    )
                )
        names = {a.name for a in decl.attributes}
        for domain in decl.choice:
            for ident in domain:
                if ident.name not in names:
                    problems.append(
                        (
                            ident.span,
                            f"`{ident.name}` is not an attribute of `{name}`",
                            f"a choice domain names attributes of the relation: {', '.join(sorted(names)) or 'none'}",
                        )
                    )
            if len({i.name for i in domain}) != len(domain):
                problems.append((domain[0].span, "an attribute is named twice in one choice domain", ""))
        if decl.inline and (decl.eqrel or decl.choice):
            problems.append(
                (decl.span, f"inline relation `{name}` cannot be `eqrel` or have a `choice-domain`", "")
            )
        if decl.eqrel and decl.choice:
            problems.append((decl.span, f"`eqrel` relation `{name}` cannot have a `choice-domain`", ""))
        for span, message, help_ in problems:
            self.diagnostics.append(codes.INVALID_DIRECTIVE(span, message, help=help_ or None))

    def _check_inline(self, decl: ast.Decl) -> None:
        name = decl.name.name
        for directive, spans in ((".input", self.inputs), (".output", self.outputs)):
            if name in spans:
                self.diagnostics.append(
                    codes.INVALID_DIRECTIVE(
                        spans[name],
                        f"inline relation `{name}` cannot be an `{directive}`",
                        related=[Related(decl.name.span, "declared inline here")],
                        help="an inline relation is computed where it is used, so it has no facts of its own",
                    )
                )

    def _conflicts(self, relations: dict[str, Relation]) -> None:
        """A name is a relation or a functor, never both."""
        for name, sig in self.functors.items():
            uses: list[Span] = []
            if name in self.decls:
                uses.append(self.decls[name].name.span)
            if name in self.inputs:
                uses.append(self.inputs[name])
            if name in self.outputs:
                uses.append(self.outputs[name])
            uses.extend(rule.head.name_span for rule in self.program.rules_of(name))
            for span in uses:
                self.diagnostics.append(
                    codes.NAME_CONFLICT(
                        span,
                        f"`{name}` is a functor, so it cannot also be a relation",
                        related=[Related(sig.span, "declared as a functor here")],
                        help="rename the relation or the functor",
                    )
                )
            relations.pop(name, None)


def key_position(decl: ast.Decl, key: ast.Key) -> tuple[int, ...] | None:
    """The attribute positions a key names (sorted), or None when it names something the
    relation does not have, or every attribute (checks/keys.py says why)."""
    names = [a.name for a in decl.attributes]
    positions = sorted({names.index(n.name) for n in key.attributes if n.name in names})
    if len(positions) != len({n.name for n in key.attributes}) or len(positions) == len(names):
        return None
    return tuple(positions)


def key_positions(decl: ast.Decl, keys: list[ast.Key]) -> tuple[tuple[int, ...], ...]:
    """The keys of a relation as attribute positions, each once, in the order written."""
    found = [key_position(decl, key) for key in keys]
    return tuple(dict.fromkeys(k for k in found if k is not None))


def _types(functor: ast.Functor) -> tuple[tuple[str, ...], str]:
    return tuple(p.type.name for p in functor.params), functor.returns.name


def _fits(functor: ast.Functor, library: ast.Functor) -> bool:
    """Every call ``functor`` allows, ``library`` allows the same way."""
    (params, returns), (allowed, gives) = _types(functor), _types(library)
    return (
        returns == gives
        and len(params) == len(allowed)
        and all(p == a or a == "any" for p, a in zip(params, allowed, strict=True))
    )


def _signature(functor: ast.Functor) -> str:
    """``contains(text: symbol, part: symbol): bool``."""
    params = ", ".join(f"{p.name}: {p.type.name}" if p.name else p.type.name for p in functor.params)
    return f"{functor.name.name}({params}): {functor.returns.name}"


def _shown(argument: Argument) -> str:
    """An argument's type and presence as a declaration writes them."""
    return f"{argument.type} required" if argument.required else argument.type
