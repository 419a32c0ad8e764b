from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.observations import IncompatibleView
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation, assuming

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class ViewWithoutContiguous(Rule):
    """
    ## What it does
    Finds `.view(...)` calls that merge axes of a tensor whose axes were reordered by
    `transpose`, `permute`, `.T`/`.t()`, `.mT`, `movedim`, `swapaxes` or `expand` — in the
    same expression or statements earlier — with no `.contiguous()` or `.reshape` in between.

    ## Why is this bad?
    `view` never copies: it can only merge axes that are adjacent in memory. After a transpose
    they are not, and PyTorch raises at run time. Elementwise arithmetic, dtype casts,
    dropout and even `.clone()` keep the reordered strides, so they do not help. A size-1
    axis (decoding one token) can hide the crash until the sequence grows.

    ## Example
    ```python
    out = attn @ v                       # [B, H, L, D]
    out = out.transpose(1, 2)            # [B, L, H, D], axes reordered
    out = out.view(B, L, H * D)          # merges H and D: not adjacent in memory
    ```

    ## Use instead
    ```python
    out = out.transpose(1, 2).contiguous().view(B, L, H * D)
    # or
    out = out.transpose(1, 2).reshape(B, L, H * D)
    ```

    ## Fix safety
    Safe. `--fix` inserts `.contiguous()` before `.view(...)`: the same values, copied into
    memory order, so the view no longer raises and nothing else changes. Unsafe where the
    layout is known on some paths only (an unmodelled branch, a name a nested function
    rebinds with `nonlocal`): if the view in fact works, it shares the tensor's memory, and a
    copy would stop writes through it (`y.view(...).zero_()`) from reaching the tensor.

    ## Runtime evidence
    `RuntimeError: view size is not compatible with input tensor's size and stride (at least
    one dimension spans across two contiguous subspaces). Use .reshape(...) instead.`
    (fixtures/SC101_*.py, CPU and CUDA.) Real cases: fairseq#2598, Megatron-LM#251,
    vllm#11978, TensorRT#3823.
    """

    code = "SC101"
    name = "view-without-contiguous"
    severity = "error"
    summary = "`.view()` merges axes that a transpose/permute/expand reordered"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for view in analysis.observations(IncompatibleView):
            cause = view.receiver.layout.reordered_by if view.receiver.layout else None
            reordered = f"`{_describe(analysis, cause)}`" if cause is not None else "an earlier op"
            *first, last = (str(axis) for axis in view.merged_axes)
            axes = f"{', '.join(first)} and {last}"
            yield Violation(
                view.anchor,
                f"`.view()` merges axes {axes}, which {reordered} left non-adjacent in memory: "
                "PyTorch raises 'view size is not compatible'; "
                "use `.contiguous().view(...)` or `.reshape(...)`" + assuming(view.receiver.guess),
                fix=_contiguous_first(view.call, safe=not view.receiver.uncertain),
            )


def _contiguous_first(call: ast.Call, *, safe: bool) -> FixOffer | None:
    """``x.view(...)`` -> ``x.contiguous().view(...)``: the same values, now in memory order.
    Safe only where the layout is certain: a view that in fact works (the tensor was changed
    in place behind the analysis' back) shares memory, and a copy would break writes to it.
    Only the method's name is rewritten: the receiver, its comments and its line breaks stay
    as written."""
    if not isinstance(call.func, ast.Attribute) or call.func.attr != "view":
        return None
    return FixOffer(
        "insert `.contiguous()` before `.view()`", safe, partial(_contiguous_view, call.func)
    )


def _contiguous_view(method: ast.Attribute, tree: ConcreteTree) -> Replacements | None:
    import libcst as cst  # libcst loads only when a fix is written

    written = tree.node(method)
    if not isinstance(written, cst.Attribute):
        return None
    return ((written.attr, "contiguous().view"),)


def _describe(analysis: ModuleAnalysis, node: ast.AST) -> str:
    """The reordering call as written, without its receiver (`.transpose(1, 2)`) unless that
    is a class (`Attend.attention(q, k, v)`, a static method)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        arguments = ", ".join(analysis.source(argument) for argument in _arguments(node))
        receiver = node.func.value
        cls = receiver.id if isinstance(receiver, ast.Name) and receiver.id[:1].isupper() else ""
        return f"{cls}.{node.func.attr}({arguments})"
    if isinstance(node, ast.Attribute):
        return f".{node.attr}"
    text = " ".join(analysis.source(node).split())
    return text if len(text) <= 40 else text[:37] + "..."


def _arguments(call: ast.Call) -> list[ast.expr | ast.keyword]:
    """Positional and keyword arguments in the order written."""
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    return sorted(arguments, key=lambda node: (node.lineno, node.col_offset))
