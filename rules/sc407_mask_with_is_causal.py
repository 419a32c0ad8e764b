from __future__ import annotations

import ast
from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.facts import NoneFact
from shapecheck.analysis.imports import dotted_name
from shapecheck.rule import Rule, Violation


class MaskWithIsCausal(Rule):
    """
    ## What it does
    Finds `F.scaled_dot_product_attention` calls given both an `attn_mask` and
    `is_causal=True`.

    ## Why is this bad?
    PyTorch documents the two as exclusive, and its backends disagree on what the pair means:
    the math backend (the one CUDA falls back to for many shapes and dtypes) raises
    `Explicit attn_mask should not be set when is_causal=True`, while CPU's default kernel
    applies both. The same line runs on one machine and crashes on another, and which mask
    wins is never written down (minimind#382 and #453, nari-labs/dia PR#170, nanoVLM#80,
    pytorch/pytorch#187801).

    ## Example
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=padding, is_causal=True)
    ```

    ## Use instead
    ```python
    causal = torch.ones(L, S, dtype=torch.bool, device=q.device).tril()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=padding & causal)
    ```

    ## Runtime evidence
    Under `sdpa_kernel(SDPBackend.MATH)` the call raises `RuntimeError:
    _scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True`
    (fixtures/SC407_*.py); CPU's default kernel applies both masks. Traps that
    stay quiet: `attn_mask=None`, a mask that is None where the call is made (`if mask is
    None:`), `is_causal=mask is None` and other flags the code computes, a call a test expects
    to raise (`with pytest.raises(RuntimeError):`).
    """

    code = "SC407"
    name = "mask-with-is-causal"
    severity = "warning"
    summary = "`attn_mask` together with `is_causal=True` in one SDPA call"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for call, causal in analysis.causal_attention_calls():
            mask = argument(call, 3, "attn_mask")
            if mask is None or _none_here(analysis, call, mask) or _expects_error(analysis, call):
                continue
            yield Violation(
                causal,
                "`attn_mask` with `is_causal=True`: PyTorch's math backend raises here and "
                "other backends apply both; fold the causal mask into `attn_mask` or drop one",
            )


def _none_here(analysis: ModuleAnalysis, call: ast.Call, mask: ast.expr) -> bool:
    """Is ``mask`` None where ``call`` runs: a literal ``None``, a name the analysis knows to
    be None, or one tested ``is None`` by an enclosing ``if`` whose body holds the call?"""
    if isinstance(mask, ast.Constant) and mask.value is None:
        return True
    if isinstance(analysis.fact(mask), NoneFact):
        return True
    written = dotted_name(mask)
    if written is None:
        return False
    child: ast.AST = call
    for holder in analysis.holders(call):
        if isinstance(holder, ast.If | ast.IfExp) and _tests_none(holder.test, written):
            body = holder.body if isinstance(holder, ast.If) else [holder.body]
            if any(part is child for part in body):
                return True
        child = holder
    return False


def _tests_none(test: ast.expr, written: str) -> bool:
    """``written is None`` (alone or in an ``and``)."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    return any(
        isinstance(part, ast.Compare)
        and isinstance(part.ops[0], ast.Is)
        and dotted_name(part.left) == written
        and isinstance(part.comparators[0], ast.Constant)
        and part.comparators[0].value is None
        for part in parts
    )


def _expects_error(analysis: ModuleAnalysis, call: ast.Call) -> bool:
    """Inside ``with pytest.raises(...)`` or ``self.assertRaises(...)``: a test of the error."""
    return any(
        isinstance(holder, ast.With)
        and any(
            isinstance(item.context_expr, ast.Call)
            and (dotted_name(item.context_expr.func) or "").endswith(("raises", "assertRaises"))
            for item in holder.items
        )
        for holder in analysis.holders(call)
    )
