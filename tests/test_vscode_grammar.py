"""The VS Code extension in editors/vscode: its own tests (grammar tests, example coverage, the
client's launch of `policyc lsp`) run with npm, its TextMate grammar scopes every policy the way
policyc's parser reads it, and `package.sh` builds a .vsix that holds what VS Code loads.

The tests that run the extension's code need Node.js and npm; without npm on PATH they are
skipped, saying so. The locked dependencies are installed once (`npm ci`) into
editors/vscode/node_modules and reused. The documentation of the extension is checked always.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings

from policyc.compiler import ast
from policyc.compiler.arguments import ARG_TYPES
from policyc.compiler.parser import parse
from policyc.compiler.source import SourceFile

from .conftest import EXAMPLES, ROOT, policyc_command, shared_folder
from .programs import oracle_programs, token_soup

EXTENSION = ROOT / "editors" / "vscode"
NPM = shutil.which("npm")

needs_npm = pytest.mark.skipif(
    NPM is None, reason="npm is not on PATH: the VS Code extension's tests need Node.js 20+ and npm"
)

BUILTINS = frozenset(
    re.findall(r"^\.functor (\w+)\(", (ROOT / "stdlib" / "builtins.dl").read_text("utf-8"), flags=re.M)
) | {"range"}  # the generator, intrinsic (compiler/generators.py)
PRIMITIVE_TYPES = frozenset({"symbol", "number", "unsigned", "float", "any", "bool"})


def _env() -> dict[str, str]:
    """This environment's `policyc` first on PATH (the extension's tests start `policyc lsp`)."""
    bindir = str(Path(policyc_command()[0]).parent)
    return dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), NO_COLOR="1")


def _npm(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    assert NPM is not None
    return subprocess.run(
        [NPM, *args], cwd=EXTENSION, env=_env(), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def node_modules(tmp_path_factory) -> Path:
    """The extension's locked dependencies, installed by `npm ci` unless already up to date.

    Test workers take a lock first: two `npm ci` in one folder remove each other's files."""
    marker = EXTENSION / "node_modules" / ".package-lock.json"
    locked = EXTENSION / "package-lock.json"
    with open(shared_folder(tmp_path_factory) / "node_modules.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists() or marker.stat().st_mtime < locked.stat().st_mtime:
            done = _npm("ci", "--no-audit", "--no-fund")
            assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return marker.parent


def _shipped_policies() -> list[Path]:
    return sorted([*EXAMPLES.rglob("*.dl"), *(ROOT / "stdlib").rglob("*.dl")])


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
@needs_npm
def test_npm_test_passes(node_modules: Path) -> None:
    done = _npm("test", timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    grammar_tests = sorted((EXTENSION / "test" / "grammar").glob("*.dltest"))
    assert len(grammar_tests) >= 9
    passed = set(re.findall(r"✓ (test/grammar/[\w-]+\.dltest) run successfuly\.", output))
    assert passed == {f"test/grammar/{p.name}" for p in grammar_tests}, output
    assert "✖" not in output
    summary = dict(re.findall(r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$", output, flags=re.M))
    assert summary.get("fail") == "0" and summary.get("cancelled") == "0", output
    assert summary.get("skipped") == "0" and summary.get("todo") == "0", output
    assert summary["pass"] == summary["tests"], output
    # one test per policy shipped with policyc, and the client's test against the real server
    for policy in _shipped_policies():
        name = policy.relative_to(ROOT).as_posix()
        assert re.search(rf"^ok \d+ - every character of {re.escape(name)} is scoped", output, flags=re.M), (
            name
        )
    assert re.search(
        r"^ok \d+ - the command the extension builds starts a language server", output, flags=re.M
    )
    assert int(summary["pass"]) >= len(_shipped_policies()) + 10


# ------------------------------------------------------------------ the grammar against the parser


class Tokenizer:
    """The extension's grammar in a Node.js process (test/tokenize.js --serve)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            ["node", str(EXTENSION / "test" / "tokenize.js"), "--serve"],
            cwd=EXTENSION,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def scopes(self, text: str) -> tuple[list[list[str]], int]:
        """The scopes of every character of the text, and the rule-stack depth at its end."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(text) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], 30)
        assert ready, f"the grammar did not tokenize within 30 s: {text[:200]!r}"
        reply = json.loads(self.process.stdout.readline())
        assert "error" not in reply, reply.get("error")
        chars: list[list[str]] = [["source.policyc"] for _ in text]
        for start, end, scopes in reply["tokens"]:
            for i in range(start, end):
                chars[i] = scopes
        return chars, reply["depth"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def tokenizer(node_modules: Path) -> Iterator[Tokenizer]:
    if shutil.which("node") is None:
        pytest.fail("npm is on PATH but node is not")
    found = Tokenizer()
    yield found
    found.close()


@dataclass(frozen=True)
class Expect:
    """The visible characters [start, end) must each carry one of `scopes`."""

    start: int
    end: int
    scopes: tuple[str, ...]
    what: str


def _relation(name: str) -> tuple[str, ...]:
    if name in BUILTINS:
        return ("support.function.builtin.policyc",)
    return ("entity.name.type.relation.policyc",)


def _function(name: str) -> tuple[str, ...]:
    if name in BUILTINS:
        return ("support.function.builtin.policyc",)
    return ("entity.name.function.policyc",)


def _type(name: str) -> tuple[str, ...]:
    return ("support.type.primitive.policyc",) if name in PRIMITIVE_TYPES else ("entity.name.type.policyc",)


def _between(text: str, start: int, end: int, token: str) -> int:
    """The first place `token` is written between two nodes."""
    at = text.find(token, start, end)
    assert at >= 0, (token, text[start:end])
    return at


def _term(text: str, term: ast.Term) -> Iterator[Expect]:
    s = term.span
    if isinstance(term, ast.Var) and term.name.startswith("_@"):  # `_ = aggregate`, named by the parser
        yield Expect(s.start, s.end, ("variable.language.anonymous.policyc",), "_")
    elif isinstance(term, ast.Var):
        yield Expect(s.start, s.end, ("variable.other.policyc",), f"variable {term.name}")
    elif isinstance(term, ast.Wildcard):
        yield Expect(s.start, s.end, ("variable.language.anonymous.policyc",), "_")
    elif isinstance(term, ast.String):
        yield Expect(s.start, s.end, ("string.quoted.double.policyc",), "string")
    elif isinstance(term, ast.Integer | ast.Float):
        digits = re.search(r"[0-9]", text[s.start : s.end])
        assert digits is not None
        scope = (
            "constant.numeric.integer.policyc"
            if isinstance(term, ast.Integer)
            else "constant.numeric.float.policyc"
        )
        yield Expect(s.start + digits.start(), s.end, (scope,), "number")
        if digits.start():  # a negative number: the minus sign is an operator
            yield Expect(s.start, s.start + 1, ("keyword.operator.arithmetic.policyc",), "minus")
    elif isinstance(term, ast.Call):
        yield Expect(term.name_span.start, term.name_span.end, _function(term.name), f"call {term.name}")
        for arg in term.args:
            yield from _term(text, arg)
    elif isinstance(term, ast.BinOp) and term.op in ast.EXTREMA:
        if text.startswith(term.op, s.start):  # the innermost of `max(a, b, c)` starts at the name
            yield Expect(s.start, s.start + 3, ("support.function.builtin.policyc",), f"call {term.op}")
        yield from _term(text, term.left)
        yield from _term(text, term.right)
    elif isinstance(term, ast.BinOp):
        at = _between(text, term.left.span.end, term.right.span.start, term.op)
        yield Expect(at, at + len(term.op), (_operator_scope(term.op),), f"operator {term.op}")
        yield from _term(text, term.left)
        yield from _term(text, term.right)
    elif isinstance(term, ast.Negate):
        yield Expect(s.start, s.start + 1, ("keyword.operator.arithmetic.policyc",), "minus")
        yield from _term(text, term.operand)
    elif isinstance(term, ast.UnaryOp):
        yield Expect(s.start, s.start + len(term.op), (_operator_scope(term.op),), term.op)
        yield from _term(text, term.operand)
    elif isinstance(term, ast.Record):
        yield Expect(s.start, s.start + 1, ("punctuation.section.brackets.begin.policyc",), "record")
        for arg in term.args:
            yield from _term(text, arg)
    elif isinstance(term, ast.Nil):
        yield Expect(s.start, s.end, ("constant.language.nil.policyc",), "nil")
    elif isinstance(term, ast.Constructor):
        span = term.name_span
        yield Expect(
            span.start, span.end, ("entity.name.type.constructor.policyc",), f"constructor {term.name}"
        )
        for arg in term.args:
            yield from _term(text, arg)
    elif isinstance(term, ast.Cast):
        yield Expect(s.start, s.start + 2, ("support.function.builtin.policyc",), "as")
        yield from _term(text, term.operand)
    elif isinstance(term, ast.Aggregate):
        yield Expect(s.start, s.start + len(term.op), ("keyword.other.aggregate.policyc",), term.op)
        if term.target is not None:
            yield from _term(text, term.target)
        for literal in term.body:
            yield from _literal(text, literal)
    else:
        raise AssertionError(f"unknown term {term!r}")


def _operator_scope(op: str) -> str:
    if op in ast.BITWISE or op == "bnot":
        return "keyword.operator.bitwise.policyc"
    if op in ast.LOGICAL or op == "lnot":
        return "keyword.operator.logical.policyc"
    return "keyword.operator.arithmetic.policyc"


def _atom(text: str, atom: ast.Atom) -> Iterator[Expect]:
    yield Expect(atom.name_span.start, atom.name_span.end, _relation(atom.name), f"atom {atom.name}")
    for arg in atom.args:
        yield from _term(text, arg)


def _literal(text: str, literal: ast.Literal) -> Iterator[Expect]:
    if isinstance(literal, ast.Atom):
        yield from _atom(text, literal)
    elif isinstance(literal, ast.Negation):
        width = 3 if text.startswith("not", literal.span.start) else 1
        if literal.span.start != literal.atom.span.start:  # else negated by `not (...)` around it
            yield Expect(
                literal.span.start, literal.span.start + width, ("keyword.operator.negation.policyc",), "not"
            )
        yield from _atom(text, literal.atom)
    elif text[literal.span.start : literal.span.end] in ("true", "false"):  # Soufflé's constraints
        yield Expect(literal.span.start, literal.span.end, ("constant.language.boolean.policyc",), "boolean")
    else:
        # the operator written (in `not (...)` the parser's is the opposite one)
        written = re.search(r"!=|<=|>=|=|<|>", text[literal.left.span.end : literal.right.span.start])
        assert written is not None
        at = literal.left.span.end + written.start()
        yield Expect(at, at + len(written.group()), ("keyword.operator.comparison.policyc",), written.group())
        yield from _term(text, literal.left)
        yield from _term(text, literal.right)


def _ident(ident: ast.Ident, scopes: tuple[str, ...], what: str) -> Expect:
    return Expect(ident.span.start, ident.span.end, scopes, what)


def _written(text: str, ident: ast.Ident) -> str:
    """The name as written (an instance of a component has its type arguments in their place)."""
    return text[ident.span.start : ident.span.end]


def _statement(text: str, statement: ast.Statement) -> Iterator[Expect]:
    span = statement.span
    if isinstance(statement, ast.Misplaced):
        for annotation in statement.annotations:
            yield from _annotation(annotation)
        yield from _statement(text, statement.statement)
        return
    if isinstance(statement, ast.Rule):
        for annotation in statement.annotations:
            yield from _annotation(annotation)
        yield from _atom(text, statement.head)
        last = statement.head
        if statement.dominating is not None:  # `r(a) <= r(b) :- ...`
            at = _between(text, statement.head.span.end, statement.dominating.span.start, "<=")
            yield Expect(at, at + 2, ("keyword.operator.subsumption.policyc",), "<=")
            yield from _atom(text, statement.dominating)
            last = statement.dominating
        if statement.conditions:
            at = _between(text, last.span.end, statement.conditions[0].span.start, ":-")
            yield Expect(at, at + 2, ("keyword.operator.rule.policyc",), ":-")
        for literal in statement.conditions:
            yield from _literal(text, literal)
        assert text[span.end - 1] == "."
        yield Expect(span.end - 1, span.end, ("punctuation.terminator.statement.policyc",), "end of rule")
        return
    directive = re.match(r"\.[a-z]+", text[span.start :])
    assert directive is not None
    yield Expect(
        span.start, span.start + directive.end(), ("keyword.other.directive.policyc",), directive.group()
    )
    if isinstance(statement, ast.Decl):
        yield _ident(statement.name, ("entity.name.type.relation.policyc",), "declared relation")
        for attribute in statement.attributes:
            start = attribute.span.start
            yield Expect(start, start + len(attribute.name), ("variable.parameter.policyc",), "attribute")
            yield _ident(attribute.type, _type(_written(text, attribute.type)), "type")
        qualifiers = text[span.start : span.end]
        for word, scope, on in (
            ("inline", "storage.modifier.inline.policyc", statement.inline),
            ("overridable", "storage.modifier.overridable.policyc", statement.overridable),
            ("eqrel", "storage.modifier.eqrel.policyc", statement.eqrel),
            ("choice-domain", "storage.modifier.choice-domain.policyc", bool(statement.choice)),
        ):
            if on:
                at = span.start + qualifiers.rindex(word)
                yield Expect(at, at + len(word), (scope,), word)
        for hint in statement.hints:
            yield _ident(hint, ("storage.modifier.hint.policyc",), "planner's hint")
        for qualifier in statement.io:
            yield _ident(qualifier, ("storage.modifier.io.policyc",), "older I/O qualifier")
    elif isinstance(statement, ast.Once):
        pass  # the keyword alone
    elif isinstance(statement, ast.Input | ast.Output | ast.Host):
        for name in statement.names:
            yield _ident(name, ("entity.name.type.relation.policyc",), "listed relation")
    elif isinstance(statement, ast.LimitSize):
        yield _ident(statement.relation, ("entity.name.type.relation.policyc",), "size-limited relation")
    elif isinstance(statement, ast.Key):
        yield _ident(statement.relation, ("entity.name.type.relation.policyc",), "keyed relation")
        for name in statement.attributes:
            yield _ident(name, ("variable.parameter.policyc",), "key attribute")
    elif isinstance(statement, ast.Include):
        yield from _term(text, statement.path)
    elif isinstance(statement, ast.Import):
        yield _ident(statement.module, ("entity.name.namespace.policyc",), "module")
    elif isinstance(statement, ast.Functor):
        yield _ident(statement.name, ("entity.name.function.functor.policyc",), "functor")
        for parameter in statement.params:
            if parameter.name is not None:
                start = parameter.span.start
                yield Expect(start, start + len(parameter.name), ("variable.parameter.policyc",), "parameter")
            yield _ident(parameter.type, _type(_written(text, parameter.type)), "type")
        yield _ident(statement.returns, _type(_written(text, statement.returns)), "result type")
        if statement.stateful is not None:
            yield _ident(statement.stateful, ("storage.modifier.stateful.policyc",), "stateful")
    elif isinstance(statement, ast.Default):
        yield _ident(statement.verdict, ("constant.language.verdict.policyc",), "verdict")
    elif isinstance(statement, ast.Role):
        yield _ident(statement.name, ("entity.name.type.role.policyc",), "role")
        yield from _term(text, statement.budget)
        if statement.pool is not None:
            yield _ident(statement.pool, ("entity.name.type.role.policyc",), "pool")
    elif isinstance(statement, ast.FieldMap):
        quoted = text[statement.path_span.start] == '"'
        scope = "string.quoted.double.policyc" if quoted else "entity.other.attribute-name.field.policyc"
        yield Expect(statement.path_span.start, statement.path_span.end, (scope,), "field")
        yield _ident(statement.role, ("entity.name.type.role.policyc",), "role")
    elif isinstance(statement, ast.ArgDecl):
        quoted = text[statement.path_span.start] == '"'
        scope = "string.quoted.double.policyc" if quoted else "entity.other.attribute-name.field.policyc"
        yield Expect(statement.path_span.start, statement.path_span.end, (scope,), "argument")
        known = statement.type.name in ARG_TYPES
        kind = ("support.type.primitive.policyc",) if known else ("entity.name.type.policyc",)
        yield _ident(statement.type, kind, "argument type")
        if statement.presence is not None:
            yield _ident(statement.presence, ("keyword.other.presence.policyc",), "presence")
    elif isinstance(statement, ast.TypeDecl):
        yield _ident(statement.name, ("entity.name.type.policyc",), "declared type")
        for member in statement.members:
            yield _ident(member, _type(_written(text, member)), "type")
        attributes = [*statement.fields, *(a for b in statement.branches for a in b.fields)]
        for branch in statement.branches:
            yield _ident(branch.name, ("entity.name.type.constructor.policyc",), "branch")
        for attribute in attributes:
            start = attribute.span.start
            yield Expect(start, start + len(attribute.name), ("variable.parameter.policyc",), "field")
            yield _ident(attribute.type, _type(_written(text, attribute.type)), "type")
    else:
        raise AssertionError(f"unknown statement {statement!r}")


def _component_parts(text: str, statement: ast.Statement) -> Iterator[Expect]:
    """What a component, an instance and an override are (the parser expands the first two,
    so these come from the text as written)."""
    if not isinstance(statement, ast.Component | ast.Init | ast.Override):
        return
    keyword = re.match(r"\.[a-z]+", text[statement.span.start :])
    assert keyword is not None
    at = statement.span.start
    yield Expect(at, at + keyword.end(), ("keyword.other.directive.policyc",), keyword.group())
    component = ("entity.name.type.component.policyc",)
    if isinstance(statement, ast.Override):
        yield _ident(statement.name, ("entity.name.type.relation.policyc",), "overridden relation")
        return
    if isinstance(statement, ast.Init):
        yield _ident(statement.name, ("entity.name.namespace.instance.policyc",), "instance")
        refs = (statement.component,)
    else:
        yield _ident(statement.name, component, "component")
        for param in statement.params:
            yield _ident(param, _type(param.name), "type parameter")
        refs = statement.bases
        end = statement.close_span
        yield Expect(end.start, end.end, ("punctuation.section.component.end.policyc",), "end of component")
        for inner in statement.body:
            yield from _component_parts(text, inner)
    for ref in refs:
        yield _ident(ref.name, component, "component")
        for arg in ref.args:
            yield _ident(arg, _type(arg.name), "type argument")


def _annotation(annotation: ast.Annotation) -> Iterator[Expect]:
    start = annotation.span.start
    yield Expect(start, start + 1 + len(annotation.name), ("storage.type.annotation.policyc",), "annotation")
    for arg in annotation.args:
        if isinstance(arg, ast.String):
            yield Expect(
                arg.span.start, arg.span.end, ("string.quoted.double.policyc",), "annotation argument"
            )
        elif isinstance(arg, ast.Var):
            yield Expect(arg.span.start, arg.span.end, ("string.unquoted.annotation.policyc",), "bare word")


def _expectations(text: str, module: ast.Module) -> Iterator[Expect]:
    for comment in module.comments:
        scope = (
            "comment.line.double-slash.policyc" if comment.text.startswith("//") else "comment.block.policyc"
        )
        yield Expect(comment.span.start, comment.span.end, (scope,), "comment")
    declared = {s.span for s in module.statements if isinstance(s, ast.Decl)}
    for statement in module.statements:
        if isinstance(statement, ast.Rule) and statement.span in declared:
            continue  # the rules closing an `eqrel` relation, written nowhere
        yield from _statement(text, statement)
    if any(isinstance(s, ast.Component | ast.Init | ast.Override) for s in module.statements):
        raise AssertionError("components are expanded by the parser")
    written, _ = parse(SourceFile(module.path, text), surface=True)
    for statement in written.statements:
        yield from _component_parts(text, statement)


def _disagreements(tokenizer: Tokenizer, text: str, name: str) -> list[str]:
    """Where the grammar's scopes differ from what policyc's parser says the text is."""
    module, diagnostics = parse(SourceFile(name, text))
    assert diagnostics == [], (name, [d.message for d in diagnostics])
    chars, depth = tokenizer.scopes(text)
    problems = []
    if depth != 1:
        problems.append(f"{name}: the grammar ends inside a construct (depth {depth})")
    for i, c in enumerate(text):
        invalid = [s for s in chars[i] if s.startswith("invalid.")]
        if c.strip() and (len(chars[i]) < 2 or invalid):
            problems.append(f"{name}@{i}: {c!r} is scoped {chars[i]}")
    for expect in _expectations(text, module):
        for i in range(expect.start, expect.end):
            if text[i].strip() and not any(s in chars[i] for s in expect.scopes):
                line = text.count("\n", 0, i) + 1
                problems.append(
                    f"{name}:{line}: {expect.what} {text[expect.start : expect.end]!r} "
                    f"should be {expect.scopes[0]}, is {chars[i][1:]}"
                )
                break
    return problems


def _doc_examples() -> list[tuple[str, str]]:
    """The ```datalog blocks of the docs that are policies without syntax errors."""
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        blocks = re.findall(r"```datalog\n(.*?)```", page.read_text("utf-8"), flags=re.S)
        for n, block in enumerate(blocks):
            if not parse(SourceFile("doc.dl", block))[1]:
                found.append((f"{page.name}#{n}", block))
    return found


@needs_npm
def test_grammar_scopes_every_shipped_policy_as_the_parser_reads_it(tokenizer: Tokenizer) -> None:
    policies = _shipped_policies()
    assert len(policies) >= 20
    problems = []
    for policy in policies:
        text = policy.read_text("utf-8")
        problems += _disagreements(tokenizer, text, policy.relative_to(ROOT).as_posix())
    assert problems == []


@needs_npm
def test_grammar_scopes_the_souffle_corpus_as_the_parser_reads_it(tokenizer: Tokenizer) -> None:
    problems = []
    for program in sorted((ROOT / "tests" / "souffle").glob("*.dl")):
        problems += _disagreements(tokenizer, program.read_text("utf-8"), program.name)
    assert problems == []


@needs_npm
def test_grammar_scopes_the_language_reference_examples(tokenizer: Tokenizer) -> None:
    examples = _doc_examples()
    assert len([name for name, _ in examples if name.startswith("language.md")]) >= 15
    problems = []
    for name, text in examples:
        problems += _disagreements(tokenizer, text, name)
    assert problems == []


@needs_npm
@settings(max_examples=60, deadline=None)
@given(case=oracle_programs())
def test_grammar_scopes_random_programs_as_the_parser_reads_them(tokenizer: Tokenizer, case) -> None:
    assert _disagreements(tokenizer, case.text, "random.dl") == []


@needs_npm
@settings(max_examples=60, deadline=None)
@given(text=token_soup())
def test_grammar_scopes_every_character_of_any_text(tokenizer: Tokenizer, text: str) -> None:
    """Whatever the text, the grammar answers and leaves no visible character without a scope."""
    chars, _ = tokenizer.scopes(text)
    assert [(i, c) for i, c in enumerate(text) if c.strip() and len(chars[i]) < 2] == []


# ------------------------------------------------------------------ the package


@pytest.mark.slow  # run by the slow suite, as CI does: it keeps the main suite within its time
@needs_npm
def test_package_sh_builds_a_vsix_with_what_vscode_loads(node_modules: Path, tmp_path: Path) -> None:
    vsix = tmp_path / "policyc.vsix"
    done = subprocess.run(
        ["sh", str(EXTENSION / "package.sh"), str(vsix)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "unpacked")
    extension = tmp_path / "unpacked" / "extension"
    manifest = json.loads((extension / "package.json").read_text("utf-8"))
    # what the manifest points at is in the package
    assert (extension / manifest["main"]).is_file()
    for language in manifest["contributes"]["languages"]:
        assert (extension / language["configuration"]).is_file()
    for grammar in manifest["contributes"]["grammars"]:
        assert (
            json.loads((extension / grammar["path"]).read_text("utf-8"))["scopeName"] == grammar["scopeName"]
        )
    # ... and what is only for development is not
    assert not [n for n in names if n.startswith("extension/test/") or n.endswith(".vsix")]
    assert "extension/node_modules/vscode-tmgrammar-test/package.json" not in names
    # every module the client requires (but `vscode`, which VS Code provides) resolves inside it
    script = (
        "for (const m of ['vscode-languageclient/node', './lib/server']) require.resolve(m);"
        "const s = require('./lib/server');"
        "console.log(JSON.stringify(s.serverExecutable({}, {workspaceFolders: []}).executable.args));"
    )
    resolved = subprocess.run(
        ["node", "-e", script], cwd=extension, capture_output=True, text=True, timeout=60, env=_env()
    )
    assert resolved.returncode == 0, resolved.stderr
    assert json.loads(resolved.stdout) == ["lsp"]
    requires = set(re.findall(r"require\('([^']+)'\)", (extension / "extension.js").read_text("utf-8")))
    assert requires == {"vscode", "vscode-languageclient/node", "./lib/server"}


# ------------------------------------------------------------------ the documentation


def _settings_rows(markdown: str) -> dict[str, str]:
    return dict(re.findall(r"^\| `(policyc\.[\w.]+)` \| `([^`]*)` \|", markdown, flags=re.M))


def _value(shown: str) -> object:
    """A default as the docs show it: JSON (`["lsp"]`, `true`, `300`), or a bare string (`off`)."""
    try:
        return json.loads(shown)
    except json.JSONDecodeError:
        return shown


def test_the_docs_list_every_setting_of_the_extension_with_its_default() -> None:
    manifest = json.loads((EXTENSION / "package.json").read_text("utf-8"))
    declared = {
        name: p["default"] for name, p in manifest["contributes"]["configuration"]["properties"].items()
    }
    for page in (ROOT / "docs" / "editors.md", EXTENSION / "README.md"):
        rows = _settings_rows(page.read_text("utf-8"))
        assert {name: _value(shown) for name, shown in rows.items()} == declared, page


def test_the_editor_docs_snippets_are_well_formed() -> None:
    text = (ROOT / "docs" / "editors.md").read_text("utf-8")
    blocks = dict.fromkeys(("json", "yaml", "lua", "elisp", "sh"), 0)
    for language, body in re.findall(r"^```(\w+)\n(.*?)^```$", text, flags=re.S | re.M):
        blocks[language] = blocks.get(language, 0) + 1
        if language == "json":
            settings_ = json.loads(body)
            assert settings_["[policyc]"]["editor.codeActionsOnSave"] == {"source.fixAll.policyc": "explicit"}
        elif language == "yaml":
            assert yaml.safe_load(body)
    assert blocks["json"] == 1 and blocks["lua"] >= 4 and blocks["elisp"] == 3 and blocks["yaml"] == 2
    assert "(lsp.md)" in text
    version = json.loads((EXTENSION / "package.json").read_text("utf-8"))["version"]
    assert set(re.findall(r"policyc-[\d.]+\.vsix", text)) == {f"policyc-{version}.vsix"}
    assert (ROOT / "docs" / "lsp.md").exists()


def test_the_editor_docs_show_only_options_policyc_has(policyc) -> None:
    text = (ROOT / "docs" / "editors.md").read_text("utf-8")
    commands = re.findall(r"^(?:- run: )?policyc (\w+)(.*?)(?:\s+#.*)?$", text, flags=re.M)
    commands += [("fmt", args) for args in re.findall(r"entry: policyc fmt(.*)$", text, flags=re.M)]
    assert {name for name, _ in commands} >= {"fmt", "check", "lsp"}
    for name, args in commands:
        shown = policyc(name, "--help")
        assert shown.status == 0, (name, shown.stderr)
        for option in re.findall(r"--[a-z-]+", args):
            assert option in shown.stdout, f"`policyc {name}` has no option {option}"
