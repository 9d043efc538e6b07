"""The OpenAPI 3.1 document of the service: every route, request and answer, served at
``GET /openapi.json`` and the source of docs/serve.md's API reference."""

from __future__ import annotations

from typing import Any

from policyc.compiler.version import __version__
from policyc.runtime.verdict import DECISION_FIELDS, REASON_FIELDS, json_schema

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}

EVENT = {
    "type": "object",
    "description": "An event of docs/events.md: a message, a tool call or a tool result.",
    "required": ["id", "kind"],
    "properties": {
        "id": {"type": "string", "minLength": 1},
        "kind": {"type": "string", "minLength": 1},
        "text": {"type": ["string", "null"]},
        "tool": {"type": ["string", "null"]},
        "args": {"type": ["object", "null"]},
        "of": {"type": ["string", "null"]},
        "deps": {"type": ["array", "null"], "items": {"type": "string"}},
        "agent": {"type": ["string", "null"]},
        "labels": {"type": ["array", "null"], "items": {"type": "string"}},
        "role": {"type": ["string", "null"]},
    },
    "additionalProperties": False,
}

# the service's answers of decisions: the runtime's one JSON form of a decision as a session's
# key sees it, with the id and the sequence number the service gives it
REASON = json_schema(REASON_FIELDS, "service")
_DECISION = json_schema(DECISION_FIELDS, "service")
DECISION = {
    **_DECISION,
    "required": ["decision_id", *_DECISION["required"], "seq"],
    "properties": {
        "decision_id": {"type": "string"},
        **_DECISION["properties"],
        "seq": {"type": "integer", "minimum": 0},
        "explanation": {},
    },
}


def _errors(*statuses: int) -> dict[str, Any]:
    meaning = {
        400: "The body is not JSON.",
        401: "No key, or a key that is not one of KEYS.toml.",
        403: "The key's principal does not hold a role the request names (or is not an approver).",
        404: "No such session (or another principal's).",
        409: "The principal has a session of that id (or the escalated call was answered).",
        413: "The body is larger than the limit.",
        422: "The request, one of its events or its facts are malformed; nothing was recorded.",
        503: "What was asked could not be recorded; nothing was (and no decision is given).",
    }
    return {
        str(status): {
            "description": meaning[status],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for status in statuses
    }


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


SESSION_PARAMETER = {"name": "session", "in": "path", "required": True, "schema": {"type": "string"}}


def document() -> dict[str, Any]:
    """The service's OpenAPI document."""
    secured: list[dict[str, list[str]]] = [{"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "policyc serve", "version": __version__},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": ERROR, "Event": EVENT, "Reason": REASON, "Decision": DECISION},
        },
        "paths": {
            "/healthz": {
                "get": {
                    "summary": "Whether the service runs",
                    "responses": {
                        "200": _answer(
                            "It runs.",
                            {
                                "type": "object",
                                "required": ["status"],
                                "properties": {"status": {"const": "ok"}, "sessions": {"type": "integer"}},
                            },
                        )
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Counters in the Prometheus text format",
                    "description": "`policyc_decisions_total{verdict}`, `policyc_decision_seconds` (a histogram), `policyc_sessions`, `policyc_queue_depth`; with `--processes N`, every process's summed, and `policyc_connections_total{how}` (what became of each connection a process accepted: `kept`, `passed` to its session's owner, `received` from the process that accepted it, `unrouted`: served where accepted) and `policyc_forwarded_requests_total` (requests forwarded to the process owning their session).",
                    "security": secured,
                    "responses": {
                        "200": {
                            "description": "The counters.",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        },
                        **_errors(401),
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "security": secured,
                    "responses": {"200": _answer("The document.", {"type": "object"}), **_errors(401)},
                }
            },
            "/v1/sessions": {
                "post": {
                    "summary": "Start a session of the key's principal",
                    "description": "`roles` default to the key's and must be among them (403 `role-not-held`); 409 `session-exists` when the principal has a session of that id.",
                    "security": secured,
                    "requestBody": _json_body(
                        {
                            "type": "object",
                            "required": ["session"],
                            "properties": {
                                "session": {"type": "string", "minLength": 1, "maxLength": 256},
                                "roles": {"type": "array", "items": {"type": "string"}},
                            },
                        }
                    ),
                    "responses": {
                        "201": _answer(
                            "The session, at sequence number 0.",
                            {
                                "type": "object",
                                "required": ["session", "seq", "policy"],
                                "properties": {
                                    "session": {"type": "string"},
                                    "seq": {"const": 0},
                                    "policy": {
                                        "type": "string",
                                        "description": "The digest of the policy it runs.",
                                    },
                                },
                            },
                        ),
                        **_errors(400, 401, 403, 409, 413, 422),
                    },
                }
            },
            "/v1/sessions/{session}/events": {
                "post": {
                    "summary": "Record events; durable when this answers",
                    "description": "Events of docs/events.md. A batch with a malformed event (422 `malformed-event` naming the event and field), or an event the session refuses (422 `limit-exceeded` past its fact limit, `extension-failed` when an extension fails on it, `conflicting-facts` when its facts break a key with facts the host gave), or one only the host records (422 `host-only-event`: an event of kind `approval`, labelled `approval` or `approved-by:*`, a result of an approval tool of the policy; approvals are given at `/v1/approvals`), is refused whole and records nothing but the refusal in the audit log; the session decides on as before.",
                    "security": secured,
                    "parameters": [SESSION_PARAMETER],
                    "requestBody": _json_body(
                        {
                            "type": "object",
                            "required": ["events"],
                            "properties": {
                                "events": {
                                    "type": "array",
                                    "minItems": 1,
                                    "items": {"$ref": "#/components/schemas/Event"},
                                }
                            },
                        }
                    ),
                    "responses": {
                        "200": _answer(
                            "The session's sequence number after the batch.",
                            {
                                "type": "object",
                                "required": ["seq"],
                                "properties": {"seq": {"type": "integer"}},
                            },
                        ),
                        **_errors(400, 401, 404, 413, 422, 503),
                    },
                }
            },
            "/v1/sessions/{session}/facts": {
                "post": {
                    "summary": "Give the session domain facts (rows per input relation); durable when this answers",
                    "description": "Rows of the policy's input relations, checked first: malformed facts (422 `malformed-facts` naming the relation), or facts only the host states (422 `host-only-relation`: a relation marked `.host`, such as `HasRole`, `Principal`, `Candidate`), record nothing but the refusal in the audit log.",
                    "security": secured,
                    "parameters": [SESSION_PARAMETER],
                    "requestBody": _json_body(
                        {
                            "type": "object",
                            "required": ["facts"],
                            "properties": {
                                "facts": {
                                    "type": "object",
                                    "description": "Rows of the policy's input relations by name.",
                                    "additionalProperties": {
                                        "type": "array",
                                        "items": {
                                            "type": "array",
                                            "items": {"type": ["string", "integer", "number", "boolean"]},
                                        },
                                    },
                                }
                            },
                        }
                    ),
                    "responses": {
                        "200": _answer(
                            "The session's sequence number after the facts.",
                            {
                                "type": "object",
                                "required": ["seq"],
                                "properties": {"seq": {"type": "integer"}},
                            },
                        ),
                        **_errors(400, 401, 404, 413, 422, 503),
                    },
                }
            },
            "/v1/sessions/{session}/authorize": {
                "post": {
                    "summary": "Record a candidate action and decide it",
                    "description": "The candidate is recorded as `session.authorize` records it and decided on a graph that holds at least `after_seq` events: the request waits for them up to `--wait` seconds, then is denied saying the graph is behind (a decision like any other: stored, logged, with its `decision_id`).",
                    "security": secured,
                    "parameters": [SESSION_PARAMETER],
                    "requestBody": _json_body(
                        {
                            "type": "object",
                            "required": ["event"],
                            "properties": {
                                "event": {"$ref": "#/components/schemas/Event"},
                                "after_seq": {"type": "integer", "minimum": 0},
                            },
                        }
                    ),
                    "responses": {
                        "200": _answer("The decision.", {"$ref": "#/components/schemas/Decision"}),
                        **_errors(400, 401, 404, 413, 422, 503),
                    },
                }
            },
            "/v1/sessions/{session}/decide": {
                "post": {
                    "summary": "Decide a recorded candidate again (after an approval)",
                    "description": "After a person approved an escalated call, the agent asks again for the same action: the answer carries the `approval` it used (once).",
                    "security": secured,
                    "parameters": [SESSION_PARAMETER],
                    "requestBody": _json_body(
                        {
                            "type": "object",
                            "required": ["action"],
                            "properties": {
                                "action": {"type": "string"},
                                "after_seq": {"type": "integer", "minimum": 0},
                            },
                        }
                    ),
                    "responses": {
                        "200": _answer("The decision.", {"$ref": "#/components/schemas/Decision"}),
                        **_errors(400, 401, 404, 413, 422, 503),
                    },
                }
            },
            "/v1/approvals": {
                "get": {
                    "summary": "Escalated calls waiting for a person (approver keys)",
                    "description": "Keys with the `approver` role only (others 403 `not-an-approver`).",
                    "security": secured,
                    "responses": {
                        "200": _answer(
                            "The calls, oldest first.",
                            {
                                "type": "object",
                                "required": ["pending"],
                                "properties": {
                                    "pending": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": [
                                                "approval_id",
                                                "principal",
                                                "session",
                                                "request",
                                                "asked",
                                            ],
                                            "properties": {
                                                "asked": {
                                                    "type": "number",
                                                    "description": "When the call was escalated (seconds since the epoch).",
                                                }
                                            },
                                        },
                                    }
                                },
                            },
                        ),
                        **_errors(401, 403),
                    },
                }
            },
            "/v1/approvals/{approval_id}": {
                "post": {
                    "summary": "Answer an escalated call: approve it once, for ttl seconds, or refuse it",
                    "description": "`ttl` is 300 seconds unless given; an approval is recorded in the session as an event. Either answer is logged (an `outcome` record naming the approver). 409 `already-answered`.",
                    "security": secured,
                    "parameters": [
                        {"name": "approval_id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "requestBody": _json_body(
                        {
                            "type": "object",
                            "required": ["approve"],
                            "properties": {
                                "approve": {"type": "boolean"},
                                "ttl": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
                            },
                        }
                    ),
                    "responses": {
                        "200": _answer(
                            "The answer, recorded.",
                            {
                                "type": "object",
                                "required": ["approval_id", "approved", "approval", "seq"],
                                "properties": {
                                    "approval_id": {"type": "string"},
                                    "approved": {"type": "boolean"},
                                    "approval": {"type": ["object", "null"]},
                                    "seq": {"type": "integer"},
                                },
                            },
                        ),
                        **_errors(400, 401, 403, 404, 409, 413, 422, 503),
                    },
                }
            },
            "/v1/audit/head": {
                "get": {
                    "summary": "The head of the service's audit log",
                    "description": "What the log has got to, per chain of records (its first record's hash, its last record's `seq` and hash): keep it where the database's writer cannot reach, and `policyc audit verify --expect` finds an export cut before it. To any key (it holds hashes and a count).",
                    "security": secured,
                    "responses": {
                        "200": _answer(
                            "The head (no entry while the log is empty).",
                            {
                                "type": "object",
                                "required": ["format", "heads"],
                                "properties": {
                                    "format": {"const": "policyc-audit-head/1"},
                                    "heads": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["chain", "seq", "hash", "final"],
                                            "properties": {
                                                "chain": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                                "seq": {"type": "integer", "minimum": 0},
                                                "hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                                "final": {"type": "boolean"},
                                            },
                                        },
                                    },
                                },
                            },
                        ),
                        **_errors(401),
                    },
                }
            },
            "/v1/sessions/{session}/decisions/{decision_id}": {
                "get": {
                    "summary": "A decision with its explanation",
                    "description": "The decision as it was answered, with its `explanation` (the session replayed up to it).",
                    "security": secured,
                    "parameters": [
                        SESSION_PARAMETER,
                        {"name": "decision_id", "in": "path", "required": True, "schema": {"type": "string"}},
                    ],
                    "responses": {
                        "200": _answer(
                            "The decision and its explanation.", {"$ref": "#/components/schemas/Decision"}
                        ),
                        **_errors(401, 404),
                    },
                }
            },
        },
    }
