"""`policyc lsp` for editing: hover, definitions, references, rename, symbols, completion, quick
fixes and formatting, through a real LSP client (pytest-lsp) against the installed command."""

import re
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from policyc.compiler.formatter import format_source
from policyc.compiler.loader import library_modules
from policyc.compiler.pipeline import check_source, compile_file

from .lsp_client import (
    STDLIB,
    apply,
    as_tuple,
    astuple,
    change,
    check_json,
    close,
    copy_fixtures,
    doc,
    lsp,
    open_document,
    position_of,
    shared_server,
)

client = shared_server()


# ------------------------------------------------------------------------- navigation


@lsp
async def test_hover_on_a_relation(client: LanguageClient, tmp_path: Path) -> None:
    main, _ = copy_fixtures(tmp_path)
    text = main.read_text("utf-8")
    await open_document(client, main)
    hover = await client.text_document_hover_async(
        types.HoverParams(doc(main), position_of(text, "Tainted(a)"))
    )
    value = hover.contents.value
    assert ".decl Tainted(e: symbol)" in value
    assert "`Tainted(e)`: `e` was influenced by untrusted content." in value  # the doc comment
    assert "`Tainted(e) :- DependsOn(e, d), Tainted(d).` (this file, line 8)" in value
    strata = compile_file(str(main)).strata
    assert f"stratum {strata.of['Tainted']} of 0–{len(strata.strata) - 1}, recursive" in value
    # a relation of an included file, not declared: its inferred types and its rules there
    hover = await client.text_document_hover_async(
        types.HoverParams(doc(main), position_of(text, "Reached(a, n)"))
    )
    value = hover.contents.value
    assert "Reached(symbol, number)" in value and "not declared" in value
    assert "(`rules.dl`, line 8)" in value and "from `rules.dl`" in value
    # a library relation: its declaration and doc comment from the module
    hover = await client.text_document_hover_async(types.HoverParams(doc(main), position_of(text, "Label(")))
    value = hover.contents.value
    assert ".decl Label(e: EventId, label: symbol)" in value and "input" in value
    assert "from library `events`" in value and "a label the host attached" in value
    close(client, main)


@lsp
async def test_hover_on_a_functor_a_variable_and_an_import(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "functor.dl"
    text = '.import events\nDeny(a) :- Action(a), Text(a, t), contains("password", lower(t)).\n'
    await open_document(client, path, text)
    hover = await client.text_document_hover_async(
        types.HoverParams(doc(path), position_of(text, "contains"))
    )
    builtins = (STDLIB / "builtins.dl").read_text("utf-8")
    declaration = next(line for line in builtins.splitlines() if line.startswith(".functor contains("))
    comment = builtins.splitlines()[builtins.splitlines().index(declaration) - 1][3:]
    assert declaration in hover.contents.value and comment in hover.contents.value
    assert "builtin foreign predicate" in hover.contents.value
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "lower")))
    assert ".functor lower(text: symbol): symbol" in hover.contents.value
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "t)")))
    assert hover.contents.value == "variable `t`: 2 occurrences in this rule"
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "events")))
    first = (STDLIB / "events.dl").read_text("utf-8").splitlines()[0][3:]
    assert "library module `events`" in hover.contents.value and first in hover.contents.value
    close(client, path)
    path = tmp_path / "range.dl"
    text = "S(i) :- i = range(0, 3).\n"
    await open_document(client, path, text)
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "range")))
    assert "range(from, to[, step])" in hover.contents.value and "builtin generator" in hover.contents.value
    close(client, path)


@lsp
async def test_hover_and_definition_of_a_type_and_a_constructor(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "types.dl"
    text = (
        ".type Host <: symbol\n.type Shape = Circle {r: number} | Dot {}\n"
        '.decl S(h: Host, s: Shape)\nS("a", $Circle(2)).\nDeny(h) :- S(h, $Dot).\n'
    )
    await open_document(client, path, text)
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "Host, s")))
    assert ".type Host <: symbol" in hover.contents.value
    hover = await client.text_document_hover_async(types.HoverParams(doc(path), position_of(text, "Dot).")))
    assert "constructor `$Dot` of `Shape`" in hover.contents.value
    assert ".type Shape = Circle {r: number} | Dot {}" in hover.contents.value
    found = await client.text_document_definition_async(
        types.DefinitionParams(doc(path), position_of(text, "Circle(2)"))
    )
    assert [(d.range.start.line, d.range.start.character) for d in found] == [(1, 14)]
    close(client, path)


@lsp
async def test_go_to_definition(client: LanguageClient, tmp_path: Path) -> None:
    main, rules = copy_fixtures(tmp_path)
    text, rules_text = main.read_text("utf-8"), rules.read_text("utf-8")
    await open_document(client, main)

    async def definition(needle: str, nth: int = 0) -> list[tuple]:
        found = await client.text_document_definition_async(
            types.DefinitionParams(doc(main), position_of(text, needle, nth))
        )
        return [
            (Path(at.uri[len("file://") :]), (at.range.start.line, at.range.start.character)) for at in found
        ]

    # a relation: its declaration and the heads of its rules
    tainted = [
        p
        for p in (
            position_of(text, "Tainted(e: "),
            position_of(text, "Tainted(e) :- L"),
            position_of(text, "Tainted(e) :- D"),
        )
    ]
    assert await definition("Tainted(a)") == [(main, (p.line, p.character)) for p in tainted]
    # a relation defined in the included file
    heads = [position_of(rules_text, "Sends(a) :-", n) for n in (0, 1)]
    assert await definition("Sends(a)") == [(rules, (p.line, p.character)) for p in heads]
    # a relation of a library module: its `.decl` in the installed package
    events = (STDLIB / "events.dl").resolve()
    events_text = events.read_text("utf-8")
    line = events_text[: events_text.index(".decl Label(")].count("\n")
    assert await definition("Label(") == [(events, (line, len(".decl ")))]
    # the module of an `.import`, the file of an `.include`
    assert await definition("events") == [(events, (0, 0))]
    assert await definition('"rules.dl"') == [(rules, (0, 0))]
    # a variable: where its rule binds it
    binding = position_of(text, "DependsOn(e, d)", inside=len("DependsOn(e, "))
    assert await definition("d)", 0) == [(main, (binding.line, binding.character))]
    close(client, main)


@lsp
async def test_find_references_across_included_files(client: LanguageClient, tmp_path: Path) -> None:
    main, rules = copy_fixtures(tmp_path)
    text, rules_text = main.read_text("utf-8"), rules.read_text("utf-8")
    await open_document(client, main)

    async def references(needle: str, declaration: bool) -> list[tuple]:
        found = await client.text_document_references_async(
            types.ReferenceParams(
                context=types.ReferenceContext(include_declaration=declaration),
                text_document=doc(main),
                position=position_of(text, needle),
            )
        )
        return sorted((at.uri, at.range.start.line, at.range.start.character) for at in found)

    in_rules = [position_of(rules_text, "Sends(a)", n) for n in range(3)]
    want = [(main.as_uri(), *astuple(position_of(text, "Sends(a)")))]
    want += [(rules.as_uri(), *astuple(p)) for p in in_rules]
    assert await references("Sends(a)", True) == sorted(want)
    with_decl = await references("Tainted(a)", True)
    without = await references("Tainted(a)", False)
    code = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    assert len(with_decl) == len(re.findall(r"\bTainted\(", code)) == len(without) + 1
    assert set(without) < set(with_decl)
    close(client, main)


@lsp
async def test_rename_a_relation_in_every_file_it_is_written_in(
    client: LanguageClient, tmp_path: Path
) -> None:
    main, rules = copy_fixtures(tmp_path)
    text, rules_text = main.read_text("utf-8"), rules.read_text("utf-8")
    await open_document(client, main)
    prepared = await client.text_document_prepare_rename_async(
        types.PrepareRenameParams(doc(main), position_of(text, "Sends(a)", inside=2))
    )
    assert prepared.placeholder == "Sends" and prepared.range.start == position_of(text, "Sends(a)")
    edit = await client.text_document_rename_async(
        types.RenameParams(doc(main), position_of(text, "Sends(a)"), "SendsOut")
    )
    assert set(edit.changes) == {main.as_uri(), rules.as_uri()}
    new_main, new_rules = (
        apply(text, edit.changes[main.as_uri()]),
        apply(rules_text, edit.changes[rules.as_uri()]),
    )
    assert "Sends(" not in new_main + new_rules and new_rules.count("SendsOut(") == rules_text.count("Sends(")
    main.write_text(new_main, "utf-8")
    rules.write_text(new_rules, "utf-8")
    assert check_json(str(main)) == []
    close(client, main)


@lsp
async def test_rename_a_variable_in_its_rule_only(client: LanguageClient, tmp_path: Path) -> None:
    main, _ = copy_fixtures(tmp_path)
    text = main.read_text("utf-8")
    await open_document(client, main)
    edit = await client.text_document_rename_async(
        types.RenameParams(doc(main), position_of(text, "Deny(a)", inside=5), "action")
    )
    renamed = apply(text, edit.changes[main.as_uri()])
    assert '@message("{action} sends data' in renamed  # the placeholder too
    assert "Deny(action) :- Sends(action), Tainted(action), Reached(action, n), n > 1." in renamed
    assert "Tainted(e) :- DependsOn(e, d), Tainted(d)." in renamed  # other rules untouched
    assert check_source(renamed, str(main)) == check_source(text, str(main))
    # the same occurrences are highlighted
    highlights = await client.text_document_document_highlight_async(
        types.DocumentHighlightParams(doc(main), position_of(text, "Deny(a)", inside=5))
    )
    assert sorted(as_tuple(h.range) for h in highlights) == sorted(
        as_tuple(e.range) for e in edit.changes[main.as_uri()]
    )
    assert len(highlights) == 5
    close(client, main)


@lsp
@pytest.mark.parametrize(
    ("needle", "new_name", "reason"),
    [
        ("Label(", "Tag", "belongs to the standard library"),
        ("Deny(a)", "Refuse", "is a verdict relation"),
        ("Tainted(a)", "Sends", "already the name of a relation"),
        ("Tainted(a)", "not", "is not a valid name"),
        ("Tainted(a)", "2x", "is not a valid name"),
        ("d), Tainted(d)", "e", "already has a variable `e`"),
        ("events", "evts", "only relations and variables can be renamed"),
    ],
)
async def test_rename_refuses_what_would_break_the_policy(
    client: LanguageClient, tmp_path: Path, needle: str, new_name: str, reason: str
) -> None:
    main, _ = copy_fixtures(tmp_path)
    text = main.read_text("utf-8")
    await open_document(client, main)
    with pytest.raises(JsonRpcException, match=re.escape(reason)):
        await client.text_document_rename_async(
            types.RenameParams(doc(main), position_of(text, needle), new_name)
        )
    close(client, main)


@lsp
async def test_document_symbols(client: LanguageClient, tmp_path: Path) -> None:
    main, _ = copy_fixtures(tmp_path)
    await open_document(client, main)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(main)))
    assert [(s.name, s.kind) for s in symbols] == [
        ("events", types.SymbolKind.Module),
        ("rules.dl", types.SymbolKind.File),
        ("Tainted", types.SymbolKind.Class),
        ("Deny", types.SymbolKind.Class),
    ]
    tainted, deny = symbols[2], symbols[3]
    assert [c.name for c in tainted.children] == [".decl", "Tainted(e)", "Tainted(e)"]
    assert [c.name for c in deny.children] == ["no-tainted-send"]  # named by its @id

    def within(inner: types.Range, outer: types.Range) -> bool:
        return as_tuple(outer)[0] <= as_tuple(inner)[0] and as_tuple(inner)[1] <= as_tuple(outer)[1]

    for symbol in symbols:
        assert within(symbol.selection_range, symbol.range)
        for child in symbol.children:
            assert within(child.range, symbol.range) and within(child.selection_range, child.range)
    close(client, main)


@lsp
async def test_a_declared_argument_in_hover_definition_outline_and_completion(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "args.dl"
    text = (
        ".import events\n// in cents\n.arg pay.amount: number required\n"
        'Escalate(a) :- ToolCall(a, "pay"), tool_arg(a, "amount") > 1000, tool_arg(a, "memo") = "x".\n'
        ".arg pay.to: \n"
    )
    await open_document(client, path, text)

    async def hover(needle: str) -> str:
        found = await client.text_document_hover_async(
            types.HoverParams(doc(path), position_of(text, needle))
        )
        return found.contents.value

    declared = await hover("pay.amount")
    assert ".arg pay.amount: number required" in declared and "required: every call must give it" in declared
    assert "in cents" in declared  # its doc comment
    assert await hover('"amount"') == declared  # the key of `tool_arg` where the rule fixes the tool
    assert "argument `memo` of `pay`: not declared" in await hover('"memo"')
    found = await client.text_document_definition_async(
        types.DefinitionParams(doc(path), position_of(text, '"amount"'))
    )
    assert [(d.range.start.line, d.range.start.character) for d in found] == [(2, 5)]
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(path)))
    assert ("pay.amount", types.SymbolKind.Field) in [(s.name, s.kind) for s in symbols]
    items = await _complete(
        client, path, text, position_of(text, ".arg pay.to: ", inside=len(".arg pay.to: "))
    )
    assert [i.label for i in items] == [
        "symbol",
        "number",
        "unsigned",
        "float",
        "bool",
        "list",
        "object",
        "any",
    ]
    close(client, path)


# ------------------------------------------------------------------------- completion


async def _complete(client: LanguageClient, path: Path, text: str, position: types.Position) -> list:
    result = await client.text_document_completion_async(types.CompletionParams(doc(path), position))
    return result.items


@lsp
async def test_completion_of_directives_modules_and_annotations(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "typing.dl"
    text = ".import events\n.de\n.import \n@mes\n"
    await open_document(client, path, text)
    items = await _complete(client, path, text, position_of(text, ".de", inside=3))
    assert ".decl" in [i.label for i in items] and ".include" in [i.label for i in items]
    decl = next(i for i in items if i.label == ".decl")
    assert decl.text_edit.new_text == ".decl" and decl.text_edit.range.start == position_of(text, ".de")
    items = await _complete(client, path, text, position_of(text, ".import \n", inside=len(".import ")))
    assert [i.label for i in items] == library_modules()
    items = await _complete(client, path, text, position_of(text, "@mes", inside=4))
    assert {i.label for i in items} == {"id", "req", "message", "suggest", "severity", "mode"}
    close(client, path)


@lsp
async def test_no_completion_after_a_rule_ends_or_inside_comments_and_strings(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "quiet.dl"
    text = '.input Send\nDeny(a) :- Send(a).\n// a comment about Send\nAllow(a) :- Send(a), a = "x@y".\n'
    await open_document(client, path, text)

    async def labels(position: types.Position, trigger: str | None = None) -> list[str]:
        context = types.CompletionContext(
            types.CompletionTriggerKind.TriggerCharacter if trigger else types.CompletionTriggerKind.Invoked,
            trigger,
        )
        result = await client.text_document_completion_async(
            types.CompletionParams(doc(path), position, context)
        )
        return [i.label for i in result.items]

    assert await labels(position_of(text, "Send(a).", inside=len("Send(a).")), ".") == []
    assert await labels(position_of(text, "about Send", inside=len("about"))) == []
    assert await labels(position_of(text, '"x@y"', inside=3), "@") == []
    assert "Send" in await labels(position_of(text, "Send(a), a"))  # but in code, there is plenty
    close(client, path)


@lsp
async def test_completion_in_a_rule_being_written(client: LanguageClient, tmp_path: Path) -> None:
    main, _ = copy_fixtures(tmp_path)
    text = main.read_text("utf-8") + "Deny(act) :- Sends(act), Reached(act, count_of), Ta"
    await open_document(client, main, text)
    items = await _complete(
        client, main, text, types.Position(text.count("\n"), len(text.rsplit("\n", 1)[1]))
    )
    labels = {i.label: i for i in items}
    # variables of the rule being written (which does not parse yet), first
    assert {"act", "count_of"} <= set(labels) and "Ta" not in labels
    assert labels["act"].kind == types.CompletionItemKind.Variable
    assert labels["act"].sort_text < labels["Tainted"].sort_text
    # relations of this file, its includes and its imports; functors
    assert {"Tainted", "Sends", "Reached", "DependsOn", "Label"} <= set(labels)
    assert labels["Reached"].detail == "Reached(symbol, number)"
    assert labels["contains"].kind == types.CompletionItemKind.Method  # a foreign predicate
    assert labels["lower"].detail == "lower(text: symbol): symbol"
    assert labels["range"].detail == "range(from, to[, step])"  # the generator, intrinsic
    assert "e" not in labels and "d" not in labels  # the variables of other rules
    # inside a parsed rule: its own variables
    items = await _complete(client, main, text, position_of(text, "DependsOn(e, d)"))
    variables = [i.label for i in items if i.kind == types.CompletionItemKind.Variable]
    assert variables == ["e", "d"]
    close(client, main)


# ------------------------------------------------------------------ actions, formatting


async def _actions(client: LanguageClient, path: Path, diagnostic: types.Diagnostic) -> list:
    only = [types.CodeActionKind.QuickFix]
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            doc(path), diagnostic.range, types.CodeActionContext(diagnostics=[diagnostic], only=only)
        )
    )


@lsp
async def test_quick_fixes_from_diagnostics(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "fixes.dl"
    text = (
        ".import event\n.decl Send(a: symbol, n: number)\n.input Send\n"
        "Tainted(a) :- Send(a, _).\n"
        '@id("d") @message("m") Deny(a) :- Send(a, n), Taint(a).\n'
        "Allow(a) :- Send(a, k), External(a, k, 3).\n"
    )
    got = await open_document(client, path, text)
    assert [d.code for d in got] == ["PC107"]  # the unknown module stops the pipeline

    (fix,) = await _actions(client, path, got[0])
    assert fix.title == "Replace `event` with `events`" and fix.kind == types.CodeActionKind.QuickFix
    text = apply(text, fix.edit.changes[path.as_uri()])
    assert text.startswith(".import events\n")
    got = await change(client, path, text, 2)
    by_code = {d.code: d for d in got}
    assert set(by_code) == {"PC101", "PC201", "PC202"}, [d.message for d in got]

    undefined = [d for d in got if d.code == "PC101"]
    taint = next(d for d in undefined if "Taint`" in d.message)
    (fix,) = await _actions(client, path, taint)
    assert fix.title == "Replace `Taint` with `Tainted`" and not fix.is_preferred
    fixed = apply(text, fix.edit.changes[path.as_uri()])
    assert "Deny(a) :- Send(a, n), Tainted(a)." in fixed

    external = next(d for d in undefined if "External" in d.message)
    (fix,) = await _actions(client, path, external)
    assert fix.title == "Declare `External` as an input relation"
    declared = apply(text, fix.edit.changes[path.as_uri()])
    assert ".input Send\n.decl External(a: symbol, k: number, x3: number)\n.input External\n" in declared
    assert "External" not in " ".join(d.message for d in check_source(declared, str(path)))

    singleton = next(d for d in got if d.code == "PC201")
    (fix,) = await _actions(client, path, singleton)
    assert fix.is_preferred and apply(text, fix.edit.changes[path.as_uri()]).count("Send(a, _)") == 2
    close(client, path)


@lsp
async def test_a_builtin_declared_again_is_a_warning_whose_fix_removes_the_line(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "souffle.dl"
    text = (
        ".functor contains(s: symbol, sub: symbol): bool\n.input Send\n"
        '@id("d") @message("m") Deny(a) :- Send(a, x), contains("evil", x).\n'
    )
    (got,) = await open_document(client, path, text)
    assert (got.code, got.severity) == ("PC205", types.DiagnosticSeverity.Warning)
    assert "`contains` is a builtin functor" in got.message
    (fix,) = await _actions(client, path, got)
    assert fix.title == "Remove the declaration" and fix.is_preferred
    fixed = apply(text, fix.edit.changes[path.as_uri()])
    assert fixed == '.input Send\n@id("d") @message("m") Deny(a) :- Send(a, x), contains("evil", x).\n'
    assert await change(client, path, fixed, 2) == []
    close(client, path)


@lsp
async def test_a_contains_call_in_the_old_order_offers_swapping_its_arguments(
    client: LanguageClient, tmp_path: Path
) -> None:
    path = tmp_path / "order.dl"
    text = (
        '.input Fetch\n@id("d") @message("m") Deny(a) :- Fetch(a, url), contains(lower(url), "evil.com").\n'
    )
    (got,) = await open_document(client, path, text)
    assert (got.code, got.severity) == ("PC206", types.DiagnosticSeverity.Warning)
    (fix,) = await _actions(client, path, got)
    assert fix.title == "Swap the arguments" and not fix.is_preferred  # it changes what the rule means
    fixed = apply(text, fix.edit.changes[path.as_uri()])
    assert (
        fixed
        == '.input Fetch\n@id("d") @message("m") Deny(a) :- Fetch(a, url), contains("evil.com", lower(url)).\n'
    )
    assert await change(client, path, fixed, 2) == []
    close(client, path)


@lsp
async def test_fix_all_applies_every_safe_fix(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "fixall.dl"
    text = '.input P, Q\n@id("d") @message("m") Deny(a) :- P(a, x), Q(a, y).\nAllow(a) :- P(a, z), Q(a, _).\n'
    got = await open_document(client, path, text)
    assert sorted(d.code for d in got) == ["PC201"] * 3
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            doc(path),
            types.Range(types.Position(0, 0), types.Position(0, 0)),
            types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.SourceFixAll]),
        )
    )
    (every,) = actions
    assert every.kind == "source.fixAll.policyc"
    fixed = apply(text, every.edit.changes[path.as_uri()])
    assert (
        fixed
        == '.input P, Q\n@id("d") @message("m") Deny(a) :- P(a, _), Q(a, _).\nAllow(a) :- P(a, _), Q(a, _).\n'
    )
    assert check_source(fixed, str(path)) == []
    close(client, path)


@lsp
async def test_formatting(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "format.dl"
    text = ".input Send,Ok\nDeny(a):-Send(a),!Ok(a).   // why\n"
    await open_document(client, path, text)
    options = types.FormattingOptions(tab_size=4, insert_spaces=True)
    edits = await client.text_document_formatting_async(types.DocumentFormattingParams(doc(path), options))
    (edit,) = edits
    assert edit.range.start == types.Position(0, 0) and edit.range.end == types.Position(2, 0)
    assert edit.new_text == format_source(text) != text
    await change(client, path, edit.new_text, 2)
    unchanged = await client.text_document_formatting_async(
        types.DocumentFormattingParams(doc(path), options)
    )
    assert list(unchanged) == []
    await change(client, path, "Deny(a) :- Send(a)", 3)  # does not parse: nothing to format
    assert (
        await client.text_document_formatting_async(types.DocumentFormattingParams(doc(path), options))
        is None
    )
    close(client, path)
