"""`policyc new NAME`: a policy folder to start from — a policy, its tests and a README.

The policy is small but real (taint from untrusted tool results, a `Deny` rule with its
feedback), its test file covers both the denied and the allowed path, and the README says how
to check, test and replay it, so that `policyc test NAME` passes with every rule covered from
the first minute.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")

POLICY = """\
// {name}: what this policy protects, in one sentence of plain English.
//
// Requirement: "Do not send email once the agent has read content from an untrusted source."

.import events

// Whatever depends on an untrusted tool result is tainted.
Tainted(e) :- Label(e, "untrusted").
Tainted(e) :- DependsOn(e, d), Tainted(d).

@id("no-tainted-email")
@message("`{{a}}` would send email after reading untrusted content")
@suggest("Ask the user to confirm the recipient and the text before sending.")
Deny(a) :- is_tool(a, "send_email"), Tainted(a).
"""

TEST = """\
# Tests of {name}.dl: run them with `policyc test {name} --coverage`.
policy = "{name}.dl"

[[test]]
name = "email after reading an untrusted page is denied"
events = [
  {{ id = "u1", kind = "user_message", text = "Summarize https://example.com for me" }},
  {{ id = "c1", kind = "tool_call", tool = "fetch", args = {{ url = "https://example.com" }}, deps = ["u1"] }},
  {{ id = "r1", kind = "tool_result", of = "c1", labels = ["untrusted"] }},
  {{ id = "c2", kind = "tool_call", tool = "send_email", args = {{ to = "someone@example.com" }}, deps = ["r1"] }},
]
allow = ["c1"]
deny = ["c2"]
reasons = {{ c2 = ["no-tainted-email"] }}
derived = ['Tainted("c2")']

[[test]]
name = "email the user asked for is allowed"
events = [
  {{ id = "u1", kind = "user_message", text = "Email the team that I am late" }},
  {{ id = "c1", kind = "tool_call", tool = "send_email", args = {{ to = "team@example.com" }}, deps = ["u1"] }},
]
allow = ["c1"]
not_derived = ['Tainted("c1")']
"""

README = """\
# {name}

A policyc policy. Its requirement is stated at the top of `{name}.dl`.

```sh
policyc check {name}/{name}.dl              # errors and warnings
policyc check --deep {name}/{name}.dl       # dead, redundant and shadowed rules
policyc test {name} --coverage              # the tests in {name}_test.toml, and which rules they exercise
policyc compile {name}/{name}.dl -o {name}.bundle
```

Each `[[test]]` of `{name}_test.toml` gives a session's events (or facts) and what must follow:
the actions denied and allowed, the rule ids of the denials, the facts that must or must not be
derived. Give every `Deny` rule a test of its denied path and one of its allowed path.
"""


class ScaffoldError(ValueError):
    """A name or folder that cannot be used."""


def scaffold(name: str, parent: Path) -> list[Path]:
    """Write ``parent/name/{name.dl, name_test.toml, README.md}``; the paths written."""
    if not NAME.match(name):
        raise ScaffoldError(
            f"`{name}` is not a policy name: use letters, digits, `_` and `-`, starting with a letter"
        )
    folder = parent / name
    if folder.exists():
        raise ScaffoldError(f"`{folder}` already exists")
    files = {
        folder / f"{name}.dl": POLICY.format(name=name),
        folder / f"{name}_test.toml": TEST.format(name=name),
        folder / "README.md": README.format(name=name),
    }
    try:
        folder.mkdir(parents=True)
        for path, text in files.items():
            path.write_text(text, "utf-8")
    except OSError as error:
        raise ScaffoldError(f"cannot write `{folder}`: {error.strerror or error}") from None
    return list(files)
