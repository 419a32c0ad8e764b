"""Applying fixes: text edits, and rounds until nothing more applies.

Fixes are applied as text edits on the decoded source, so every byte outside them stays as it
was (formatting, comments, line endings). One round applies every fix that does not overlap
one already taken; the result is parsed and linted again, and the next round applies what the
first could not, until a round changes nothing (at most :data:`MAX_ROUNDS`). Writing the
result is :mod:`shapecheck.writing`'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from shapecheck.diagnostics import Diagnostic, FileResult, TextEdit, applicable
from shapecheck.linter import lint_parsed
from shapecheck.record import record
from shapecheck.rule import Rule
from shapecheck.source import Source, parse_source, physical_lines

MAX_ROUNDS = 10


class FixError(Exception):
    """A fix that cannot be applied; the file is left as it was."""


@record
class Fixed:
    """A file after fixing: its new bytes (the original ones when nothing was fixed), what
    remains, and how many findings of each rule were fixed."""

    data: bytes
    remaining: FileResult
    rules_fixed: Counter[tuple[str, str]]
    """``(code, name)`` -> how many of that rule's findings were fixed, over every round."""

    @property
    def fixed(self) -> int:
        return self.rules_fixed.total()


def fix_source(
    source: Source,
    rules: Sequence[Rule],
    keep: Callable[[Diagnostic], bool],
    unsafe: bool,
    *,
    original: bytes,
) -> Fixed:
    """Fix ``source``, decoded from ``original``, in rounds; ``keep`` drops findings the
    configuration ignores."""
    rules_fixed: Counter[tuple[str, str]] = Counter()
    data = original
    result = lint_parsed(source, rules)
    for _ in range(MAX_ROUNDS):
        findings = [d for d in result.diagnostics if keep(d)]
        text, applied = apply_fixes(source.text, findings, unsafe)
        if not applied:
            break
        # The bytes outside the edits stay as they were only if the encoding turns the text
        # back into the bytes it came from (``unicode_escape`` and ``utf-7`` need not).
        if not rules_fixed and _encode(source.text, source.encoding) != original:
            raise FixError(f"cannot fix: {source.encoding} does not encode the file back as it was")
        data = _encode(text, source.encoding)
        reparsed = parse_source(data, source.path)
        if isinstance(reparsed, Diagnostic):
            # a fix that breaks the syntax is a shapecheck bug: write nothing
            raise FixError(f"the fixed code does not parse ({reparsed.message})")
        if reparsed.text != text:
            raise FixError(f"cannot fix: {source.encoding} does not keep the fixed code")
        source = reparsed
        rules_fixed.update((d.code, d.name) for d in applied)
        result = lint_parsed(source, rules)
    kept = FileResult(result.path, [d for d in result.diagnostics if keep(d)])
    return Fixed(data, kept, rules_fixed)


def _encode(text: str, encoding: str) -> bytes:
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as error:
        raise FixError(f"cannot fix: the fixed code cannot be encoded as {encoding}") from error


def apply_fixes(
    text: str, diagnostics: Sequence[Diagnostic], unsafe: bool
) -> tuple[str, list[Diagnostic]]:
    """One round: every applicable fix whose edits overlap none already taken; the text, and
    the findings whose fixes it applied."""
    starts = _line_starts(text)
    taken: list[tuple[int, int, str]] = []
    applied: list[Diagnostic] = []
    for diagnostic in diagnostics:
        fix = diagnostic.fix
        if fix is None or not applicable(fix, unsafe):
            continue
        spans = [(*_span(edit, starts, len(text)), edit.content) for edit in fix.written]
        new = [span for span in spans if span not in taken]  # a shared `import math` once
        if any(_overlap(span, other) for span in new for other in taken):
            continue
        taken.extend(new)
        applied.append(diagnostic)
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
