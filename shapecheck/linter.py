"""Checking one file: parse once, analyse once, run the enabled rules, filter, position."""

from __future__ import annotations

import io
import tokenize
from collections.abc import Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from shapecheck.analysis import analyse, definitions, suite_statements
from shapecheck.diagnostics import (
    Diagnostic,
    FileResult,
    FixEdits,
    TextEdit,
    input_error,
    internal_error,
)
from shapecheck.fixes import Fix
from shapecheck.rule import Rule, Violation
from shapecheck.source import Source, parse_source, physical_lines
from shapecheck.suppression import is_suppressed, suppressions


def lint_path(path: str, rules: Sequence[Rule], display: str | None = None) -> FileResult:
    """Read ``path`` from disk and check it; reading problems become SC000."""
    shown = display or path
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        return FileResult(shown, [input_error(shown, f"cannot read: {reason}")])
    return lint_source(data, shown, rules)


def lint_source(
    data: bytes, path: str, rules: Sequence[Rule], *, prescan: bool = True
) -> FileResult:
    """Check ``data``; ``prescan=False`` parses every line (the pre-scan must not matter)."""
    source = parse_source(data, path, prescan=prescan)
    if isinstance(source, Diagnostic):
        return FileResult(path, [source])
    return lint_parsed(source, rules)


def lint_parsed(source: Source, rules: Sequence[Rule]) -> FileResult:
    analysis = analyse(source.module)
    found: list[tuple[Rule, Violation]] = []
    crashed: list[Diagnostic] = []
    for rule in rules:
        try:
            found.extend((rule, violation) for violation in rule.check(analysis))
        except Exception as error:  # one rule's bug must not cost the other rules' findings
            crashed.append(internal_error(source.path, f"in rule {rule.code}", error))
    diagnostics = _diagnostics(source, analysis.imports, found) if found else []
    return FileResult(source.path, sorted([*diagnostics, *crashed]), complete=not crashed)


def _diagnostics(
    source: Source, imports: dict[str, str], found: list[tuple[Rule, Violation]]
) -> list[Diagnostic]:
    # Positions cost a pass over the tree: computed only for files with findings.
    positions = MetadataWrapper(source.module, unsafe_skip_copy=True).resolve(PositionProvider)
    suppressed = suppressions(source.text)
    scopes = _scopes(source.module.body, positions, "")
    lines = [line.rstrip("\r\n") for line in physical_lines(source.text)]
    diagnostics: set[Diagnostic] = set()
    for rule, violation in found:
        where = positions[violation.node]
        line = where.start.line
        if is_suppressed(rule.code, line, suppressed):
            continue
        fix = violation.fix
        diagnostics.add(
            Diagnostic(
                source.path,
                line,
                where.start.column + 1,
                where.end.line,
                where.end.column + 1,
                rule.code,
                rule.name,
                violation.severity or rule.severity,
                violation.message,
                _edits(fix, source.module, imports, positions) if fix else None,
                _anchor(lines, where, scopes),
            )
        )
    return sorted(diagnostics)


Scope = tuple[int, int, str]
"""First line, last line, qualified name of a function or class."""


def _scopes(
    statements: Sequence[cst.BaseStatement],
    positions: Mapping[cst.CSTNode, CodeRange],
    prefix: str,
) -> list[Scope]:
    """Every function and class, nested ones included (also inside ``if``/``try``/``with``)."""
    scopes: list[Scope] = []
    for definition in definitions(statements):
        name = prefix + definition.name.value
        where = positions[definition]
        scopes.append((where.start.line, where.end.line, name))
        scopes += _scopes(suite_statements(definition.body), positions, name + ".")
    return scopes


def _anchor(lines: list[str], where: CodeRange, scopes: list[Scope]) -> str:
    """The enclosing function and the flagged lines' code, comments dropped and whitespace
    collapsed: editing a comment or the code around keeps it."""
    line = where.start.line
    holding = [scope for scope in scopes if scope[0] <= line <= scope[1]]
    scope = max(holding)[2] if holding else "<module>"  # the innermost starts last
    code = _without_comments("\n".join(lines[line - 1 : where.end.line]))
    return f"{scope}: {' '.join(code.split())}"


def _without_comments(code: str) -> str:
    pieces = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
                pieces.append(token.string)
    except (tokenize.TokenError, SyntaxError):
        return code  # a statement cut mid-way: keep the text as it is
    return " ".join(pieces)


def _edits(
    fix: Fix,
    module: cst.Module,
    imports: dict[str, str],
    positions: Mapping[cst.CSTNode, CodeRange],
) -> FixEdits | None:
    """A fix as text edits; ``None`` when a name its code needs is bound to something else."""
    edits = []
    for node, content in fix.replacements:
        start, end = positions[node].start, positions[node].end
        edits.append(TextEdit(start.line, start.column + 1, end.line, end.column + 1, content))
    for name in fix.imports:
        if imports.get(name) == name:
            continue
        if name in imports:
            return None
        edits.append(_import_edit(name, module, positions))
    return FixEdits(fix.description, fix.safe, tuple(edits), fix.keeps_results)


def _import_edit(
    name: str, module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange]
) -> TextEdit:
    """``import name`` on the line after the module's last top-level import (or before its
    first statement after the docstring)."""
    statements = [s for s in module.body if isinstance(s, cst.SimpleStatementLine)]
    imports = [s for s in statements if isinstance(s.body[0], cst.Import | cst.ImportFrom)]
    newline = module.default_newline
    if imports:
        line = positions[imports[-1]].end.line + 1
    else:
        first = next(
            (s for s in module.body if not (s is module.body[0] and _is_docstring(s))), None
        )
        line = positions[first].start.line if first is not None else 1
    return TextEdit(line, 1, line, 1, f"import {name}{newline}")


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.SimpleString | cst.ConcatenatedString)
    )
