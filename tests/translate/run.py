"""What the translation tests share: the example files and running `policyc translate` against a
scripted chat server."""

from __future__ import annotations

import json
from pathlib import Path

from ..conftest import EXAMPLES, ROOT, run_policyc
from .chat import ChatServer, Reply
from .script import BackTranslator, ReferenceJudge, Script, fixture, translation

TASK43 = ROOT / "tests" / "translate" / "task43"
AIRLINE_TEXT = EXAMPLES / "tau2_airline" / "airline_policy.md"
AIRLINE = EXAMPLES / "tau2_airline" / "tau2_airline.dl"


def translate(server: ChatServer | None, *args: str, env: dict | None = None):
    base = ["--base-url", server.url] if server is not None else []
    return run_policyc(
        "translate",
        "--model",
        "scripted-model",
        *base,
        *args,
        env={"OPENAI_API_KEY": "test-key", **(env or {})},
    )


def airline_script() -> Script:
    """Answers for translating the tau2 example's airline policy text over its vocabulary: the
    first translation needs a repair round; the judge answers by the example's policy."""
    normalized = json.loads(fixture("tau2", "normalize.json"))
    unexpressed = json.loads(fixture("tau2", "not_expressible.json"))
    described = BackTranslator(
        json.loads(fixture("tau2", "backtranslations.json")),
        {"compensation-over-limit": "the requirement scales the amount with the number of passengers"},
    )
    return Script(
        normalize=lambda r: Reply.json(normalized),
        translate=lambda r: translation(fixture("tau2", "first_answer.dl"), unexpressed),
        repair=lambda r: translation(fixture("tau2", "translation.dl"), unexpressed),
        backtranslate=described.describe,
        compare=described.compare,
        judge=ReferenceJudge(AIRLINE),
    )


def task43_script(translation_file: str = "translation.dl", **overrides) -> tuple[Script, ReferenceJudge]:
    normalized = json.loads(fixture("task43", "normalize.json"))
    described = BackTranslator(json.loads(fixture("task43", "backtranslations.json")))
    judge = ReferenceJudge(TASK43 / "reference.dl")
    handlers = {
        "normalize": lambda r: Reply.json(normalized),
        "translate": lambda r: translation(fixture("task43", translation_file)),
        "backtranslate": described.describe,
        "compare": described.compare,
        "judge": judge,
        **overrides,
    }
    return Script(**handlers), judge


def task43_args(out: Path, *more: str) -> list[str]:
    return [
        str(TASK43 / "requirements.md"),
        "--vocab",
        str(TASK43 / "vocabulary.dl"),
        "--traces",
        str(TASK43 / "traces.jsonl"),
        "-o",
        str(out / "policy.dl"),
        "--report",
        str(out / "report.json"),
        *more,
    ]


def no_traceback(run) -> None:
    assert "Traceback" not in run.stdout + run.stderr
    assert "internal error" not in run.stderr


def codes(report: dict) -> list[str]:
    return [p["name"] for p in report["problems"]]
