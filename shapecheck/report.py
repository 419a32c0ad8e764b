"""Output formats: ``text`` (``path:line:col: CODE message``) and ``json`` (DESIGN.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from shapecheck.diagnostics import Diagnostic

FORMATS = ("text", "json")


def render(diagnostics: Sequence[Diagnostic], output_format: str, files_checked: int) -> str:
    if output_format == "json":
        return json.dumps([d.to_json() for d in diagnostics], indent=2)
    return _text(diagnostics, files_checked)


def _text(diagnostics: Sequence[Diagnostic], files_checked: int) -> str:
    lines = [
        f"{click.style(d.path, bold=True)}:{d.line}:{d.column}: "
        f"{click.style(d.code, fg='red' if d.severity == 'error' else 'yellow', bold=True)} "
        f"{d.message}"
        for d in diagnostics
    ]
    files = len({d.path for d in diagnostics})
    if diagnostics:
        lines.append(f"{_count(len(diagnostics), 'finding')} in {_count(files, 'file')}")
    else:
        lines.append(f"No findings in {_count(files_checked, 'file')}")
    return "\n".join(lines)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
