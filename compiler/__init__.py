"""The compiler: source text to an evaluation plan through typed stages (parse, resolve, check,
stratify, plan), diagnostics as values, the formatter, and the typed reader of file formats."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "compile_file": ".pipeline",
        "compile_source": ".pipeline",
        "compile_program": ".pipeline",
        "check_source": ".pipeline",
        "Parsed": ".stages",
        "Resolved": ".stages",
        "Checked": ".stages",
        "Stratified": ".stages",
        "Planned": ".stages",
        "Program": ".loader",
        "SourceFile": ".source",
        "Span": ".source",
        "Diagnostic": ".diagnostics",
        "Severity": ".diagnostics",
        "CATALOG": ".codes",
        "Plan": ".plan",
        "PlanError": ".plan",
        "FormatError": ".reading",
        "format_source": ".formatter",
        "declared_arguments": ".arguments",
    },
)
