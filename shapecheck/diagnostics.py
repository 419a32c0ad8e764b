"""Diagnostics: one finding at one place in one file, as every output format reports it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]

INPUT_ERROR_CODE = "SC000"
INPUT_ERROR_NAME = "unreadable-input"


@dataclass(frozen=True, order=True)
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

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "fix": None}


def input_error(path: str, message: str, line: int = 1, column: int = 1) -> Diagnostic:
    """SC000: the file could not be read, decoded or parsed."""
    return Diagnostic(
        path, line, column, line, column, INPUT_ERROR_CODE, INPUT_ERROR_NAME, "error", message
    )
