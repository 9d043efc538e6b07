"""docs/serve.md says what the service does: its table of routes is the OpenAPI document's
operations, and every error code the service answers with is documented there."""

from __future__ import annotations

import re

from policyc.serve.openapi import document

from .conftest import ROOT

DOC = (ROOT / "docs" / "serve.md").read_text("utf-8")


def _generic(path: str) -> str:
    return re.sub(r"\{[A-Za-z_]+\}", "{}", path)


def test_the_route_table_is_the_openapi_documents_operations() -> None:
    table = {
        (method, _generic(path))
        for method, path in re.findall(r"^\| `(GET|POST|PUT|DELETE) (/[^` ]*)` \|", DOC, flags=re.M)
    }
    published = {
        (method.upper(), _generic(path))
        for path, operations in document()["paths"].items()
        for method in operations
    }
    assert table == published


def test_every_error_code_of_the_service_is_documented() -> None:
    source = "\n".join(p.read_text("utf-8") for p in (ROOT / "serve").glob("*.py"))
    codes = set(re.findall(r'Problem\(\s*\d{3},\s*"([a-z-]+)"', source))
    codes |= set(re.findall(r'_error\(\s*\d{3},\s*"([a-z-]+)"', source))
    assert len(codes) >= 15, codes
    missing = sorted(code for code in codes if f"`{code}`" not in DOC)
    assert missing == [], f"docs/serve.md does not name these error codes: {missing}"
