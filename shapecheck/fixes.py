"""Fixes as rules describe them: which nodes to replace with which new code.

A rule attaches a :class:`Fix` to a :class:`~shapecheck.rule.Violation`; the linter turns its
replacements into text edits at the nodes' positions (``shapecheck.diagnostics.TextEdit``) and
``shapecheck.fixer`` applies them. A replacement covers a node's own text, not the parentheses
around it: those stay, so ``(q @ k)`` scaled becomes ``(q @ k / s)``.

A fix is *safe* when the fixed code computes what the code was meant to compute without
changing any result it already got right (a crash mended); it is *unsafe* when it changes
numbers on purpose (a silent bug mended), so users opt in.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst


@dataclass(frozen=True)
class Fix:
    description: str
    replacements: tuple[tuple[cst.CSTNode, str], ...]
    """``(node in the module, new code)`` pairs."""
    safe: bool
    imports: tuple[str, ...] = ()
    """Modules the new code names (``math``): imported at the top when the file lacks them."""
    keeps_results: bool = False
    """The fixed code computes exactly what the code computed (SC202 drops a no-op, SC601 a
    host tensor): proven by identical results, not by matching the reference."""


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


def is_plain_reference(node: cst.BaseExpression) -> bool:
    """A name or attribute chain (``scores``, ``self.scale``): safe to repeat in new code."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


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


def reorder(order: tuple[int, ...]) -> str:
    """The call that puts axis ``order[i]`` at position ``i``: one transpose when it can."""
    moved = [axis for axis, source in enumerate(order) if axis != source]
    if len(moved) == 2:
        return f".transpose({moved[0]}, {moved[1]})"
    return f".permute({', '.join(map(str, order))})"


def inverse(order: tuple[int, ...]) -> tuple[int, ...]:
    result = [0] * len(order)
    for position, axis in enumerate(order):
        result[axis] = position
    return tuple(result)
