"""Hostile input to every `policyc` command, through the installed command as a user runs it.

Each case gives one command a bad input: JSON nested 100,000 deep, integers of 5,000 digits,
NaN and infinities, bytes that are not UTF-8, a folder where a file is expected, an empty
file, a FIFO or `/dev/zero` (which would block or never end if read), and numeric options that
are negative, NaN or absurdly large. Every case must end, within a timeout, with status 1 or 2,
a message on standard error that says where the problem is (the file or the option), and no
traceback or internal error. (`policyc lsp` has tests of its own.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import EXAMPLES, ROOT, policyc_command

TIMEOUT = 60

DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" * 5000
TOXIC = EXAMPLES / "toxic_flow" / "toxic_flow.dl"  # over the event vocabulary
FORGE = EXAMPLES / "forge" / "toxic_flow.dl"  # over input relations (`ExternalSend`, ...)
TRACE = EXAMPLES / "toxic_flow" / "scenario.jsonl"
FORECAST = EXAMPLES / "forecast" / "copilot_forecast.dl"
MODEL = EXAMPLES / "forecast" / "model.json"
TRAIN = EXAMPLES / "forecast" / "train.jsonl"
RISK = EXAMPLES / "risk_budgets" / "policy.dl"
THRESHOLDS = EXAMPLES / "risk_budgets" / "thresholds.json"
PREDICATES = "Edit,Unscanned,Unchecked,Tested,Committed,OpenFinding"

CALL = '{{"id": "c1", "kind": "tool_call", "tool": "send_email", "args": {{"to": {value}}}}}'
CALIBRATION = '{{"field": "send_money.recipient", "score": {value}, "violated": false, "episode": "e1"}}'

# the content of a hostile file of each format, by kind
JSON = {
    "deep": '{"ExternalSend": ' + DEEP + "}",
    "deep-array": DEEP,
    "huge-int": '{"ExternalSend": [[' + HUGE + "]]}",
    "nan": '{"ExternalSend": [[NaN]]}',
    "infinity": '{"ExternalSend": [[-Infinity]]}',
    "overflow": '{"ExternalSend": [[1e999]]}',
    "surrogate": '{"ExternalSend": [["\\ud800"]]}',
    "not-utf8": b'{"ExternalSend": [["\xff\xfe"]]}',
    "empty": "",
}
JSONL = {
    "deep": '{"events": ' + DEEP + "}\n",
    "huge-int": '{"events": [' + CALL.format(value=HUGE) + "]}\n",
    "nan": '{"events": [' + CALL.format(value="NaN") + "]}\n",
    "infinity": '{"events": [' + CALL.format(value="Infinity") + "]}\n",
    "overflow": '{"events": [' + CALL.format(value="1e999") + "]}\n",
    "not-utf8": b'{"events": []}\n{"events": [\xff]}\n',
    "empty": "",
}
RECORDS = {
    "deep": CALIBRATION.format(value=DEEP) + "\n",
    "huge-int": CALIBRATION.format(value=HUGE) + "\n",
    "nan": CALIBRATION.format(value="NaN") + "\n",
    "infinity": CALIBRATION.format(value="-Infinity") + "\n",
    "overflow": CALIBRATION.format(value="1e999") + "\n",
    "not-utf8": b'{"field": "send_money.recipient", "score": 0.5, "violated": false, "episode": "\xff"}\n',
    "empty": "",
}
POLICY = {
    "deep": ".input S\nDeny(a) :- S(a), a = " + "lower(" * 100_000 + '"x"' + ")" * 100_000 + ".\n",
    "huge-int": ".input S\nDeny(a) :- S(a), a = " + HUGE + ".\n",
    "huge-float": ".input S\nDeny(a) :- S(a), a > 1e999.\n",
    "surrogate": '.input S\nDeny(a) :- S(a), a = "\\ud800".\n',
    "not-utf8": b'.input S\nDeny(a) :- S(a), a = "\xff".\n',
}
TOML = {
    "deep": 'policy = "p.dl"\nx = ' + DEEP + "\n",
    "huge-int": 'policy = "p.dl"\nx = ' + HUGE + "\n",
    "not-utf8": b'policy = "\xff.dl"\n',
    "empty": "",
}
TEXT = {"not-utf8": b"# Requirements\n\n1. \xff\n", "empty": ""}
SPECIAL = ("folder", "fifo", "dev-zero")  # a file of no format can be these


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]  # `{hostile}` is the hostile file, `{tmp}` a scratch folder
    where: str  # what the message must name: `{hostile}`'s name, or an option


def hostile_files(folder: Path, fmt: str, kinds: dict[str, str | bytes]) -> dict[str, Path]:
    made = {}
    for kind, content in kinds.items():
        path = folder / f"{fmt}-{kind}"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, "utf-8")
        made[kind] = path
    return made


def special(folder: Path, kind: str) -> Path:
    if kind == "folder":
        path = folder / "a-folder"
        path.mkdir(exist_ok=True)
        (path / "README").write_text("nothing to see\n", "utf-8")
        return path
    if kind == "fifo":
        path = folder / "a-fifo"
        if not path.exists():
            os.mkfifo(path)
        return path
    return Path("/dev/zero")


# commands and where they read a file of each format: (id, argv with `{hostile}`)
SLOTS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "json-facts": [
        ("eval", ("eval", str(FORGE), "--facts", "{hostile}")),
        ("explain", ("explain", str(FORGE), 'Deny("v6")', "--facts", "{hostile}")),
    ],
    "json-model": [
        ("forecast-query", ("forecast", "query", "{hostile}")),
        ("forecast-show", ("forecast", "show", "{hostile}")),
        (
            "forecast-replay-model",
            ("forecast", "replay", str(FORECAST), "{hostile}", str(TRAIN), "--threshold", "0.4"),
        ),
    ],
    "json-thresholds": [
        (
            "risk-report-thresholds",
            ("risk-report", str(RISK), "--data", "{calib}", "--thresholds", "{hostile}"),
        ),
        ("compile-thresholds", ("compile", str(RISK), "-o", "{tmp}/out.bundle", "--thresholds", "{hostile}")),
        ("replay-thresholds", ("replay", str(RISK), str(TRACE), "--thresholds", "{hostile}")),
    ],
    "json-bundle": [
        ("eval-bundle", ("eval", "{hostile}", "--facts", "{facts}")),
        ("replay-bundle", ("replay", "{hostile}", str(TRACE))),
        ("witness-bundle", ("witness", "{hostile}", "Deny(a)")),
        ("conditions-bundle", ("conditions", "{hostile}", "Deny(a)")),
        ("diff-bundle", ("diff", str(TOXIC), "{hostile}")),
        ("calibrate-bundle", ("calibrate", "{hostile}", "--data", "{calib}", "-o", "{tmp}/t.json")),
        (
            "forecast-learn-bundle",
            (
                "forecast",
                "learn",
                "{hostile}",
                str(TRAIN),
                "-p",
                PREDICATES,
                "--unsafe",
                "Deny",
                "-o",
                "{tmp}/m.json",
            ),
        ),
    ],
    "jsonl-trace": [
        ("replay", ("replay", str(TOXIC), "{hostile}")),
        ("calibrate-traces", ("calibrate", str(RISK), "--from-traces", "{hostile}", "-o", "{tmp}/t.json")),
        (
            "forecast-learn",
            (
                "forecast",
                "learn",
                str(FORECAST),
                "{hostile}",
                "-p",
                PREDICATES,
                "--unsafe",
                "Deny",
                "-o",
                "{tmp}/m.json",
            ),
        ),
        (
            "forecast-replay",
            ("forecast", "replay", str(FORECAST), str(MODEL), "{hostile}", "--threshold", "0.4"),
        ),
        (
            "translate-traces",
            (
                "translate",
                "{requirements}",
                "--traces",
                "{hostile}",
                "-o",
                "{tmp}/p.dl",
                *"--model m --base-url http://127.0.0.1:9/v1 -q".split(),
            ),
        ),
    ],
    "jsonl-audit": [
        ("audit-verify", ("audit", "verify", "{hostile}")),
        ("audit-show", ("audit", "show", "{hostile}")),
        ("audit-export", ("audit", "export", "{hostile}")),  # a file that is no database
        ("serve-reload", ("serve", "reload", "--db", "{hostile}")),
    ],
    "jsonl-records": [
        ("calibrate", ("calibrate", str(RISK), "--data", "{hostile}", "-o", "{tmp}/t.json")),
        ("risk-report", ("risk-report", str(RISK), "--data", "{hostile}", "--thresholds", str(THRESHOLDS))),
    ],
    "policy": [
        ("check", ("check", "{hostile}")),
        ("compile", ("compile", "{hostile}", "-o", "{tmp}/out.bundle")),
        ("eval-policy", ("eval", "{hostile}", "--facts", "{facts}")),
        ("explain-policy", ("explain", "{hostile}", 'Deny("a")', "--facts", "{facts}")),
        ("replay-policy", ("replay", "{hostile}", str(TRACE))),
        ("witness", ("witness", "{hostile}", "Deny(a)")),
        ("conditions", ("conditions", "{hostile}", "Deny(a)")),
        ("diff", ("diff", "{hostile}", str(TOXIC))),
        ("fmt", ("fmt", "{hostile}")),
        ("serve-policy", ("serve", "{hostile}", "--keys", "{keys}", "--db", "{tmp}/serve.db", "--port", "0")),
        ("mcp-policy", ("mcp", "{hostile}", "--name", "x", "--", "true")),
        ("calibrate-policy", ("calibrate", "{hostile}", "--data", "{calib}", "-o", "{tmp}/t.json")),
        (
            "risk-report-policy",
            ("risk-report", "{hostile}", "--data", "{calib}", "--thresholds", str(THRESHOLDS)),
        ),
        (
            "forecast-learn-policy",
            (
                "forecast",
                "learn",
                "{hostile}",
                str(TRAIN),
                "-p",
                "S",
                "--unsafe",
                "Deny",
                "-o",
                "{tmp}/m.json",
            ),
        ),
        (
            "translate-vocab",
            (
                "translate",
                "{requirements}",
                "--vocab",
                "{hostile}",
                "-o",
                "{tmp}/p.dl",
                *"--model m --base-url http://127.0.0.1:9/v1 -q".split(),
            ),
        ),
    ],
    "toml": [
        ("test", ("test", "{hostile}")),
        ("serve-keys", ("serve", str(TOXIC), "--keys", "{hostile}", "--db", "{tmp}/serve.db", "--port", "0")),
        ("mcp-config", ("mcp", str(TOXIC), "--config", "{hostile}")),
        ("mcp-lock", ("mcp", "lock", "--config", "{hostile}")),
    ],
    "text": [
        (
            "translate",
            (
                "translate",
                "{hostile}",
                "-o",
                "{tmp}/p.dl",
                *"--model m --base-url http://127.0.0.1:9/v1 -q".split(),
            ),
        ),
    ],
}
FORMATS = {
    "json-facts": JSON,
    "json-model": JSON,
    "json-thresholds": JSON,
    "json-bundle": {k: v for k, v in JSON.items() if k != "empty"},
    "jsonl-trace": JSONL,
    "jsonl-records": RECORDS,
    "jsonl-audit": JSONL,
    "policy": POLICY,
    "toml": TOML,
    "text": TEXT,
}

OPTIONS: list[Case] = [
    Case(f"{command[0]}-{option}-{value}", (*command, option, value), option)
    for command in (("eval", str(FORGE), "--facts", "{facts}"),)
    for option, value in (
        ("--timeout", "nan"),
        ("--timeout", "-1"),
        ("--timeout", "inf"),
        ("--max-facts", "-5"),
    )
] + [
    Case("witness-timeout-nan", ("witness", str(TOXIC), "Deny(a)", "--timeout", "nan"), "--timeout"),
    Case("witness-timeout-negative", ("witness", str(TOXIC), "Deny(a)", "--timeout", "-1"), "--timeout"),
    Case("diff-timeout-nan", ("diff", str(TOXIC), str(TOXIC), "--timeout", "nan"), "--timeout"),
    Case(
        "check-deep-timeout-nan", ("check", "--deep", "--deep-timeout", "nan", str(TOXIC)), "--deep-timeout"
    ),
    Case(
        "forecast-learn-horizon-huge",
        (
            "forecast",
            "learn",
            str(FORECAST),
            str(TRAIN),
            "-p",
            PREDICATES,
            "--unsafe",
            "Deny",
            "-o",
            "{tmp}/m.json",
            "--horizon",
            "99999999",
        ),
        "--horizon",
    ),
    Case(
        "forecast-learn-alpha-nan",
        (
            "forecast",
            "learn",
            str(FORECAST),
            str(TRAIN),
            "-p",
            PREDICATES,
            "--unsafe",
            "Deny",
            "-o",
            "{tmp}/m.json",
            "--alpha",
            "nan",
        ),
        "--alpha",
    ),
    Case(
        "forecast-learn-epsilon-nan",
        (
            "forecast",
            "learn",
            str(FORECAST),
            str(TRAIN),
            "-p",
            PREDICATES,
            "--unsafe",
            "Deny",
            "-o",
            "{tmp}/m.json",
            "--epsilon",
            "nan",
        ),
        "--epsilon",
    ),
    Case(
        "forecast-replay-threshold-nan",
        ("forecast", "replay", str(FORECAST), str(MODEL), str(TRAIN), "--threshold", "nan"),
        "--threshold",
    ),
    Case(
        "forecast-replay-horizon-huge",
        (
            "forecast",
            "replay",
            str(FORECAST),
            str(MODEL),
            str(TRAIN),
            "--threshold",
            "0.4",
            "--horizon",
            "99999999",
        ),
        "--horizon",
    ),
    Case(
        "forecast-show-min-probability-nan",
        ("forecast", "show", str(MODEL), "--min-probability", "nan"),
        "--min-probability",
    ),
    Case(
        "calibrate-delta-nan",
        ("calibrate", str(RISK), "--data", "{calib}", "-o", "{tmp}/t.json", "--delta", "nan"),
        "--delta",
    ),
    Case(
        "calibrate-split-nan",
        ("calibrate", str(RISK), "--data", "{calib}", "-o", "{tmp}/t.json", "--test-split", "nan"),
        "--test-split",
    ),
    Case(
        "risk-report-delta-nan",
        ("risk-report", str(RISK), "--data", "{calib}", "--thresholds", str(THRESHOLDS), "--delta", "nan"),
        "--delta",
    ),
    Case(
        "translate-timeout-nan",
        (
            "translate",
            "{requirements}",
            "-o",
            "{tmp}/p.dl",
            *"--model m --base-url http://127.0.0.1:9/v1 -q --timeout nan".split(),
        ),
        "--timeout",
    ),
    Case(
        "translate-search-timeout-inf",
        (
            "translate",
            "{requirements}",
            "-o",
            "{tmp}/p.dl",
            *"--model m --base-url http://127.0.0.1:9/v1 -q --search-timeout inf".split(),
        ),
        "--search-timeout",
    ),
]

# other commands and arguments
OTHERS: list[Case] = [
    Case("keygen-key-is-a-folder", ("keygen", "{tmp}/folder-key"), "folder-key.key"),
    Case(
        "audit-verify-key-fifo", ("audit", "verify", "{facts}", "--key", "{tmp}/fifo-key.key"), "fifo-key.key"
    ),
    Case(
        "audit-verify-key-folder",
        ("audit", "verify", "{facts}", "--key", "{tmp}/folder-key.key"),
        "folder-key.key",
    ),
    Case("keygen-key-is-a-fifo", ("keygen", "{tmp}/fifo-key"), "fifo-key.key"),
    Case("keygen-missing-folder", ("keygen", "{tmp}/missing/team"), "team.key"),
    Case("new-traversal", ("new", "../escape", "--dir", "{tmp}"), "../escape"),
    Case("new-empty", ("new", "", "--dir", "{tmp}"), "name"),
    Case("new-dir-is-a-file", ("new", "fresh", "--dir", "{facts}"), "facts.json"),
    Case("eval-facts-folder-without-facts", ("eval", str(FORGE), "--facts", "{tmp}/no-facts"), "no-facts"),
    Case("compile-output-is-a-folder", ("compile", str(TOXIC), "-o", "{tmp}/no-facts"), "no-facts"),
    Case("test-missing", ("test", "{tmp}/missing_test.toml"), "missing_test.toml"),
    Case(
        "forecast-learn-trace-fifo",
        (
            "forecast",
            "learn",
            str(FORECAST),
            "{tmp}/a-fifo",
            "-p",
            PREDICATES,
            "--unsafe",
            "Deny",
            "-o",
            "{tmp}/m.json",
        ),
        "a-fifo",
    ),
]


# each format's kinds are all given to the first command that reads it (whose reader the others
# share); the other commands get these few
FEW = ("deep", "not-utf8", "fifo", "dev-zero")


def cases() -> list[Case]:
    found = []
    for fmt, slots in SLOTS.items():
        every = [*FORMATS[fmt], *SPECIAL]
        for n, (name, argv) in enumerate(slots):
            kinds = every if n == 0 or (fmt == "policy" and n < 3) else [k for k in every if k in FEW]
            for kind in kinds:
                found.append(Case(f"{name}-{kind}", argv, f"{fmt}:{kind}"))
    return [*found, *OPTIONS, *OTHERS]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / "facts.json").write_text('{"ExternalSend": [["v6"]]}', "utf-8")
    (root / "calib.jsonl").write_text(
        "".join(
            f'{{"field": "send_money.recipient", "score": {i / 40}, "violated": {"true" if i % 7 == 0 else "false"}, '
            f'"episode": "e{i}"}}\n'
            for i in range(40)
        ),
        "utf-8",
    )
    (root / "requirements.md").write_text("# Requirements\n\n1. Never mail secrets out.\n", "utf-8")
    digest = "0" * 64  # no key hashes to it: a keys file that is well formed
    (root / "keys.toml").write_text(f'[principals.agent]\nroles = []\nkeys = ["{digest}"]\n', "utf-8")
    (root / "no-facts").mkdir()
    (root / "folder-key.key").mkdir()
    os.mkfifo(root / "fifo-key.key")
    os.mkfifo(root / "a-fifo")
    for fmt, kinds in FORMATS.items():
        (root / fmt).mkdir()
        hostile_files(root / fmt, fmt, kinds)
    return root


def resolve(case: Case, root: Path) -> tuple[list[str], str]:
    """The command line of a case, and what its message must name."""
    hostile = ""
    where = case.where
    if ":" in case.where and case.where.split(":")[0] in FORMATS:
        fmt, kind = case.where.split(":")
        target = special(root, kind) if kind in SPECIAL else root / fmt / f"{fmt}-{kind}"
        hostile = str(target)
        where = target.name
    values = {
        "hostile": hostile,
        "tmp": str(root),
        "facts": str(root / "facts.json"),
        "calib": str(root / "calib.jsonl"),
        "requirements": str(root / "requirements.md"),
        "keys": str(root / "keys.toml"),
    }
    return [arg.format(**values) for arg in case.argv], where


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    env.pop("POLICYC_DEBUG", None)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [*policyc_command(), *argv],
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.id)
def test_hostile_input_fails_cleanly(case: Case, folder: Path) -> None:
    argv, where = resolve(case, folder)
    try:
        done = run(argv, ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`policyc {' '.join(argv)[:200]}` did not end within {TIMEOUT} s")
    stdout = done.stdout.decode("utf-8", "replace")
    stderr = done.stderr.decode("utf-8", "replace")
    shown = f"$ policyc {' '.join(argv)[:300]}\nstatus {done.returncode}\nstdout: {stdout[:1500]}\nstderr: {stderr[:1500]}"
    assert done.returncode in (1, 2), shown
    assert "Traceback" not in stderr and "internal error" not in stderr, shown
    message = stderr.strip() or (stdout.strip() if argv[0] in ("check", "fmt", "test") else "")
    assert message, f"no message\n{shown}"
    assert where in message, f"the message does not name `{where}`\n{shown}"
    # they report diagnostics, results or a replay's report on standard output
    if argv[0] not in ("check", "fmt", "test", "replay"):
        assert stdout.strip() == "", f"output besides the error\n{shown}"


def test_every_command_is_exercised() -> None:
    """Every command of `policyc --help` (but the language server) has a hostile case."""
    done = subprocess.run([*policyc_command(), "--help"], capture_output=True, text=True, timeout=TIMEOUT)
    commands = set()
    listing = False
    for line in done.stdout.splitlines():
        if line.strip() == "Commands:":
            listing = True
        elif listing and line.startswith("  ") and line.split():
            commands.add(line.split()[0])
    covered = {c.argv[0] for c in cases()}
    assert commands - {"lsp"} <= covered, commands - covered
    forecast = {c.argv[1] for c in cases() if c.argv[0] == "forecast"}
    assert {"learn", "query", "show", "replay"} <= forecast


def test_fifo_is_refused_without_blocking(folder: Path) -> None:
    """A FIFO with no writer would block an `open` for reading forever."""
    assert shutil.which("true")  # the check needs a POSIX system
    done = run(["check", str(folder / "a-fifo")], ROOT)
    assert done.returncode == 2 and b"not a regular file" in done.stderr, done.stderr
