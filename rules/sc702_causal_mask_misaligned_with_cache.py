from __future__ import annotations

import ast
from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.facts import TensorFact
from shapecheck.rule import Rule, Violation


class CausalMaskMisalignedWithCache(Rule):
    """
    ## What it does
    Finds `F.scaled_dot_product_attention(..., is_causal=True)` given keys that a KV cache
    grew (`torch.cat([past_k, k], dim=2)`, `past_key_values.update(k, v, layer_idx)`), with
    no test that the queries are as long as the keys.

    ## Why is this bad?
    SDPA's `is_causal` builds `tril(ones(L, S))`: aligned at the top left. With a cache the
    keys are longer than the queries (`S = past + L`), and query `i` should see the keys up
    to `past + i`; top-left, it sees the keys up to `i`. A one-token decode step attends to
    the first token only, and chunked prefill mostly to the prompt's start. Nothing raises
    (pytorch/pytorch#144858, #103082, #108108, gpt-neox PR#1178, tinygrad PR#15949).

    ## Example
    ```python
    k = torch.cat([past_k, k], dim=2)
    v = torch.cat([past_v, v], dim=2)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ```

    ## Use instead
    ```python
    L, S = q.size(-2), k.size(-2)
    visible = torch.ones(L, S, dtype=torch.bool, device=q.device).tril(diagonal=S - L)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)
    ```
    (or `attn_mask=torch.nn.attention.bias.causal_lower_right(L, S)`).

    ## Runtime evidence
    A decode step's output differs from the reference (`shapecheck.reference` attention
    with the causal mask aligned bottom-right, equal to attending over the whole sequence;
    fixtures/SC702_*.py). Traps that stay quiet: `is_causal` computed
    (`is_causal=past is None`, `q_len > 1 and mask is None`), a call under a test of the
    lengths or of the cache (`if q.size(-2) == k.size(-2):`, `if past is None:`),
    flash-attn's `causal=True` (aligned bottom-right), concatenations that are no cache.
    """

    code = "SC702"
    name = "causal-mask-misaligned-with-cache"
    severity = "error"
    summary = "`is_causal=True` (top-left) on keys a KV cache made longer than the queries"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for call, causal in analysis.causal_attention_calls():
            keys = argument(call, 1, "key")
            fact = analysis.fact(keys) if keys is not None else None
            if not isinstance(fact, TensorFact) or fact.cached is None:
                continue
            if _lengths_tested(analysis, call):
                continue
            grown = getattr(fact.cached, "lineno", None)
            where = f" (line {grown})" if grown else ""
            yield Violation(
                causal,
                f"the keys grew by a KV cache{where}, so they are longer than the queries, but "
                "`is_causal=True` aligns the causal mask top-left: query `i` sees keys up to `i`, "
                "not `past + i`; pass a bottom-right mask "
                "(`ones(L, S).tril(diagonal=S - L)`, `causal_lower_right(L, S)`)",
            )


def _lengths_tested(analysis: ModuleAnalysis, call: ast.Call) -> bool:
    """Under an ``if`` that tests the lengths (``q.size(-2) == k.size(-2)``, ``.shape``) or
    whether there is a cache (``past is None``): the author chose when the alignment agrees."""
    for holder in analysis.holders(call):
        if isinstance(holder, ast.If | ast.IfExp) and any(
            _tests_length_or_none(node) for node in ast.walk(holder.test)
        ):
            return True
    return False


def _tests_length_or_none(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        if any(isinstance(op, ast.Is | ast.IsNot) for op in node.ops) and any(
            isinstance(operand, ast.Constant) and operand.value is None for operand in operands
        ):
            return True
        return any(
            isinstance(part, ast.Attribute) and part.attr in ("shape", "size")
            for operand in operands
            for part in ast.walk(operand)
        )
    return False
