"""Applying fixes: text edits, rounds until nothing more applies, atomic writes.

Fixes are applied as text edits on the decoded source, so every byte outside them stays as it
was (formatting, comments, line endings). One round applies every fix that does not overlap
one already taken; the result is parsed and linted again, and the next round applies what the
first could not, until a round changes nothing (at most :data:`MAX_ROUNDS`).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shapecheck.diagnostics import Diagnostic, FileResult, TextEdit, applicable
from shapecheck.linter import lint_parsed
from shapecheck.rule import Rule
from shapecheck.source import Source, parse_source, physical_lines

MAX_ROUNDS = 10


class FixError(Exception):
    """A fix that cannot be applied or written; the file is left as it was."""


@dataclass(frozen=True)
class Fixed:
    """A file after fixing: its new bytes, how many findings were fixed, what remains."""

    data: bytes
    fixed: int
    remaining: FileResult


def fix_source(
    source: Source,
    rules: Sequence[Rule],
    keep: Callable[[Diagnostic], bool],
    unsafe: bool,
) -> Fixed:
    """Fix ``source`` in rounds; ``keep`` drops findings the configuration ignores."""
    fixed = 0
    result = lint_parsed(source, rules)
    for _ in range(MAX_ROUNDS):
        findings = [d for d in result.diagnostics if keep(d)]
        text, applied = apply_fixes(source.text, findings, unsafe)
        if not applied:
            break
        reparsed = parse_source(text.encode(source.encoding), source.path)
        if isinstance(reparsed, Diagnostic):
            # a fix that breaks the syntax is a shapecheck bug: write nothing
            raise FixError(f"the fixed code does not parse ({reparsed.message})")
        source, fixed = reparsed, fixed + applied
        result = lint_parsed(source, rules)
    kept = FileResult(result.path, [d for d in result.diagnostics if keep(d)])
    return Fixed(source.text.encode(source.encoding), fixed, kept)


def apply_fixes(text: str, diagnostics: Sequence[Diagnostic], unsafe: bool) -> tuple[str, int]:
    """One round: every applicable fix whose edits overlap none already taken."""
    starts = _line_starts(text)
    taken: list[tuple[int, int, str]] = []
    applied = 0
    for diagnostic in diagnostics:
        fix = diagnostic.fix
        if fix is None or not applicable(fix, unsafe):
            continue
        spans = [(*_span(edit, starts, len(text)), edit.content) for edit in fix.edits]
        new = [span for span in spans if span not in taken]  # a shared `import math` once
        if any(_overlap(span, other) for span in new for other in taken):
            continue
        taken.extend(new)
        applied += 1
    for start, end, content in sorted(taken, reverse=True):
        text = text[:start] + content + text[end:]
    return text, applied


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for line in physical_lines(text):
        starts.append(starts[-1] + len(line))
    return starts


def _span(edit: TextEdit, starts: list[int], length: int) -> tuple[int, int]:
    def offset(line: int, column: int) -> int:
        if line > len(starts) - 1:
            return length
        return starts[line - 1] + column - 1

    return offset(edit.line, edit.column), offset(edit.end_line, edit.end_column)


def _overlap(a: tuple[int, int, str], b: tuple[int, int, str]) -> bool:
    """Two edits touch the same text (an insertion inside a replaced range counts)."""
    if a[0] == a[1] or b[0] == b[1]:
        point, (start, end) = (a[0], b[:2]) if a[0] == a[1] else (b[0], a[:2])
        return start < point < end or (start == end == point)
    return a[0] < b[1] and b[0] < a[1]


def write_atomically(path: str, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` in one step, keeping its permissions; a file
    its owner may not write is refused, not replaced."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as error:
        raise FixError(f"cannot write: {error.strerror}") from error
    if not mode & stat.S_IWUSR or not os.access(path, os.W_OK):
        raise FixError("cannot write: the file is read-only")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".shapecheck-", suffix=".tmp")
    except OSError as error:
        raise FixError(f"cannot write: {error.strerror}") from error
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as error:
        os.unlink(temporary)
        raise FixError(f"cannot write: {error.strerror}") from error
