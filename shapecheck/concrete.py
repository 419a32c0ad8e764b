"""libcst's concrete tree of one statement, where fixes are written (see
:mod:`shapecheck.fixes`), and the code helpers fix writers write with.

Only a fix whose edits are asked for gets here: the analysis and the decision to offer a fix
never need libcst, so a run that prints no edits never loads it.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from shapecheck.diagnostics import TextEdit
from shapecheck.fixes import Replacements
from shapecheck.source import Lines


class ConcreteTree:
    """One statement as libcst parses it (libcst is slow: a fix needs no more), and the way
    from an ``ast`` node there to the same code in the concrete tree."""

    def __init__(self, module: cst.Module, lines: Lines, first_line: int, column: int) -> None:
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        self._first_line, self._column = first_line, column
        self._positions: Mapping[cst.CSTNode, CodeRange] = wrapper.resolve(PositionProvider)
        self._lines = lines
        self._expressions = {
            self._span(where): node
            for node, where in self._positions.items()
            if isinstance(node, cst.BaseExpression)
        }

    @classmethod
    def parse(
        cls, lines: Lines, first_line: int, column: int, last_line: int
    ) -> ConcreteTree | None:
        """The statement that starts at ``column`` of ``first_line`` (an indented one is read
        from there) and ends on ``last_line``; ``None`` for code libcst cannot read (it then
        gets no fix)."""
        text = "".join([lines.lines[first_line - 1][column:], *lines.lines[first_line:last_line]])
        try:
            return cls(cst.parse_module(text), lines, first_line, column)
        except (cst.ParserSyntaxError, RecursionError, MemoryError):
            return None

    def node(self, node: ast.AST) -> cst.BaseExpression | None:
        """The expression covering exactly ``node``'s code (parentheses aside), if any: none
        outside the statement."""
        return self._expressions.get(self._lines.span(node))

    def edits(self, replacements: Replacements) -> list[TextEdit]:
        """The replacements as text edits in the whole file."""
        edits = []
        for node, content in replacements:
            line, column, end_line, end_column = self._span(self._positions[node])
            edits.append(TextEdit(line, column + 1, end_line, end_column + 1, content))
        return edits

    def _span(self, where: CodeRange) -> tuple[int, int, int, int]:
        """``where`` in the whole file: the first line's columns start at the statement's."""
        start, end = where.start, where.end
        return (
            start.line + self._first_line - 1,
            start.column + (self._column if start.line == 1 else 0),
            end.line + self._first_line - 1,
            end.column + (self._column if end.line == 1 else 0),
        )


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


# Expressions that bind less tightly than ``*``/``/``: as an operand they need parentheses.
_LOOSE_OPERATORS = (
    cst.Add,
    cst.Subtract,
    cst.LeftShift,
    cst.RightShift,
    cst.BitAnd,
    cst.BitOr,
    cst.BitXor,
)


def operand(node: cst.BaseExpression) -> str:
    """``node``'s code, parenthesised when it would not stay whole as an operand of ``/``."""
    text = code(node)
    if node.lpar:
        return text
    loose = isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _LOOSE_OPERATORS)
    if loose or isinstance(
        node,
        cst.Comparison | cst.BooleanOperation | cst.IfExp | cst.Lambda | cst.NamedExpr,
    ):
        return f"({text})"
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return f"({text})"
    return text


def bare(node: cst.CSTNode) -> str:
    """``node``'s code without its own parentheses: the text a replacement of it covers."""
    if isinstance(node, cst.BaseExpression) and (node.lpar or node.rpar):
        return code(node.with_changes(lpar=[], rpar=[]))
    return code(node)


def atom(node: cst.BaseExpression) -> str:
    """``node``'s code, parenthesised unless it stays whole before ``.attr`` or ``(...)``."""
    if node.lpar or isinstance(node, cst.Name | cst.Attribute | cst.Call | cst.Subscript):
        return code(node)
    return f"({code(node)})"
