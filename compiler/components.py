"""Components (``.comp``) and their instances (``.init``), as the plain statements they stand for.

A component is a template of declarations, rules, facts, types, components and instances;
each ``.init g = Graph<symbol>`` copies it, with its type parameters replaced by the type
arguments, under the instance's name: relation ``reach`` of the component is ``g.reach`` of
the instance, and ``g.reach`` is how the rest of the program names it. As in Soufflé:

- the names the copy qualifies are those its own declarations (``.decl``, ``.type``) and
  instances define; any other name is the enclosing program's (so a rule inside a component
  may derive ``Deny`` or read ``.input`` relations of the policy);
- ``.comp Sym<N> : Graph<N> { ... }`` inherits: the copy holds its bases' contents first;
  ``.override reach`` in it drops the rules its bases give ``reach``, which a base must have
  declared ``overridable``;
- a nested instance's names are qualified again by the enclosing one (``a.b.rel``), and so
  are the ``@id``s of its rules (``@id("g.r")``), which stay unique.

>>> from .source import SourceFile
>>> from .parser import parse
>>> text = ".comp C<T> { .decl r(x: T) r(1). }\\n.init c = C<number>\\nP(x) :- c.r(x)."
>>> module, _ = parse(SourceFile("p.dl", text))
>>> [(type(s).__name__, getattr(s, "name", None) or s.head.name) for s in module.statements][:2]
[('Decl', Ident(name='c.r')), ('Rule', 'c.r')]
>>> module.statements[0].attributes[0].type.name
'number'

Expansion is a source-to-source step of the parser, right after the statements of a file are
read: every copied node keeps the span it was written at, so a diagnostic about an instance's
rule points inside the component. It is bounded (:data:`MAX_DEPTH`, :data:`MAX_STATEMENTS`):
a component that instantiates or inherits from itself is an error, not a loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import cast

from . import ast, codes
from .diagnostics import Diagnostic, Related

MAX_DEPTH = 32  # instances nested in instances, bases of bases
MAX_STATEMENTS = 20_000  # the statements all instances of a file stand for


@dataclass
class _Scope:
    """The components visible at a place: those defined there, then the enclosing scope's."""

    components: dict[str, ast.Component] = field(default_factory=dict)
    parent: _Scope | None = None

    def find(self, name: str) -> tuple[ast.Component, _Scope] | None:
        """The component of a name and the scope that defines it."""
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.components:
                return scope.components[name], scope
            scope = scope.parent
        return None


def expand(
    statements: list[ast.Statement],
    diagnostics: list[Diagnostic],
    others: dict[str, ast.Component] | None = None,
) -> list[ast.Statement]:
    """The statements with every component removed and every instance in its place, expanded;
    ``others``: the components of the program's other files, visible here too."""
    if not any(isinstance(s, ast.Component | ast.Init | ast.Override) for s in statements):
        return statements
    return _Expander(diagnostics).top(statements, _Scope(dict(others or {})))


def expand_program(modules: list[ast.Module], diagnostics: list[Diagnostic]) -> list[ast.Module]:
    """The modules of a program with their components expanded: a file's instances may be of
    the components of any file of the program (two files defining one name are an error)."""
    if not any(isinstance(s, ast.Component | ast.Init | ast.Override) for m in modules for s in m.statements):
        return modules
    everywhere: dict[str, ast.Component] = {}
    for module in modules:
        own = [s for s in module.statements if isinstance(s, ast.Component)]
        for component in own:
            first = everywhere.get(component.name.name)
            if first is not None and first.span.file != component.span.file:
                diagnostics.append(
                    codes.DUPLICATE_INSTANCE(
                        component.name.span,
                        f"another file of the policy defines a component `{component.name.name}`",
                        related=(Related(first.name.span, "the other component of this name"),),
                        help="give each component a name of its own",
                    )
                )
            everywhere.setdefault(component.name.name, component)
    out = []
    for module in modules:
        if any(isinstance(s, ast.Component | ast.Init | ast.Override) for s in module.statements):
            others = {n: c for n, c in everywhere.items() if c.span.file != module.path}
            module = replace(module, statements=tuple(expand(list(module.statements), diagnostics, others)))
        out.append(module)
    return out


class _Expander:
    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        self.produced = 0
        self.too_large = False

    def top(self, statements: list[ast.Statement], others: _Scope) -> list[ast.Statement]:
        scope = _Scope(_components(statements, self.diagnostics), others)
        out: list[ast.Statement] = []
        seen: dict[str, ast.Init] = {}
        for statement in statements:
            if isinstance(statement, ast.Component):
                continue
            if isinstance(statement, ast.Init):
                if self._fresh(statement, seen):
                    out.extend(self._instance(statement, scope, ()))
            elif isinstance(statement, ast.Override):
                self.diagnostics.append(
                    codes.INVALID_OVERRIDE(
                        statement.span,
                        f"`.override {statement.name.name}` is outside any component",
                        help="`.override` belongs in a component that inherits the relation from a base",
                    )
                )
            else:
                out.append(statement)
        return out

    def _fresh(self, init: ast.Init, seen: dict[str, ast.Init]) -> bool:
        """Whether an instance's name is new where it is made (else a diagnostic)."""
        first = seen.get(init.name.name)
        if first is None:
            seen[init.name.name] = init
            return True
        self.diagnostics.append(
            codes.DUPLICATE_INSTANCE(
                init.name.span,
                f"there is already an instance named `{init.name.name}`",
                related=(Related(first.name.span, "the first instance of this name"),),
                help="give each `.init` a name of its own",
            )
        )
        return False

    def _lookup(
        self, ref: ast.CompType, scope: _Scope, chain: tuple[ast.Component, ...], verb: str
    ) -> tuple[ast.Component, _Scope] | None:
        """The component a reference names, if it exists, takes that many type arguments and
        is not one being expanded already (else a diagnostic)."""
        found = scope.find(ref.name.name)
        if found is None:
            self.diagnostics.append(
                codes.UNKNOWN_COMPONENT(
                    ref.name.span,
                    f"there is no component `{ref.name.name}`",
                    help="define it with `.comp` at the top level of a file of the policy, or in the "
                    "component that uses it",
                )
            )
            return None
        component = found[0]
        if len(ref.args) != len(component.params):
            wanted = len(component.params)
            self.diagnostics.append(
                codes.COMPONENT_ARGUMENTS(
                    ref.span,
                    f"component `{component.name.name}` takes {wanted} type argument"
                    f"{'' if wanted == 1 else 's'}, but {len(ref.args)} {'is' if len(ref.args) == 1 else 'are'} "
                    "given",
                    related=(Related(component.name.span, "the component"),),
                )
            )
            return None
        if any(c is component for c in chain):
            self.diagnostics.append(
                codes.RECURSIVE_COMPONENT(
                    ref.span,
                    f"component `{component.name.name}` {verb} itself",
                    related=(Related(component.name.span, "the component"),),
                    help="a component cannot contain an instance of itself or inherit from itself",
                )
            )
            return None
        if len(chain) >= MAX_DEPTH:
            self.diagnostics.append(
                codes.RECURSIVE_COMPONENT(
                    ref.span,
                    f"instances and bases nest more than {MAX_DEPTH} levels deep here",
                    help="flatten the components",
                )
            )
            return None
        return found

    def _contents(
        self,
        component: ast.Component,
        bindings: dict[str, str],
        scope: _Scope,
        chain: tuple[ast.Component, ...],
    ) -> tuple[list[ast.Statement], dict[str, ast.Component]]:
        """A component's statements with its type parameters bound and its instances expanded:
        its bases' first (less the rules it overrides), then its own (less its `.override`s);
        and the components it defines or inherits, which its instances (and those of a
        component inheriting from it) may name, as in Soufflé (src/ast/analysis/ComponentLookup.cpp
        searches a component's own components, then its bases', then the enclosing scope's)."""
        chain = (*chain, component)
        bases: list[list[ast.Statement]] = []
        inherited: dict[str, ast.Component] = {}
        for ref in component.bases:
            ref = _bound_ref(ref, bindings)
            found = self._lookup(ref, scope, chain, "inherits from")
            if found is None:
                continue
            base, base_scope = found
            args = [a.name for a in ref.args]
            body, components = self._contents(
                base, dict(zip(_names(base.params), args, strict=True)), base_scope, chain
            )
            bases.append(body)
            inherited.update(components)
        declared = {s.name.name: s for body in bases for s in body if isinstance(s, ast.Decl)}
        overridden: set[str] = set()
        for statement in component.body:
            if isinstance(statement, ast.Override):
                if self._may_override(statement, component, declared.get(statement.name.name)):
                    overridden.add(statement.name.name)
        for statement in component.body:
            if isinstance(statement, ast.Include | ast.Import):
                keyword = ".include" if isinstance(statement, ast.Include) else ".import"
                self.diagnostics.append(
                    codes.INVALID_DIRECTIVE(
                        statement.span,
                        f"`{keyword}` inside a component",
                        help=f"put the `{keyword}` at the top level of the file: what it loads is the "
                        "whole policy's",
                    )
                )
        own = [
            _map_types(s, lambda name: _bound(name, bindings))
            for s in component.body
            if not isinstance(s, ast.Override | ast.Include | ast.Import)
        ]
        visible = {**inherited, **_components(own, self.diagnostics)}
        inner = _Scope(visible, scope)
        out: list[ast.Statement] = []
        for body in bases:
            out.extend(s for s in body if not (isinstance(s, ast.Rule) and s.head.name in overridden))
        seen: dict[str, ast.Init] = {}
        for statement in own:
            if isinstance(statement, ast.Component):
                continue
            if isinstance(statement, ast.Init):
                if self._fresh(statement, seen):
                    out.extend(self._instance(statement, inner, chain))
            else:
                out.append(statement)
        return out, visible

    def _may_override(self, override: ast.Override, component: ast.Component, decl: ast.Decl | None) -> bool:
        name = override.name.name
        if decl is None:
            self.diagnostics.append(
                codes.INVALID_OVERRIDE(
                    override.name.span,
                    f"no base of component `{component.name.name}` declares `{name}`",
                    help="`.override` drops the rules a base gives one of its relations; name a relation "
                    "a base declares",
                )
            )
            return False
        if not decl.overridable:
            self.diagnostics.append(
                codes.INVALID_OVERRIDE(
                    override.name.span,
                    f"`{name}` is not declared `overridable`",
                    related=(Related(decl.span, "the declaration"),),
                    help=f"declare it `.decl {name}(...) overridable` in the base",
                )
            )
            return False
        return True

    def _instance(
        self, init: ast.Init, scope: _Scope, chain: tuple[ast.Component, ...]
    ) -> list[ast.Statement]:
        """The statements of one instance, their names qualified by the instance's."""
        if self.too_large:
            return []
        found = self._lookup(init.component, scope, chain, "instantiates")
        if found is None:
            return []
        component, defining = found
        bindings = dict(zip(_names(component.params), (a.name for a in init.component.args), strict=True))
        flat, _ = self._contents(component, bindings, defining, chain)
        self.produced += len(flat)
        if self.produced > MAX_STATEMENTS:
            if not self.too_large:
                self.diagnostics.append(
                    codes.RECURSIVE_COMPONENT(
                        init.span,
                        f"the instances of this file stand for more than {MAX_STATEMENTS:,} statements",
                        help="instantiate fewer or smaller components",
                    )
                )
            self.too_large = True
            return []
        prefix = init.name.name + "."
        relations = {s.name.name for s in flat if isinstance(s, ast.Decl)}
        types = {s.name.name for s in flat if isinstance(s, ast.TypeDecl)}
        # an ADT's branches are named after the instance too (`g.Leaf`), so that two instances
        # of a component declaring an ADT have branches of their own, as in Soufflé
        # (src/ast/transform/ComponentInstantiation.cpp renames the branches with the types)
        branches = {b.name.name for s in flat if isinstance(s, ast.TypeDecl) for b in s.branches}

        def relation(name: str) -> str:
            return prefix + name if name in relations else name

        def type_(name: str) -> str:
            return prefix + name if name in types else name

        def branch(name: str) -> str:
            return prefix + name if name in branches else name

        return [
            _copied(_map_branches(_map_relations(_map_types(s, type_), relation), branch), prefix)
            for s in flat
        ]


def _components(statements: list[ast.Statement], diagnostics: list[Diagnostic]) -> dict[str, ast.Component]:
    found: dict[str, ast.Component] = {}
    for statement in statements:
        if not isinstance(statement, ast.Component):
            continue
        first = found.get(statement.name.name)
        if first is not None:
            diagnostics.append(
                codes.DUPLICATE_INSTANCE(
                    statement.name.span,
                    f"there is already a component named `{statement.name.name}` here",
                    related=(Related(first.name.span, "the first component of this name"),),
                    help="give each component a name of its own",
                )
            )
            continue
        found[statement.name.name] = statement
    return found


def _names(idents: tuple[ast.Ident, ...]) -> list[str]:
    return [i.name for i in idents]


def _bound(name: str, bindings: dict[str, str]) -> str:
    return bindings.get(name, name)


def _bound_ref(ref: ast.CompType, bindings: dict[str, str]) -> ast.CompType:
    """A reference to a component with the parameters it names bound: a component given as a
    type argument (`.comp Case<C> { .init s = C }`, `.comp A<T> : T`) is the one it stands for."""
    return _comp_type(ref, lambda name: _bound(name, bindings))


def _comp_type(ref: ast.CompType, fn: Callable[[str], str]) -> ast.CompType:
    return replace(ref, name=_ident(ref.name, fn), args=tuple(_ident(a, fn) for a in ref.args))


# ------------------------------------------------------------------------ renaming


def _ident(ident: ast.Ident, fn: Callable[[str], str]) -> ast.Ident:
    new = fn(ident.name)
    return ident if new == ident.name else replace(ident, name=new)


def _attribute(attribute: ast.Attribute, fn: Callable[[str], str]) -> ast.Attribute:
    return replace(attribute, type=_ident(attribute.type, fn))


def _map_types(statement: ast.Statement, fn: Callable[[str], str]) -> ast.Statement:
    """The statement with ``fn`` applied to each type it names (not to those a nested
    component's own parameters shadow)."""
    if isinstance(statement, ast.Decl):
        return replace(statement, attributes=tuple(_attribute(a, fn) for a in statement.attributes))
    if isinstance(statement, ast.TypeDecl):
        return replace(
            statement,
            name=_ident(statement.name, fn),
            members=tuple(_ident(m, fn) for m in statement.members),
            fields=tuple(_attribute(f, fn) for f in statement.fields),
            branches=tuple(
                replace(b, fields=tuple(_attribute(f, fn) for f in b.fields)) for b in statement.branches
            ),
        )
    if isinstance(statement, ast.Init):  # a parameter may stand for the component itself
        return replace(statement, component=_comp_type(statement.component, fn))
    if isinstance(statement, ast.Component):
        shadowed = set(_names(statement.params))

        def inner(name: str) -> str:
            return name if name in shadowed else fn(name)

        return replace(
            statement,
            bases=tuple(_comp_type(b, inner) for b in statement.bases),
            body=tuple(_map_types(s, inner) for s in statement.body),
        )
    if isinstance(statement, ast.Misplaced):
        return replace(statement, statement=cast(ast.Directive, _map_types(statement.statement, fn)))
    if isinstance(statement, ast.Rule):  # the types of `as(x, T)`
        return ast.map_rule(
            statement, lambda t: replace(t, type=_ident(t.type, fn)) if isinstance(t, ast.Cast) else t
        )
    return statement


def _copied(statement: ast.Statement, prefix: str) -> ast.Statement:
    """A rule as the instance's copy: marked with the instance, and its ``@id("r")`` as the
    instance's, ``@id("g.r")``, so that each instance's rules have ids of their own."""
    if not isinstance(statement, ast.Rule):
        return statement
    statement = replace(statement, instance=prefix + statement.instance)
    if statement.annotation("id") is None:
        return statement
    annotations = tuple(
        replace(a, args=(replace(a.args[0], value=prefix + a.args[0].value), *a.args[1:]))
        if a.name == "id" and a.args and isinstance(a.args[0], ast.String)
        else a
        for a in statement.annotations
    )
    return replace(statement, annotations=annotations)


def _map_branches(statement: ast.Statement, fn: Callable[[str], str]) -> ast.Statement:
    """The statement with ``fn`` applied to each ADT branch it declares or constructs."""
    if isinstance(statement, ast.TypeDecl) and statement.branches:
        return replace(
            statement, branches=tuple(replace(b, name=_ident(b.name, fn)) for b in statement.branches)
        )
    if isinstance(statement, ast.Rule):
        return ast.map_rule(
            statement, lambda t: replace(t, name=fn(t.name)) if isinstance(t, ast.Constructor) else t
        )
    return statement


def _map_relations(statement: ast.Statement, fn: Callable[[str], str]) -> ast.Statement:
    """The statement with ``fn`` applied to each relation it names."""
    if isinstance(statement, ast.Rule):
        return ast.map_rule_literals(statement, lambda lit: _literal(lit, fn))
    if isinstance(statement, ast.Decl):
        return replace(statement, name=_ident(statement.name, fn))
    if isinstance(statement, ast.Input | ast.Output | ast.Host):
        return replace(statement, names=tuple(_ident(n, fn) for n in statement.names))
    if isinstance(statement, ast.Key | ast.LimitSize):
        return replace(statement, relation=_ident(statement.relation, fn))
    if isinstance(statement, ast.Misplaced):
        return replace(statement, statement=cast(ast.Directive, _map_relations(statement.statement, fn)))
    return statement


def _literal(literal: ast.Literal, fn: Callable[[str], str]) -> ast.Literal:
    """The literal with ``fn`` applied to the relation it names and to those of the aggregates
    inside its terms."""

    def aggregate(term: ast.Term) -> ast.Term:  # its body's terms are renamed already
        if isinstance(term, ast.Aggregate):
            return replace(term, body=tuple(_named(lit, fn) for lit in term.body))
        return term

    return _named(ast.map_literal(literal, lambda t: ast.map_deep(t, aggregate)), fn)


def _named(literal: ast.Literal, fn: Callable[[str], str]) -> ast.Literal:
    if isinstance(literal, ast.Atom):
        return replace(literal, name=fn(literal.name))
    if isinstance(literal, ast.Negation):
        return replace(literal, atom=replace(literal.atom, name=fn(literal.atom.name)))
    return literal
