"""The typed reader of policyc's file formats (compiler/reading.py): what each read accepts and
refuses, the located error `file:line: field: problem`, the line of a value found again in the
JSON text (a property test whose oracle is where the test wrote the wrong value), and, for
every format, a wrong value deep inside a real example file reported at its line and field."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyc.compiler.locate import json_line
from policyc.compiler.reading import Cursor, FormatError, Source, field_name
from policyc.runtime.documents import document, records

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MARK = "WRONG-VALUE"


def at(value: object) -> Cursor:
    return Cursor.root({"x": value}, Source("f.json"))["x"]


def refusal(read, value: object) -> str:
    with pytest.raises(FormatError) as caught:
        read(at(value))
    return str(caught.value)


# ------------------------------------------------------------------------------ the reads


@pytest.mark.parametrize(
    ("read", "good", "bad", "message"),
    [
        (Cursor.string, "a", 1, "f.json: x: expected a string, got 1"),
        (lambda c: c.string(empty=False), "a", "", 'f.json: x: expected a non-empty string, got ""'),
        (Cursor.boolean, True, 0, "f.json: x: expected true or false, got 0"),
        (Cursor.count, 0, -1, "f.json: x: expected a count (an integer, 0 or more), got -1"),
        (Cursor.count, 3, True, "f.json: x: expected a count (an integer, 0 or more), got true"),
        (Cursor.count, 2, 2.0, "f.json: x: expected a count (an integer, 0 or more), got 2.0"),
        (lambda c: c.count(3), 2, 3, "f.json: x: expected an index below 3, got 3"),
        (Cursor.positive, 1, 0, "f.json: x: expected a positive integer, got 0"),
        (Cursor.number, -2.5, "1", 'f.json: x: expected a finite number, got "1"'),
        (Cursor.number, 1, math.nan, "f.json: x: expected a finite number, got NaN"),
        (lambda c: c.number(0, 1), 1, 1.5, "f.json: x: expected a number in [0, 1], got 1.5"),
        (lambda c: c.number(0), 0, -1, "f.json: x: expected a number >= 0, got -1"),
        (Cursor.probability, 1, 0, "f.json: x: expected a number in (0, 1], got 0"),
        (lambda c: c.choice(("a", "b")), "b", "c", 'f.json: x: expected one of a, b, got "c"'),
        (Cursor.list, [], {}, "f.json: x: expected a list, got {}"),
        (lambda c: c.list(2), [1, 2], [1], "f.json: x: expected a list of 2, got 1"),
        (Cursor.object, {}, [], "f.json: x: expected an object, got []"),
        (Cursor.strings, ["a"], ["a", 1], "f.json: x[1]: expected a string, got 1"),
        (lambda c: c.counts(2), [0, 1], [0, 2], "f.json: x[1]: expected an index below 2, got 2"),
        (lambda c: c.mapping(Cursor.count), {"a": 1}, {"a": -1}, "f.json: x.a: expected a count"),
        (lambda c: c.object({"a"}), {"a": 1}, {"b": 1}, "f.json: x.b: unknown key (the keys are `a`)"),
        (
            lambda c: c.object({"score", "role"}),
            {},
            {"scores": 1},
            "f.json: x.scores: unknown key (did you mean `score`?)",
        ),
    ],
)
def test_each_read_accepts_its_type_and_says_what_it_expected(read, good, bad, message: str) -> None:
    read(at(good))
    assert refusal(read, bad).startswith(message)


def test_fields_required_optional_and_absent() -> None:
    top = Cursor.root({"a": 1, "n": None}, Source("f.json"))
    assert top["a"].count() == 1
    with pytest.raises(FormatError, match=r"^f.json: b: missing$"):
        top["b"]
    assert top.get("b") is None and top.get("a").value == 1
    assert top.optional("n", Cursor.count, 7) == 7 and top.optional("b", Cursor.count, 8) == 8
    assert top.optional("a", Cursor.count, 7) == 1
    with pytest.raises(FormatError, match=r"^f.json: b: missing \(expected a string\)$"):
        top.child("b").string()
    assert at(None).number(null_infinite=True) == math.inf


def test_the_error_is_located_and_stable() -> None:
    error = FormatError("t.json", 14, "strata.target.n", "expected a count, got -1")
    assert str(error) == "t.json:14: strata.target.n: expected a count, got -1"
    assert isinstance(error, ValueError)
    assert (error.file, error.line, error.field, error.problem) == (
        "t.json",
        14,
        "strata.target.n",
        "expected a count, got -1",
    )
    assert str(FormatError("t.json", None, "", "not an object")) == "t.json: not an object"
    assert str(FormatError("t.json", 2, "", "not valid JSON: x", 5)) == "t.json:2:5: not valid JSON: x"
    assert field_name(("a", 0, "b c", "d")) == 'a[0]["b c"].d'


def test_a_document_locates_only_what_it_refuses(monkeypatch) -> None:
    calls = []
    monkeypatch.setattr("policyc.compiler.reading.json_line", lambda text, path: calls.append(path) or 0)
    top = document('{"a": {"b": [1, 2]}}', "d.json")
    assert top["a"]["b"].counts() == (1, 2) and calls == []
    with pytest.raises(FormatError):
        top["a"]["b"].list()[1].string()
    assert calls == [("a", "b", 1)]


def test_documents_and_records_refuse_what_is_not_json() -> None:
    with pytest.raises(FormatError, match=r"^d.json:2:3: not valid JSON: Expecting value"):
        document('{"a":\n  }', "d.json")
    with pytest.raises(FormatError, match=r"^r.jsonl:3:7: Infinity is not a JSON number"):
        list(records('{"a": 1}\n\n{"a": Infinity}', "r.jsonl"))
    found = list(itertools.islice(records('{"a": 1}\n \n[\n', "r.jsonl"), 1))  # read as they come
    assert [(line, c["a"].value) for line, c in found] == [(1, 1)]
    with pytest.raises(FormatError, match=r"^r.jsonl:2: a: expected a string, got 2"):
        for _, c in records('{"a": "x"}\n{"a": 2}\n', "r.jsonl"):
            c["a"].string()


def test_json_line_follows_keys_and_indices() -> None:
    text = '{\n "a": [\n  1,\n  {"b":\n   "x"}],\n "a2": 0,\n "a2": {"c": 1}\n}'
    assert json_line(text, ()) == 1
    assert json_line(text, ("a",)) == 2
    assert json_line(text, ("a", 0)) == 3
    assert json_line(text, ("a", 1)) == 4
    assert json_line(text, ("a", 1, "b")) == 5
    assert json_line(text, ("a2",)) == 7  # a key given twice is the last, as json.loads reads it
    assert json_line(text, ("a", 1, "missing")) == 4  # a missing field: the object that lacks it
    assert json_line("[" * 300 + "]" * 300, (0,) * 299) == 1  # as deep as jsonio reads, and deeper


# ------------------------------------------------------------------- the property: lines

KEYS = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)
LEAVES = st.integers(0, 1000)
DOCUMENTS = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)


def leaf_paths(value: object, path: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in leaf_paths(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaf_paths(v, (*path, i))]
    return [path]


def write(value: object, target: tuple, breaks: st.DataObject) -> tuple[str, int]:
    """The JSON text of ``value`` with newlines drawn between tokens, and the line on which the
    value at ``target`` was written."""
    out: list[str] = []
    where: list[int] = []

    def gap() -> None:
        out.append("\n" * breaks.draw(st.integers(0, 2)) + " " * breaks.draw(st.integers(0, 1)))

    def emit(v: object, path: tuple) -> None:
        gap()
        if path == target:
            where.append("".join(out).count("\n") + 1)
        if isinstance(v, dict):
            out.append("{")
            for i, (k, item) in enumerate(v.items()):
                out.append("," if i else "")
                gap()
                out.append(json.dumps(k) + ":")
                emit(item, (*path, k))
            gap()
            out.append("}")
        elif isinstance(v, list):
            out.append("[")
            for i, item in enumerate(v):
                out.append("," if i else "")
                emit(item, (*path, i))
            gap()
            out.append("]")
        else:
            out.append(json.dumps(v))

    emit(value, ())
    return "".join(out), where[0]


def read_counts(c: Cursor) -> None:
    """A reader of the generated documents: objects and lists of counts, any depth."""
    if isinstance(c.value, dict):
        for _, child in c.entries():
            read_counts(child)
    elif isinstance(c.value, list):
        for child in c.list():
            read_counts(child)
    else:
        c.count()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_wrong_field_is_named_and_found_at_the_line_it_was_written(data: st.DataObject) -> None:
    value = data.draw(DOCUMENTS.filter(lambda v: isinstance(v, dict | list) and leaf_paths(v)))
    target = data.draw(st.sampled_from([p for p in leaf_paths(value) if p]))
    node = value
    for key in target[:-1]:
        node = node[key]
    node[target[-1]] = MARK
    text, line = write(value, target, data)
    assert json.loads(text) == value
    with pytest.raises(FormatError) as caught:
        read_counts(document(text, "doc.json"))
    error = caught.value
    assert (error.file, error.line, error.field) == ("doc.json", line, field_name(target))
    assert (
        str(error)
        == f'doc.json:{line}: {field_name(target)}: expected a count (an integer, 0 or more), got "{MARK}"'
    )


# -------------------------------------------------------- every format, on a real example


def marked(text: str) -> int:
    """The line of the file that holds the wrong value."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if MARK in line)


def test_thresholds_file(tmp_path: Path) -> None:
    from policyc.risk.errors import RiskError
    from policyc.risk.thresholds import read_thresholds

    data = json.loads((EXAMPLES / "quickstart" / "thresholds.json").read_text("utf-8"))
    stratum = sorted(data["strata"])[-1]
    data["strata"][stratum]["n"] = MARK
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(data, indent=2), "utf-8")
    with pytest.raises(RiskError) as caught:
        read_thresholds(path)
    line = marked(path.read_text("utf-8"))
    assert str(caught.value) == (
        f'{path}:{line}: strata.{stratum}.n: expected a count (an integer, 0 or more), got "{MARK}"'
    )


def test_calibration_records(tmp_path: Path) -> None:
    from policyc.risk.declarations import read_declarations
    from policyc.risk.errors import RiskError
    from policyc.risk.records import read_records

    lines = (EXAMPLES / "quickstart" / "calib.jsonl").read_text("utf-8").splitlines()
    record = json.loads(lines[36])
    record["score"] = MARK
    lines[36] = json.dumps(record)
    path = tmp_path / "calib.jsonl"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    declarations = read_declarations(EXAMPLES / "quickstart" / "budgets.dl")
    with pytest.raises(RiskError) as caught:
        read_records(path, declarations)
    assert caught.value.problems == (f'{path}:37: score: expected a finite number, got "{MARK}"',)


def test_forecast_model(tmp_path: Path) -> None:
    from policyc.forecast import ForecastError, load_model

    data = json.loads((EXAMPLES / "forecast" / "model.json").read_text("utf-8"))
    data["states"][3]["within"][1] = MARK
    path = tmp_path / "model.json"
    path.write_text(json.dumps(data, indent=1), "utf-8")
    with pytest.raises(ForecastError) as caught:
        load_model(path)
    line = marked(path.read_text("utf-8"))
    assert (
        str(caught.value) == f'{path}:{line}: states[3].within[1]: expected a number in [0, 1], got "{MARK}"'
    )


def test_trace_file(tmp_path: Path) -> None:
    from policyc.runtime.replay import TraceError, read_sessions

    lines = (EXAMPLES / "quickstart" / "trace.jsonl").read_text("utf-8").splitlines()
    session = json.loads(lines[1])
    session["events"] = MARK
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join([lines[0], "", json.dumps(session)]) + "\n", "utf-8")
    with pytest.raises(TraceError) as caught:
        list(read_sessions(str(path)))
    assert str(caught.value) == f'{path}:3: events: expected a list, got "{MARK}"'


def test_policy_test_file(tmp_path: Path) -> None:
    from policyc.testing.spec import TestFileError, read

    for name in ("agent.dl", "agent_test.toml"):
        shutil.copy(EXAMPLES / "quickstart" / name, tmp_path / name)
    path = tmp_path / "agent_test.toml"
    text = path.read_text("utf-8")
    head, case = text.split('name = "requests go to trusted hosts only"')
    case = case.replace('deny = ["c2"]', f'deny = "{MARK}"', 1)
    path.write_text(head + 'name = "requests go to trusted hosts only"' + case, "utf-8")
    with pytest.raises(TestFileError) as caught:
        read(path)
    line = marked(path.read_text("utf-8"))
    assert str(caught.value) == (
        f'{path}:{line}: test[2].deny: expected a list of actions (strings or integers), got "{MARK}"'
    )


def test_bundle_plan(tmp_path: Path, cli) -> None:
    import policyc
    from policyc.runtime.bundle import canonical, sha256
    from policyc.runtime.errors import PolicyError

    bundle = tmp_path / "agent.bundle.json"
    run = cli("compile", str(EXAMPLES / "quickstart" / "agent.dl"), "-o", str(bundle))
    assert run.status == 0, run.stderr
    data = json.loads(bundle.read_text("utf-8"))
    stratum = next(i for i, s in enumerate(data["plan"]["strata"]) if s["rules"])
    data["plan"]["strata"][stratum]["rules"][0]["steps"][0][1] = MARK
    data["manifest"]["plan_sha256"] = sha256(canonical(data["plan"]))
    bundle.write_text(json.dumps(data, indent=1), "utf-8")
    with pytest.raises(PolicyError) as caught:
        policyc.load(bundle)
    line = marked(bundle.read_text("utf-8"))
    field = f"plan.strata[{stratum}].rules[0].steps[0][1]"
    assert str(caught.value).startswith(f"{bundle}:{line}: {field}: expected a count")
