from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.facts import TensorFact
from shapecheck.rule import Rule, Violation

_FLOATS = frozenset({"float32", "float16", "bfloat16", "float64"})


class MaskKindConfusion(Rule):
    """
    ## What it does
    Finds a 1 = keep / 0 = pad mask made float (`mask.float()`, `.to(torch.float16)`,
    `torch.ones(L, L).tril()`) and given as the `attn_mask` of
    `F.scaled_dot_product_attention` or `nn.MultiheadAttention`.

    ## Why is this bad?
    Both read a boolean mask as a mask, but *add* a float mask to the scores. A 0/1 float mask
    adds 1 to the kept keys and 0 to the padding: the padding is attended almost as much as
    before, and nothing raises (transformers PR#41443, timm PR#2674, unsloth PR#1762).

    ## Example
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep.float())
    ```

    ## Use instead
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep.bool())
    # or an additive mask: torch.zeros_like(s).masked_fill(~keep, float("-inf"))
    ```

    ## Runtime evidence
    The output differs from the reference (the same attention with the boolean mask)
    (fixtures/SC405_*.py). Traps that stay quiet: additive masks built from the 0/1 mask
    (`(1 - m) * torch.finfo(dtype).min`, `masked_fill(~m, float("-inf"))`,
    `m.log()`), boolean masks, a mask cast to a dtype the code does not write out.
    """

    code = "SC405"
    name = "mask-kind-confusion"
    severity = "error"
    summary = "0/1 float mask given where a float mask is added to the scores"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for mask, api, parameter in analysis.attention_masks():
            if parameter != "attn_mask":
                continue  # a key-padding mask is boolean or additive to its module already
            fact = analysis.fact(mask)
            if not isinstance(fact, TensorFact) or fact.polarity is None:
                continue
            if fact.dtype not in _FLOATS or fact.fill is not None:
                continue
            kept = "kept keys" if fact.polarity == "attend" else "blocked keys"
            yield Violation(
                mask,
                f"this is a 0/1 mask in {fact.dtype}: {api} adds a float mask to the scores, "
                f"so the {kept} get +1 and the others +0 and nothing is masked; pass it as "
                "bool, or make it additive (0 and -inf)",
            )
