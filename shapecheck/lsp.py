"""``shapecheck --lsp``: a Language Server over stdio, for editors.

Diagnostics are published when a Python document is opened, changed or saved, from the text
in the editor (not the file on disk), under the configuration that applies to the file; fixes
are offered as quick-fix code actions (unsafe ones say so and are never preferred). Needs the
``lsp`` extra (pygls).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from shapecheck import __version__
from shapecheck.config import ConfigError, Settings, find_config, load_settings
from shapecheck.diagnostics import Diagnostic, FixEdits
from shapecheck.linter import lint_source
from shapecheck.rule import Rule, all_rules, rule_codes
from shapecheck.selection import SelectionError, enabled_codes

SOURCE = "shapecheck"

server = LanguageServer(
    "shapecheck", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full
)


def serve() -> None:
    server.start_io()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(params: types.DidOpenTextDocumentParams) -> None:
    _publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(params: types.DidChangeTextDocumentParams) -> None:
    _publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(params: types.DidSaveTextDocumentParams) -> None:
    _publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(params: types.DidCloseTextDocumentParams) -> None:
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
    )


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
)
def code_actions(params: types.CodeActionParams) -> list[types.CodeAction]:
    """A quick fix for each finding with a fix that touches the requested range."""
    document = server.workspace.get_text_document(params.text_document.uri)
    wanted = params.range
    actions = []
    for diagnostic in _findings(document):
        if diagnostic.fix is None or not _overlaps(_range(document, diagnostic), wanted):
            continue
        fix = diagnostic.fix
        title = f"{diagnostic.code}: {fix.description}" + ("" if fix.safe else " (unsafe)")
        actions.append(
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[_lsp_diagnostic(document, diagnostic)],
                is_preferred=fix.safe,
                edit=types.WorkspaceEdit(changes={document.uri: _edits(document, fix)}),
            )
        )
    return actions


def _publish(uri: str) -> None:
    document = server.workspace.get_text_document(uri)
    diagnostics = [_lsp_diagnostic(document, d) for d in _findings(document)]
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=document.version)
    )


def _findings(document: TextDocument) -> list[Diagnostic]:
    path = to_fs_path(document.uri) or document.uri
    if not path.endswith((".py", ".pyi")):
        return []
    try:
        settings = load_settings(find_config(Path(path).parent))
        codes = enabled_codes(rule_codes(), settings)
    except (ConfigError, SelectionError):
        # an editor has no place for a usage error (the command line reports it): defaults
        settings = Settings()
        codes = enabled_codes(rule_codes(), settings)
    result = lint_source(document.source.encode("utf-8"), path, _rules(tuple(codes)))
    return [d for d in result.diagnostics if settings.keeps(d)]


@cache
def _rules(codes: tuple[str, ...]) -> list[Rule]:
    return [rule() for rule in all_rules() if rule.code in codes]


def _lsp_diagnostic(document: TextDocument, diagnostic: Diagnostic) -> types.Diagnostic:
    error = diagnostic.severity == "error"
    return types.Diagnostic(
        range=_range(document, diagnostic),
        message=diagnostic.message,
        severity=types.DiagnosticSeverity.Error if error else types.DiagnosticSeverity.Warning,
        code=diagnostic.code,
        source=SOURCE,
    )


def _range(document: TextDocument, diagnostic: Diagnostic) -> types.Range:
    return _client_range(
        document,
        diagnostic.line,
        diagnostic.column,
        diagnostic.end_line,
        diagnostic.end_column,
    )


def _edits(document: TextDocument, fix: FixEdits) -> list[types.TextEdit]:
    return [
        types.TextEdit(
            range=_client_range(document, e.line, e.column, e.end_line, e.end_column),
            new_text=e.content,
        )
        for e in fix.edits
    ]


def _client_range(
    document: TextDocument, line: int, column: int, end_line: int, end_column: int
) -> types.Range:
    """1-based code-point positions -> the 0-based units the client negotiated (UTF-16)."""
    where = ServerTextRange(
        start=ServerTextPosition(line=line - 1, character=column - 1),
        end=ServerTextPosition(line=end_line - 1, character=end_column - 1),
    )
    return document.position_codec.range_to_client_units(document.lines, where)


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(position: types.Position) -> tuple[int, int]:
        return (position.line, position.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)
