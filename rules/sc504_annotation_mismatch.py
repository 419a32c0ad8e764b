from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.annotations import format_value
from shapecheck.analysis.observations import AnnotationMismatch
from shapecheck.rule import Rule, Violation


class AnnotationMismatchRule(Rule):
    """
    ## What it does
    Compares the shape the analysis infers for a value with its jaxtyping annotation — on
    returns, annotated assignments and arguments passed to annotated functions of the same
    file — and reports contradictions: a different number of axes, a different literal size,
    or a named axis found at another position (`"batch heads seq d_k"` for a value whose
    axes are batch, seq, heads, d_k).

    It reads jaxtyping's whole dimension grammar: after a `*batch` or `...` it checks the
    last axes (`"*batch t s"` for a value whose last axes are s, t), and that one `*batch`
    stands for the same axes throughout a call; `"h*d"`, `"d_model//h"` and `"2*n"` are
    sizes computed from the names bound before them; `#n` and `#3` accept a 1; `channels=3`
    is a fixed size. Where a size cannot be told (`"n-1"`, a `#n` that may be 1, the axes
    behind a `*batch`), it says nothing.

    ## Why is this bad?
    jaxtyping checks annotations only when the code runs, with checking turned on, on the
    inputs a test happens to use. A contradiction visible in the source is a bug in the code
    or in its documentation.

    ## Example
    ```python
    def split(x: Float[Tensor, "b l e"], heads: int) -> Float[Tensor, "b h l d"]:
        b, l, e = x.shape
        return x.view(b, l, heads, e // heads)
    ```

    ## Use instead
    ```python
        return x.view(b, l, heads, e // heads).transpose(1, 2)
    ```

    ## Runtime evidence
    With `@jaxtyped(typechecker=beartype)` the call raises `TypeCheckError: Type-check error
    whilst checking the return value of ...` (or `... the parameters of ...`); jaxtyping
    never checks annotated local variables, where PyTorch fails later instead, e.g.
    `RuntimeError: The size of tensor a (6) must match the size of tensor b (3)`
    (fixtures/SC504_*.py).
    """

    code = "SC504"
    name = "annotation-mismatch"
    severity = "error"
    summary = "inferred shape contradicts a jaxtyping annotation"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for mismatch in analysis.observations(AnnotationMismatch):
            yield Violation(
                mismatch.node,
                f"inferred shape {format_value(mismatch.shape)} contradicts the annotation "
                f'"{mismatch.annotation}": {mismatch.reason}',
            )
