from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.imports import dotted_name
from shapecheck.analysis.observations import FillValue
from shapecheck.fixes import FixOffer, Replacements
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
    Safe where the filled scores go into a softmax and nowhere else: for `masked_fill` the
    literal becomes `torch.finfo(scores.dtype).min`; in float32 the masked keys still get
    weight 0 and a fully masked row is still uniform, and in float16 nothing overflows.
    Unsafe otherwise, because the fill itself is then read: scaled after the mask (a learned
    temperature times the minimum is `-inf`, and a fully masked row turns to NaN), a second
    mask added, a masked max-pooling, returned, or filled into an integer tensor (`finfo`
    raises). Additive masks and `torch.where` are left to the author (adding the dtype's
    minimum to a negative score can overflow to `-inf`).

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


def _dtype_minimum(analysis: ModuleAnalysis, fill: FillValue) -> FixOffer | None:
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
    minimum = f"{torch}.finfo({written}.dtype).min"
    return FixOffer(
        "fill with the dtype's minimum",
        safe=_only_softmax_reads(analysis, call),
        write=partial(_fill_minimum, fill.node, minimum),
        rewritten=(fill.node,),
    )


def _fill_minimum(value: ast.AST, minimum: str, tree: ConcreteTree) -> Replacements | None:
    written = tree.node(value)
    if written is None:
        return None
    return ((written, minimum),)


def _only_softmax_reads(analysis: ModuleAnalysis, call: ast.Call) -> bool:
    """Do the filled scores go into a softmax and nowhere else? Then the fix keeps every
    result that worked: masked keys get weight 0 either way, and a fully masked row, all
    -1e9 or all the minimum, is uniform either way. Anything else may read the fill itself:
    scaled after it (a learned temperature times the minimum is -inf, and the row NaN), a
    second mask added, a max-pooling, an int tensor (``finfo`` raises)."""
    if _softmax_of(analysis, call):
        return True
    holder = analysis.parent(call)
    name = _filled_name(holder, call)
    scope = analysis.enclosing_function(call) or analysis.module
    if name is None or not isinstance(holder, ast.stmt) or _in_loop(analysis, holder, scope):
        return False  # in a loop, a read written above runs after the fill too
    after = (holder.end_lineno or 0, holder.end_col_offset or 0)
    reads = sorted(
        (
            node
            for node in ast.walk(scope)
            if isinstance(node, ast.Name)
            and node.id == name
            and isinstance(node.ctx, ast.Load)
            and (node.lineno, node.col_offset) >= after
        ),
        key=lambda node: (node.lineno, node.col_offset),
    )
    if not reads or not _softmax_of(analysis, reads[0]):
        return False
    if len(reads) == 1:
        return True
    # scores = F.softmax(scores, dim=-1): later reads see the weights, wherever the fill ran
    rebinding = next(h for h in analysis.holders(reads[0]) if isinstance(h, ast.stmt))
    rebinds = isinstance(rebinding, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id == name for target in rebinding.targets
    )
    end = (rebinding.end_lineno or 0, rebinding.end_col_offset or 0)
    return (
        rebinds
        and _blocks(analysis, rebinding, scope) <= _blocks(analysis, holder, scope)
        and all((read.lineno, read.col_offset) >= end for read in reads[1:])
    )


def _softmax_of(analysis: ModuleAnalysis, read: ast.expr) -> bool:
    """Is ``read`` what a softmax (of any spelling) normalises?"""
    holder = analysis.parent(read)
    if isinstance(holder, ast.Attribute) and holder.value is read:
        holder = analysis.parent(holder)  # scores.softmax(-1)
        if not isinstance(holder, ast.Call) or holder.func is not analysis.parent(read):
            return False
    elif not isinstance(holder, ast.Call) or not holder.args or holder.args[0] is not read:
        return False
    fact = analysis.fact(holder)
    return isinstance(fact, TensorFact) and fact.probabilities and fact.origin is holder


def _filled_name(statement: ast.AST | None, call: ast.Call) -> str | None:
    """``scores = scores.masked_fill(...)`` or ``scores.masked_fill_(...)``: the name that
    holds the filled scores."""
    match statement:
        case ast.Assign(targets=[ast.Name(id=name)], value=value) if value is call:
            return name
        case ast.Expr(value=value) if value is call and isinstance(call.func, ast.Attribute):
            receiver = call.func.value
            if call.func.attr == "masked_fill_" and isinstance(receiver, ast.Name):
                return receiver.id
    return None


def _blocks(analysis: ModuleAnalysis, statement: ast.stmt, scope: ast.AST) -> set[ast.AST]:
    """The compound statements (``if``, ``with``, ``try``) between ``statement`` and
    ``scope``."""
    found: set[ast.AST] = set()
    for holder in analysis.holders(statement):
        if holder is scope:
            break
        found.add(holder)
    return found


def _in_loop(analysis: ModuleAnalysis, statement: ast.stmt, scope: ast.AST) -> bool:
    loops = (ast.For, ast.AsyncFor, ast.While)
    return any(isinstance(block, loops) for block in _blocks(analysis, statement, scope))
