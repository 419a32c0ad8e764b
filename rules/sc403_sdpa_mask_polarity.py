from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.facts import TensorFact
from shapecheck.rule import Rule, Violation

_MEANING = {"attend": "True = attend", "block": "True = blocked"}


class SdpaMaskPolarity(Rule):
    """
    ## What it does
    Finds boolean masks given to an attention API that reads them the other way round:
    a True = blocked mask (`torch.triu(ones, diagonal=1)`, `tril(...) == 0`) as `attn_mask`
    of `F.scaled_dot_product_attention` (True = attend), or a True = attend mask (`tril`,
    `ids != pad`) as `attn_mask`/`key_padding_mask` of `nn.MultiheadAttention` (True =
    blocked). A triangle offset by a KV cache (`triu(j - i + 1)`,
    `triu(diagonal=start_pos + 1)`) is a True = blocked mask too; masks combined with `&`
    or `|` mean what their known operands mean (`keep & ~future` is True = attend); a mask
    replaced by a float bias on one branch means what it meant where it is boolean.

    ## Why is this bad?
    The two PyTorch APIs disagree on what True means. With the wrong polarity every query
    attends exactly to the keys it should ignore (the future, the padding); shapes are fine and
    nothing crashes.

    ## Example
    ```python
    future = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=future)
    ```

    ## Use instead
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=~future)   # or is_causal=True
    ```

    ## Runtime evidence
    No error: the output differs from the reference (fixtures/SC403_*.py). Real cases:
    LLMs-from-scratch#1061, torchTextClassifiers PR#92.
    """

    code = "SC403"
    name = "sdpa-mask-polarity"
    severity = "error"
    summary = "boolean mask of the wrong polarity for SDPA (True = attend) or nn.MultiheadAttention"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for mask, api, _ in analysis.attention_masks():
            # SDPA reads True as "attend", nn.MultiheadAttention as "blocked"
            expected = "attend" if api.startswith("F.") else "block"
            fact = analysis.fact(mask)
            if not isinstance(fact, TensorFact) or fact.dtype != "bool":
                continue
            if fact.polarity is not None and fact.polarity != expected:
                yield Violation(
                    mask,
                    f"this mask is {_MEANING[fact.polarity]}, but {api} reads boolean masks as "
                    f"{_MEANING[expected]}: invert it (`~mask`)",
                )
