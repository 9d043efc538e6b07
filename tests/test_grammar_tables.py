"""The grammar's tables are read from their cache file only when it holds exactly them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from policyc.compiler import grammar_tables


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder, and the tables to be read or derived again."""
    monkeypatch.setattr(grammar_tables.tempfile, "gettempdir", lambda: str(tmp_path))
    grammar_tables.tables.cache_clear()
    yield tmp_path
    grammar_tables.tables.cache_clear()


def _file(folder) -> str:
    (name,) = [n for n in os.listdir(folder) if n.endswith(".json")]
    return os.path.join(folder, name)


def test_the_cached_tables_are_the_derived_ones(cache) -> None:
    derived = grammar_tables.tables()
    assert derived == grammar_tables.derive()
    grammar_tables.tables.cache_clear()
    assert grammar_tables._read(_file(cache)) == derived
    assert grammar_tables.tables() == derived


@pytest.mark.parametrize(
    "spoil",
    [
        lambda text: "{" + text,  # not JSON
        lambda text: text.replace('"format": 1', '"format": 0'),
        lambda text: text.replace('"start": ', '"start": -1, "was": '),
        lambda text: text.replace('"rules": [', '"rules": [["x"], '),
        lambda text: "[]",
    ],
    ids=["not-json", "other-format", "negative-state", "short-rule", "not-an-object"],
)
def test_a_spoilt_cache_file_is_derived_again(cache, spoil) -> None:
    derived = grammar_tables.tables()
    path = _file(cache)
    with open(path, encoding="utf-8") as file:
        text = file.read()
    with open(path, "w", encoding="utf-8") as file:
        file.write(spoil(text))
    assert grammar_tables._read(path) is None
    grammar_tables.tables.cache_clear()
    assert grammar_tables.tables() == derived
    assert grammar_tables._read(path) == derived  # and written again


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="file owners are a POSIX notion")
def test_a_cache_file_others_may_write_is_not_read(cache) -> None:
    grammar_tables.tables()
    path = _file(cache)
    os.chmod(path, 0o666)
    assert grammar_tables._read(path) is None


def test_checking_with_the_tables_cached_does_not_import_lark(cache) -> None:
    grammar_tables.tables()
    code = (
        "import sys, tempfile; tempfile.gettempdir = lambda: sys.argv[1]\n"
        "from policyc.compiler.pipeline import compile_source\n"
        "assert compile_source('Deny(a) :- Send(a).\\n.input Send').ok\n"
        "print('lark' in sys.modules, 'networkx' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(cache)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "False"]
