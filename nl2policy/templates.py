"""The prompts of the pipeline's steps, and the messages built from them.

Each step's instructions are a Markdown file in ``nl2policy/prompts/`` (shipped with the
package), sent as the system message. Everything that comes from outside — the requirements
document, the vocabulary, the model's own earlier output, recorded sessions — goes into the
user message, each piece between tags the instructions name, so that the instructions never
mix with data. A piece of data cannot close its own tag: ``</document>`` inside the document
is written ``<\\/document>``.

>>> block("document", "a </document> b")
'<document>\\na <\\\\/document> b\\n</document>'
"""

from __future__ import annotations

import functools
import re
from importlib import resources

STEPS = ("normalize", "translate", "repair", "backtranslate", "compare", "judge")


@functools.cache
def prompt(step: str) -> str:
    """The instructions of a step (``nl2policy/prompts/<step>.md``)."""
    if step not in STEPS:
        raise ValueError(f"no prompt for step {step!r}")
    return resources.files("policyc.nl2policy").joinpath("prompts", f"{step}.md").read_text("utf-8")


def block(tag: str, text: str) -> str:
    """``text`` between ``<tag>`` and ``</tag>``; a closing tag inside it, however spelt
    (``</Document >``), is escaped."""
    inner = re.sub(rf"<(\s*/\s*{tag}\s*)>", r"<\\\1>", text, flags=re.IGNORECASE)
    return f"<{tag}>\n{inner}\n</{tag}>"


def messages(step: str, *blocks: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": prompt(step)}, {"role": "user", "content": "\n\n".join(blocks)}]
