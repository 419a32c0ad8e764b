from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.observations import AttentionScores, TensorFromNumber
from shapecheck.fixes import Fix, atom, code
from shapecheck.rule import Rule, Violation


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


def _number_itself(analysis: ModuleAnalysis, call: cst.Call) -> Fix | None:
    """``torch.sqrt(torch.tensor(d, …))`` -> ``math.sqrt(d)``; ``torch.tensor(x)`` -> ``x``, where
    the value meets an activation (``scores / …``) or is a ``masked_fill`` value: PyTorch
    treats a Python number as it treats a 0-d tensor there, so the results are the same."""
    if not call.args or call.args[0].keyword is not None:
        return None
    number = call.args[0].value
    replaced: cst.BaseExpression = call
    content = code(number)
    imports: tuple[str, ...] = ()
    holder = analysis.parent(call)
    outer = analysis.parent(holder) if isinstance(holder, cst.Arg) else None
    if (
        isinstance(outer, cst.Call)
        and len(outer.args) == 1
        and analysis.resolves_to(outer.func, "torch.sqrt")
    ):
        replaced, content, imports = outer, f"math.sqrt({content})", ("math",)
    if not _number_would_do(analysis, replaced):
        return None
    if isinstance(analysis.parent(replaced), cst.BinaryOperation) and not isinstance(
        number, cst.Integer | cst.Float
    ):
        content = atom(cst.parse_expression(content))
    return Fix("use the number itself", ((replaced, content),), True, imports, keeps_results=True)


def _number_would_do(analysis: ModuleAnalysis, value: cst.BaseExpression) -> bool:
    """Is ``value`` an operand next to an activation, or the value of a ``masked_fill``?"""
    holder = analysis.parent(value)
    if isinstance(holder, cst.BinaryOperation):
        partner = holder.right if holder.left is value else holder.left
        fact = analysis.fact(partner)
        # computed here (an untyped parameter is only assumed to be a tensor)
        if not isinstance(fact, TensorFact) or fact.origin is None:
            return False
        return fact.from_number is None
    if isinstance(holder, cst.Arg) and not holder.star:
        call = analysis.parent(holder)
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return False
        fills = call.func.attr.value in ("masked_fill", "masked_fill_")
        position = call.args.index(holder)
        method_value = position == 1 and not analysis.resolves_to(call.func, "torch.masked_fill")
        keyword = holder.keyword is not None and holder.keyword.value == "value"
        return fills and (keyword or method_value or position == 2)
    return False
