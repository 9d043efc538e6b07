"""The documentation says what the code does: every code documented with an example that
triggers it, every language example parses, the README's Quickstart has exactly two commands,
every sh, console and python block of the README, docs/ and the examples' READMEs runs as shown
(with the files of examples/quickstart/), and every link between the pages reaches its file and
section."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from policyc.compiler.codes import CATALOG
from policyc.compiler.parser import parse
from policyc.compiler.pipeline import compile_source
from policyc.compiler.source import SourceFile

from .conftest import EXAMPLES, ROOT, policyc_command

DIAGNOSTICS = (ROOT / "docs" / "diagnostics.md").read_text("utf-8")
LANGUAGE = (ROOT / "docs" / "language.md").read_text("utf-8")
README = (ROOT / "README.md").read_text("utf-8")


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## ", text, flags=re.M)
    return {part.split("\n", 1)[0].strip(): part for part in parts[1:]}


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("code", CATALOG, ids=lambda c: c.name)
def test_every_code_is_documented(code) -> None:
    section = sections(DIAGNOSTICS).get(f"{code.code} {code.name}")
    assert section is not None, f"docs/diagnostics.md has no section `## {code.code} {code.name}`"
    for part in ("**What it does.**", "**Why.**", "**Example.**", "**Fix.**"):
        assert part in section, (code.name, part)
    examples = blocks(section, "datalog")
    if code.name == "invalid-encoding":
        assert blocks(section, "text")
        return
    assert len(examples) == 1, code.name
    compilation = compile_source(examples[0], "example.dl")
    found = {d.name for d in compilation.diagnostics}
    if code.code.startswith("PC3"):  # deep findings
        from policyc.analyzer.deep import deep_findings

        found |= {d.name for d in deep_findings(compilation)}
    assert code.name in found, (code.name, found)


def test_no_section_documents_an_unknown_code() -> None:
    known = {f"{c.code} {c.name}" for c in CATALOG}
    assert set(sections(DIAGNOSTICS)) <= known


def test_language_examples_parse() -> None:
    examples = blocks(LANGUAGE, "datalog")
    assert len(examples) >= 15
    for example in examples:
        _, diagnostics = parse(SourceFile("example.dl", example))
        assert diagnostics == [], (example, [d.message for d in diagnostics])


def test_quickstart_has_two_commands() -> None:
    quickstart = sections(README)["Quickstart"]
    (commands,) = blocks(quickstart, "sh")
    lines = [line for line in commands.splitlines() if line.strip()]
    assert len(lines) == 2
    assert "policyc check examples/" in lines[0] and "pytest" in lines[1]
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    assert lines[1] in ci, "`.ci/run` runs the README's test command"


def test_events_docs_datalog_examples_compile() -> None:
    for example in blocks((ROOT / "docs" / "events.md").read_text("utf-8"), "datalog"):
        assert compile_source(example, "events.dl").ok, example


ANALYZER = (ROOT / "docs" / "analyzer.md").read_text("utf-8")


def test_analyzer_docs_list_every_deep_finding() -> None:
    deep = {c.name for c in CATALOG if c.code.startswith("PC3")}
    assert deep == set(re.findall(r"^\| PC3\d\d \| `([a-z-]+)` \|", ANALYZER, flags=re.M))


# ------------------------------------------------------------------ every snippet runs as shown

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(EXAMPLES.glob("*/README.md"))]
RUNNABLE = ("sh", "console", "python")
# a fenced block, possibly indented (inside a list item): its indentation, language and body
FENCE = re.compile(r"^([ \t]*)```([\w-]*)[^\n]*\n(.*?)^\1```[ \t]*$", flags=re.S | re.M)
# `<!-- not run: REASON -->` right before a fence: the block cannot run here (an installation);
# `<!-- slow: REASON -->`: it runs in the slow suite only (`pytest -m slow`); `<!-- chat: REASON
# -->`: it asks a model, and runs in the slow suite against a scripted chat server on 127.0.0.1
# standing in for the endpoint (`OPENAI_BASE_URL`), which answers as for the tau2 airline example
MARKER = re.compile(r"<!--\s*(not run|slow|chat):\s*(.*?)\s*-->$", flags=re.S)
# the blocks that cannot run here stay few
MAX_NOT_RUN = 12


@dataclass(frozen=True)
class Snippet:
    page: str  # relative to the repository
    index: int  # among the page's sh, console and python blocks
    line: int  # of the opening fence
    language: str
    code: str
    shown: str | None  # what a python or sh block prints: the bare or `text` block after it
    not_run: str | None  # the reason given by `<!-- not run: ... -->` right before the fence
    slow: str | None  # the reason given by `<!-- slow: ... -->`
    chat: str | None  # the reason given by `<!-- chat: ... -->`

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def fences(text: str) -> list[tuple[int, str, str, str]]:
    """Every fenced block of a Markdown text: its line, language, body (without the fence's
    indentation) and the text between it and the block before it."""
    found, end = [], 0
    for match in FENCE.finditer(text):
        indent = len(match.group(1))
        body = "".join(line[indent:] for line in match.group(3).splitlines(keepends=True))
        line = text.count("\n", 0, match.start()) + 1
        found.append((line, match.group(2), body, text[end : match.start()]))
        end = match.end()
    return found


def snippets(page: Path) -> list[Snippet]:
    found = fences(page.read_text("utf-8"))
    out: list[Snippet] = []
    for i, (line, language, body, before) in enumerate(found):
        if language not in RUNNABLE:
            continue
        shown = None
        if language != "console" and i + 1 < len(found):
            _, next_language, next_body, between = found[i + 1]
            prose = between.strip()
            if next_language in ("", "text") and (not prose or (prose.endswith(":") and "\n\n" not in prose)):
                shown = next_body
        marker = MARKER.search(before.rstrip())
        kind, reason = marker.groups() if marker else (None, None)
        out.append(
            Snippet(
                str(page.relative_to(ROOT)),
                len(out),
                line,
                language,
                body,
                shown,
                reason if kind == "not run" else None,
                reason if kind == "slow" else None,
                reason if kind == "chat" else None,
            )
        )
    return out


SNIPPETS = [s for page in PAGES for s in snippets(page)]


@functools.cache
def checkout_files() -> tuple[str, ...]:
    """The files of the checkout: tracked ones and new ones that are not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    return tuple(sorted({p for p in listed.split("\0") if p and (ROOT / p).is_file()}))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the checkout's files, and the hash of each."""
    folder = tmp_path_factory.mktemp("checkout")
    for name in checkout_files():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, folder / name)
    return folder, {name: digest(folder / name) for name in checkout_files()}


def changed_files(copy: Path, hashes: dict[str, str]) -> list[str]:
    return [name for name, sha in hashes.items() if not (copy / name).is_file() or digest(copy / name) != sha]


def shell_environment() -> dict[str, str]:
    """The environment of `run_policyc`, with the installed `policyc` and `python` first on the PATH."""
    folders = [os.path.dirname(policyc_command()[0]), os.path.dirname(sys.executable)]
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", PATH=os.pathsep.join([*folders, os.environ["PATH"]]))
    env.pop("POLICYC_DEBUG", None)
    return env


def console_commands(code: str) -> list[tuple[str, str]]:
    """The `$ command` lines of a console block (with their `\\` continuations), each with the
    output shown under it."""
    commands: list[tuple[str, list[str]]] = []
    continued = False
    for line in code.splitlines():
        if continued:
            commands[-1] = (commands[-1][0] + "\n" + line, commands[-1][1])
        elif line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"output before the first `$ ` command: {line!r}"
            commands[-1][1].append(line)
            continue
        continued = line.endswith("\\")
    return [(command, "\n".join(shown)) for command, shown in commands]


def normalized(text: str, copy: Path) -> str:
    """Output as compared: the copy's location and durations left out, trailing blanks too."""
    text = text.replace(f"{copy}{os.sep}", "").replace(str(copy), ".")
    text = re.sub(r"\b\d+(?:\.\d+)? ?(?:ms|µs|s)\b", "<duration>", text)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**shell_environment(), **(env or {})}
    return subprocess.run(argv, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300)


def syntax_problem(snippet: Snippet) -> str | None:
    """Why the block is not even well formed (for blocks that are not run)."""
    if snippet.language == "python":
        try:
            compile(snippet.code, str(snippet), "exec")
        except SyntaxError as error:
            return str(error)
        return None
    commands = (
        [c for c, _ in console_commands(snippet.code)] if snippet.language == "console" else [snippet.code]
    )
    for command in commands:
        done = subprocess.run(["bash", "-n", "-c", command], capture_output=True, text=True)
        if done.returncode != 0:
            return done.stderr
    return None


@pytest.mark.parametrize(
    "snippet",
    [pytest.param(s, marks=[pytest.mark.slow] if s.slow or s.chat else []) for s in SNIPPETS],
    ids=lambda s: f"{s.page}#{s.index}",
)
def test_snippet_runs_as_shown(snippet: Snippet, checkout, tmp_path: Path) -> None:
    """Each sh, console and python block of the README, docs/ and the examples' READMEs runs in
    a copy of the checkout: a sh block exits with 0, a console block's commands print what is
    shown under them, a python block runs (and prints the block that shows its output); and
    no block changes a file of the checkout."""
    assert syntax_problem(snippet) is None, syntax_problem(snippet)
    if snippet.not_run is not None:
        pytest.skip(f"{snippet}: not run: {snippet.not_run}")
    # a copy of the copy, its files linked (a file written in place shows in its hash)
    pristine, hashes = checkout
    copy = tmp_path / "checkout"
    shutil.copytree(pristine, copy, copy_function=os.link)
    try:
        check_snippet(snippet, copy, tmp_path)
    finally:
        changed = changed_files(copy, hashes)
        for name in changed:  # restored for the next snippets
            (copy / name).unlink(missing_ok=True)
            shutil.copy2(ROOT / name, pristine / name)
            hashes[name] = digest(pristine / name)
    assert changed == [], "a snippet changed files of the checkout"


def check_snippet(snippet: Snippet, copy: Path, tmp_path: Path) -> None:
    if snippet.chat is not None:
        check_chat_snippet(snippet, copy)
        return
    if snippet.language == "console":
        for command, shown in console_commands(snippet.code):
            done = run(["bash", "-o", "pipefail", "-c", command], copy)
            problem = f"$ {command}\nstatus {done.returncode}\n{done.stdout}{done.stderr}"
            assert done.returncode in (0, 1), problem
            assert "Traceback" not in done.stderr and "internal error" not in done.stderr, problem
            assert normalized(done.stdout, copy) == normalized(shown, copy), problem
        return
    if snippet.language == "python":
        script = tmp_path / "snippet.py"  # outside the copy: its folder is not on sys.path
        script.write_text(snippet.code, "utf-8")
        done = run([sys.executable, str(script)], copy)
    else:
        done = run(["bash", "-e", "-o", "pipefail", "-c", snippet.code], copy)
    assert done.returncode == 0, f"status {done.returncode}\n{done.stdout}{done.stderr}"
    if snippet.shown is not None:
        assert normalized(done.stdout, copy) == normalized(snippet.shown, copy)


def check_chat_snippet(snippet: Snippet, copy: Path) -> None:
    """A block that asks a model: run against the scripted chat server, it reaches the server,
    ends with 0 or 1 (a translation whose report lists problems), and the policy it writes
    (`-o FILE`) checks clean."""
    from .translate.chat import ChatServer
    from .translate.run import airline_script

    assert snippet.language == "sh", f"{snippet}: a chat block is a sh block"
    with ChatServer(airline_script()) as server:
        done = run(["bash", "-o", "pipefail", "-c", snippet.code], copy, {"OPENAI_BASE_URL": server.url})
    problem = f"status {done.returncode}\n{done.stdout}{done.stderr}"
    assert done.returncode in (0, 1), problem
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, problem
    assert server.requests, "the block did not reach the endpoint"
    for output in re.findall(r"(?:-o|--output)\s+(\S+\.dl)\b", snippet.code):
        checked = run(["policyc", "check", output], copy)
        assert checked.returncode == 0, f"{output}:\n{checked.stdout}{checked.stderr}"


def test_extras_the_pages_install_are_declared() -> None:
    """Every extra a page installs (`pip install 'policyc[mcp]'`, `pip install -e '.[lsp,examples]'`)
    is one pyproject.toml declares, so a command copied from the docs installs what it says."""
    import tomllib

    declared = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    )
    named = {
        (str(page.relative_to(ROOT)), extra)
        for page in PAGES
        for group in re.findall(r"(?:policyc|['\"]\.)\[([a-z0-9,-]+)\]", page.read_text("utf-8"))
        for extra in group.split(",")
    }
    assert named and {extra for _, extra in named} >= {"agentdojo", "examples", "lsp", "mcp"}
    assert sorted((page, extra) for page, extra in named if extra not in declared) == []


def test_snippets_not_run_are_few_and_say_why() -> None:
    not_run = [f"{s}: {s.not_run}" for s in SNIPPETS if s.not_run is not None]
    assert len(SNIPPETS) >= 60
    assert all(len(s.not_run.split()) >= 3 for s in SNIPPETS if s.not_run is not None), not_run
    assert len(not_run) <= MAX_NOT_RUN, "\n".join(not_run)


def test_blocks_that_name_a_file_show_it() -> None:
    """A block whose first line is a comment naming a file of the repository
    (`# examples/quickstart/agent_test.toml`) shows that file: the lines after it are its text."""
    shown = 0
    for page in PAGES:
        for line, _language, body, _ in fences(page.read_text("utf-8")):
            first, _, rest = body.partition("\n")
            named = re.fullmatch(r"(?:#|//) ([\w./-]+\.\w+)", first.strip())
            if named and (ROOT / named.group(1)).is_file():
                assert rest == (ROOT / named.group(1)).read_text("utf-8"), f"{page}:{line}"
                shown += 1
    assert shown >= 1


def test_quickstart_policies_check_clean(policyc) -> None:
    run = policyc("check", "--fail-on", "warning", "examples/quickstart/")
    assert run.status == 0 and run.stdout == "All checks passed.\n", run.stdout
    assert policyc("fmt", "--check", "examples/quickstart/").status == 0


# ------------------------------------------------------------------ links between the pages

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text("utf-8"))
    found: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.*?)#*$", text, flags=re.M):
        base = slug(heading)
        n = found.get(base, 0)
        found[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_reach_their_files_and_sections(page: Path) -> None:
    """Every link to a file of the repository reaches it, and every #anchor a heading of it."""
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text("utf-8")))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or ROOT not in (file, *file.parents):
            broken.append(f"{target}: no such file")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"{target}: no section `#{anchor}`")
    assert broken == []
