"""What can go wrong in a translation, as report entries with stable codes.

Every failure of a step (a model that times out, refuses, answers nothing or answers nonsense;
a rule that names something the vocabulary does not have; a requirement left without a rule)
becomes a :class:`Problem`: a code and a name that never change meaning, a severity, the step
it happened in, what it is about (a requirement, a rule, a decision point) and a one-line
message. ``docs/translate.md`` lists every code.

>>> p = MODEL_TIMEOUT("translate", "no answer within 30 s (3 attempts)")
>>> p.code, p.name, p.severity
('TR001', 'model-timeout', 'error')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ERROR, WARNING, NOTE = "error", "warning", "note"


@dataclass(frozen=True)
class Problem:
    code: str
    name: str
    severity: str  # "error" (the result needs attention), "warning" or "note"
    step: str  # the pipeline step it happened in
    message: str
    subject: str | None = None  # the requirement, rule or decision point it is about

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "step": self.step,
            "subject": self.subject,
            "message": self.message,
        }

    def text(self) -> str:
        about = f" ({self.subject})" if self.subject else ""
        return f"{self.severity}[{self.code}] {self.step}{about}: {self.message} [{self.name}]"


@dataclass(frozen=True)
class Kind:
    code: str
    name: str
    severity: str
    summary: str

    def __call__(self, step: str, message: str, subject: str | None = None) -> Problem:
        return Problem(self.code, self.name, self.severity, step, message, subject)


# ---- the model's answers
MODEL_TIMEOUT = Kind("TR001", "model-timeout", ERROR, "no answer within the timeout, after every retry")
RATE_LIMITED = Kind("TR002", "rate-limited", ERROR, "HTTP 429 after every retry")
SERVER_ERROR = Kind("TR003", "server-error", ERROR, "HTTP 5xx after every retry")
CONNECTION_FAILED = Kind("TR004", "connection-failed", ERROR, "the endpoint could not be reached")
REQUEST_REJECTED = Kind("TR005", "request-rejected", ERROR, "the endpoint rejected the request (HTTP 4xx)")
REFUSAL = Kind("TR006", "refusal", ERROR, "the model refused to answer")
EMPTY_ANSWER = Kind("TR007", "empty-answer", ERROR, "the model's answer was empty")
TRUNCATED_ANSWER = Kind("TR008", "truncated-answer", ERROR, "the answer was cut off at the length limit")
MALFORMED_ANSWER = Kind("TR009", "malformed-answer", ERROR, "the answer was not the JSON object asked for")
RETRIED = Kind("TR010", "retried", NOTE, "a request failed and was retried (429, 5xx, timeout)")
ASKED_AGAIN = Kind("TR011", "asked-again", NOTE, "a malformed answer was corrected when asked again")

# ---- the requirements
SUSPICIOUS_INSTRUCTIONS = Kind(
    "TR101", "suspicious-instructions", ERROR, "the document holds text addressed to the translator"
)
UNACCOUNTED_TEXT = Kind(
    "TR102", "unaccounted-text", ERROR, "lines normalization turned neither into requirements nor context"
)
UNSUPPORTED_REQUIREMENT = Kind(
    "TR103", "unsupported-requirement", ERROR, "a requirement that cites no line of the document"
)
NO_REQUIREMENTS = Kind("TR104", "no-requirements", ERROR, "normalization found no requirement at all")

# ---- the translation
INVENTED_NAME = Kind(
    "TR201", "invented-name", ERROR, "a rule uses a relation or functor the vocabulary lacks"
)
VOCABULARY_CHANGE = Kind(
    "TR202",
    "vocabulary-change",
    ERROR,
    "the translation declares inputs or functors, or adds to the vocabulary",
)
UNKNOWN_REQUIREMENT = Kind(
    "TR203", "unknown-requirement", ERROR, "a rule cites a requirement that does not exist"
)
MISSING_REQUIREMENT = Kind("TR204", "missing-requirement", ERROR, "a rule cites no requirement")
RULE_REJECTED = Kind("TR205", "rule-rejected", ERROR, "a rule with errors left after repair, left out")
UNCOVERED_REQUIREMENT = Kind("TR206", "uncovered-requirement", ERROR, "a requirement no rule encodes")
MALFORMED_DATALOG = Kind("TR207", "malformed-datalog", ERROR, "the translation does not parse")

# ---- validation
BACK_TRANSLATION_DISCREPANCY = Kind(
    "TR301", "back-translation-discrepancy", ERROR, "a rule's description differs from its requirement"
)
JUDGE_DISAGREEMENT = Kind("TR401", "judge-disagreement", ERROR, "the policy and the judge decide differently")
JUDGE_UNCLEAR = Kind("TR402", "judge-unclear", WARNING, "the judge could not decide a decision point")
NO_SCENARIO = Kind("TR403", "no-scenario", NOTE, "no database within the bound takes a path of a rule")
SCENARIO_FAILED = Kind(
    "TR404", "scenario-failed", WARNING, "a path's scenario could not be searched or replayed"
)
TRACE_PROBLEM = Kind("TR405", "trace-problem", WARNING, "a recorded session could not be replayed cleanly")

KINDS = tuple(value for value in dict(globals()).values() if isinstance(value, Kind))


def counts(problems: list[Problem]) -> dict[str, int]:
    return {severity: sum(p.severity == severity for p in problems) for severity in (ERROR, WARNING, NOTE)}


def shorten(text: str, limit: int) -> str:
    """Text quoted in a message: on one line, cut to ``limit`` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
