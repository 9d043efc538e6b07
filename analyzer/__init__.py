"""Semantic analyses with clingo and z3: deep checks, witnesses, differences between versions and
conditions, each over a stratified program (the only package that imports the solvers)."""

from policyc.compiler.exports import exports

__all__, __getattr__ = exports(
    __name__,
    {
        "Loaded": ".query",
        "AnalysisError": ".query",
        "analyse": ".deep",
        "deep_findings": ".deep",
        "DeepResult": ".deep",
        "find_witness": ".witness",
        "find_witnesses": ".witness",
        "Witness": ".witness",
        "DiffResult": ".diff",
        "Conditions": ".conditions",
        "Deadline": ".deadline",
    },
)
