"""Checking one file: parse once, analyse once, run the enabled rules, filter, position."""

from __future__ import annotations

import ast
import io
import itertools
import sys
import tokenize
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shapecheck.analysis import analyse, definitions
from shapecheck.diagnostics import (
    Diagnostic,
    FileResult,
    FixEdits,
    TextEdit,
    input_error,
    internal_error,
)
from shapecheck.files import read_regular_file
from shapecheck.fixes import FixRecipe
from shapecheck.rule import Rule, Violation
from shapecheck.source import OUT_OF_MEMORY, Lines, Source, parse_source
from shapecheck.suppression import is_suppressed, suppressions

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


def lint_path(path: str, rules: Sequence[Rule], display: str | None = None) -> FileResult:
    """Read ``path`` from disk and check it; reading problems become SC000."""
    shown = display or path
    try:
        data = read_regular_file(path)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        return FileResult(shown, [input_error(shown, f"cannot read: {reason}")])
    return lint_source(data, shown, rules)


def lint_source(data: bytes, path: str, rules: Sequence[Rule]) -> FileResult:
    source = parse_source(data, path)
    if isinstance(source, Diagnostic):
        # running out of memory says nothing about the file: not cached, tried again next run
        return FileResult(path, [source], complete=source.message != OUT_OF_MEMORY)
    return lint_parsed(source, rules)


def lint_parsed(source: Source, rules: Sequence[Rule]) -> FileResult:
    analysis = analyse(source.module, source.text)
    found: list[tuple[Rule, Violation]] = []
    crashed: list[Diagnostic] = []
    for rule in rules:
        try:
            found.extend((rule, violation) for violation in rule.check(analysis))
        except Exception as error:  # one rule's bug must not cost the other rules' findings
            crashed.append(internal_error(source.path, f"in rule {rule.code}", error))
    diagnostics = _diagnostics(source, analysis.imports, found, crashed) if found else []
    return FileResult(source.path, sorted([*diagnostics, *crashed]), complete=not crashed)


def _diagnostics(
    source: Source,
    imports: dict[str, str],
    found: list[tuple[Rule, Violation]],
    crashed: list[Diagnostic],
) -> list[Diagnostic]:
    """Positions, anchors and fixes: computed only for files with findings."""
    lines = Lines(source.text)
    suppressed = suppressions(source.text)
    scopes = _scopes(source.module.body, "")
    code_lines = [line.rstrip("\r\n") for line in lines.lines]
    fixes = _Fixes(source, lines, imports)
    diagnostics: set[Diagnostic] = set()
    for rule, violation in found:
        line, column, end_line, end_column = lines.span(violation.node)
        if is_suppressed(rule.code, line, suppressed):
            continue
        try:
            edits = fixes.edits(violation.fix, violation.node) if violation.fix else None
        except Exception as error:  # a fix's bug costs the fix, not the finding
            crashed.append(internal_error(source.path, f"in the fix of rule {rule.code}", error))
            edits = None
        diagnostics.add(
            Diagnostic(
                source.path,
                line,
                column + 1,
                end_line,
                end_column + 1,
                rule.code,
                rule.name,
                violation.severity or rule.severity,
                violation.message,
                edits,
                _anchor(code_lines, line, end_line, scopes),
            )
        )
    return sorted(diagnostics)


class _Fixes:
    """Rules' fix recipes made into text edits. libcst parses only the top-level statements
    that hold a fix, each once."""

    def __init__(self, source: Source, lines: Lines, imports: dict[str, str]) -> None:
        self.lines, self.imports = lines, imports
        self.module = source.module
        self._statements = [(_first_line(s), s.end_lineno or s.lineno) for s in source.module.body]
        self._trees: dict[tuple[int, int], ConcreteTree | None] = {}

    def edits(self, recipe: FixRecipe, node: ast.AST) -> FixEdits | None:
        tree = self._tree(self.lines.span(node)[0])
        fix = recipe(tree) if tree is not None else None
        if fix is None or tree is None:
            return None
        edits = tree.edits(fix)
        for name in fix.imports:
            if self.imports.get(name) == name:
                continue
            if name in self.imports:
                return None  # the name the new code needs means something else here
            edits.append(self._import(name))
        safe = fix.safe and not tree.drops_comments(fix)
        return FixEdits(fix.description, safe, tuple(edits), fix.keeps_results)

    def _import(self, name: str) -> TextEdit:
        """``import name`` (a standard-library module) on a line of its own, where isort and
        ruff's I001 would put it (after the last line when that one has no line break)."""
        line, blank_before, blank_after = _import_place(self.module, name)
        newline, lines = _newline(self.lines), self.lines.lines
        statement = f"{newline if blank_before else ''}import {name}"
        if line > len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            end = len(lines[-1]) + 1
            return TextEdit(len(lines), end, len(lines), end, f"{newline}{statement}")
        text = f"{statement}{newline}{newline if blank_after else ''}"
        return TextEdit(line, 1, line, 1, text)

    def _tree(self, line: int) -> ConcreteTree | None:
        from shapecheck.concrete import ConcreteTree  # libcst: only for files with fixes

        region = next(((a, b) for a, b in self._statements if a <= line <= b), None)
        if region is None:
            return None
        if region not in self._trees:
            self._trees[region] = ConcreteTree.parse(self.lines, *region)
        return self._trees[region]


def _first_line(statement: ast.stmt) -> int:
    """Where a statement starts, its decorators included."""
    decorators = getattr(statement, "decorator_list", None)
    return decorators[0].lineno if decorators else statement.lineno


def _import_place(module: ast.Module, name: str) -> tuple[int, bool, bool]:
    """Where ``import name`` goes, and whether a blank line goes before or after it, as
    isort sorts the imports at the top of a module: sections (``__future__``, the standard
    library, the rest) apart, plain imports before ``from`` imports, each in name order.
    Without imports at the top: before the first statement after the docstring."""
    body = module.body
    if body and ast.get_docstring(module, clean=False) is not None:
        body = body[1:]
    block: list[ast.Import | ast.ImportFrom] = []
    for statement in itertools.takewhile(
        lambda s: isinstance(s, ast.Import | ast.ImportFrom), body
    ):
        assert isinstance(statement, ast.Import | ast.ImportFrom)
        block.append(statement)
    if not block:
        imports = [s for s in body if isinstance(s, ast.Import | ast.ImportFrom)]
        if imports:  # imports only further down: after the last of them
            return (imports[-1].end_lineno or imports[-1].lineno) + 1, False, False
        return (_first_line(body[0]) if body else 1), False, False
    future = [s for s in block if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    others = [s for s in block if s not in future]
    standard = [s for s in others if _section(s) == "stdlib"]
    if not standard:  # a section of its own, between __future__ and the rest
        if others:
            return others[0].lineno, False, True
        return (future[-1].end_lineno or future[-1].lineno) + 1, True, False
    plain = [s for s in standard if isinstance(s, ast.Import)]
    later = next((s for s in plain if s.names[0].name.lower() > name.lower()), None)
    if later is not None:
        return later.lineno, False, False
    if plain:
        return (plain[-1].end_lineno or plain[-1].lineno) + 1, False, False
    return standard[0].lineno, False, False


def _section(statement: ast.Import | ast.ImportFrom) -> str:
    if isinstance(statement, ast.ImportFrom):
        if statement.level:
            return "local"
        top = (statement.module or "").partition(".")[0]
    else:
        top = statement.names[0].name.partition(".")[0]
    return "stdlib" if top in sys.stdlib_module_names else "other"


def _newline(lines: Lines) -> str:
    """The file's own line ending (the first one), for a line a fix adds."""
    first = lines.lines[0] if lines.lines else ""
    return next((end for end in ("\r\n", "\n", "\r") if first.endswith(end)), "\n")


Scope = tuple[int, int, str]
"""First line, last line, qualified name of a function or class."""


def _scopes(statements: Sequence[ast.stmt], prefix: str) -> list[Scope]:
    """Every function and class, nested ones included (also inside ``if``/``try``/``with``)."""
    scopes: list[Scope] = []
    for definition in definitions(statements):
        name = prefix + definition.name
        scopes.append((definition.lineno, definition.end_lineno or definition.lineno, name))
        scopes += _scopes(definition.body, name + ".")
    return scopes


def _anchor(lines: list[str], line: int, end_line: int, scopes: list[Scope]) -> str:
    """The enclosing function and the flagged lines' code, comments dropped and whitespace
    collapsed: editing a comment or the code around keeps it."""
    holding = [scope for scope in scopes if scope[0] <= line <= scope[1]]
    scope = max(holding)[2] if holding else "<module>"  # the innermost starts last
    code = _without_comments("\n".join(lines[line - 1 : end_line]))
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
