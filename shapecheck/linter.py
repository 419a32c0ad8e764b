"""Checking one file: parse once, analyse once, run the enabled rules, filter, position."""

from __future__ import annotations

import ast
import bisect
import functools
import io
import itertools
import sys
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, cast

from shapecheck import project
from shapecheck.analysis import ModuleAnalysis, analyse, definitions
from shapecheck.analysis.imports import COMPOUND_STATEMENTS
from shapecheck.diagnostics import (
    Diagnostic,
    FileResult,
    FixEdits,
    TextEdit,
    input_error,
    internal_error,
)
from shapecheck.files import read_regular_file
from shapecheck.fixes import FixOffer
from shapecheck.record import replace
from shapecheck.rule import Rule, SuppressionRule, Violation
from shapecheck.source import OUT_OF_MEMORY, STDIN, Lines, Source, parse_source
from shapecheck.suppression import Suppressions

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


def lint_source(
    data: bytes, path: str, rules: Sequence[Rule], *, write_fixes: bool = True
) -> FileResult:
    shared = project.parsed(path, data) if path != STDIN else None
    source = replace(shared, path=path) if shared is not None else parse_source(data, path)
    if isinstance(source, Diagnostic):
        # running out of memory says nothing about the file: not cached, tried again next run
        return FileResult(path, [source], complete=source.message != OUT_OF_MEMORY)
    return lint_parsed(source, rules, write_fixes=write_fixes)


def lint_parsed(source: Source, rules: Sequence[Rule], *, write_fixes: bool = True) -> FileResult:
    """The findings in ``source``; ``write_fixes``: each fix with its edits (libcst), else
    offered only (what a report that prints no edits needs)."""
    analysis = analyse(source.module, source.text, path=source.location)
    found: list[tuple[Rule, Violation]] = []
    crashed: list[Diagnostic] = []
    ran: set[str] = set()
    judges = [rule for rule in rules if isinstance(rule, SuppressionRule)]
    for rule in rules:
        if isinstance(rule, SuppressionRule):
            continue  # it judges the suppressions, once every other rule's findings went by
        try:
            found.extend((rule, violation) for violation in _once_per_node(rule.check(analysis)))
        except Exception as error:  # one rule's bug must not cost the other rules' findings
            crashed.append(internal_error(source.path, f"in rule {rule.code}", error))
        else:
            ran.add(rule.code)
    if analysis.handed_by:
        found = [_as_handed(analysis, rule, violation) for rule, violation in found]
    if analysis.specialised:
        found += _in_constructed_sizes(analysis, rules, found, source, crashed, ran)
    if analysis.too_deep:  # the rules saw only part of the file: none can vouch for it all
        ran.clear()
    diagnostics = (
        _diagnostics(source, analysis.imports, found, crashed, judges, frozenset(ran), write_fixes)
        if found or judges
        else []
    )
    too_deep = [part.diagnostic(source.path) for part in analysis.too_deep]
    # not cached: how deep the analysis may go depends on the stack it runs on
    complete = not crashed and not too_deep
    dependencies = analysis.project.evidence if analysis.project is not None else {}
    return FileResult(
        source.path,
        sorted([*diagnostics, *crashed, *too_deep]),
        complete=complete,
        dependencies=dependencies,
    )


def _once_per_node(violations: Iterable[Violation]) -> Iterator[Violation]:
    """A rule's first finding at each node: code run once per item of a loop over a tuple
    (``[t.transpose(1, 2).view(b, -1, d) for t in (q, k)]``, ``map(lambda t: ..., (q, k))``)
    is observed once per item, and is one place to fix."""
    seen: set[ast.AST] = set()
    for violation in violations:
        if violation.node not in seen:
            seen.add(violation.node)
            yield violation


def _as_handed(
    analysis: ModuleAnalysis, rule: Rule, violation: Violation
) -> tuple[Rule, Violation]:
    """A finding in a function another module's call told its parameters of rests on that
    call: the message says which (the sizes it names may be that module's)."""
    function = analysis.enclosing_function(violation.node)
    caller = analysis.handed_by.get(function) if function is not None else None
    if caller is None:
        return rule, violation
    return rule, replace(violation, message=f"{violation.message} (given what {caller} passes)")


def _in_constructed_sizes(
    analysis: ModuleAnalysis,
    rules: Sequence[Rule],
    found: list[tuple[Rule, Violation]],
    source: Source,
    crashed: list[Diagnostic],
    ran: set[str],
) -> list[tuple[Rule, Violation]]:
    """What the rules that ran on the module find in a class only as a construction sizes it
    (``Head(n_embd, head_size=n_embd // n_head)`` makes ``C ** -0.5`` the model width's scale),
    reported where it is written with the construction named; no fix, which would be right for
    one caller. A class the rules fault alone is left at that: in its callers' sizes the same
    bug shows again downstream (a wrong merge also feeds the wrong width to the next layer). A
    rule's bug here costs its findings here, and says so."""
    if not analysis.specialised:
        return []  # (asking each finding's class would map every node's holder)
    faulted = {analysis.enclosing_class(violation.node) for _, violation in found}
    seen: set[tuple[str, ast.AST]] = set()
    more: list[tuple[Rule, Violation]] = []
    for specialised in analysis.specialised:
        where = f" (where {specialised.where} with {specialised.construction.decided})"
        for rule in rules:
            if rule.code not in ran:
                continue  # a suppression rule, or one that failed on the module already
            try:
                violations = list(rule.check(specialised.analysis))
            except Exception as error:
                crashed.append(internal_error(source.path, f"in rule {rule.code}", error))
                continue
            for violation in violations:
                held = analysis.enclosing_class(violation.node)
                if held is None or held in faulted:
                    continue  # (None: a size's division written in the caller's file)
                if (rule.code, violation.node) not in seen:
                    seen.add((rule.code, violation.node))
                    message = violation.message + where
                    more.append((rule, replace(violation, message=message, fix=None)))
    return more


def _diagnostics(
    source: Source,
    imports: dict[str, str],
    found: list[tuple[Rule, Violation]],
    crashed: list[Diagnostic],
    judges: list[SuppressionRule],
    ran: frozenset[str],
    write_fixes: bool,
) -> list[Diagnostic]:
    """Positions, anchors and fixes: computed only for files with findings (or where a
    suppression rule is on). Findings go through the suppression comments, which remember
    what they silenced; then the suppression rules judge the comments, as ruff's RUF100 does
    in its noqa pass."""
    lines = Lines(source.text)
    suppressions = Suppressions(source.text)
    anchors = _Anchors(source.module, lines)
    fixes = _Fixes(source, lines, imports, write=write_fixes)
    diagnostics: set[Diagnostic] = set()
    # in the order of the code, so that the fixes in one top-level statement come together
    located = sorted(
        ((lines.span(violation.node), rule, violation) for rule, violation in found),
        key=lambda item: item[0],
    )
    for (line, column, end_line, end_column), rule, violation in located:
        if suppressions.suppresses(rule.code, line):
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
                anchors.anchor(line, end_line),
            )
        )
    for judge in judges:
        if suppressions.exempts(judge.code):
            continue
        try:
            judged = list(judge.check_suppressions(suppressions, ran))
        except Exception as error:  # one rule's bug must not cost the other rules' findings
            crashed.append(internal_error(source.path, f"in rule {judge.code}", error))
            continue
        for comment in judged:
            line = comment.directive.line
            diagnostics.add(
                Diagnostic(
                    source.path,
                    line,
                    comment.directive.column + 1,
                    line,
                    comment.directive.end_column + 1,
                    judge.code,
                    judge.name,
                    judge.severity,
                    comment.message,
                    comment.fix,
                    anchors.anchor(line, line),
                )
            )
    return sorted(diagnostics)


class _Fixes:
    """Rules' fix offers made into fixes: their safety decided on the ``ast`` side, their
    edits written (where asked for) on libcst's tree of only the code that holds each: the
    simple statement around it, or the top-level statement where the fix is in no simple
    statement (a compound statement's header, a decorator). Each is parsed once when asked in
    the order of the code, and only the last one of each kind is kept (all of them would grow
    the heap that every garbage collection walks with the number of fixes)."""

    def __init__(
        self, source: Source, lines: Lines, imports: dict[str, str], *, write: bool
    ) -> None:
        self.lines, self.imports, self.write = lines, imports, write
        self.module, self.text = source.module, source.text
        self._statements = [(_first_line(s), s.end_lineno or s.lineno) for s in source.module.body]
        self._lasts = [last for _, last in self._statements]
        # the last tree parsed of each kind: a simple statement, a top-level one
        self._trees: dict[bool, tuple[tuple[int, int, int], ConcreteTree | None]] = {}
        self._places: dict[str, tuple[int, bool, bool]] = {}

    def edits(self, offer: FixOffer, node: ast.AST) -> FixEdits | None:
        if any(name in self.imports and self.imports[name] != name for name in offer.imports):
            return None  # a name the new code needs means something else here
        safe = offer.safe and not self._deletes_comment(offer)
        if not self.write:
            return FixEdits(offer.description, safe, None, offer.keeps_results)
        line = cast(ast.expr, node).lineno
        # the first top-level statement ending at or after the node's line, if it holds it
        index = bisect.bisect_left(self._lasts, line)
        if index == len(self._statements) or line < self._statements[index][0]:
            return None
        tree = self._statement_tree(self.module.body[index], node)
        if tree is None:  # a compound statement's header, a decorator, or unreadable alone
            first, last = self._statements[index]
            tree = self._parsed((first, 0, last), top_level=True)
        replacements = offer.write(tree) if tree is not None else None
        if replacements is None or tree is None:
            return None
        edits = tree.edits(replacements)
        edits += [self._import(name) for name in offer.imports if name not in self.imports]
        return FixEdits(offer.description, safe, tuple(edits), offer.keeps_results)

    def _deletes_comment(self, offer: FixOffer) -> bool:
        """Is a comment written inside the code ``offer`` rewrites, outside what it keeps?"""
        if not any("#" in self.lines.segment(node) for node in offer.rewritten):
            return False  # (almost always: only then is the file tokenized)
        places = self._comment_places
        if places is None:
            return True  # no way to tell a comment from a ``#`` in a string: not safe
        spans = [self.lines.span(node) for node in offer.rewritten]
        kept = [self.lines.span(node) for node in offer.kept]
        return any(
            _within(place, span) and not any(_within(place, each) for each in kept)
            for place in places
            for span in spans
        )

    @functools.cached_property
    def _comment_places(self) -> list[tuple[int, int]] | None:
        """Where each comment of the file starts (line, column); ``None`` where Python's
        tokenizer does not read the file (one ``ast`` parsed)."""
        try:
            tokens = tokenize.generate_tokens(io.StringIO(self.text).readline)
            return [token.start for token in tokens if token.type == tokenize.COMMENT]
        except (tokenize.TokenError, SyntaxError):
            return None

    def _import(self, name: str) -> TextEdit:
        """``import name`` (a standard-library module) on a line of its own, where isort and
        ruff's I001 would put it (after the last line when that one has no line break)."""
        if name not in self._places:  # once per file, however many fixes need it
            self._places[name] = _import_place(self.module, name)
        line, blank_before, blank_after = self._places[name]
        newline, lines = _newline(self.lines), self.lines.lines
        statement = f"{newline if blank_before else ''}import {name}"
        if line > len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            end = len(lines[-1]) + 1
            return TextEdit(len(lines), end, len(lines), end, f"{newline}{statement}")
        text = f"{statement}{newline}{newline if blank_after else ''}"
        return TextEdit(line, 1, line, 1, text)

    def _statement_tree(self, top_level: ast.stmt, node: ast.AST) -> ConcreteTree | None:
        """The simple statement holding ``node`` (libcst's parse and positions cost as much
        as the code they cover: a class of hundreds of lines for one name otherwise)."""
        statement: ast.stmt | None = top_level
        while statement is not None and isinstance(statement, COMPOUND_STATEMENTS):
            statement = next(
                (inner for inner in _statements_in(statement) if _holds(inner, node)), None
            )
        if statement is None or not _holds(statement, node):
            return None
        line, column, end_line, _ = self.lines.span(statement)
        return self._parsed((line, column, end_line), top_level=False)

    def _parsed(self, region: tuple[int, int, int], *, top_level: bool) -> ConcreteTree | None:
        from shapecheck.concrete import ConcreteTree  # libcst: only for files with fixes

        last = self._trees.get(top_level)
        if last is None or last[0] != region:
            last = self._trees[top_level] = region, ConcreteTree.parse(self.lines, *region)
        return last[1]


def _within(place: tuple[int, int], span: tuple[int, int, int, int]) -> bool:
    line, column, end_line, end_column = span
    return (line, column) <= place < (end_line, end_column)


def _statements_in(statement: ast.stmt) -> Iterator[ast.stmt]:
    """The statements a compound statement holds, in its clauses and handlers too."""
    for child in ast.iter_child_nodes(statement):
        if isinstance(child, ast.stmt):
            yield child
        elif isinstance(child, ast.excepthandler | ast.match_case):
            yield from (
                inner for inner in ast.iter_child_nodes(child) if isinstance(inner, ast.stmt)
            )


def _holds(statement: ast.stmt, node: ast.AST) -> bool:
    """Does ``statement``'s code cover ``node``'s (positions as ``ast`` gives them)?"""
    held = cast(ast.expr, node)
    return (statement.lineno, statement.col_offset) <= (held.lineno, held.col_offset) and (
        held.end_lineno or held.lineno,
        held.end_col_offset or 0,
    ) <= (statement.end_lineno or statement.lineno, statement.end_col_offset or 0)


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


class _Anchors:
    """Each finding's anchor (see ``Diagnostic.anchor``): the enclosing function and the
    flagged lines' code, comments dropped and whitespace collapsed, so that editing a comment
    or the code around keeps it. Each line's scope and each flagged code are worked out once
    per file, however many findings share them."""

    def __init__(self, module: ast.Module, lines: Lines) -> None:
        self._code_lines = [line.rstrip("\r\n") for line in lines.lines]
        self._scope_of_line = ["<module>"] * (len(self._code_lines) + 1)
        for first, last, name in sorted(_scopes(module.body, "")):
            # sorted by first line: an inner scope starts later and overwrites its lines
            self._scope_of_line[first : last + 1] = [name] * (last + 1 - first)
        self._code: dict[tuple[int, int], str] = {}

    def anchor(self, line: int, end_line: int) -> str:
        code = self._code.get((line, end_line))
        if code is None:
            written = _without_comments("\n".join(self._code_lines[line - 1 : end_line]))
            code = self._code[line, end_line] = " ".join(written.split())
        return f"{self._scope_of_line[line]}: {code}"


def _without_comments(code: str) -> str:
    pieces = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
                pieces.append(token.string)
    except (tokenize.TokenError, SyntaxError):
        return code  # a statement cut mid-way: keep the text as it is
    return " ".join(pieces)
