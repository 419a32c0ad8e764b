from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.imports import dotted_name
from shapecheck.analysis.observations import FillValue
from shapecheck.fixes import Fix, FixRecipe
from shapecheck.rule import Rule, Violation

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class MaskFillOverflow(Rule):
    """
    ## What it does
    Finds literals beyond float16's range (±65504) written into tensors whose dtype may be
    float16: `masked_fill(mask == 0, -1e9)`, `torch.where(mask, scores, -1e9)`, additive masks
    built as `(1 - mask) * -1e9`.

    ## Why is this bad?
    Under `.half()` or autocast the scores are float16 and PyTorch refuses the fill. The same
    model that trains in float32 crashes the day someone enables mixed precision.

    ## Example
    ```python
    scores = scores.masked_fill(mask == 0, -1e9)
    ```

    ## Use instead
    ```python
    scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    ```

    ## Fix safety
    Safe. For `masked_fill` the literal becomes `torch.finfo(scores.dtype).min`: in float32
    the masked keys still get weight 0 after the softmax, and in float16 nothing overflows.
    Additive masks and `torch.where` are left to the author (adding the dtype's minimum to a
    negative score can overflow to `-inf`).

    ## Runtime evidence
    In float16: `RuntimeError: value cannot be converted to type c10::Half without overflow`
    (fixtures/SC401_*.py; the same error for a float32 model under
    `torch.autocast(device_type, dtype=torch.float16)`, where the matmul makes fp16 scores).
    An additive mask (`scores + (1 - mask) * -1e9`) or `torch.where(mask, scores, -1e9)` does
    not raise: the fill becomes `-inf`, a fully blocked row turns to NaN, and the output
    differs from the reference. Real cases: fairseq#3575, pytorch/benchmark PR#794,
    pytorch-seq2seq#191, apex#93. Traps that stay quiet: bfloat16 (holds -1e9),
    `float("-inf")`, scores cast with `.float()` first.
    """

    code = "SC401"
    name = "mask-fill-overflow"
    severity = "warning"
    summary = "mask fill like -1e9 that overflows float16"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for fill in analysis.observations(FillValue):
            if not fill.overflow:
                continue
            effect = (
                "masked_fill refuses it in half precision"
                if fill.masked_fill is not None
                else "in half precision it becomes -inf, and a fully masked row becomes NaN"
            )
            yield Violation(
                fill.node,
                f"{fill.value:g} is beyond float16's range (±65504): {effect}; use "
                "`torch.finfo(scores.dtype).min`",
                fix=_dtype_minimum(analysis, fill),
            )


def _dtype_minimum(analysis: ModuleAnalysis, fill: FillValue) -> FixRecipe | None:
    """``scores.masked_fill(mask, -1e9)`` -> ``…, torch.finfo(scores.dtype).min)``: the most
    negative number the scores' own dtype holds, in every precision."""
    call = fill.masked_fill
    if call is None or fill.value >= 0 or not isinstance(call.func, ast.Attribute):
        return None
    if analysis.resolves_to(call.func, "torch.masked_fill"):
        scores = call.args[0] if call.args else None
    else:
        scores = call.func.value
    torch = next((name for name, target in analysis.imports.items() if target == "torch"), None)
    written = dotted_name(scores) if scores is not None else None  # safe to repeat
    if written is None or torch is None:
        return None
    return partial(_fill_minimum, fill.node, f"{torch}.finfo({written}.dtype).min")


def _fill_minimum(value: ast.AST, minimum: str, tree: ConcreteTree) -> Fix | None:
    written = tree.node(value)
    if written is None:
        return None
    return Fix("fill with the dtype's minimum", ((written, minimum),), safe=True)
