from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.dims import format_shape
from shapecheck.analysis.observations import ReinterpretingView
from shapecheck.rule import Rule, Violation


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
        for view in analysis.observations(ReinterpretingView):
            if view.moved.moves_forward:
                continue  # a split: SC102
            yield Violation(
                view.anchor,
                f"merges {format_shape(view.old_shape)} into {format_shape(view.new_shape)} "
                f"without a transpose: axis {view.moved.dim} is re-read across the heads, so "
                "positions and heads mix silently; `.transpose(...)` the heads next to the "
                "features first",
            )
