from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.observations import AttentionScores
from shapecheck.rule import Rule, Violation


class MissingAttentionScale(Rule):
    """
    ## What it does
    Finds a softmax over dot-product attention scores (`q @ k.transpose(-2, -1)`, `matmul`,
    `bmm`, `einsum`) where nothing scales the queries, the keys or the scores — no
    `/ math.sqrt(d_k)`, `* d_k ** -0.5`, `* self.scale`, learned temperature or `alpha=`.

    ## Why is this bad?
    The dot product of two `d_k`-dimensional vectors has a variance that grows with `d_k`.
    Unscaled, the softmax saturates: almost all weight on one key, vanishing gradients for the
    rest. Training still runs, so the bug survives; the outputs differ from every reference
    implementation (`F.scaled_dot_product_attention` scales by `1/sqrt(d_k)` by default).

    Scaling after the softmax does not count. Models that drop the scale on purpose (T5 folds
    it into the initialisation) should say so with `# shapecheck: ignore[SC301]`.

    ## Example
    ```python
    scores = q @ k.transpose(-2, -1)
    weights = scores.softmax(dim=-1)
    ```

    ## Use instead
    ```python
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = scores.softmax(dim=-1)
    # or: F.scaled_dot_product_attention(q, k, v)
    ```

    ## Runtime evidence
    No error: the unscaled attention's output differs from the reference
    (`shapecheck.reference`, and `F.scaled_dot_product_attention`) under the same weights, by
    0.12 to 1.3 at the fixtures' small sizes (fixtures/SC301_*.py, `python -m
    shapecheck.confirm`). Real case: mlc-llm PR#3426.
    """

    code = "SC301"
    name = "missing-attention-scale"
    severity = "warning"
    summary = "softmax over q·kᵀ scores with no 1/sqrt(d_k) scaling"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        reported: set[cst.CSTNode] = set()
        for scores in analysis.observations(AttentionScores):
            product = scores.product
            if product.left.is_parameter or product.right.is_parameter:
                continue
            if scores.scores.scaling != () or product.node in reported:
                continue
            reported.add(product.node)
            yield Violation(
                product.node,
                "softmax over q·kᵀ scores that nothing scales: divide by `math.sqrt(d_k)` "
                "(or multiply q by `d_k ** -0.5`) before the softmax",
            )
