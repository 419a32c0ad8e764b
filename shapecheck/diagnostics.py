"""Diagnostics: one finding at one place in one file, as every output format reports it."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal

from shapecheck.record import as_dict, record

Severity = Literal["error", "warning"]

INPUT_ERROR_CODE = "SC000"
INPUT_ERROR_NAME = "unreadable-input"


@record
class TextEdit:
    """Replace the text from (line, column) to just before (end_line, end_column), 1-based;
    an insertion when both ends are the same place."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@record
class FixEdits:
    """A fix as text: applied whole or not at all."""

    description: str
    safe: bool
    edits: tuple[TextEdit, ...] | None
    """``None``: offered, not written, in a run that prints no edits (see ``FixOffer``)."""
    keeps_results: bool = False  # see shapecheck.fixes.FixOffer

    @property
    def written(self) -> tuple[TextEdit, ...]:
        """The edits, of a fix checked with its edits written (``lint(write_fixes=True)``)."""
        if self.edits is None:
            raise ValueError(f"the fix {self.description!r} was offered, not written")
        return self.edits

    def to_json(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "applicability": "safe" if self.safe else "unsafe",
            "edits": [as_dict(edit) for edit in self.written],
        }


@record(order=True)
class Diagnostic:
    """A finding. Lines and columns are 1-based; ``end_column`` points just past the end."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    severity: Severity
    message: str
    fix: FixEdits | None = field(default=None, compare=False)
    anchor: str = field(default="", compare=False)
    """Where it is, in words that survive edits elsewhere: the enclosing function and the
    flagged code, whitespace collapsed (``MHA.forward: x.transpose(1, 2).view(b, l, e)``).
    Baselines key on it (with path and code), never on line numbers."""

    def to_json(self) -> dict[str, Any]:
        fields = {name: getattr(self, name) for name in _REPORTED}
        return {**fields, "fix": self.fix.to_json() if self.fix else None}


_REPORTED = (
    "path",
    "line",
    "column",
    "end_line",
    "end_column",
    "code",
    "name",
    "severity",
    "message",
)


@record
class FileResult:
    """What checking one file found."""

    path: str
    diagnostics: list[Diagnostic]
    complete: bool = True
    """False when shapecheck failed on part of the file (an internal error): not cached."""
    dependencies: dict[str, str | None] = field(default_factory=dict)
    """The project's other files the result rests on: path -> SHA-256 of the content read,
    or ``None`` where a module was looked for and none was (see :mod:`shapecheck.project`)."""

    @property
    def unreadable(self) -> bool:
        return any(diagnostic.code == INPUT_ERROR_CODE for diagnostic in self.diagnostics)


def applicable(fix: FixEdits | None, unsafe: bool) -> bool:
    """Would ``--fix`` apply this fix (unsafe ones only with ``--unsafe-fixes``)?"""
    return fix is not None and (fix.safe or unsafe)


def internal_error(path: str, where: str, error: Exception) -> Diagnostic:
    """SC000 for a bug in shapecheck: named, with a request to report it."""
    return input_error(
        path,
        f"internal error {where} ({type(error).__name__}: {error}); "
        "please report it at the shapecheck issue tracker",
    )


def input_error(path: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    """SC000: the file could not be read, decoded or parsed."""
    return Diagnostic(
        path, line, column, line, column, INPUT_ERROR_CODE, INPUT_ERROR_NAME, "error", message
    )
