from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.facts import Product
from shapecheck.analysis.observations import LinearWeightProduct
from shapecheck.rule import Rule, Violation


class LinearWeightOrientation(Rule):
    """
    ## What it does
    Finds `x @ lin.weight` / `torch.matmul(x, self.proj.weight)` where `lin` is an
    `nn.Linear` that is square, or `x` is known to be the layer's own input (its last axis is
    the layer's `in_features`). A non-square weight times a tensor of unknown width may be a
    deliberate reverse projection (tied weights) and stays quiet.

    ## Why is this bad?
    `nn.Linear(in, out)` stores its weight as `[out, in]` and computes `x @ weight.T + bias`.
    Multiplying by the weight itself uses it as `[in, out]`: a crash when `in != out`, and a
    silently transposed projection when the layer is square.

    ## Example
    ```python
    queries = x @ self.W_query.weight
    ```

    ## Use instead
    ```python
    queries = self.W_query(x)          # or F.linear(x, self.W_query.weight), x @ W.T
    ```

    ## Runtime evidence
    `RuntimeError: mat1 and mat2 shapes cannot be multiplied (5x12 and 8x12)` when not
    square; when square it runs and differs from the reference (`F.linear`, the layer's own
    call) by 0.3 at the fixtures' sizes (fixtures/SC503_*.py). Real case:
    LLMs-from-scratch#857. Traps that stay quiet: a raw `nn.Parameter(d_in, d_out)`,
    `F.linear(x, W)`, tied heads `x @ emb.weight.T`.
    """

    code = "SC503"
    name = "linear-weight-orientation"
    severity = "error"
    summary = "`x @ linear.weight`: nn.Linear's weight is [out, in]"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for product in analysis.observations(LinearWeightProduct):
            if not _uses_weight_as_input_projection(product.product):
                continue
            weight = analysis.source(product.product.right_node).strip()
            yield Violation(
                product.product.right_node,
                f"`{weight}` is an nn.Linear weight, stored as [out, in]; multiplying by it "
                f"uses it as [in, out]: call the layer, or use `{weight}.T`",
            )


def _uses_weight_as_input_projection(product: Product) -> bool:
    """A square layer's weight (silently transposed), or the layer's own input times it.

    A non-square weight times a tensor of unknown width may be a deliberate reverse
    projection (tied weights, `h @ proj.weight` with `h` as wide as the layer's output).
    """
    weight = product.right.shape
    if weight is None or len(weight) != 2:
        return False
    out_features, in_features = weight
    if out_features == in_features:
        return True
    return product.left.last_dim == in_features
