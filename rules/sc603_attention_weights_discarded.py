from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class AttentionWeightsDiscarded(Rule):
    """
    ## What it does
    Finds calls of an `nn.MultiheadAttention` whose attention weights are thrown away
    (`out, _ = self.attn(q, k, v)`, `self.attn(q, k, v)[0]`, a second name never read)
    while `need_weights` is left at its default, True.

    ## Why is this bad?
    With `need_weights=True` the module cannot use the fused attention kernel: it computes
    the `[B, L, S]` weights (averaged over heads, or `[B, H, L, S]`), returns them, and the
    caller drops them. That is a full attention matrix of memory and time per call for
    nothing (RT-DETR#678, nanoTabPFN PR#15).

    ## Example
    ```python
    out, _ = self.attn(x, x, x, key_padding_mask=padding)
    ```

    ## Use instead
    ```python
    out, _ = self.attn(x, x, x, key_padding_mask=padding, need_weights=False)
    ```

    ## Fix safety
    Unsafe: `--fix` passes `need_weights=False`. The output is the same up to float
    rounding (another kernel computes it), dropout draws its random numbers differently in
    training, and the second value becomes None.

    ## Runtime evidence
    The call allocates the weights, and the case computes the same output when they are
    never computed (`need_weights=False` forced on every call), so nothing read them
    (fixtures/SC603_*.py). Traps that stay quiet: weights that are returned, stored or
    summed; `need_weights=False` or a flag the code computes; a call given `**kwargs`.
    """

    code = "SC603"
    name = "attention-weights-discarded"
    severity = "warning"
    summary = "nn.MultiheadAttention computes attention weights that are thrown away"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for call in analysis.module_calls("torch.nn.MultiheadAttention"):
            flag = argument(call, 4, "need_weights")
            if flag is not None and not (isinstance(flag, ast.Constant) and flag.value is True):
                continue
            if any(isinstance(a, ast.Starred) for a in call.args) or any(
                keyword.arg is None for keyword in call.keywords
            ):
                continue  # *args or **kwargs may carry need_weights
            if not _weights_discarded(analysis, call):
                continue
            yield Violation(
                call.func,
                "attention weights computed and thrown away: `need_weights` defaults to True, "
                "which materialises them and rules out the fused kernel; pass "
                "`need_weights=False`",
                fix=_without_weights(call, flag),
            )


def _weights_discarded(analysis: ModuleAnalysis, call: ast.Call) -> bool:
    """``call(...)[0]``, or ``out, weights = call(...)`` with ``weights`` named ``_...`` or
    never read in the function."""
    holder = analysis.parent(call)
    if isinstance(holder, ast.Subscript) and holder.value is call:
        return isinstance(holder.slice, ast.Constant) and holder.slice.value == 0
    if not (isinstance(holder, ast.Assign) and holder.value is call and len(holder.targets) == 1):
        return False
    target = holder.targets[0]
    if not (isinstance(target, ast.Tuple | ast.List) and len(target.elts) == 2):
        return False
    weights = target.elts[1]
    if not isinstance(weights, ast.Name):
        return False  # stored on self, in a container: kept
    if weights.id.startswith("_"):
        return True
    function = analysis.enclosing_function(call)
    scope: ast.AST = function if function is not None else analysis.module
    return not any(
        isinstance(node, ast.Name) and node.id == weights.id and isinstance(node.ctx, ast.Load)
        for node in ast.walk(scope)
    )


def _without_weights(call: ast.Call, flag: ast.expr | None) -> FixOffer | None:
    """``need_weights=True`` -> ``False``, or ``need_weights=False`` after the last argument."""
    if flag is not None:
        replaced, content = flag, "False"
    elif call.args or call.keywords:
        replaced = call.keywords[-1].value if call.keywords else call.args[-1]
        content = None  # the last argument as written, then the flag
    else:
        return None
    return FixOffer(
        "pass `need_weights=False`",
        safe=False,
        write=partial(_write_flag, replaced, content),
        rewritten=(replaced,),
        kept=() if content else (replaced,),
    )


def _write_flag(replaced: ast.expr, content: str | None, tree: ConcreteTree) -> Replacements | None:
    from shapecheck.concrete import code

    written = tree.node(replaced)
    if written is None:
        return None
    return ((written, content or f"{code(written)}, need_weights=False"),)
