"""`policyc check` reads, tokenizes and parses each file once, whatever it prints."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from policyc.cli import main
from policyc.compiler import loader, parser
from policyc.compiler.pipeline import compile_file


@pytest.fixture
def counted(monkeypatch) -> dict[str, Counter]:
    """Calls of the file reader, the parser and the tokenizer, by path."""
    calls: dict[str, Counter] = {"read": Counter(), "parse": Counter(), "tokenize": Counter()}
    read, parse, tokenize = loader.read_bytes, loader.parse, parser.tokenize

    def counting_read(path, limit):
        calls["read"][Path(path).name] += 1
        return read(path, limit)

    def counting_parse(source, **options):
        calls["parse"][Path(source.path).name] += 1
        return parse(source, **options)

    def counting_tokenize(source):
        calls["tokenize"][Path(source.path).name] += 1
        return tokenize(source)

    monkeypatch.setattr(loader, "read_bytes", counting_read)
    monkeypatch.setattr(loader, "parse", counting_parse)
    monkeypatch.setattr(parser, "tokenize", counting_tokenize)
    loader._library_module.cache_clear()  # the library modules are parsed once per process
    loader.library_names.cache_clear()
    yield calls
    loader._library_module.cache_clear()
    loader.library_names.cache_clear()


@pytest.fixture
def policy(tmp_path) -> Path:
    (tmp_path / "rules.dl").write_text(".decl Seen(a: symbol)\nSeen(a) :- Actions(a).\n", "utf-8")
    root = tmp_path / "policy.dl"
    root.write_text(
        '.include "rules.dl"\n.import provenance\n.input Actions\nDeny(a) :- Seen(a), Unknown(a).\n',
        "utf-8",
    )
    return root


ONCE = {"policy.dl": 1, "rules.dl": 1}
# provenance imports events; for the undefined `Unknown`, the check asks which library module
# declares it (see checks/undefined.py): every module is parsed, once per process
LIBRARY = {"builtins.dl": 1, **{f"{name}.dl": 1 for name in loader.library_modules()}}
PARSED_ONCE = {**ONCE, **LIBRARY}


@pytest.mark.parametrize(
    "options",
    [
        (),
        ("--show", "ast"),
        ("--show", "strata"),
        ("--show", "plan"),
        ("--format", "json"),
        ("--format", "sarif"),
    ],
    ids=lambda o: " ".join(o) or "default",
)
def test_check_reads_and_parses_each_file_once(counted, policy, options) -> None:
    run = CliRunner().invoke(main, ["check", *options, str(policy)])
    assert run.exit_code == 1, run.output  # `Unknown` is undefined: the policy has an error
    assert "Unknown" in run.output
    assert counted["read"] == ONCE
    assert counted["parse"] == PARSED_ONCE
    assert counted["tokenize"] == PARSED_ONCE


def test_two_files_including_the_same_one_parse_the_library_once(counted, policy, tmp_path) -> None:
    other = tmp_path / "other.dl"
    other.write_text('.include "rules.dl"\n.input Actions\nDeny(a) :- Seen(a).\n', "utf-8")
    run = CliRunner().invoke(main, ["check", str(policy), str(other)])
    assert run.exit_code == 1, run.output
    # each root is its own program (so rules.dl once per root); the library once per process
    assert counted["read"] == {"policy.dl": 1, "other.dl": 1, "rules.dl": 2}
    assert counted["parse"] == {"policy.dl": 1, "other.dl": 1, "rules.dl": 2, **LIBRARY}
    assert counted["tokenize"] == counted["parse"]


def test_compile_file_parses_once(counted, policy) -> None:
    result = compile_file(str(policy), upto="plan")
    assert not result.ok
    assert counted["read"] == ONCE
    assert counted["parse"] == PARSED_ONCE
    assert counted["tokenize"] == PARSED_ONCE
