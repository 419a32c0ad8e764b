from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.dims import format_shape
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.layout import faithful_order, plan_view
from shapecheck.analysis.observations import (
    AttentionScores,
    ChannelsMovingView,
    ReinterpretingView,
)
from shapecheck.fixes import FixOffer, Replacements, inverse, reorder
from shapecheck.rule import Rule, Violation, assuming

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class HeadSplitWithoutTranspose(Rule):
    """
    ## What it does
    Finds a `view`/`reshape` that splits the features of `[B, L, H*D]` straight into a
    heads-first layout — `(B, H, L, D)`, `(B*H, L, D)`, `(H, B, L, D)` — or otherwise moves a
    named axis onto other data, without the transpose that would move the data with it.

    ## Why is this bad?
    `view` and `reshape` re-read memory in order; they never move data between axes. Viewing
    `[B, L, H*D]` as `(B, H, L, D)` makes "head 0" the first `L/H` positions' features and
    "position 1" a slice of one position's features: every head attends over scrambled
    tokens. Shapes line up, so nothing crashes; the model just learns worse.

    ## Example
    ```python
    q = self.wq(x).view(B, self.num_heads, L, self.head_dim)
    ```

    ## Use instead
    ```python
    q = self.wq(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
    ```

    ## Fix safety
    Unsafe: the outputs change (that is the point), so it applies only with `--unsafe-fixes`.
    The view lists the sizes in the order the data lies in, then a `.transpose(...)` (or
    `.permute(...)`) puts them where the code wanted them: `view(B, H, L, D)` becomes
    `view(B, L, H, D).transpose(1, 2)`. Only where every size is known and exactly one such
    order is closest to the one written; a fold into `(B*H, L, D)` is left to the author.

    ## Runtime evidence
    No error: the output has the right shape and differs from the reference
    (`shapecheck.reference.MultiHeadAttention` with the same weights; fixtures/SC102_*.py).
    Real cases: hyunwoongko/transformer PR#4, Informer2020#59, FuxiCTR#30, QAnet-pytorch#2.
    Traps that stay quiet: time-first `(L, B*H, D)` then `transpose(0, 1)`, flash-attn's
    `(B, L, H, D)`, head-major fused weights.
    """

    code = "SC102"
    name = "head-split-without-transpose"
    severity = "error"
    summary = "`view`/`reshape` splits features into heads-first axes without a transpose"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        keys = _keys_viewed_as_transposed(analysis)
        images = {seen.call for seen in analysis.observations(ChannelsMovingView)}
        for view in analysis.observations(ReinterpretingView):
            if not view.splits or view.call in keys or view.call in images:
                continue  # a merge (SC103), keys SC201 reports, or an image's channels (SC104)
            yield Violation(
                view.anchor,
                f"reshapes {format_shape(view.old_shape)} into {format_shape(view.new_shape)} "
                f"without a transpose: axis {view.moved.dim} is re-read from memory laid out "
                f"differently, so {_consequence(view)}" + assuming(view.guess),
                fix=_split_then_reorder(analysis, view),
            )


def _consequence(view: ReinterpretingView) -> str:
    """What goes wrong, and the remedy: in terms of heads only where the code names them
    (windows of an image grid or halves of router logits are split the same way)."""
    if view.moves_heads:
        return (
            "heads mix positions and features silently; view with the heads after the "
            "sequence axis, then `.transpose(...)` them forward"
        )
    return (
        "its entries mix with those of other axes silently; view the sizes in the order the "
        "data lies in, then `.transpose(...)` them where they belong"
    )


def _keys_viewed_as_transposed(analysis: ModuleAnalysis) -> set[ast.AST]:
    """Attention keys made by a view that swaps the last two sizes: SC201 reports those."""
    found: set[ast.AST] = set()
    for scores in analysis.observations(AttentionScores):
        keys = scores.product.right
        if keys.axis_op is not None and keys.axis_op.name == "view":
            found.add(keys.axis_op.node)
    return found


def _split_then_reorder(analysis: ModuleAnalysis, view: ReinterpretingView) -> FixOffer | None:
    """``x.view(B, H, L, D)`` -> ``x.view(B, L, H, D).transpose(1, 2)``, when shapes say so.

    The sizes are split in the order the data lies in, then moved where the code wanted
    them; only when exactly one such order is closest to what was written.
    """
    method = view.call.func
    receiver = analysis.fact(method.value) if isinstance(method, ast.Attribute) else None
    if (
        not isinstance(method, ast.Attribute)
        or not isinstance(receiver, TensorFact)
        or receiver.shape != view.old_shape
        or len(view.call.args) != len(view.new_shape)
        or view.call.keywords
        or any(isinstance(argument, ast.Starred) for argument in view.call.args)
    ):
        return None
    order = faithful_order(view.old_shape, view.new_shape, reorder_old=False)
    if order is None:
        return None
    split = tuple(view.new_shape[axis] for axis in order)
    if method.attr == "view" and (
        receiver.layout is None
        or receiver.layout.order is None
        or plan_view(view.old_shape, receiver.layout, split).merged
    ):
        return None  # the split itself would need a copy
    return FixOffer(
        "split the features in memory order, then move the heads forward",
        safe=False,
        write=partial(_write_split, view.call, order),
        rewritten=(view.call,),
    )


def _write_split(call: ast.Call, order: tuple[int, ...], tree: ConcreteTree) -> Replacements | None:
    import libcst as cst  # libcst loads only when a fix is written

    from shapecheck.concrete import code

    written = tree.node(call)
    if not isinstance(written, cst.Call) or not isinstance(written.func, cst.Attribute):
        return None
    method = written.func
    sizes = ", ".join(code(written.args[axis].value) for axis in order)
    content = f"{code(method.value)}.{method.attr.value}({sizes}){reorder(inverse(order))}"
    return ((written, content),)
