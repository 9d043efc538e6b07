"""The catalog of diagnostic codes. Codes are stable: a code, once published, keeps its name
and meaning; retired codes are not reused. ``docs/diagnostics.md`` documents every entry.

>>> UNDEFINED_RELATION.code, UNDEFINED_RELATION.name
('PC101', 'undefined-relation')
"""

from __future__ import annotations

from dataclasses import dataclass

from .diagnostics import Diagnostic, Fix, Related, Scenario, Severity
from .source import Span


@dataclass(frozen=True)
class Code:
    """A diagnostic code: ``PC101`` ``undefined-relation``, its severity and what it is about;
    calling it makes a :class:`Diagnostic` of that code."""

    code: str
    name: str
    severity: Severity
    summary: str

    def __call__(
        self,
        span: Span,
        message: str,
        *,
        related: tuple[Related, ...] | list[Related] = (),
        help: str | None = None,
        fix: Fix | None = None,
        strength: str | None = None,
        bound: int | None = None,
        uninterpreted: tuple[str, ...] = (),
        witness: Scenario | None = None,
        tool: str | None = None,
    ) -> Diagnostic:
        return Diagnostic(
            self.code,
            self.name,
            self.severity,
            message,
            span,
            tuple(related),
            help,
            fix,
            strength,
            bound,
            uninterpreted,
            witness,
            tool,
        )


E, W = Severity.ERROR, Severity.WARNING

SYNTAX_ERROR = Code("PC001", "syntax-error", E, "the text is not a well-formed policy")
INVALID_ENCODING = Code("PC002", "invalid-encoding", E, "the file is not UTF-8 text")

UNDEFINED_RELATION = Code(
    "PC101", "undefined-relation", E, "a relation is used but nothing defines or declares it"
)
ARITY_MISMATCH = Code(
    "PC102", "arity-mismatch", E, "a relation or functor is used with the wrong number of arguments"
)
TYPE_MISMATCH = Code("PC103", "type-mismatch", E, "a value of one type is used where another is required")
UNSAFE_VARIABLE = Code(
    "PC104", "unsafe-variable", E, "a variable is not bound by any positive literal or assignment"
)
NEGATION_CYCLE = Code(
    "PC105", "negation-cycle", E, "a relation depends on itself through negation or an aggregate"
)
UNDEFINED_FUNCTION = Code("PC106", "undefined-function", E, "a function is called but not declared")
INVALID_DIRECTIVE = Code("PC107", "invalid-directive", E, "a directive is malformed or contradicts another")
INVALID_ANNOTATION = Code("PC108", "invalid-annotation", E, "a rule annotation is malformed")
NAME_CONFLICT = Code("PC109", "name-conflict", E, "a name is used both as a relation and as a functor")
INVALID_PATTERN = Code(
    "PC110", "invalid-pattern", E, "a constant `match` pattern is not a regular expression `match` can run"
)
MISPLACED_GENERATOR = Code(
    "PC111", "misplaced-generator", E, "`range` is used elsewhere than as one side of `=` in a body"
)
UNKNOWN_COMPONENT = Code("PC113", "unknown-component", E, "an `.init` or a base names no component in scope")
COMPONENT_ARGUMENTS = Code(
    "PC114", "component-arguments", E, "a component is given the wrong number of type arguments"
)
RECURSIVE_COMPONENT = Code(
    "PC115",
    "recursive-component",
    E,
    "a component instantiates or inherits from itself, or its instances nest or grow past the limits",
)
DUPLICATE_INSTANCE = Code(
    "PC116", "duplicate-instance", E, "two `.init`s (or two components) of one scope have the same name"
)
INVALID_OVERRIDE = Code(
    "PC117", "invalid-override", E, "`.override` names a relation no base declares, or one not `overridable`"
)
INVALID_ARGUMENT_DECLARATION = Code(
    "PC118",
    "invalid-argument-declaration",
    E,
    "an `.arg` declaration is malformed or contradicts another declaration of the same argument",
)
INVALID_KEY = Code(
    "PC119",
    "invalid-key",
    E,
    "a `.key` names what its relation does not have, or a relation whose given facts it cannot describe",
)
INVALID_SUBSUMPTION = Code(
    "PC112",
    "invalid-subsumption",
    E,
    "a subsumption rule compares tuples of two relations, or of a relation it cannot drop tuples of",
)
ORDER_DEPENDENT = Code(
    "PC120",
    "order-dependent",
    E,
    "a policy uses a construct whose value depends on the order of evaluation (`autoinc()`, `.limitsize`)",
)

SINGLETON_VARIABLE = Code("PC201", "singleton-variable", W, "a named variable occurs only once in its rule")
UNUSED_RELATION = Code(
    "PC202", "unused-relation", W, "a relation does not contribute to `Allow`, `Deny` or an output"
)
EMPTY_RELATION = Code("PC203", "empty-relation", W, "nothing can ever put a fact into a relation")
DUPLICATE_RULE = Code("PC204", "duplicate-rule", W, "a rule repeats another rule")
REDECLARED_BUILTIN = Code(
    "PC205", "redeclared-builtin", W, "a builtin functor is declared again, with the signature it has"
)
CONTAINS_ORDER = Code(
    "PC206",
    "contains-order",
    W,
    '`contains(x, "constant")` asks whether `x` occurs in the constant: the arguments may be swapped',
)
IGNORED_OPTION = Code(
    "PC207", "ignored-option", W, "an option Soufflé reads (such as an I/O option) means nothing to policyc"
)
UNMATCHED_PATTERN = Code(
    "PC208",
    "unmatched-pattern",
    W,
    "in a program without verdicts, a constant `match` pattern Soufflé rejects or RE2 cannot run: it matches nothing",
)
SOUFFLE_DIFFERENCE = Code(
    "PC209",
    "souffle-difference",
    W,
    "a construct Soufflé accepts gives another answer here, on purpose (the message says why)",
)
EVALUATION_ORDER = Code(
    "PC210",
    "evaluation-order",
    W,
    "in a program without verdicts, a construct whose value depends on the order of evaluation",
)
MISSING_VERDICT_ANNOTATION = Code(
    "PC211",
    "missing-verdict-annotation",
    W,
    "a `Deny` or `Escalate` rule has no `@id` or no `@message`: its reasons say neither which rule nor why",
)

# deep findings (`policyc check --deep`), each with a strength
UNSATISFIABLE_RULE = Code("PC301", "unsatisfiable-rule", W, "a rule's body can never hold")
UNREACHABLE_RULE = Code(
    "PC302", "unreachable-rule", W, "a rule needs a relation that can never hold, so it never fires"
)
REDUNDANT_RULE = Code("PC303", "redundant-rule", W, "removing a rule never changes what the policy derives")
SHADOWED_ALLOW = Code("PC304", "shadowed-allow", W, "whenever an `Allow` rule fires, a `Deny` fires too")
ALWAYS_DENY = Code("PC305", "always-deny", W, "every call of a tool is denied, on every database")
ALWAYS_ALLOW = Code("PC306", "always-allow", W, "no call of a tool is ever denied")
SHADOWED_ESCALATE = Code(
    "PC307", "shadowed-escalate", W, "whenever an `Escalate` rule fires, a `Deny` fires too"
)
UNSEARCHED_RULE = Code(
    "PC308", "unsearched-rule", W, "the bounded searches of `--deep` cannot translate or model a rule"
)
VERDICT_NOT_ACTION = Code(
    "PC312",
    "verdict-not-action",
    W,
    "a `Deny`, `Allow` or `Escalate` rule decides a value that is never an action (an argument's value, a text)",
)
MISSING_ARGUMENT = Code(
    "PC309",
    "missing-argument",
    W,
    "a `Deny` or `Escalate` rule tests an argument no declaration makes present: a call without it escapes",
)
UNTYPED_ARGUMENT_COMPARISON = Code(
    "PC310",
    "untyped-argument-comparison",
    W,
    "a tool argument of undeclared type is compared or computed with: the call's JSON types decide, not its values",
)
LENIENT_CONVERSION = Code(
    "PC311",
    "lenient-conversion",
    W,
    'a `Deny` or `Escalate` condition reads agent text with a lenient conversion (`"1e9"` reads as 1)',
)

CATALOG: tuple[Code, ...] = (
    SYNTAX_ERROR,
    INVALID_ENCODING,
    UNDEFINED_RELATION,
    ARITY_MISMATCH,
    TYPE_MISMATCH,
    UNSAFE_VARIABLE,
    NEGATION_CYCLE,
    UNDEFINED_FUNCTION,
    INVALID_DIRECTIVE,
    INVALID_ANNOTATION,
    NAME_CONFLICT,
    INVALID_PATTERN,
    MISPLACED_GENERATOR,
    UNKNOWN_COMPONENT,
    COMPONENT_ARGUMENTS,
    RECURSIVE_COMPONENT,
    DUPLICATE_INSTANCE,
    INVALID_OVERRIDE,
    INVALID_ARGUMENT_DECLARATION,
    INVALID_KEY,
    INVALID_SUBSUMPTION,
    ORDER_DEPENDENT,
    SINGLETON_VARIABLE,
    UNUSED_RELATION,
    EMPTY_RELATION,
    DUPLICATE_RULE,
    REDECLARED_BUILTIN,
    CONTAINS_ORDER,
    IGNORED_OPTION,
    UNMATCHED_PATTERN,
    SOUFFLE_DIFFERENCE,
    EVALUATION_ORDER,
    MISSING_VERDICT_ANNOTATION,
    UNSATISFIABLE_RULE,
    UNREACHABLE_RULE,
    REDUNDANT_RULE,
    SHADOWED_ALLOW,
    ALWAYS_DENY,
    ALWAYS_ALLOW,
    SHADOWED_ESCALATE,
    UNSEARCHED_RULE,
    MISSING_ARGUMENT,
    UNTYPED_ARGUMENT_COMPARISON,
    LENIENT_CONVERSION,
    VERDICT_NOT_ACTION,
)

BY_NAME: dict[str, Code] = {c.name: c for c in CATALOG}
BY_CODE: dict[str, Code] = {c.code: c for c in CATALOG}
