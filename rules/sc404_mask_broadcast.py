from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.dims import format_shape
from shapecheck.analysis.observations import AttentionScores, MaskBroadcast
from shapecheck.rule import Rule, Violation, assuming


class MaskBroadcastRule(Rule):
    """
    ## What it does
    Finds masks applied to attention scores `[B, H, Lq, Lk]` (a matrix product a softmax
    takes; by `masked_fill`, `torch.where`, addition, or `attn_mask=` of
    `F.scaled_dot_product_attention`) whose axes line up with the
    wrong axes when broadcast: a padding mask `[B, L]` turned into `[B, 1, L, 1]` (it masks
    queries, not keys), `[B, 1, Lk]` whose batch axis falls under the heads, or a mask built
    from the queries' sequence on cross-attention scores.

    ## Why is this bad?
    Broadcasting aligns axes from the right. A key-padding mask must end with the keys' axis;
    anywhere else it masks the wrong positions, or raises when the sizes differ.

    ## Example
    ```python
    mask = padding_mask.unsqueeze(1).unsqueeze(-1)      # [B, 1, L, 1]
    scores = scores.masked_fill(mask == 0, float("-inf"))
    ```

    ## Use instead
    ```python
    mask = padding_mask[:, None, None, :]               # [B, 1, 1, L]
    ```

    ## Runtime evidence
    `RuntimeError: The size of tensor a (7) must match the size of tensor b (5) at
    non-singleton dimension 3` when the sizes differ; otherwise the output differs from the
    reference (fixtures/SC404_*.py). Real cases: hyunwoongko/transformer PR#40,
    graph-transformer-pytorch PR#2.
    """

    code = "SC404"
    name = "mask-broadcast"
    severity = "error"
    summary = "mask whose axes broadcast onto the wrong axes of the attention scores"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        # scores are attention scores where a softmax takes them (Mamba's projections, which
        # a bias is added to, are matrix products too)
        normalised = {scores.product.node for scores in analysis.observations(AttentionScores)}
        for mask in analysis.observations(MaskBroadcast):
            if mask.product is not None and mask.product.node not in normalised:
                continue
            mask_shape, scores_shape = (
                format_shape(mask.mask_shape),
                format_shape(mask.scores_shape),
            )
            shapes = f"the mask {mask_shape} on the scores {scores_shape}"
            if mask.masks_queries:
                problem = "masks queries, not keys: every query still attends to the padded keys"
            else:
                dim = mask.mask_shape[mask.axis]
                problem = f"lines up its {dim} axis with a different axis of the scores"
            yield Violation(
                mask.node,
                f"{shapes} {problem}; a key mask must end with the keys' axis (`[B, 1, 1, Lk]`)"
                + assuming(mask.guess),
            )
