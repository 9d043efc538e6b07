"""Step 1: the requirements document as numbered atomic requirements (FORGE H.1).

The model sees the document with numbered lines and answers requirements, each citing the
lines it comes from, and context entries (text that states no condition). What it answers is
checked against the document:

* a requirement that cites no line of the document is not traceable, so it is left out
  (``unsupported-requirement``): this is where an invented requirement would come in;
* every line that is neither blank nor a heading must be cited by a requirement or a context
  entry; the others are reported (``unaccounted-text``), so that normalization cannot drop a
  requirement silently.

Requirements are numbered ``R1``, ``R2``, ... in the order of the answer. Independently of the
model, the document is searched for text addressed to the translator rather than to the agent
(``ignore the previous instructions``, chat markup, ...): such lines are reported
(``suspicious-instructions``), and every prompt treats the document as data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import problems as P
from .answers import AnswerError, ask_json, field, optional
from .client import Chat
from .templates import block, messages

STEP = "normalize"

SUSPICIOUS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|preceding|earlier|"
        r"foregoing|all|any|your|these|those|the)\b.{0,30}\b(instructions?|prompts?|directions?|directives?)\b",
        r"\b(system|developer)\s+(prompt|message|instructions?)\b",
        r"\b(new|updated|real|actual|hidden)\s+instructions?\b",
        r"\byou\s+are\s+(now\s+)?(an?|the)\s+(ai|assistant|language\s+model|llm|model|translator)\b",
        r"\b(note|message|instructions?)\s+(to|for)\s+(the\s+)?(ai|model|assistant|translator|llm|judge)\b",
        r"\b(respond|reply|answer)\s+(only\s+)?with\b",
        r"\boutput\s+(only|exactly|the\s+following)\b",
        r"\b(mark|report|treat|consider)\b.{0,30}\b(every|all)\b.{0,30}\b(covered|satisfied|compliant|passing)\b",
        r"<\|\s*(im_start|im_end|system|assistant|user|endoftext)\s*\|>",
        r"\[/?INST\]",
        r"^\s*(system|assistant)\s*:",
    )
]


@dataclass(frozen=True)
class Document:
    path: str
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def numbered(self) -> str:
        width = len(str(len(self.lines)))
        return "\n".join(f"{n:>{width}}| {line}" for n, line in enumerate(self.lines, 1))

    def meaningful(self) -> list[int]:
        """The lines a requirement or a context entry must account for."""
        return [
            n for n, line in enumerate(self.lines, 1) if line.strip() and not line.lstrip().startswith("#")
        ]

    def quote(self, lines: tuple[int, ...]) -> str:
        text = self.lines
        return "\n".join(text[n - 1].strip() for n in lines if 1 <= n <= len(text))


@dataclass(frozen=True)
class Requirement:
    id: str
    text: str
    lines: tuple[int, ...]
    source: str  # the cited lines of the document

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "lines": list(self.lines), "source": self.source}


@dataclass(frozen=True)
class Context:
    lines: tuple[int, ...]
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"lines": list(self.lines), "why": self.why}


@dataclass(frozen=True)
class Normalized:
    requirements: tuple[Requirement, ...]
    context: tuple[Context, ...]
    problems: tuple[P.Problem, ...]
    answered: bool  # the model answered usably


def suspicious_lines(document: Document) -> list[P.Problem]:
    """Lines that read like instructions to a model rather than requirements for the agent."""
    found = []
    for n, line in enumerate(document.lines, 1):
        for pattern in SUSPICIOUS:
            match = pattern.search(line)
            if match:
                found.append(
                    P.SUSPICIOUS_INSTRUCTIONS(
                        STEP,
                        f"line {n} reads like instructions to a model, not a requirement: "
                        f"{P.shorten(line.strip(), 120)!r}; it was given to every model as data only",
                        f"line {n}",
                    )
                )
                break
    return found


def normalize(chat: Chat, document: Document) -> Normalized:
    answer, found = ask_json(chat, STEP, None, messages(STEP, block("document", document.numbered())), _shape)
    problems = [*suspicious_lines(document), *found]
    if answer is None:
        return Normalized((), (), tuple(problems), False)
    raw_requirements, raw_context = answer
    size = len(document.lines)
    requirements: list[Requirement] = []
    for text, cited in raw_requirements:
        lines = tuple(n for n in cited if 1 <= n <= size and document.lines[n - 1].strip())
        if not lines:
            problems.append(
                P.UNSUPPORTED_REQUIREMENT(
                    STEP,
                    f"left out: it cites no line of the document ({_lines(cited) or 'none'}): {P.shorten(text, 120)!r}",
                )
            )
            continue
        requirements.append(Requirement(f"R{len(requirements) + 1}", text, lines, document.quote(lines)))
    context = tuple(Context(tuple(n for n in cited if 1 <= n <= size), why) for cited, why in raw_context)
    cited = {n for r in requirements for n in r.lines} | {n for c in context for n in c.lines}
    missing = [n for n in document.meaningful() if n not in cited]
    for start, end in _ranges(missing):
        where = f"line {start}" if start == end else f"lines {start}-{end}"
        problems.append(
            P.UNACCOUNTED_TEXT(
                STEP,
                f"{where} became neither a requirement nor context: {P.shorten(document.quote((start,)), 120)!r}",
                where,
            )
        )
    if not requirements:
        problems.append(P.NO_REQUIREMENTS(STEP, "normalization found no requirement in the document"))
    return Normalized(tuple(requirements), context, tuple(problems), True)


def _shape(value: Any) -> tuple[list[tuple[str, list[int]]], list[tuple[list[int], str]]]:
    requirements = []
    for i, item in enumerate(field(value, "requirements", list)):
        where = f"requirement {i + 1}"
        text = field(item, "text", str, where).strip()
        if not text:
            raise AnswerError(f"{where} has an empty `text`")
        requirements.append(
            (" ".join(text.split()), parse_lines(field(item, "lines", (list, int, str), where), where))
        )
    context = []
    for i, item in enumerate(optional(value, "context", list, [])):
        where = f"context entry {i + 1}"
        context.append(
            (
                parse_lines(field(item, "lines", (list, int, str), where), where),
                optional(item, "why", str, "", where),
            )
        )
    return requirements, context


def parse_lines(value: Any, where: str) -> list[int]:
    """Line numbers from ``[7, "9-11"]`` (or a single number or range)."""
    items = value if isinstance(value, list) else [value]
    lines: list[int] = []
    for item in items:
        if isinstance(item, bool):
            raise AnswerError(f"{where} cites a line that is not a number")
        if isinstance(item, int):
            lines.append(item)
            continue
        if isinstance(item, str):
            match = re.fullmatch(r"\s*(\d+)\s*(?:[-–]\s*(\d+)\s*)?", item)
            if match:
                start = int(match[1])
                end = int(match[2] or start)
                if end - start > 10_000:
                    raise AnswerError(f"{where} cites an implausible range `{item}`")
                lines.extend(range(start, end + 1))
                continue
        raise AnswerError(f'{where} cites `{item}`, which is not a line number or a range like "3-5"')
    return sorted(set(lines))


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for n in numbers:
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], n)
        else:
            ranges.append((n, n))
    return ranges


def _lines(numbers: list[int]) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in _ranges(numbers))
