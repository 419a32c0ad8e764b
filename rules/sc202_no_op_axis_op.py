from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.observations import NoOpAxisOp
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class NoOpAxisOperation(Rule):
    """
    ## What it does
    Finds `permute` with the identity order and `transpose`/`swapaxes` of an axis with itself
    (`transpose(2, 2)`, or `transpose(-1, 3)` on a 4-D tensor).

    ## Why is this bad?
    The call does nothing, so the author meant something else — usually a real swap, as in
    Self-Attention-GAN#11 where `permute(0, 1, 2)` stood where `permute(0, 2, 1)` was
    needed. The next product then crashes on mismatched sizes, or, when sizes coincide,
    silently computes the wrong thing.

    ## Example
    ```python
    proj_query = self.query_conv(x).view(B, -1, W * H).permute(0, 1, 2)
    ```

    ## Use instead
    ```python
    proj_query = self.query_conv(x).view(B, -1, W * H).permute(0, 2, 1)
    ```

    ## Fix safety
    Safe, and it keeps results: `--fix` removes the no-op call, so the code computes exactly
    what it computed. It cannot know which axes were meant; if a real reordering was
    intended, write it.

    ## Runtime evidence
    The no-op itself runs; what follows raises, e.g. `RuntimeError: The size of tensor a (5)
    must match the size of tensor b (3) at non-singleton dimension 1` or `RuntimeError:
    running_mean should contain 5 elements not 12` (fixtures/SC202_*.py).
    """

    code = "SC202"
    name = "no-op-axis-op"
    severity = "warning"
    summary = "`permute`/`transpose` that leaves every axis where it was"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for op in analysis.observations(NoOpAxisOp):
            name = op.call.func.attr if isinstance(op.call.func, ast.Attribute) else "op"
            axes = ", ".join(str(axis) for axis in op.axes)
            what = "keeps every axis in place" if name == "permute" else "swaps an axis with itself"
            yield Violation(
                op.anchor,
                f"`{name}({axes})` {what}: it does nothing; remove it, or name the axes meant",
                fix=_removed(name, op.call, op.receiver) if op.receiver else None,
            )


def _removed(name: str, call: ast.Call, receiver: ast.expr) -> FixOffer:
    """``x.permute(0, 1, 2)`` -> ``x``."""
    return FixOffer(
        f"remove the `{name}`",
        safe=True,
        write=partial(_receiver_alone, call, receiver),
        rewritten=(call,),
        kept=(receiver,),
        keeps_results=True,
    )


def _receiver_alone(call: ast.Call, receiver: ast.expr, tree: ConcreteTree) -> Replacements | None:
    from shapecheck.concrete import atom  # libcst loads only when a fix is written

    written, tensor = tree.node(call), tree.node(receiver)
    if written is None or tensor is None:
        return None
    return ((written, atom(tensor)),)
