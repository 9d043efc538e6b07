"""Argument declarations: ``.arg tool.argument : TYPE [required]``.

A declaration says what JSON value a tool's argument holds and whether every call must give
it. It is used three ways: the type checker gives ``tool_arg(a, "amount")`` the declared type
where a rule fixes the tool ``a`` calls (:func:`fixed_tools`, :func:`declared_for`); the plan
carries the declarations (:class:`~.plan.ArgumentSpec`) so that the monitor refuses a call
whose arguments do not match before any rule runs; and the analyzer reads them through
:func:`declared_arguments`.

>>> from policyc.compiler.pipeline import compile_source
>>> compilation = compile_source('.arg pay.amount : number required\\n.arg pay.to : symbol')
>>> [(a.tool, a.argument, a.type, a.required) for a in declared_arguments(compilation).values()]
[('pay', 'amount', 'number', True), ('pay', 'to', 'symbol', False)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import ast
from .plan import ARGUMENT_TYPES
from .source import Span

if TYPE_CHECKING:
    from .stages import Resolved

ARG_TYPES = ARGUMENT_TYPES
"""The types an argument may be declared: the JSON values it may hold (``symbol`` a string,
``number`` an integer, ``unsigned`` an integer of at least 0, ``float`` any number, ``bool``
``true`` or ``false``, ``list`` an array, ``object`` an object, ``any`` every value)."""

PRESENCES = ("required", "optional")
"""What may follow the type: ``required`` (present and not null) or ``optional`` (the default)."""

VALUE_TYPES: Mapping[str, str | None] = {
    "symbol": "symbol",
    "number": "number",
    "unsigned": "unsigned",
    "float": "float",
    "bool": "symbol",  # `tool_arg` gives a boolean as the text "true" or "false"
    "list": "symbol",  # and a list or an object as its JSON text
    "object": "symbol",
    "any": None,
}
"""The type of ``tool_arg``'s value for an argument of each declared type (None: any type)."""


@dataclass(frozen=True)
class Argument:
    """A declared argument: its tool, its name, its type (one of :data:`ARG_TYPES`), whether
    every call must give it, and where it is declared (the directive, and its
    ``tool.argument``)."""

    tool: str
    argument: str
    type: str
    required: bool
    span: Span = field(compare=False)
    path_span: Span = field(compare=False)

    @property
    def name(self) -> str:
        """``tool.argument``, as a policy writes it."""
        return f"{self.tool}.{self.argument}"

    @property
    def value_type(self) -> str | None:
        """The type ``tool_arg`` gives its value (None: any)."""
        return VALUE_TYPES[self.type]


def of_declaration(statement: ast.ArgDecl) -> Argument:
    """The argument an ``.arg`` declares (its type and presence already checked)."""
    return Argument(
        statement.tool,
        statement.argument,
        statement.type.name,
        statement.required,
        statement.span,
        statement.path_span,
    )


def declared_arguments(compilation: Resolved) -> dict[tuple[str, str], Argument]:
    """Every argument the policy declares, by ``(tool, argument)``, in the order written
    (a malformed or conflicting declaration is left out: the checks report it)."""
    return dict(compilation.symbols.arguments)


# --------------------------------------------------------------------------- rules


TOOL_CALL = "ToolCall"  # `ToolCall(a, "pay")`
IS_TOOL = "is_tool"  # `is_tool(a, "pay")`
TOOL_NAME = "tool_name"  # `tool_name(a) = "pay"`
TOOL_ARG = "tool_arg"  # `tool_arg(a, "amount")`


def fixed_tools(literals: Iterable[ast.Literal]) -> dict[str, frozenset[str]]:
    """Per variable, the tools that ``literals`` (a rule's body, or an aggregate's) say the
    call it names calls: ``ToolCall(a, "pay")``, ``is_tool(a, "pay")`` or ``tool_name(a) =
    "pay"`` (either way round). A variable fixed to two tools has both.

    >>> from policyc.compiler.parser import parse
    >>> from policyc.compiler.source import SourceFile
    >>> module, _ = parse(SourceFile("p.dl", 'D(a) :- ToolCall(a, "pay"), tool_name(b) = "mail".'))
    >>> sorted(fixed_tools(module.statements[0].body).items())
    [('a', frozenset({'pay'})), ('b', frozenset({'mail'}))]
    """
    found: dict[str, set[str]] = {}
    for literal in literals:
        fixed = _fixed(literal)
        if fixed is not None:
            found.setdefault(fixed[0], set()).add(fixed[1])
    return {name: frozenset(tools) for name, tools in found.items()}


def _fixed(literal: ast.Literal) -> tuple[str, str] | None:
    if isinstance(literal, ast.Atom) and literal.name in (TOOL_CALL, IS_TOOL) and len(literal.args) == 2:
        call, tool = literal.args
        if isinstance(call, ast.Var) and isinstance(tool, ast.String):
            return call.name, tool.value
    if isinstance(literal, ast.Comparison) and literal.op == "=":
        for left, right in ((literal.left, literal.right), (literal.right, literal.left)):
            if (
                isinstance(left, ast.Call)
                and left.name == TOOL_NAME
                and len(left.args) == 1
                and isinstance(left.args[0], ast.Var)
                and isinstance(right, ast.String)
            ):
                return left.args[0].name, right.value
    return None


def declared_for(
    call: ast.Call, tools: Mapping[str, frozenset[str]], arguments: Mapping[tuple[str, str], Argument]
) -> Argument | None:
    """The declaration of the argument ``call`` (``tool_arg(a, "key")``) reads, where ``tools``
    fixes ``a``'s tool and that tool declares ``key``; when ``a`` is fixed to several tools,
    their declarations must give the value one type (the first is returned)."""
    if call.name != TOOL_ARG or len(call.args) != 2:
        return None
    variable, key = call.args
    if not isinstance(variable, ast.Var) or not isinstance(key, ast.String):
        return None
    found = [arguments.get((tool, key.value)) for tool in sorted(tools.get(variable.name, ()))]
    if not found or any(a is None for a in found):
        return None
    first = found[0]
    assert first is not None
    if any(a is not None and a.value_type != first.value_type for a in found):
        return None
    return first
