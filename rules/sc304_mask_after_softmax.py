from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.observations import MaskAfterSoftmax
from shapecheck.rule import Rule, Violation


class MaskAfterSoftmaxRule(Rule):
    """
    ## What it does
    Finds attention weights masked after their softmax (`masked_fill`, `torch.where`) and then
    used to weight the values without being renormalised.

    ## Why is this bad?
    The softmax already gave the masked keys their share: zeroing them afterwards leaves rows
    that no longer sum to one, and the remaining keys' weights are still computed as if the
    masked ones were there. Mask the scores before the softmax (with a large negative value or
    `-inf`), or renormalise.

    ## Example
    ```python
    weights = scores.softmax(dim=-1)
    weights = weights.masked_fill(mask == 0, 0.0)
    out = weights @ v
    ```

    ## Use instead
    ```python
    scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    out = scores.softmax(dim=-1) @ v
    ```

    ## Runtime evidence
    No error: the output differs from the reference that masks before the softmax
    (fixtures/SC304_*.py). Traps that stay quiet: renormalising after the mask, dropout, head
    masks multiplied into the weights, masking the attention output.
    """

    code = "SC304"
    name = "mask-after-softmax"
    severity = "warning"
    summary = "attention weights masked after the softmax, without renormalising"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for masked in {o.mask: o for o in analysis.observations(MaskAfterSoftmax)}.values():
            yield Violation(
                masked.mask,
                "masks the attention weights after their softmax: the rows no longer sum to 1 "
                "and the masked keys already took their share; mask the scores before the "
                "softmax",
            )
