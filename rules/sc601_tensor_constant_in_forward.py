from __future__ import annotations

import ast
import math
import struct
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.observations import AttentionScores, TensorFromNumber
from shapecheck.fixes import FixOffer, Replacements
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
    Unsafe, except where the numbers provably stay the same. `torch.sqrt(torch.tensor(d,
    ...))` becomes `math.sqrt(d)` (`import math` is added when missing) and `torch.tensor(x)`
    used as an operand or a fill becomes `x`. PyTorch treats a Python number as it treats a
    0-d tensor next to a tensor (it does not change the result's dtype), but the 0-d tensor
    is float32: next to float64 activations it is the float32-rounded number, where the
    Python number is exact. The numbers are the same in float32, float16 and bfloat16
    models, and differ in the last bits of a float64 one (7e-9 for `sqrt(80)`). So the fix
    is safe, and keeps results, only where that rounding changes nothing: the number is a
    float32 exactly (`torch.tensor(0.125)`, `torch.tensor(-1e4)`,
    `torch.sqrt(torch.tensor(64))`) or the constant is float64. A constant written in
    float16 or bfloat16 gets no fix: it rounds the number, and the number itself would not
    do the same.

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


def _number_itself(analysis: ModuleAnalysis, call: ast.Call) -> FixOffer | None:
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
    dtype = next((k.value for k in call.keywords if k.arg == "dtype"), None)
    wide = dtype is None or any(analysis.resolves_to(dtype, name) for name in _WIDE_DTYPES)
    if not wide:
        return None  # dtype=torch.float16 rounds the constant: the number would not do
    literal = isinstance(number, ast.Constant) and type(number.value) in (int, float)
    value = _literal_number(number)
    if value is not None and root:
        value = math.sqrt(value) if value >= 0 else None
    keeps = (dtype is not None and analysis.resolves_to(dtype, "torch.float64")) or (
        value is not None and _exact_in_float32(value)
    )
    operand = isinstance(analysis.parent(replaced), ast.BinOp) and not literal
    return FixOffer(
        "use the number itself",
        safe=keeps,
        write=partial(_write_number, replaced, number, root, operand),
        rewritten=(replaced,),
        kept=(number,),
        imports=("math",) if root else (),
        keeps_results=keeps,
    )


_WIDE_DTYPES = ("torch.float32", "torch.float", "torch.float64", "torch.double")
"""Dtypes whose 0-d tensor meets an activation as a Python number does (a narrower one
rounds the constant first)."""


def _literal_number(node: ast.expr) -> float | None:
    """The value of ``3``, ``0.125`` or ``-1e4`` as written."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if type(value) in (int, float) else None


def _exact_in_float32(value: float) -> bool:
    """Is ``value`` a float32 exactly? Then the constant is the same number in every dtype."""
    try:
        rounded: float = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return False
    return rounded == value


def _write_number(
    replaced: ast.expr,
    number: ast.expr,
    root: bool,
    operand: bool,
    tree: ConcreteTree,
) -> Replacements | None:
    """The number (``math.sqrt`` of it where a root was taken), parenthesised as an operand
    when it would not stay whole."""
    import libcst as cst  # libcst loads only when a fix is written

    from shapecheck.concrete import atom, code

    target, written = tree.node(replaced), tree.node(number)
    if target is None or written is None:
        return None
    content = f"math.sqrt({code(written)})" if root else code(written)
    if isinstance(written, cst.NamedExpr) and not written.lpar and not root:
        content = f"({content})"  # value=(v := -1e4): a bare walrus is valid almost nowhere
    elif operand:
        content = atom(cst.parse_expression(content))
    return ((target, content),)


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
