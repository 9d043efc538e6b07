"""The service against its own OpenAPI document: schemathesis generates requests for every
operation from the document `GET /openapi.json` serves and checks every answer (no 5xx, status
codes, content types, bodies and headers as documented, malformed requests refused, a missing
key refused), with a key and without one.

One check is left out: that every request the schema allows is accepted. A schema cannot say
which sessions exist, or which earlier events a new one may depend on, so a well-formed request
for a session that is not there is rightly 404, and an event depending on an unknown one 422."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from policyc.serve.keys import new_key
from policyc.serve.openapi import document

from .support.service import Server
from .test_serve import POLICY

SCHEMA = schemathesis.openapi.from_dict(document())
KEY, DIGEST = new_key()  # the running service's one principal's key, and its hash


@SCHEMA.auth(refresh_interval=None)
class BearerKey:
    """The service's key, as schemathesis applies (and, to check it is needed, leaves out) auth."""

    def get(self, case, context) -> str:
        return KEY

    def set(self, case, data, context) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory):
    folder: Path = tmp_path_factory.mktemp("serve")
    (folder / "policy.dl").write_text(POLICY, "utf-8")
    (folder / "keys.toml").write_text(
        f'[principals.agent]\nroles = ["agent"]\nkeys = ["{DIGEST}"]\n', "utf-8"
    )
    server = Server(folder, "--wait", "0.05")
    with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {KEY}"}) as agent:
        assert agent.post("/v1/sessions", json={"session": "s1"}).status_code == 201
        assert agent.get("/openapi.json").json() == document(), "the service serves this document"
    yield server, KEY
    server.stop()


@SCHEMA.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_as_documented(case, running) -> None:
    server, _ = running
    case.call_and_validate(base_url=server.url, excluded_checks=[positive_data_acceptance])


@pytest.mark.parametrize("path", sorted(document()["paths"]))
def test_without_a_key_only_health_answers(path: str, running) -> None:
    server, _ = running
    for method in document()["paths"][path]:
        concrete = path.replace("{session}", "s1").replace("{decision_id}", "d-1")
        answer = httpx.request(method.upper(), server.url + concrete, json={})
        if path == "/healthz":
            assert answer.status_code == 200
        else:
            assert answer.status_code == 401 and answer.json()["error"]["code"] == "unauthorized"
