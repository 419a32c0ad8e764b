from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.observations import SizeMismatch
from shapecheck.rule import Rule, Violation


class MatmulShapeMismatch(Rule):
    """
    ## What it does
    Finds matrix products whose inner sizes provably differ, and `nn.Linear(in, out)` layers
    applied to tensors whose last axis provably is not `in` — for example a projection sized
    for `d_model` applied to the `3 * d_model` output of a fused qkv layer.

    ## Why is this bad?
    PyTorch raises at the first call. "Provably" means the sizes are different literals, or
    the same named size times different numbers; two differently named sizes are not
    reported, since they may be equal at run time.

    ## Example
    ```python
    self.qkv = nn.Linear(d_model, 3 * d_model)
    self.out = nn.Linear(d_model, d_model)
    ...
    return self.out(self.qkv(x))
    ```

    ## Use instead
    ```python
    q, k, v = self.qkv(x).chunk(3, dim=-1)
    ...
    return self.out(attended)
    ```

    ## Runtime evidence
    `RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x36 and 12x12)`, or for
    batched products `RuntimeError: Expected size for first two dimensions of batch2 tensor to
    be: [6, 4] but got: [6, 8].` (fixtures/SC501_*.py).
    """

    code = "SC501"
    name = "matmul-shape-mismatch"
    severity = "error"
    summary = "matrix product or nn.Linear whose inner sizes provably differ"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for mismatch in analysis.observations(SizeMismatch):
            yield Violation(
                mismatch.node,
                f"{mismatch.what}: {mismatch.expected} and {mismatch.actual} can never be "
                "equal, so PyTorch raises here",
            )
