from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.observations import FillValue
from shapecheck.rule import Rule, Violation


class MaskFillTooWeak(Rule):
    """
    ## What it does
    Finds attention scores masked before the softmax with a value too small in magnitude to
    mask anything (below 1e4: `-1e-12`, `0`, `-1`).

    ## Why is this bad?
    After the softmax a masked key keeps a weight of about `exp(fill - max score)`: with a fill
    of `-1e-12` or `0` the "masked" keys are attended to as much as the others — padding and
    future tokens leak in.

    ## Example
    ```python
    scores = scores.masked_fill(mask == 0, -1e-12)
    ```

    ## Use instead
    ```python
    scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    ```

    ## Runtime evidence
    No error: the output differs from the reference with the mask applied
    (fixtures/SC402_*.py). Real cases: hyunwoongko/transformer 9c5515d, transformers#17121,
    #14859.
    """

    code = "SC402"
    name = "mask-fill-too-weak"
    severity = "warning"
    summary = "attention scores masked with a fill too small to mask (|fill| < 1e4)"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for fill in analysis.observations(FillValue):
            if not fill.overflow:
                yield Violation(
                    fill.node,
                    f"masking scores with {fill.value:g} leaves masked keys real weight after "
                    "the softmax; use `torch.finfo(scores.dtype).min` or `float('-inf')`",
                )
