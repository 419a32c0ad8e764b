"""Checking one file: parse once, analyse once, run the enabled rules, filter, position."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from shapecheck.analysis import analyse
from shapecheck.diagnostics import Diagnostic, input_error
from shapecheck.rule import Rule, Violation
from shapecheck.source import parse_source
from shapecheck.suppression import is_suppressed, suppressions


@dataclass(frozen=True)
class FileResult:
    path: str
    diagnostics: list[Diagnostic]

    @property
    def unreadable(self) -> bool:
        return any(diagnostic.code == "SC000" for diagnostic in self.diagnostics)


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


def lint_source(data: bytes, path: str, rules: Sequence[Rule]) -> FileResult:
    source = parse_source(data, path)
    if isinstance(source, Diagnostic):
        return FileResult(path, [source])
    analysis = analyse(source.module)
    found: list[tuple[Rule, Violation]] = []
    for rule in rules:
        found.extend((rule, violation) for violation in rule.check(analysis))
    if not found:
        return FileResult(path, [])
    return FileResult(path, _diagnostics(path, source.text, source.module, found))


def _diagnostics(
    path: str, text: str, module: cst.Module, found: list[tuple[Rule, Violation]]
) -> list[Diagnostic]:
    # Positions cost a pass over the tree: computed only for files with findings.
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    suppressed = suppressions(text)
    diagnostics: set[Diagnostic] = set()
    for rule, violation in found:
        where = positions[violation.node]
        line = where.start.line
        if is_suppressed(rule.code, line, suppressed):
            continue
        diagnostics.add(
            Diagnostic(
                path,
                line,
                where.start.column + 1,
                where.end.line,
                where.end.column + 1,
                rule.code,
                rule.name,
                violation.severity or rule.severity,
                violation.message,
            )
        )
    return sorted(diagnostics)
