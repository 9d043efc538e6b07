"""docs/serve.md says what the service does: its API reference is the one made from the OpenAPI
document (and so lists exactly its operations), `policyc serve openapi` prints both, and every
error code the service answers with is documented there."""

from __future__ import annotations

import json
import re
import subprocess

from policyc.serve.app import STATUS
from policyc.serve.errors import KINDS
from policyc.serve.openapi import document
from policyc.serve.reference import BEGIN, END, markdown

from .conftest import ROOT
from .support.commands import policyc_path

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


def test_the_api_reference_is_made_from_the_openapi_document() -> None:
    made = markdown(document())
    start, end = DOC.index(BEGIN), DOC.index(END) + len(END)
    assert DOC[start:end] + "\n" == made, (
        "run `policyc serve openapi --markdown` and paste it into docs/serve.md"
    )
    for path, operations in document()["paths"].items():
        for method, operation in operations.items():
            row = next(
                line for line in made.splitlines() if line.startswith(f"| `{method.upper()} {path}` |")
            )
            assert operation["summary"] in row


def test_policyc_serve_openapi_prints_the_document_and_the_reference() -> None:
    printed = subprocess.run([policyc_path(), "serve", "openapi"], capture_output=True, text=True, check=True)
    assert json.loads(printed.stdout) == json.loads(json.dumps(document()))
    reference = subprocess.run(
        [policyc_path(), "serve", "openapi", "--markdown"], capture_output=True, text=True, check=True
    )
    assert reference.stdout == markdown(document())


def test_every_error_code_of_the_service_is_documented() -> None:
    source = "\n".join(p.read_text("utf-8") for p in (ROOT / "serve").glob("*.py"))
    kinds = "|".join(KINDS)  # every refusal is raised as one of the service's kinds of error
    codes = set(re.findall(rf'\b(?:{kinds})\(\s*"([a-z-]+)"', source))
    codes |= set(re.findall(r'_error\(\s*\d{3},\s*"([a-z-]+)"', source))
    assert len(codes) >= 15, codes
    missing = sorted(code for code in codes if f"`{code}`" not in DOC)
    assert missing == [], f"docs/serve.md does not name these error codes: {missing}"


def test_every_kind_of_refusal_has_its_own_http_status() -> None:
    assert set(STATUS) == set(KINDS.values())
    assert len(set(STATUS.values())) == len(STATUS), "two kinds of refusal share a status"
    assert all(400 <= status < 600 for status in STATUS.values())
