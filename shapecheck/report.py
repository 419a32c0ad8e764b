"""Output formats: ``text`` (``path:line:col: CODE message``) and ``json`` (DESIGN.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import click

from shapecheck.diagnostics import Diagnostic, applicable

FORMATS = ("text", "json")


def render(
    diagnostics: Sequence[Diagnostic],
    output_format: str,
    files_checked: int,
    *,
    unsafe: bool = False,
    fixed: int | None = None,
) -> str:
    """``fixed`` is how many findings ``--fix`` mended (``None`` when not fixing);
    ``unsafe`` counts unsafe fixes as available."""
    if output_format == "json":
        return json.dumps([d.to_json() for d in diagnostics], indent=2)
    return _text(diagnostics, files_checked, unsafe, fixed)


def _text(
    diagnostics: Sequence[Diagnostic], files_checked: int, unsafe: bool, fixed: int | None
) -> str:
    lines = [
        f"{click.style(d.path, bold=True)}:{d.line}:{d.column}: "
        f"{click.style(d.code, fg='red' if d.severity == 'error' else 'yellow', bold=True)} "
        f"{'[*] ' if applicable(d.fix, unsafe) else ''}{d.message}"
        for d in diagnostics
    ]
    files = len({d.path for d in diagnostics})
    if diagnostics:
        summary = f"{count(len(diagnostics), 'finding')} in {count(files, 'file')}"
    else:
        summary = f"No findings in {count(files_checked, 'file')}"
    if fixed is not None:
        summary += f" ({fixed} fixed)"
    else:
        summary += _fixable(diagnostics, unsafe)
    lines.append(summary)
    return "\n".join(lines)


def _fixable(diagnostics: Sequence[Diagnostic], unsafe: bool) -> str:
    """``; [*] 2 fixable with --fix (1 more with --unsafe-fixes)``, like ruff's hint."""
    ready = sum(1 for d in diagnostics if applicable(d.fix, unsafe))
    hidden = sum(1 for d in diagnostics if d.fix is not None and not applicable(d.fix, unsafe))
    flag = "--fix --unsafe-fixes" if unsafe else "--fix"
    if ready and hidden:
        return f"; [*] {ready} fixable with {flag} ({hidden} more with --unsafe-fixes)"
    if ready:
        return f"; [*] {ready} fixable with {flag}"
    if hidden:
        return f"; {hidden} fixable with --fix --unsafe-fixes"
    return ""


def count(number: int, noun: str) -> str:
    """``1 finding``, ``2 findings``, ``2 fixes``."""
    plural = "es" if noun.endswith("x") else "s"
    return f"{number} {noun}{'' if number == 1 else plural}"
