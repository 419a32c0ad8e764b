"""``shapecheck --show-shapes FILE.py[:SELECTOR]``: functions annotated with the shapes the
analysis infers, the way a person writes them in the margin, or (``--format json``) the same
notes as objects.

    12 |         q = self.wq(x).view(B, -1, H, D).transpose(1, 2)  # q: [B, H, L, D]

A selector names a function (``Class.method``), a class or function and everything defined in
it (``Class``), or the functions overlapping a line or range of lines (``25``, ``10-40``).
What is said of each value is :mod:`shapecheck.hover`'s, as in the editor.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

from shapecheck.analysis import analyse
from shapecheck.analysis.facts import FunctionNode
from shapecheck.diagnostics import Diagnostic
from shapecheck.hover import FileShapes, Note
from shapecheck.record import record
from shapecheck.source import Source, physical_lines

_NOTE_COLUMN = 60
_LINES = re.compile(r"([0-9]+)(?:-([0-9]+))?")


@record
class Shown:
    """What ``--show-shapes`` says of one file: each selected function with its notes, and an
    SC000 for each selected function the analysis could not follow."""

    path: str
    lines: list[str]
    functions: list[tuple[str, FunctionNode, list[Note]]]
    """``(qualified name, def, notes)``, in the order of the code."""
    problems: list[Diagnostic]

    def listing(self) -> str:
        return "\n\n".join(self._listing(*function) for function in self.functions)

    def records(self) -> list[dict[str, object]]:
        """One object per note: where it is, then what :class:`Description` says (the keys
        the README documents, every one on every object)."""
        return [
            {
                "path": self.path,
                "function": name,
                "line": note.line,
                "column": note.column + 1,
                **note.description.as_json(),
            }
            for name, _, notes in self.functions
            for note in notes
        ]

    def _listing(self, name: str, node: FunctionNode, notes: list[Note]) -> str:
        by_line: dict[int, list[str]] = defaultdict(list)
        for note in notes:
            by_line[note.line].append(note.description.text)
        out = [f"{self.path}:{node.lineno} {name}"]
        for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            text = self.lines[number - 1].rstrip() if number <= len(self.lines) else ""
            row = f"{number:>5} | {text}"
            if by_line.get(number):
                row = f"{row:<{_NOTE_COLUMN}}  # {'; '.join(by_line[number])}"
            out.append(row)
        return "\n".join(out)


def show_shapes(source: Source, selector: str | None) -> Shown:
    """The functions ``selector`` selects (every function if ``None``) with their notes, the
    file analysed where it lies, seeing the project's other files as a check of it does.

    Raises ``LookupError`` naming the functions there are when ``selector`` selects none,
    or saying what a line range must be.
    """
    chosen = _chooser(source.path, selector)
    shapes = FileShapes(analyse(source.module, source.text, path=source.location))
    analysed = [
        (function, function.node)
        for function in shapes.analysis.functions
        if isinstance(function.node, FunctionNode)
    ]
    too_deep = [
        (part, part.node)
        for part in shapes.analysis.too_deep
        if isinstance(part.node, FunctionNode)
    ]
    listed = [
        (function.name, node, shapes.notes(function))
        for function, node in analysed
        if chosen(function.name, node)
    ]
    problems = [part.diagnostic(source.path) for part, node in too_deep if chosen(part.name, node)]
    if not listed and not problems:
        names = sorted([*(f.name for f, _ in analysed), *(part.name for part, _ in too_deep)])
        known = ", ".join(names) if names else "none (the file does not use torch?)"
        wanted = (
            f"overlapping lines {selector}"
            if _LINES.fullmatch(selector or "")
            else (repr(selector))
        )
        raise LookupError(f"{source.path}: no function {wanted}; functions: {known}")
    lines = [line.rstrip("\r\n") for line in physical_lines(source.text)]
    return Shown(source.path, lines, listed, problems)


Chooser = Callable[[str, FunctionNode], bool]
"""Is a function (by qualified name and ``def``) selected?"""


def _chooser(path: str, selector: str | None) -> Chooser:
    if selector is None:
        return lambda name, node: True
    lines = _LINES.fullmatch(selector)
    if lines is None:  # a function, or a class or function with all that is defined in it
        return lambda name, node: name == selector or name.startswith(selector + ".")
    first, last = int(lines.group(1)), int(lines.group(2) or lines.group(1))
    if not 1 <= first <= last:
        raise LookupError(f"{path}: lines {selector!r}: give FIRST-LAST, 1 <= FIRST <= LAST")
    return lambda name, node: _first_line(node) <= last and first <= (node.end_lineno or 0)


def _first_line(node: FunctionNode) -> int:
    """Where a function starts, its decorators included."""
    return min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
