"""Every FORGE policy listing checks clean, and planted errors in them are found.

The listings live in `examples/forge/`. Each planted error edits one listing (replace a piece
of text by another) and names the diagnostic that must appear, and on which line: nothing
else may change in the output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from policyc.compiler.pipeline import compile_file, compile_source

from .conftest import EXAMPLES

FORGE = sorted((EXAMPLES / "forge").glob("*.dl"))


def test_every_listing_is_there() -> None:
    names = {p.stem for p in FORGE}
    assert names >= {
        "toxic_flow",
        "approval",
        "mls",
        "malade",
        "openclaw",
        "copilot",
        "tau2_airline",
        "tau2_retail",
        "agentdojo_provenance",
    }


@pytest.mark.parametrize("path", FORGE, ids=lambda p: p.stem)
def test_listing_checks_clean(path: Path) -> None:
    result = compile_file(str(path))
    assert [(d.span.line, d.name, d.message) for d in result.diagnostics] == []
    assert result.completed == "stratify"


@pytest.mark.parametrize("path", FORGE, ids=lambda p: p.stem)
def test_listing_through_the_command(path: Path, policyc) -> None:
    run = policyc("check", "--format", "json", str(path.relative_to(EXAMPLES.parent)))
    assert run.status == 0, run.stdout + run.stderr
    assert run.json() == {"diagnostics": [], "errors": 0, "warnings": 0}


# (listing, text to replace, replacement, [(name, line)])
PLANTED = [
    (
        "toxic_flow",
        "Deny(a) :- ExternalSend(a), Tainted(a), HasSecret(a).",
        "Deny(a) :- ExternalSend(a), Taint(a), HasSecret(a).",
        [("undefined-relation", 23), ("unused-relation", 13), ("unused-relation", 6)],
    ),
    (
        "toxic_flow",
        "Tainted(e) :- DependsOn(e, e’), Tainted(e’).",
        "Tainted(e) :- DependsOn(e, e’), Tainted(e’, e).",
        [("arity-mismatch", 14)],
    ),
    (
        "toxic_flow",
        "HasSecret(e) :- SensitiveInput(e).",
        "HasSecret(e) :- SensitiveInput(x).",
        [("unsafe-variable", 15), ("singleton-variable", 15)],
    ),
    (
        "toxic_flow",
        "Deny(a) :- ExternalSend(a), Tainted(a), HasSecret(a).",
        "Deny(a) :- ExternalSend(a), Tainted(a), HasSecret(a)",
        [("syntax-error", 23)],
    ),
    (
        "toxic_flow",
        "Tainted(e) :- UntrustedInput(e).",
        "Tainted(e) :- UntrustedInput(e), not Deny(e).",
        [("negation-cycle", 13)],
    ),
    (
        "approval",
        "Deny(a) :- ProtectedAPICall(a), not HasApproval(a).",
        "Deny(a) :- ProtectedAPICall(a), not HasApproval(b).",
        [("unsafe-variable", 17)],
    ),
    (
        "approval",
        "HasApproval(a) :- ProtectedAPICall(a), Reaches(a, p), Approval(p).",
        "HasApproval(a) :- ProtectedAPICall(a), Reaches(a, p), Approval(p), p = 3.",
        [("type-mismatch", 12)],
    ),
    ("mls", 'Level("SECRET", 2).', 'Level("SECRET", "two").', [("type-mismatch", 20)]),
    (
        "mls",
        "ClearanceRank(c),\n    level > c.",
        "ClearanceRank(c),\n    levl > c.",
        [("unsafe-variable", 33)],
    ),
    (
        "mls",
        "Deny(a) :- RecipientRank(a, r), ClearanceRank(c), r < c.",
        "Deny(a) :- RecipientRank(a, r), ClearanceRank(c), r < c.\nDeny(a) :- RecipientRank(a, r), ClearanceRank(c), r < c.",
        [("duplicate-rule", 57), ("missing-verdict-annotation", 57)],
    ),
    ("malade", '@id("not-fda")', '@id("fda-access")', [("invalid-annotation", 42)]),
    (
        "malade",
        ".functor queries(a: symbol, host: symbol): bool",
        ".functor queries(a: symbol): bool",
        [("arity-mismatch", 33), ("arity-mismatch", 43)],
    ),
    (
        "openclaw",
        ".functor tool_arg(a: symbol, key: symbol): any",
        "",
        [("undefined-function", 27), ("undefined-function", 28)],
    ),
    (
        "copilot",
        "TotalUncoveredDiffSize(total) :- total = sum size : { UncoveredDiffSize(_, size) }.",
        "TotalUncoveredDiffSize(total) :- total = sum size : { UncoveredDiffSize(_, size), TotalUncoveredDiffSize(size) }.",
        [("negation-cycle", 59)],
    ),
    (
        "copilot",
        "SastScanOverdue() :- TotalUncoveredDiffSize(total), total > 1000.",
        'SastScanOverdue() :- TotalUncoveredDiffSize(total), total > "1000".',
        [("type-mismatch", 60)],
    ),
    (
        "tau2_airline",
        ".decl UserRequestedBags()\n",
        ".decl UserRequestedBags()\n.decl UserRequestedBags()\n",
        [("invalid-directive", 17)],
    ),
    (
        "tau2_airline",
        "not UserRequestedCompensation().",
        "not UserRequestedCompensation(a).",
        [("arity-mismatch", 93)],
    ),
    (
        "tau2_retail",
        ".decl ItemPairOk(a: symbol, pos: number)",
        ".decl ItemPairOk(a: symbol, pos: symbol)",
        [("type-mismatch", 100)],
    ),
    (
        "tau2_retail",
        "Deny(a) :- ModifyItemPair(a, _, item_id, item_id).",
        "Deny(a) :- ModifyItemPair(a, _, item_id, item_id), not ItemKnown(item_id).",
        [("undefined-relation", 103)],
    ),
    (
        "agentdojo_provenance",
        ".decl BrowseAllowed(a: symbol) inline",
        ".decl BrowseAllowed(a: symbol)",
        [("unsafe-variable", 107)],
    ),
    (
        "agentdojo_provenance",
        ".decl Anchored(v: symbol) inline",
        ".decl Anchored(v: symbol)",
        [("unsafe-variable", 51)],
    ),
]


@pytest.mark.parametrize(("listing", "old", "new", "expected"), PLANTED)
def test_planted_error(listing: str, old: str, new: str, expected: list[tuple[str, int]]) -> None:
    path = EXAMPLES / "forge" / f"{listing}.dl"
    text = path.read_text("utf-8")
    assert old in text, f"{old!r} is not in {listing}.dl"
    planted = text.replace(old, new, 1)
    result = compile_source(planted, str(path))
    found = sorted((d.name, d.span.line) for d in result.diagnostics)
    assert found == sorted(expected), [(d.name, d.span.line, d.message) for d in result.diagnostics]


def test_retail_listing_as_printed_warns_about_its_singletons() -> None:
    """The paper's item-pair rule names two ids it never uses; policyc says so."""
    path = EXAMPLES / "forge" / "tau2_retail.dl"
    text = path.read_text("utf-8").replace("_old_id, _new_id", "old_id, new_id")
    result = compile_source(text, str(path))
    assert [(d.name, d.message) for d in result.diagnostics] == [
        ("singleton-variable", "variable `old_id` occurs only once in this rule"),
        ("singleton-variable", "variable `new_id` occurs only once in this rule"),
    ]
