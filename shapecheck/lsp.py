"""``shapecheck --lsp``: a Language Server over stdio, for editors.

Diagnostics are published when a Python document is opened, changed or saved, from the text
in the editor (not the file on disk), under the configuration that applies to the file; each
links to its rule's documentation (``codeDescription``). Fixes are offered as quick-fix code
actions (unsafe ones say so and are never preferred), and all safe ones at once as the
``source.fixAll.shapecheck`` action, made by the fixer ``--fix`` uses. A hover on a value
shows what :mod:`shapecheck.hover` says of it (shape, role, layout, dtype), and inlay hints
show each assignment's shape when the client asks for them in its initialization options
(``{"settings": {"inlayHints": true}}``, as ruff's server takes its settings). Needs the
``lsp`` extra (pygls).

Checks run on one background thread, so the server keeps answering (``shutdown``, ``exit``,
the end of its input) while a big document is checked. Changes that arrive during a check are
checked once, together, when it ends; a check whose document changed or closed meanwhile is
dropped, never published over the newer text's. Quick fixes come from the check whose
diagnostics the editor shows. Hovers, inlay hints and the fix-all action are answered on
pygls' worker threads from the newest text, analysed once per text. A document saved in a
project sees the project's other files as a check of it on disk does (from the files on disk:
only the document itself is read from the editor); an untitled one lies nowhere and sees only
itself, as standard input without a name does. One analysis runs at a time: what the project's
files gave is shared by every analysis in the process.
"""

from __future__ import annotations

import inspect
import io
import threading
import tokenize
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol.language_server import LanguageServerProtocol, lsp_method
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from shapecheck import __version__
from shapecheck.analysis import analyse
from shapecheck.config import ConfigError, Settings, find_config, load_settings
from shapecheck.diagnostics import Diagnostic, FixEdits, input_error
from shapecheck.fixer import FixError, fix_source
from shapecheck.hover import FileShapes
from shapecheck.linter import lint_source
from shapecheck.project import know
from shapecheck.record import record
from shapecheck.report import count
from shapecheck.rule import Rule, all_rules, rule_by_code, rule_codes
from shapecheck.run import failure
from shapecheck.selection import SelectionError, enabled_codes
from shapecheck.source import STDIN, Source, parse_source, physical_lines

SOURCE = "shapecheck"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.shapecheck"
"""The code action that applies every safe fix (``editor.codeActionsOnSave`` names it)."""

_analysing = threading.Lock()
"""Held by each check, hover analysis and fix-all: the project's files, once read and
analysed, are shared by all of them (and the settings they were read under)."""


class _Protocol(LanguageServerProtocol):
    """pygls' protocol, except that a change to a document the client never opened is ignored
    (pygls raises KeyError)."""

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(
        self, params: types.DidChangeTextDocumentParams
    ) -> Generator[Any, Any, None]:
        if _open_document(params.text_document.uri) is not None:
            yield from super().lsp_text_document__did_change(params)


server = LanguageServer(
    "shapecheck",
    __version__,
    text_document_sync_kind=types.TextDocumentSyncKind.Full,
    protocol_cls=_Protocol,
)


@record
class _Snapshot:
    """A document's text as the editor had it."""

    uri: str
    version: int | None
    text: str


@record
class _Checked:
    """A snapshot's findings, each with the diagnostic the editor was sent for it."""

    snapshot: _Snapshot
    lines: list[str]
    findings: list[tuple[Diagnostic, types.Diagnostic]]


class _Checker:
    """The background thread that checks documents, and the current check of each open one."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._waiting: dict[str, _Snapshot] = {}
        """The newest text of each document that changed since its last check began."""
        self._open: dict[str, _Checked | None] = {}
        """Each open document's check of its newest text; None until that is done."""
        self._stopped = False

    def start(self) -> None:
        # a daemon: a check still running never keeps the process alive once its client left
        threading.Thread(target=self._run, name="shapecheck-checks", daemon=True).start()

    def request(self, snapshot: _Snapshot) -> None:
        with self._changed:
            self._waiting[snapshot.uri] = snapshot
            self._open[snapshot.uri] = None
            self._changed.notify()

    def current(self, uri: str) -> _Checked | None:
        with self._changed:
            return self._open.get(uri)

    def forget(self, uri: str) -> None:
        """The document closed: its diagnostics go, and a check under way is dropped."""
        with self._changed:
            self._waiting.pop(uri, None)
            self._open.pop(uri, None)
            _publish(uri, None, [])

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not (self._waiting or self._stopped):
                    self._changed.wait()
                if self._stopped:
                    return
                uri = next(iter(self._waiting))
                snapshot = self._waiting.pop(uri)
            checked = _check(snapshot)
            with self._changed:
                if self._stopped or uri in self._waiting or uri not in self._open:
                    continue  # stale: the document changed or closed while it was checked
                self._open[uri] = checked
                _publish(uri, snapshot.version, [shown for _, shown in checked.findings])


checker = _Checker()


@dataclass
class _ClientSettings:
    """What the client asked for in ``initializationOptions.settings``."""

    inlay_hints: bool = False
    """Shape hints at assignments: off unless asked for (``inlayHints: true``)."""


client_settings = _ClientSettings()


@record
class _Analysed:
    """A document's text, its lines, and what can be said of its values (``None``: the text
    does not parse or could not be analysed; its diagnostics say why)."""

    text: str
    lines: list[str]
    shapes: FileShapes | None


class _ShapeCache:
    """The analysis of each open document's newest text, made once per text, when a hover or
    inlay hint first needs it (on a worker thread; the lock keeps two from making it twice)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._analysed: dict[str, _Analysed] = {}

    def get(self, uri: str) -> _Analysed | None:
        document = _open_document(uri)
        if document is None:
            return None
        text = document.source
        with self._lock:
            analysed = self._analysed.get(uri)
            if analysed is None or analysed.text != text:
                path = _path(uri)
                shapes = _file_shapes(text, path) if path is not None else None
                analysed = _Analysed(text, physical_lines(text), shapes)
                self._analysed[uri] = analysed
            return analysed

    def forget(self, uri: str) -> None:
        with self._lock:
            self._analysed.pop(uri, None)


shape_cache = _ShapeCache()


def serve() -> None:
    checker.start()
    server.start_io()


@server.feature(types.INITIALIZE)
def initialize(params: types.InitializeParams) -> None:
    """Read ``initializationOptions``: ``{"settings": {"inlayHints": true}}`` turns the shape
    hints on (ruff's server takes its settings under the same key)."""
    options = params.initialization_options
    settings = options.get("settings") if isinstance(options, dict) else None
    wanted = settings.get("inlayHints", False) if isinstance(settings, dict) else False
    if not isinstance(wanted, bool):
        message = "shapecheck: initializationOptions.settings.inlayHints must be true or false"
        server.window_show_message(types.ShowMessageParams(types.MessageType.Error, message))
    client_settings.inlay_hints = wanted is True


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(params: types.DidOpenTextDocumentParams) -> None:
    _request_check(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(params: types.DidChangeTextDocumentParams) -> None:
    _request_check(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(params: types.DidSaveTextDocumentParams) -> None:
    _request_check(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(params: types.DidCloseTextDocumentParams) -> None:
    checker.forget(params.text_document.uri)
    shape_cache.forget(params.text_document.uri)


@server.feature(types.SHUTDOWN)
def shutdown(_: None) -> None:
    checker.stop()


@server.thread()
@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]),
)
def code_actions(params: types.CodeActionParams) -> list[types.CodeAction]:
    """Quick fixes for the findings that touch the requested range, and, when the client asks
    for ``source.fixAll`` by kind (``context.only``), one action applying every safe fix.
    Fixing all runs the fixer, so it is never computed for a request that does not ask for
    it (editors request code actions at every move of the cursor)."""
    only = params.context.only
    actions = _quick_fixes(params) if _wanted(types.CodeActionKind.QuickFix, only) else []
    if only is not None and _wanted(FIX_ALL, only):
        fix_all = _fix_all(params.text_document.uri)
        actions += [fix_all] if fix_all is not None else []
    return actions


@server.thread()
@server.feature(types.TEXT_DOCUMENT_HOVER)
def hover(params: types.HoverParams) -> types.Hover | None:
    """What shapecheck knows of the value under the cursor (see ``FileShapes.at``)."""
    analysed = shape_cache.get(params.text_document.uri)
    if analysed is None or analysed.shapes is None:
        return None
    where = server.workspace.position_codec.position_from_client_units(
        analysed.lines, params.position
    )
    note = analysed.shapes.at(where.line + 1, where.character)
    if note is None:
        return None
    return types.Hover(
        contents=types.MarkupContent(types.MarkupKind.Markdown, note.description.markdown()),
        range=_client_range(
            analysed.lines, note.line, note.column + 1, note.end_line, note.end_column + 1
        ),
    )


@server.thread()
@server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
def inlay_hints(params: types.InlayHintParams) -> list[types.InlayHint]:
    """``: [B, H, L, D]`` after each assignment target in the range whose tensor's rank is
    known; none unless the client turned them on (see ``initialize``)."""
    if not client_settings.inlay_hints:
        return []
    analysed = shape_cache.get(params.text_document.uri)
    if analysed is None or analysed.shapes is None:
        return []
    first, last = params.range.start.line + 1, params.range.end.line + 1
    hints = []
    for note in analysed.shapes.assignments():
        if not first <= note.end_line <= last:
            continue
        target = _client_range(
            analysed.lines, note.line, note.column + 1, note.end_line, note.end_column + 1
        )
        hints.append(
            types.InlayHint(
                position=target.end,
                label=f": {note.description.shape}",
                kind=types.InlayHintKind.Type,
                tooltip=note.description.text,
            )
        )
    return hints


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Does a request for the kinds ``only`` (``None``: any) take actions of ``kind``? Kinds
    are hierarchical: ``source`` takes ``source.fixAll.shapecheck``."""
    if only is None:
        return True
    return any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


def _quick_fixes(params: types.CodeActionParams) -> list[types.CodeAction]:
    """A quick fix for each finding with a fix that touches the requested range; none while the
    document's newest text is being checked, nor for a document the client never opened."""
    checked = checker.current(params.text_document.uri)
    if checked is None:
        return []
    uri = checked.snapshot.uri
    actions = []
    for finding, shown in checked.findings:
        fix = finding.fix
        if fix is None or not _overlaps(shown.range, params.range):
            continue
        title = f"{finding.code}: {fix.description}" + ("" if fix.safe else " (unsafe)")
        actions.append(
            types.CodeAction(
                title=title,
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[shown],
                is_preferred=fix.safe,
                edit=types.WorkspaceEdit(changes={uri: _edits(checked.lines, fix)}),
            )
        )
    return actions


def _fix_all(uri: str) -> types.CodeAction | None:
    """Every safe fix in the document's newest text, in rounds, as ``--fix`` makes them
    (never an unsafe one), as one edit of the text between the first and the last change;
    ``None`` when there is nothing to fix or the text cannot be fixed."""
    document = _open_document(uri)
    path = _path(uri)
    if document is None or path is None:
        return None
    parsed = _parsed(document.source, path)
    if parsed is None:
        return None
    data, source = parsed
    settings, codes = _settings(path)
    rules = _rules(tuple(codes))
    try:
        with _analysing:
            know(settings.known_modules)
            fixed = fix_source(source, rules, settings.keeps, unsafe=False, original=data)
    except FixError:  # the fixer declined (the text would not survive); nothing is offered
        return None
    if not fixed.fixed:
        return None
    old, new = source.text, fixed.data.decode(source.encoding)
    start, old_end, new_end = _changed_span(old, new)
    lines = physical_lines(document.source)
    (line, column), (end_line, end_column) = _position(old, start), _position(old, old_end)
    return types.CodeAction(
        title=f"shapecheck: apply {count(fixed.fixed, 'safe fix')}",
        kind=FIX_ALL,
        edit=types.WorkspaceEdit(
            changes={
                uri: [
                    types.TextEdit(
                        range=_client_range(lines, line, column, end_line, end_column),
                        new_text=new[start:new_end],
                    )
                ]
            }
        ),
    )


def _changed_span(old: str, new: str) -> tuple[int, int, int]:
    """Where ``new`` differs from ``old``: the common prefix's length, and where the common
    suffix starts in each."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    return start, len(old) - end, len(new) - end


def _file_shapes(text: str, path: str) -> FileShapes | None:
    """The editor's text analysed as a check analyses it, where it lies and under its
    settings; ``None`` where a check would report SC000 (it does, in the diagnostics)."""
    parsed = _parsed(text, path)
    if parsed is None:
        return None
    _, source = parsed
    settings, _ = _settings(path)
    try:
        with _analysing:
            know(settings.known_modules)
            return FileShapes(analyse(source.module, source.text, path=source.location))
    except Exception:  # the check of the same text reports it as an internal error
        return None


def _parsed(text: str, path: str) -> tuple[bytes, Source] | None:
    """The editor's text as a save writes it, and parsed from that; ``None`` where a check
    reports SC000 instead."""
    data = _encoded(text, path)
    if isinstance(data, Diagnostic):
        return None
    source = parse_source(data, path)
    return None if isinstance(source, Diagnostic) else (data, source)


def _request_check(uri: str) -> None:
    document = _open_document(uri)
    if document is not None:
        checker.request(_Snapshot(uri, document.version, document.source))


def _open_document(uri: str) -> TextDocument | None:
    """The document the client opened at ``uri``, or None (pygls would read it from disk)."""
    document: TextDocument | None = server.workspace.text_documents.get(unquote(uri))
    return document


def _publish(uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
    server.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
    )


def _check(snapshot: _Snapshot) -> _Checked:
    # LSP ends lines only at \n, \r\n and \r, as Python does (str.splitlines also breaks at
    # form feeds and Unicode separators, which would shift every later position)
    lines = physical_lines(snapshot.text)
    path = _path(snapshot.uri)
    if path is None:
        return _Checked(snapshot, lines, [])
    try:
        findings = _findings(snapshot.text, path)
    except Exception as error:  # reported in place of the findings: none stay stale
        findings = failure(path, error).diagnostics
    return _Checked(snapshot, lines, [(f, _lsp_diagnostic(lines, f)) for f in findings])


def _findings(text: str, path: str) -> list[Diagnostic]:
    settings, codes = _settings(path)
    data = _encoded(text, path)
    if isinstance(data, Diagnostic):
        return [data]
    with _analysing:
        know(settings.known_modules)
        result = lint_source(data, path, _rules(tuple(codes)))
    return [d for d in result.diagnostics if settings.keeps(d)]


def _path(uri: str) -> str | None:
    """The path a Python document is checked at: where it lies, or ``-`` for one that lies
    nowhere (``untitled:model.py``), which sees none of the project's other files; ``None``
    for a document that is not Python."""
    path = to_fs_path(uri)
    if not (path or uri).endswith((".py", ".pyi")):
        return None
    return path or STDIN


_reported_config_errors: set[str] = set()


def _settings(path: str) -> tuple[Settings, list[str]]:
    """The file's settings and the rules they enable. As ruff's server does, a configuration
    that cannot be used is shown to the user (once) and the defaults apply."""
    try:
        settings = load_settings(find_config(Path(path).parent))
        return settings, enabled_codes(rule_codes(), settings)
    except (ConfigError, SelectionError) as error:
        message = f"shapecheck: {error}; checking with the default settings"
        if message not in _reported_config_errors:
            _reported_config_errors.add(message)
            server.window_show_message(types.ShowMessageParams(types.MessageType.Error, message))
    settings = Settings()
    return settings, enabled_codes(rule_codes(), settings)


def _encoded(text: str, path: str) -> bytes | Diagnostic:
    """The editor's text as a save writes it, in the encoding its PEP 263 declaration names:
    parse_source decodes that back to exactly this text, so positions and fixes are the
    editor's. Text that encoding cannot hold (or a lone surrogate) is an SC000 where it is."""
    encoding = _declared_encoding(text)
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as error:
        line, column = _position(text, error.start)
        return input_error(path, f"cannot encode as {encoding}: {error.reason}", line, column)


def _declared_encoding(text: str) -> str:
    try:
        readline = io.BytesIO(text.encode("utf-8", "replace")).readline
        encoding, _ = tokenize.detect_encoding(readline)
        "".encode(encoding)  # LookupError for a codec that is not a text encoding (rot13)
    except (SyntaxError, LookupError):
        return "utf-8"  # parse_source reports the declaration
    # a byte order mark the editor kept is written once, by utf-8, and taken off by parse_source
    return "utf-8" if encoding == "utf-8-sig" else encoding


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of ``text[offset]``."""
    before = physical_lines(text[:offset])
    if not before or before[-1].endswith(("\n", "\r")):
        return len(before) + 1, 1
    return len(before), len(before[-1]) + 1


@cache
def _rules(codes: tuple[str, ...]) -> list[Rule]:
    return [rule() for rule in all_rules() if rule.code in codes]


def _lsp_diagnostic(lines: list[str], diagnostic: Diagnostic) -> types.Diagnostic:
    error = diagnostic.severity == "error"
    documentation = documentation_uri(diagnostic.code)
    return types.Diagnostic(
        range=_client_range(
            lines, diagnostic.line, diagnostic.column, diagnostic.end_line, diagnostic.end_column
        ),
        message=diagnostic.message,
        severity=types.DiagnosticSeverity.Error if error else types.DiagnosticSeverity.Warning,
        code=diagnostic.code,
        code_description=types.CodeDescription(documentation) if documentation else None,
        source=SOURCE,
    )


@cache
def documentation_uri(code: str) -> str | None:
    """Where a rule's documentation is: the ``file:`` URI of its module, whose docstring is
    what ``--explain`` prints (the project publishes no web pages to link to). ``None`` for
    SC000, which is no rule."""
    rule = rule_by_code(code)
    source = inspect.getsourcefile(rule) if rule is not None else None
    return Path(source).resolve().as_uri() if source else None


def _edits(lines: list[str], fix: FixEdits) -> list[types.TextEdit]:
    return [
        types.TextEdit(
            range=_client_range(lines, e.line, e.column, e.end_line, e.end_column),
            new_text=e.content,
        )
        for e in fix.written
    ]


def _client_range(
    lines: list[str], line: int, column: int, end_line: int, end_column: int
) -> types.Range:
    """1-based code-point positions -> the 0-based units the client negotiated (UTF-16)."""
    where = ServerTextRange(
        start=ServerTextPosition(line=line - 1, character=column - 1),
        end=ServerTextPosition(line=end_line - 1, character=end_column - 1),
    )
    return server.workspace.position_codec.range_to_client_units(lines, where)


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(position: types.Position) -> tuple[int, int]:
        return (position.line, position.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)
