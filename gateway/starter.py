"""What ``policyc mcp init`` writes for a server: a starter policy, its tests and a gateway.toml.

:func:`starter` takes the server's name in the gateway (the ``S`` of ``S.T``), the command
that starts it and the tools it lists, and gives the three files' text. The policy knows each
tool (a call of any other is denied), lets the tools the server marks read-only run freely and
denies the others after untrusted content (the labels of gateway.toml); each argument whose
name says what it is for (``url``, ``path``, ``to``, ``command``, ``message``, ...) gets a
``Role`` fact and a TODO saying what to decide about it. The test file has one case per tool,
in the format of ``policyc test`` (docs/testing.md), and passes as written.

Everything a server says (names, descriptions, schemas) is written as data: in quoted strings
with their escapes, or in one-line comments cleared of line breaks, so a hostile description
cannot add a rule.

>>> from mcp.types import Tool, ToolAnnotations
>>> tools = [Tool(name="send", input_schema={"type": "object", "properties": {"to": {"type": "string"}},
...     "required": ["to"]})]
>>> files = starter("mail", ["mail-server"], tools)
>>> print(files.policy.split("// ---- mail.send")[1].split("\\n\\n")[0])
: (no description)
Tool("mail.send").
// TODO: `to` looks like a recipient: allow only the ones this deployment knows, or escalate the others
Role("mail.send", "to", "recipient").
>>> guess_role("recipient_email"), guess_role("targetUrl"), guess_role("colour")
('recipient', 'url', None)
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ROLES: dict[str, tuple[str, ...]] = {
    "url": ("url", "urls", "uri", "href", "link", "endpoint", "webhook", "host", "hostname", "domain"),
    "path": (
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "filepath",
        "directory",
        "dir",
        "folder",
        "source",
        "destination",
        "repository",
        "repo",
        "cwd",
    ),
    "recipient": ("to", "recipient", "recipients", "cc", "bcc", "email", "address", "channel", "phone"),
    "command": ("command", "cmd", "script", "code", "shell", "query", "sql", "expression", "program"),
    "content": ("message", "body", "text", "content", "contents", "subject", "data", "payload", "prompt"),
    "amount": ("amount", "price", "quantity", "total", "value"),
}
"""Each role an argument may have, and the property names that suggest it (the whole name, or
its last word: ``file_path``, ``targetUrl``)."""

TODO: dict[str, str] = {
    "url": "looks like a web address: limit the hosts it may reach (an allow-list of hosts)",
    "path": "looks like a file path: limit the folders this tool may touch",
    "recipient": "looks like a recipient: allow only the ones this deployment knows, or escalate the others",
    "command": "looks like code or a command to run: deny it, or escalate it to the user",
    "content": "looks like free text sent on: it may carry what the agent read before",
    "amount": "looks like an amount: bound it (`tool_arg(a, KEY) > LIMIT`)",
}
"""What to decide about an argument of each role (the TODO the policy gets)."""

EXAMPLES: dict[str, Any] = {
    "url": "https://example.com/",
    "path": "example.txt",
    "recipient": "someone@example.com",
    "command": "echo hello",
    "content": "hello",
    "amount": 1,
}
"""The value a test case gives an argument of each role (when its schema allows it)."""

UNKNOWN_TOOL = "unknown-tool"
EFFECT_AFTER_UNTRUSTED = "effect-after-untrusted"


@dataclass(frozen=True)
class Starter:
    """The three files of ``policyc mcp init``: their names (in the output folder) and text."""

    policy_file: str
    policy: str
    test_file: str
    tests: str
    config_file: str
    config: str


def starter(name: str, command: Sequence[str], tools: Sequence[Any], cwd: str | None = None) -> Starter:
    """The starter files for server ``name`` started by ``command`` (run in ``cwd`` when given),
    listing ``tools`` (``mcp.types.Tool``; a name listed twice is written once)."""
    unique = list({tool.name: tool for tool in reversed(tools)}.values())[::-1]
    policy_file, test_file = f"{name}.dl", f"{name}_test.toml"
    return Starter(
        policy_file,
        policy_text(name, unique),
        test_file,
        tests_text(name, policy_file, unique),
        "gateway.toml",
        config_text(name, command, cwd),
    )


# the commands that run a server rather than being one: package runners, and interpreters of any
# version (``python3.11``, ``node20``, ``python.exe``)
_RUNNERS = re.compile(
    r"(npx|uvx|pipx|bunx|pnpx|uv|docker|deno|bun|nodejs|node\d*|(python|pypy)\d*(\.\d+)*)(\.exe)?",
    re.IGNORECASE,
)
_PLAIN = {"index", "main", "server", "cli", "dist", "build", "src", "lib", "bin", "__main__", "run"}


def name_of(command: Sequence[str]) -> str:
    """A server's name in the gateway made from the command that starts it: the package or
    script it runs, less ``mcp-server-``, ``server-`` and the like (``server`` when nothing
    is left).

    >>> name_of(["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"])
    'filesystem'
    >>> name_of(["uvx", "mcp-server-git"]), name_of(["node", "srv/server-everything/dist/index.js"])
    ('git', 'everything')
    >>> name_of(["/usr/bin/python3.11", "-m", "mcp_server_git"])
    'git'
    """
    words = list(command)
    if words and _RUNNERS.fullmatch(re.split(r"[/\\]", words[0])[-1]):
        rest = [w for w in words[1:] if not w.startswith("-") and w not in ("run", "exec", "-m")]
        words = rest[:1] or words[:1]
    parts = [p for p in re.split(r"[/\\]", words[0] if words else "") if p]
    parts = [re.sub(r"\.(js|mjs|cjs|ts|py)$", "", p) for p in parts]
    while len(parts) > 1 and parts[-1].lower() in _PLAIN:
        parts.pop()
    base = parts[-1] if parts else ""
    base = re.sub(r"^(@[^/]*/)?", "", base)
    base = re.sub(
        r"^(mcp[-_]server[-_]|server[-_]|mcp[-_])|([-_]mcp[-_]server|[-_]server|[-_]mcp)$", "", base
    )
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", base).strip("-_")[:64]
    return base or "server"


def guess_role(key: str) -> str | None:
    """The role an argument named ``key`` seems to have, or None."""
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", key)]
    for candidate in (key.lower(), words[-1] if words else ""):
        for role, names in ROLES.items():
            if candidate in names:
                return role
    return None


def read_only(tool: Any) -> bool:
    """Whether the server marks ``tool`` read-only (``annotations.readOnlyHint``)."""
    annotations = getattr(tool, "annotations", None)
    return getattr(annotations, "read_only_hint", None) is True


def _properties(tool: Any) -> dict[str, Any]:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    properties = schema.get("properties")
    return {k: v for k, v in properties.items() if isinstance(k, str)} if isinstance(properties, dict) else {}


# ------------------------------------------------------------------------------- policy


def policy_text(name: str, tools: Sequence[Any]) -> str:
    """The starter policy of server ``name``'s ``tools``."""
    out = [
        f"// A starter policy for the MCP server `{name}` behind `policyc mcp` (docs/mcp.md), written",
        "// by `policyc mcp init`. The gateway's tool T of this server is the tool",
        f'// "{name}.T" of the event vocabulary (docs/events.md). Review every TODO, then run',
        "// `policyc test` on this folder.",
        "",
        ".import events",
        "",
        "// Tool(t): the tools of the server; a call of any other tool is denied.",
        "// ReadOnly(t): tools the server marks read-only (annotations.readOnlyHint).",
        "// Role(t, key, role): what an argument is for, guessed from its name (an output, so that",
        "// `policyc eval` lists the guesses until rules use them).",
        "// Each is an input too: a deployment may add facts (`session.add_facts`) besides these.",
        ".decl Tool(name: symbol)",
        ".input Tool",
        ".decl ReadOnly(name: symbol)",
        ".input ReadOnly",
        ".decl Role(tool: symbol, key: symbol, role: symbol)",
        ".input Role",
        ".output Role",
        "",
    ]
    for tool in tools:
        full = f"{name}.{tool.name}"
        description = one_line(tool.description or "") or "(no description)"
        out.append(f"// ---- {one_line(full)}: {description}")
        out.append(f"Tool({datalog_string(full)}).")
        if read_only(tool):
            out.append(f"ReadOnly({datalog_string(full)}).")
        for key in sorted(_properties(tool)):
            role = guess_role(key)
            if role is None:
                continue
            out.append(f"// TODO: `{one_line(key)}` {TODO[role]}")
            out.append(f"Role({datalog_string(full)}, {datalog_string(key)}, {datalog_string(role)}).")
        out.append("")
    out += [
        "// Results that gateway.toml labels untrusted taint every later event (each depends on",
        "// every earlier one).",
        'Tainted(e) :- Label(e, "untrusted").',
        "Tainted(e) :- DependsOn(e, d), Tainted(d).",
        "",
        f'@id("{UNKNOWN_TOOL}")',
        '@message("{a} calls {t}, a tool this policy does not know")',
        '@suggest("Use one of the tools the gateway lists.")',
        "Deny(a) :- ToolCall(a, t), not Tool(t).",
        "",
        "// TODO: decide which tools may run after untrusted content, and with which arguments",
        "// (their Role facts say which arguments matter).",
        f'@id("{EFFECT_AFTER_UNTRUSTED}")',
        '@message("{a} calls {t}, which is not read-only, after reading untrusted content")',
        '@suggest("Ask the user to make this call, or to confirm it.")',
        "Deny(a) :- ToolCall(a, t), Tool(t), not ReadOnly(t), Tainted(a).",
    ]
    return "\n".join(out) + "\n"


def one_line(text: str) -> str:
    """``text`` fit for a one-line comment: no line breaks or other control characters, at
    most 100 characters."""
    cleared = "".join(c if c.isprintable() else " " for c in text)
    cleared = " ".join(cleared.split())
    return cleared if len(cleared) <= 100 else cleared[:99] + "…"


def datalog_string(text: str) -> str:
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}
    out = []
    for c in text:
        if c in escapes:
            out.append(escapes[c])
        elif "\ud800" <= c <= "\udfff":  # a lone surrogate is no character a policy can hold
            out.append("\\ufffd")
        elif not c.isprintable() and ord(c) <= 0xFFFF:  # a line break would end the string
            out.append(f"\\u{ord(c):04x}")
        else:  # beyond U+FFFF, which `\uXXXX` cannot write: as it is
            out.append(c)
    return '"' + "".join(out) + '"'


# -------------------------------------------------------------------------------- tests


def tests_text(name: str, policy_file: str, tools: Sequence[Any]) -> str:
    """The test file of the starter policy: a case per tool, and one for an unknown tool."""
    out = [
        f"# Tests of {policy_file} (docs/testing.md), written by `policyc mcp init`: a case per",
        "# tool. The arguments are examples: put in the values your agent would send.",
        f"policy = {_toml_string(policy_file)}",
    ]
    for tool in tools:
        full = f"{name}.{tool.name}"
        args = _toml_inline(example_args(tool))
        call = f'kind = "tool_call", tool = {_toml_string(full)}, args = {args}'
        out += ["", "[[test]]"]
        if read_only(tool):
            out += [
                f"name = {_toml_string(full + ': read-only, allowed also after untrusted content')}",
                "events = [",
                f'  {{ id = "c1", {call} }},',
                '  { id = "r1", kind = "tool_result", of = "c1", labels = ["untrusted"] },',
                f'  {{ id = "c2", {call} }},',
                "]",
                'allow = ["c1", "c2"]',
            ]
        else:
            out += [
                f"name = {_toml_string(full + ': allowed, then denied after untrusted content')}",
                "events = [",
                f'  {{ id = "c1", {call} }},',
                '  { id = "r1", kind = "tool_result", of = "c1", labels = ["untrusted"] },',
                f'  {{ id = "c2", {call} }},',
                "]",
                'allow = ["c1"]',
                'deny = ["c2"]',
                f'reasons = {{ c2 = ["{EFFECT_AFTER_UNTRUSTED}"] }}',
            ]
    out += [
        "",
        "[[test]]",
        'name = "a tool the server does not list is denied"',
        f'events = [{{ id = "c1", kind = "tool_call", tool = {_toml_string(name + ".not_a_tool")} }}]',
        'deny = ["c1"]',
        f'reasons = {{ c1 = ["{UNKNOWN_TOOL}"] }}',
    ]
    return "\n".join(out) + "\n"


def example_args(tool: Any) -> dict[str, Any]:
    """Arguments for a test call of ``tool``: each required property, with a value of its role
    or its schema's type."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    required = schema.get("required")
    properties = _properties(tool)
    keys = (
        [k for k in required if isinstance(k, str) and k in properties] if isinstance(required, list) else []
    )
    return {key: example_value(key, properties[key]) for key in keys}


def example_value(key: str, schema: Any) -> Any:
    """A value for argument ``key`` of schema ``schema``: its default, its first enum value,
    its role's example when its type allows it, else one of its type."""
    if not isinstance(schema, dict):
        return "example"
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    if isinstance(schema.get("enum"), list) and schema["enum"] and schema["enum"][0] is not None:
        return schema["enum"][0]
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    role = guess_role(key)
    example = EXAMPLES.get(role) if role else None
    if isinstance(example, str) and ("string" in kinds or kind is None):
        return example
    for each in kinds:
        if each in ("integer", "number"):
            minimum = schema.get("minimum")
            return minimum if isinstance(minimum, int) and not isinstance(minimum, bool) else 1
        if each == "boolean":
            return True
        if each == "array":
            item = example_value(key, schema.get("items"))
            return [item] if schema.get("minItems") else []
        if each == "object":
            return {}
    return "example"


def _toml_string(text: str) -> str:
    out = []
    for c in text:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif "\ud800" <= c <= "\udfff":
            out.append("\\ufffd")
        elif not c.isprintable():
            out.append(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_string(key)


def _toml_inline(value: Any) -> str:
    """``value`` (a JSON value) as a TOML inline value (null, which TOML has not, as "")."""
    if value is None:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return json.dumps(value) if value == value and abs(value) != float("inf") else "0"
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_inline(item) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = ", ".join(f"{_toml_key(str(k))} = {_toml_inline(v)}" for k, v in value.items())
        return "{ " + items + " }"
    return _toml_string(str(value))


# ------------------------------------------------------------------------------- config


def config_text(name: str, command: Sequence[str], cwd: str | None = None) -> str:
    """The gateway.toml in front of server ``name`` started by ``command``."""
    out = [
        "# The gateway in front of one MCP server (docs/mcp.md), written by `policyc mcp init`:",
        f"#   policyc mcp {name}.dl --config gateway.toml",
        "# The tools' definitions are pinned in the lock file (`policyc mcp lock --config gateway.toml`).",
        f"lock = {_toml_string(name + '.lock.json')}",
        "",
        f"[servers.{name}]",
        f"command = {_toml_string(command[0])}",
        f"args = [{', '.join(_toml_string(arg) for arg in command[1:])}]",
    ]
    if cwd is not None:
        out.append(f"cwd = {_toml_string(cwd)}")
    out += [
        "# TODO: the labels this server's results carry. `untrusted` (anything written by others:",
        "# web pages, mail, shared files) makes the policy deny what is not read-only after it;",
        "# remove it if every result of this server is trusted, or label single tools in",
        f"# [servers.{name}.tools.TOOL].",
        'labels = ["untrusted"]',
    ]
    return "\n".join(out) + "\n"
