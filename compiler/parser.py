"""Text to AST, reporting every syntax error of a file.

The grammar (``grammar/policy.lark``) is compiled once by Lark into an LALR table, kept as
plain tables on disk (:mod:`.grammar_tables`). Parsing is then three steps:

1. **tokenize** the whole file (:mod:`.tokens`), resuming after text it cannot read, so a
   stray character or an unterminated string is one error, not the end of the file;
2. **drive** the LALR automaton over the tokens one statement at a time (start symbol
   ``item``); when it gets stuck, report the error with a friendly message
   (:mod:`.syntax_errors`), skip to the next place a statement can start and go on;
3. **build** the AST during the parse: each grammar rule has a method in
   :class:`~policyc.compiler.ast_builder.Builder` that returns a frozen node with the span of
   its tokens.

>>> module, diagnostics = parse(SourceFile("p.dl", "Deny(a) :- Send(a), not Ok(a)."))
>>> module.statements[0].body[1]
Negation(atom=Atom(name='Ok', args=(Var(name='a'),)))
>>> diagnostics
[]
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from . import ast, codes, desugar, syntax_errors
from .ast_builder import Builder, ComponentClose, ComponentOpen
from .components import expand as expand_components
from .diagnostics import Diagnostic
from .grammar_tables import tables
from .source import SourceFile
from .tokens import Token, tokenize

MAX_NESTING = 200  # deeper terms are refused rather than risk exhausting the stack later
MAX_COMPONENT_NESTING = 32  # components defined inside components, likewise

_SYNC_TYPES = frozenset({"AT", "UNKNOWN_DIRECTIVE"} | {d[1:].upper() for d in syntax_errors.DIRECTIVES})


def parse(
    source: SourceFile, surface: bool = False, components: bool = True
) -> tuple[ast.Module, list[Diagnostic]]:
    """Parse one file. The module holds every statement that parsed; the list, every error.

    A rule with several heads or with ``;`` is desugared into the plain rules it stands for
    (:mod:`.desugar`), an ``eqrel`` declaration is followed by the rules that close its
    relation, and components are expanded into the statements of their instances
    (:mod:`.components`), unless ``surface``: then they are the :class:`~.ast.Compound` and
    the :class:`~.ast.Component` written. Without ``components`` the components and instances
    stay as they are, desugared (the loader expands them over all the files of a program)."""
    tokens, comments, diagnostics = tokenize(source)
    builder = Builder(source, diagnostics)
    statements = _nested(source, _drive(source, tokens, builder, diagnostics), diagnostics)
    statements = _desugared(statements, diagnostics, surface)
    if components and not surface:
        statements = expand_components(statements, diagnostics)
    module = ast.Module(source.path, tuple(statements), tuple(comments), source)
    return module, diagnostics


def _desugared(
    statements: list[ast.Statement], diagnostics: list[Diagnostic], surface: bool
) -> list[ast.Statement]:
    out: list[ast.Statement] = []
    for statement in statements:
        if isinstance(statement, ast.Decl) and desugar.closable(statement):
            out.append(statement)
            if not surface:
                out.extend(desugar.equivalence_rules(statement))
            continue
        if isinstance(statement, ast.Component):
            body = _desugared(list(statement.body), diagnostics, surface)
            out.append(dataclasses.replace(statement, body=tuple(body)))
            continue
        if isinstance(statement, ast.Rule) and not surface:
            out.append(desugar.named_results(statement))
            continue
        if not isinstance(statement, ast.Compound):
            out.append(statement)
            continue
        rules = desugar.expand(statement)
        if not surface:
            rules = [desugar.named_results(rule) for rule in rules]
        if len(rules) > desugar.MAX_RULES:
            diagnostics.append(
                codes.SYNTAX_ERROR(
                    statement.span,
                    f"this rule stands for more than {desugar.MAX_RULES} rules (its heads times the "
                    "alternatives of its `;`)",
                    help="define the alternatives in relations of their own",
                )
            )
        elif surface:
            out.append(statement)
        else:
            out.extend(rules)
    return out


def _nested(source: SourceFile, statements: list[Any], diagnostics: list[Diagnostic]) -> list[ast.Statement]:
    """The statements with each ``.comp ... {`` and its ``}`` made one :class:`~.ast.Component`
    holding the statements between them."""
    if not any(isinstance(s, ComponentOpen | ComponentClose | ast.Misplaced) for s in statements):
        return statements
    out: list[ast.Statement] = []
    opened: list[tuple[ComponentOpen, list[ast.Statement]]] = []
    for statement in statements:
        if isinstance(statement, ast.Misplaced) and isinstance(
            statement.statement, ComponentOpen | ComponentClose
        ):
            diagnostics.append(
                codes.INVALID_ANNOTATION(
                    statement.annotations[0].span,
                    "annotations can only precede a rule",
                    help="move the annotations to the rule they describe, or remove them",
                )
            )
            statement = statement.statement
        if isinstance(statement, ComponentOpen):
            if len(opened) == MAX_COMPONENT_NESTING:
                diagnostics.append(
                    codes.SYNTAX_ERROR(
                        statement.span,
                        f"components nest more than {MAX_COMPONENT_NESTING} levels deep here",
                        help="define the inner components at the top level",
                    )
                )
            opened.append((statement, []))
        elif isinstance(statement, ComponentClose):
            if opened:
                start, body = opened.pop()
                parent = opened[-1][1] if opened else out
                if len(opened) >= MAX_COMPONENT_NESTING:
                    parent.extend(body)  # too deep (reported): its statements, not a component
                else:
                    parent.append(_component(source, start, body, statement.span))
            elif not any(
                d.code == codes.SYNTAX_ERROR.code and d.span.start < statement.span.start for d in diagnostics
            ):
                # after a syntax error the `}` may close a `.comp` that did not parse: no second error
                diagnostics.append(
                    codes.SYNTAX_ERROR(
                        statement.span,
                        "this `}` closes no component",
                        help="a component is `.comp Name { ... }`; remove the `}` or open the component",
                    )
                )
        else:
            (opened[-1][1] if opened else out).append(statement)
    while opened:
        start, body = opened.pop()
        if len(opened) >= MAX_COMPONENT_NESTING:
            (opened[-1][1] if opened else out).extend(body)
            continue
        diagnostics.append(
            codes.SYNTAX_ERROR(
                start.span,
                f"component `{start.name.name}` is not closed",
                help="end the component with `}`",
            )
        )
        end = body[-1].span if body else start.span
        (opened[-1][1] if opened else out).append(_component(source, start, body, end))
    return out


def _component(
    source: SourceFile, start: ComponentOpen, body: list[ast.Statement], close: Any
) -> ast.Component:
    span = source.span(start.span.start, close.end)
    return ast.Component(start.name, start.params, start.bases, tuple(body), span=span, close_span=close)


# ------------------------------------------------------------------------------ driver


class _Splice(list):
    """The children of one of Lark's helper rules (``x*``), to be spliced into the parent's."""


@dataclasses.dataclass(frozen=True)
class _Automaton:
    """Lark's LALR table for ``item``, re-keyed for a tight loop.

    ``actions[state][symbol]`` is ``(True, next_state)`` for a shift (or a goto on a
    nonterminal) and ``(False, rule)`` for a reduction by ``rules[rule]``, which is
    ``(origin, length, builder method name or None, splices)``; a ``None`` method means the
    rule is a helper whose children go up to its parent (``_Splice``) or a ``?rule`` with
    one child that passes it through.
    """

    actions: dict[int, dict[str, tuple[bool, int]]]
    rules: tuple[tuple[str, int, str | None, bool], ...]
    start: int
    end: int


@functools.cache
def _automaton() -> _Automaton:
    found = tables()
    return _Automaton(found.actions, found.rules, found.start, found.end)


def _reducers(builder: Builder) -> list[tuple[str, int, Any]]:
    """Per rule of the automaton: (origin, length, callable building its value)."""
    reducers = []
    for origin, length, method, splices in _automaton().rules:
        if method == "_splice":
            build: Any = _Splice
        elif method is None:
            build = _first
        else:
            build = getattr(builder, method, None)
            if build is None:
                raise AssertionError(f"grammar rule {method!r} has no AST builder")
        if splices:
            build = _splicing(build)
        reducers.append((origin, length, build))
    return reducers


def _first(children: list) -> Any:
    return children[0]


def _splicing(method: Any) -> Any:
    def call(children: list) -> Any:
        flat: list = []
        for child in children:
            if isinstance(child, _Splice):
                flat.extend(child)
            else:
                flat.append(child)
        return method(flat)

    return call


class _Stuck(Exception):
    def __init__(self, expected: set[str]) -> None:
        self.expected = expected


def _drive(
    source: SourceFile, tokens: list[Token], builder: Builder, diagnostics: list[Diagnostic]
) -> list[ast.Statement]:
    automaton = _automaton()
    actions, start_state, end_state = automaton.actions, automaton.start, automaton.end
    reducers = _reducers(builder)
    states: list[int] = []
    values: list[Any] = []

    def feed(token: Token, is_end: bool = False) -> Any:
        while True:
            row = actions[states[-1]]
            action = row.get(token.type)
            if action is None:
                raise _Stuck({name for name in row if name.isupper()})
            shift, arg = action
            if shift:
                states.append(arg)
                values.append(token)
                return None
            origin, length, build = reducers[arg]
            if length:
                children = values[-length:]
                del states[-length:]
                del values[-length:]
            else:
                children = []
            value = build(children)
            states.append(actions[states[-1]][origin][1])
            values.append(value)
            if is_end and states[-1] == end_state:
                return value

    n = len(tokens)
    end = Token("$END", "", len(source.text), len(source.text))
    statements: list[ast.Statement] = []
    i = 0
    first = 0
    fresh = True
    while True:
        token = tokens[i] if i < n else end
        if fresh:
            if i >= n:
                break
            states[:] = [start_state]
            values.clear()
            first = i
            fresh = False
        row = actions[states[-1]]
        try:
            if token.type in row and token is not end:
                feed(token)
                i += 1
                continue
            if i > first and "$END" in row:
                statement = feed(Token("$END", "", token.start, token.start), True)
                fresh = True
                # each level of nesting takes a token, so short statements cannot be too deep
                if i - first > MAX_NESTING and _depth(statement) > MAX_NESTING:
                    diagnostics.append(
                        codes.SYNTAX_ERROR(
                            statement.span,
                            f"this statement nests terms more than {MAX_NESTING} levels deep",
                            help="split the expression with intermediate variables",
                        )
                    )
                else:
                    statements.append(statement)
                continue
            expected = {name for name in row if name.isupper()}
        except _Stuck as stuck:
            expected = stuck.expected
        if token.type != "LEXERROR":  # unreadable text is reported by the tokenizer already
            diagnostics.append(_unexpected(source, tokens, i, first, expected, end))
        fresh = True
        depth = sum(isinstance(s, ComponentOpen) for s in statements) - sum(
            isinstance(s, ComponentClose) for s in statements
        )
        i = _resync(source, tokens, i, first, depth > 0)
    return statements


def _depth(statement: ast.Statement) -> int:
    """How deeply the terms of a statement nest (aggregate bodies included)."""
    if isinstance(statement, ast.Misplaced):
        statement = statement.statement
    stack: list[tuple[object, int]]
    if isinstance(statement, ast.Rule):
        stack = [(statement.head, 1)]
        stack.extend((lit, 1) for lit in statement.body)
    elif isinstance(statement, ast.Compound):
        stack = [(head, 1) for head in statement.heads]
        stack.append((ast.Disjunction(statement.body), 0))
    else:
        return 0
    deepest = 0
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        if isinstance(node, ast.Atom | ast.Negation | ast.Comparison):
            stack.extend((t, depth + 1) for t in ast.literal_terms(node))
        elif isinstance(node, ast.Disjunction):
            stack.extend((item, depth + 1) for alternative in node.alternatives for item in alternative)
        elif isinstance(node, ast.Aggregate):
            if node.target is not None:
                stack.append((node.target, depth + 1))
            stack.extend((lit, depth + 1) for lit in node.body)
        else:
            stack.extend((t, depth + 1) for t in ast.term_children(node))  # type: ignore[arg-type]
    return deepest


def _unexpected(
    source: SourceFile, tokens: list[Token], i: int, first: int, expected: set[str], end: Token
) -> Diagnostic:
    token = tokens[i] if i < len(tokens) else end
    previous = source.span(tokens[i - 1].start, tokens[i - 1].end) if i > first else None
    following = tokens[i + 1] if i + 1 < len(tokens) else None
    next_value = None
    if following is not None and following.type == "NAME" and following.start == token.end:
        next_value = following.value
    consumed = tokens[first:i]
    return syntax_errors.unexpected_token(
        source,
        token.type,
        token.value,
        source.span(token.start, token.end),
        expected,
        previous,
        next_value,
        in_rule=any(t.type == "IF" for t in consumed),
        annotations_pending=bool(consumed) and consumed[0].type == "AT",
        previous_type=tokens[i - 1].type if i > first else None,
        previous_value=tokens[i - 1].value if i > first else "",
    )


def _resync(source: SourceFile, tokens: list[Token], i: int, first: int, in_component: bool = False) -> int:
    """Where to start parsing again after an error at token ``i``.

    Skip to just after the next `.`, or to the next token that starts a line and can start
    a statement: at column 1, or a directive or annotation (in any sensibly laid-out file,
    that is where the next statement begins); inside a component, any token that starts a line
    at or left of the column where the failing statement started (the next statement of the
    component, or the `}` that closes it).
    The failing token itself may start the next statement, unless it was the first token of
    a statement already.
    """
    n = len(tokens)
    text = source.text
    # inside a component statements are indented: they start at the column of the failing one
    column = tokens[first].start - text.rfind("\n", 0, tokens[first].start) if first < n else 1
    j = i
    if i == first:
        if i < n and tokens[i].type == "DOT":
            return i + 1
        j = i + 1
    while j < n:
        token = tokens[j]
        if token.type == "DOT":
            return j + 1
        starts_line = j == 0 or "\n" in text[tokens[j - 1].end : token.start]
        if starts_line and (
            token.type in _SYNC_TYPES
            or token.start == 0
            or text[token.start - 1] == "\n"
            or (in_component and token.start - text.rfind("\n", 0, token.start) <= column)
        ):
            return j
        j += 1
    return n
