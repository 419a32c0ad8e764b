"""Fixes as rules describe them: what a fix does and how safe it is, then the new code.

The analysis reads Python's ``ast``; fixes are written on libcst's concrete tree, which keeps
every parenthesis, comma and space. A rule decides on the ``ast`` side whether there is one
right rewrite, what it does and whether it is safe, and attaches a :class:`FixOffer` to its
:class:`~shapecheck.rule.Violation`: that is all a report that prints no edits needs (``[*]``,
the fixable counts), so a check of a file with fixes never loads libcst. Where the edits are
asked for (``--fix``, ``--diff``, JSON, SARIF, the editor server), the offer's ``write`` is
given the :class:`~shapecheck.concrete.ConcreteTree` of the simple statement that holds the
finding (the top-level statement where no simple statement does: a compound statement's
header, a decorator; libcst is loaded, and that statement parsed, only then) and returns the
replacements. The tree turns them into text edits at the nodes' positions
(``shapecheck.diagnostics.TextEdit``) and ``shapecheck.fixer`` applies them. A replacement
covers a node's own text, not the parentheses around it: those stay, so ``(q @ k)`` scaled
becomes ``(q @ k / s)``.

A fix is *safe* when the fixed code computes what the code was meant to compute without
changing any result it already got right (a crash mended); it is *unsafe* when it changes
numbers on purpose (a silent bug mended), so users opt in. A safe fix that would delete a
comment written inside the code it rewrites is unsafe, as ruff has it: the comment may be the
only record of why. That is decided on the ``ast`` side too (see ``rewritten``), so a report
and ``--fix`` always agree.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.record import record

if TYPE_CHECKING:
    import libcst as cst

    from shapecheck.analysis.facts import Tiling
    from shapecheck.concrete import ConcreteTree


Replacements = tuple[tuple["cst.CSTNode", str], ...]
"""``(node in the concrete tree, new code)`` pairs."""

FixWriter = Callable[["ConcreteTree"], "Replacements | None"]
"""How a fix is written once the concrete tree is there (``None``: the code is not where the
offer expected it, which the suite checks never happens on the fixtures)."""


@record
class FixOffer:
    description: str
    safe: bool
    write: FixWriter
    rewritten: tuple[ast.AST, ...] = ()
    """The code the new code replaces: a comment inside it (outside ``kept``) would be lost,
    which makes a safe fix unsafe."""
    kept: tuple[ast.AST, ...] = ()
    """Code inside ``rewritten`` that the new code writes again as it was (``x`` of
    ``x.permute(0, 1, 2)`` -> ``x``): its comments stay."""
    imports: tuple[str, ...] = ()
    """Modules the new code names (``math``): imported at the top when the file lacks them."""
    keeps_results: bool = False
    """The fixed code computes exactly what the code computed (SC202 drops a no-op, SC601 a
    host tensor): proven by identical results, not by matching the reference."""


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


def interleaving(tiling: Tiling, description: str) -> FixOffer | None:
    """``x.repeat(1, n, 1, 1)`` -> ``x.repeat_interleave(n, dim=1)``: each entry repeated in
    place instead of whole copies, where the tiling is a ``repeat`` with one count per axis
    written out (a ``tile``, or counts spliced in, is left to the author)."""
    call = tiling.by
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "repeat"
        and len(call.args) == tiling.rank
        and not call.keywords
        and not any(isinstance(count, ast.Starred) for count in call.args)
    ):
        return None
    return FixOffer(description, safe=False, write=partial(_interleaved, tiling), rewritten=(call,))


def _interleaved(tiling: Tiling, tree: ConcreteTree) -> Replacements | None:
    from shapecheck.concrete import atom, code  # libcst loads only when a fix is written

    call = tiling.by
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
    written, receiver = tree.node(call), tree.node(call.func.value)
    copies = tree.node(call.args[tiling.axis])
    if written is None or receiver is None or copies is None:
        return None
    return ((written, f"{atom(receiver)}.repeat_interleave({code(copies)}, dim={tiling.axis})"),)
