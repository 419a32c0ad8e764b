from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.observations import AttentionScores, TensorFromNumber
from shapecheck.fixes import Fix, FixRecipe
from shapecheck.rule import Rule, Violation

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class TensorConstantInForward(Rule):
    """
    ## What it does
    Finds `torch.tensor(<python number>)` built inside a forward pass (a method named
    `forward`, or a function that computes attention) and used where the number itself would
    do — an operand of arithmetic with activations, or a fill value — like the seed article's
    `torch.sqrt(torch.tensor(self.head_dim, dtype=torch.float32))`.

    ## Why is this bad?
    Every call allocates a new tensor on the CPU, in float32 whatever the model's device and
    dtype, and copies it over; under CUDA graphs or `torch.compile` it is a host
    synchronisation or a recompilation hazard. A Python number does the same job for free.

    ## Example
    ```python
    scores = q @ k.transpose(-2, -1) / torch.sqrt(torch.tensor(self.head_dim, dtype=torch.float32))
    ```

    ## Use instead
    ```python
    scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
    ```

    ## Fix safety
    Safe, and it keeps results: `torch.sqrt(torch.tensor(d, ...))` becomes `math.sqrt(d)`
    (`import math` is added when missing) and `torch.tensor(x)` used as an operand or a fill
    becomes `x`. PyTorch treats a Python number as it treats a 0-d tensor next to a tensor
    (it does not change the result's dtype), so the numbers are the same.

    ## Runtime evidence
    The same numbers, and a new tensor per call: `shapecheck.confirm.allocates` counts the
    `torch.tensor(<number>)` calls a forward makes (fixtures/SC601_*.py). Traps that stay
    quiet: constants built in `__init__` (`register_buffer`), `math.sqrt`, `d ** -0.5`, and
    constants placed on purpose: `device=`, `dtype=x.dtype` (Gemma rounds its sqrt(d_model)
    normaliser to bf16 this way), `.to(x.device)` or `.to(logits)`.
    """

    code = "SC601"
    name = "tensor-constant-in-forward"
    severity = "warning"
    summary = "`torch.tensor(<python number>)` built at every forward call"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for function in analysis.functions:
            is_forward = function.name.rsplit(".", 1)[-1] == "forward"
            attends = any(isinstance(o, AttentionScores) for o in function.observations)
            if not (is_forward or attends):
                continue
            for constant in function.observations:
                if isinstance(constant, TensorFromNumber):
                    yield Violation(
                        constant.call,
                        "builds a new CPU tensor from a Python number at every call where the "
                        "number itself would do (`math.sqrt(d)`, `d ** -0.5`)",
                        fix=_number_itself(analysis, constant.call),
                    )


def _number_itself(analysis: ModuleAnalysis, call: ast.Call) -> FixRecipe | None:
    """``torch.sqrt(torch.tensor(d, …))`` -> ``math.sqrt(d)``; ``torch.tensor(x)`` -> ``x``, where
    the value meets an activation (``scores / …``) or is a ``masked_fill`` value: PyTorch
    treats a Python number as it treats a 0-d tensor there, so the results are the same."""
    if not call.args or isinstance(call.args[0], ast.Starred):
        return None
    number = call.args[0]
    replaced: ast.expr = call
    root = False
    outer = analysis.parent(call)
    if (
        isinstance(outer, ast.Call)
        and outer.args == [call]
        and not outer.keywords
        and analysis.resolves_to(outer.func, "torch.sqrt")
    ):
        replaced, root = outer, True
    if not _number_would_do(analysis, replaced):
        return None
    literal = isinstance(number, ast.Constant) and type(number.value) in (int, float)
    operand = isinstance(analysis.parent(replaced), ast.BinOp) and not literal
    return partial(_write_number, replaced, number, root, operand)


def _write_number(
    replaced: ast.expr, number: ast.expr, root: bool, operand: bool, tree: ConcreteTree
) -> Fix | None:
    """The number (``math.sqrt`` of it where a root was taken), parenthesised as an operand
    when it would not stay whole."""
    import libcst as cst  # libcst loads only when a fix is written

    from shapecheck.concrete import atom, code

    target, written = tree.node(replaced), tree.node(number)
    if target is None or written is None:
        return None
    content = f"math.sqrt({code(written)})" if root else code(written)
    if operand:
        content = atom(cst.parse_expression(content))
    imports = ("math",) if root else ()
    return Fix("use the number itself", ((target, content),), True, imports, keeps_results=True)


def _number_would_do(analysis: ModuleAnalysis, value: ast.expr) -> bool:
    """Is ``value`` an operand next to an activation, or the value of a ``masked_fill``?"""
    holder = analysis.parent(value)
    if isinstance(holder, ast.BinOp):
        partner = holder.right if holder.left is value else holder.left
        fact = analysis.fact(partner)
        # computed here (an untyped parameter is only assumed to be a tensor), on every path
        if not isinstance(fact, TensorFact) or fact.origin is None or fact.uncertain:
            return False
        return fact.from_number is None
    keyword = holder.arg if isinstance(holder, ast.keyword) else None
    call = analysis.parent(holder) if isinstance(holder, ast.keyword) else holder
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr not in ("masked_fill", "masked_fill_"):
        return False
    if keyword is not None:
        return keyword == "value"
    position = call.args.index(value) if value in call.args else None
    function = analysis.resolves_to(call.func, "torch.masked_fill")
    return position == 2 if function else position == 1
