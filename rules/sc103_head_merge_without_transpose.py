from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.dims import format_shape
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.layout import faithful_order
from shapecheck.analysis.observations import ChannelsMovingView, ReinterpretingView
from shapecheck.fixes import FixOffer, Replacements, reorder
from shapecheck.rule import Rule, Violation, assuming

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class HeadMergeWithoutTranspose(Rule):
    """
    ## What it does
    Finds a `view`/`reshape` that merges `[B, H, L, D]` into `(B, L, H*D)` (or any merge that
    moves a named axis onto other data) without first transposing the heads next to the
    features.

    ## Why is this bad?
    The merged axis must hold, for one position, the features of every head. Merging
    `[B, H, L, D]` directly reads memory in order — head 0's positions first — so "position
    1" receives the second position of head 0 and so on. The shape is right, the numbers are
    not; it is silent because `attn @ v` is contiguous and the view succeeds.

    ## Example
    ```python
    out = attn @ v                       # [B, H, L, D]
    out = out.contiguous().view(B, L, H * D)
    ```

    ## Use instead
    ```python
    out = out.transpose(1, 2).contiguous().view(B, L, H * D)   # or .reshape(B, L, H * D)
    ```

    ## Fix safety
    Unsafe: the outputs change (that is the point), so it applies only with `--unsafe-fixes`.
    The heads are moved next to the features before the merge: `out.view(B, L, E)` of
    `[B, H, L, D]` becomes `out.transpose(1, 2).contiguous().view(B, L, E)` (`reshape` needs
    no `.contiguous()`). Only where every size is known and exactly one order of the axes
    makes the merge faithful; a merge from `[B*H, L, D]` is left to the author.

    ## Runtime evidence
    No error: the output differs from the reference (`shapecheck.reference`, same weights;
    fixtures/SC103_*.py). Real cases: hyunwoongko/transformer PR#4, jsbaan/transformer-from-
    scratch PR#6, attention-is-all-you-need-pytorch#7.
    """

    code = "SC103"
    name = "head-merge-without-transpose"
    severity = "error"
    summary = "`view`/`reshape` merges heads back into features without a transpose"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        images = {seen.call for seen in analysis.observations(ChannelsMovingView)}
        for view in analysis.observations(ReinterpretingView):
            if view.splits or view.call in images:
                continue  # a split (SC102), or an image's channels (SC104)
            yield Violation(
                view.anchor,
                f"merges {format_shape(view.old_shape)} into {format_shape(view.new_shape)} "
                f"without a transpose: axis {view.moved.dim} is re-read across the heads, so "
                "positions and heads mix silently; `.transpose(...)` the heads next to the "
                "features first" + assuming(view.guess),
                fix=_reorder_then_merge(analysis, view),
            )


def _reorder_then_merge(analysis: ModuleAnalysis, view: ReinterpretingView) -> FixOffer | None:
    """``out.view(B, L, E)`` of ``[B, H, L, D]`` -> ``out.transpose(1, 2).contiguous().view(...)``.

    The axes are first put in the order the merge needs (the one order closest to as
    written); a ``.contiguous()`` already in front of the view gets the reorder before it.
    """
    method = view.call.func
    if not isinstance(method, ast.Attribute) or method.attr not in ("view", "reshape"):
        return None
    receiver = analysis.fact(method.value)
    order = faithful_order(view.old_shape, view.new_shape, reorder_old=True)
    if not isinstance(receiver, TensorFact) or receiver.shape != view.old_shape or not order:
        return None  # ``torch.reshape(x, ...)``, or no single right order
    tensor, copy = method.value, ".contiguous()" if method.attr == "view" else ""
    if (
        isinstance(tensor, ast.Call)
        and isinstance(tensor.func, ast.Attribute)
        and tensor.func.attr == "contiguous"
        and not tensor.args
        and not tensor.keywords
    ):
        tensor, copy = tensor.func.value, ".contiguous()"
    return FixOffer(
        "move the heads next to the features before merging them",
        safe=False,
        write=partial(_write_merge, method.value, tensor, f"{reorder(order)}{copy}"),
        rewritten=(method.value,),
        kept=(tensor,),
    )


def _write_merge(
    replaced: ast.expr, tensor: ast.expr, reordered: str, tree: ConcreteTree
) -> Replacements | None:
    from shapecheck.concrete import atom  # libcst loads only when a fix is written

    target, written = tree.node(replaced), tree.node(tensor)
    if target is None or written is None:
        return None
    return ((target, f"{atom(written)}{reordered}"),)
