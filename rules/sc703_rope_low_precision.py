from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.imports import dotted_name
from shapecheck.analysis.observations import PositionsInLowPrecision
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class RopeLowPrecision(Rule):
    """
    ## What it does
    Finds positions (`torch.arange`) rounded to 16 bits before cos/sin turn them into
    angles: cast with `.type_as(self.inv_freq)`, `.to(x.dtype)` or
    `arange(..., dtype=self.inv_freq.dtype)` to the model's dtype (in an `nn.Module`, that of
    an activation, or of a floating buffer or parameter, which `model.to(torch.bfloat16)`
    makes bfloat16),
    written as `.bfloat16()`/`.half()`/`dtype=torch.bfloat16`, or integer positions times
    such a buffer. Rotary and sinusoidal embeddings alike.

    ## Why is this bad?
    bfloat16 has 8 bits of mantissa: above 256 it cannot hold every integer, so position
    1500 becomes 1504, and the angle `position * inv_freq` is off by up to 4 radians for the
    fastest frequency. cos and sin come out off by up to 2.0; attention at long range reads
    noise, with no error anywhere (transformers PR#29285 and #29496, Megatron-LM#535,
    modded-nanogpt#39, diffusers PR#13922). Tables computed in float32 and only then cast
    are off by at most 2⁻⁹.

    ## Example
    ```python
    t = torch.arange(seq_len).type_as(self.inv_freq)
    freqs = t[:, None] * self.inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    ```

    ## Use instead
    ```python
    t = torch.arange(seq_len).float()
    freqs = t[:, None] * self.inv_freq.float()
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    ```

    ## Fix safety
    Unsafe: `--fix` makes the positions float32 where they are cast or made
    (`.type_as(b)` becomes `.to(b.device, torch.float32)`, which still moves them to `b`'s
    device; `.to(x.dtype)` and `.bfloat16()` become `.float()`; `arange`'s `dtype=` becomes
    `torch.float32`). A float32 model computes exactly what it did; a 16-bit model gets the
    right angles, on purpose, and tables of another dtype where they were not cast back.

    ## Runtime evidence
    After `model.to(torch.bfloat16)` the output (cos/sin tables) differs from the reference
    (the same frequencies with float32 positions, `shapecheck.reference.rotary_tables`'s
    formula) by up to 2.0 over 2048 positions (fixtures/SC703_*.py). Traps that stay quiet:
    `arange(..., dtype=torch.float32)`, `.float()` positions, frequencies kept as a plain
    float32 attribute, phases under `torch.autocast(..., enabled=False)` (a float32 model run
    under autocast), positions that no cos/sin reads (masks, indices), a dtype read off a
    tensor outside an `nn.Module` (a function's caller chooses it: `torch.signal.windows`).
    """

    code = "SC703"
    name = "rope-low-precision"
    severity = "warning"
    summary = "positions rounded to 16 bits (or the model's dtype) before cos/sin"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        rounded = {}
        for found in analysis.observations(PositionsInLowPrecision):
            cast = found.positions.rounded
            if cast is None or cast in rounded or _precision_off(analysis, cast):
                continue
            if found.positions.dtype is None and not analysis.in_module_method(cast):
                continue  # outside a module, a dtype read off a tensor is the caller's choice
            rounded[cast] = found.positions
        for cast, positions in rounded.items():
            rewrite = _float32_rewrite(analysis, cast)
            if positions.dtype is not None:
                where = positions.dtype
            elif positions.like is not None:
                like = analysis.source(positions.like)
                where = f"`{like}`" if like.endswith("dtype") else f"the dtype of `{like}`"
                where += " (the model's)"
            else:
                where = "the model's dtype"
            yield Violation(
                cast,
                f"positions computed in {where}, then turned into angles by cos/sin: in "
                "bfloat16 every position above 256 is rounded, so the angles are off by up "
                "to 4 radians; compute positions and phases in float32 and cast the cos/sin "
                "tables",
                fix=_in_float32(cast, rewrite) if rewrite else None,
            )


def _precision_off(analysis: ModuleAnalysis, node: ast.AST) -> bool:
    """Inside ``with torch.autocast(..., enabled=False)``, or a function decorated so: the
    author chose the precision of this block."""
    for holder in analysis.holders(node):
        contexts: list[ast.expr] = []
        if isinstance(holder, ast.With):
            contexts = [item.context_expr for item in holder.items]
        elif isinstance(holder, ast.FunctionDef | ast.AsyncFunctionDef):
            contexts = list(holder.decorator_list)
        if any(_autocast_off(context) for context in contexts):
            return True
    return False


def _autocast_off(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call) or not (dotted_name(node.func) or "").endswith("autocast"):
        return False
    return any(
        keyword.arg == "enabled"
        and isinstance(keyword.value, ast.Constant)
        and keyword.value.value is False
        for keyword in node.keywords
    )


def _float32_rewrite(analysis: ModuleAnalysis, cast: ast.AST) -> tuple[ast.AST, str] | None:
    """What to write where, so the positions stay float32 and on the same device: the cast
    ``.type_as(b)``/``.to(b)`` (which also move to ``b``'s device) as ``.to(b.device,
    torch.float32)``, ``.to(b.dtype)``/``.half()`` as ``.float()``, an ``arange``'s
    ``dtype=`` as ``torch.float32``. ``None`` where ``torch`` has another name here."""
    if not isinstance(cast, ast.Call):
        return None
    torch = next((name for name, module in analysis.imports.items() if module == "torch"), None)
    method = cast.func.attr if isinstance(cast.func, ast.Attribute) else None
    if method in ("half", "bfloat16") and not cast.args and not cast.keywords:
        return cast, ".float()"
    if method in ("type_as", "to") and len(cast.args) == 1 and not cast.keywords:
        target = cast.args[0]
        if isinstance(target, ast.Attribute) and target.attr == "dtype":
            return cast, ".float()"
        if torch is not None:
            return cast, f".to({analysis.source(target)}.device, {torch}.float32)"
        return None
    dtype = next((keyword.value for keyword in cast.keywords if keyword.arg == "dtype"), None)
    if dtype is not None and torch is not None:
        return dtype, f"{torch}.float32"
    return None


def _in_float32(cast: ast.AST, rewrite: tuple[ast.AST, str]) -> FixOffer:
    """``text`` written in place of ``node``; after the cast's receiver, kept as written,
    where ``text`` is a method call (``.float()``)."""
    node, text = rewrite
    receiver = (
        cast.func.value
        if text.startswith(".")
        and isinstance(cast, ast.Call)
        and isinstance(cast.func, ast.Attribute)
        else None
    )
    return FixOffer(
        "compute the positions in float32",
        safe=False,
        write=partial(_write_float32, node, receiver, text),
        rewritten=(node,),
        kept=(receiver,) if receiver is not None else (),
    )


def _write_float32(
    node: ast.AST, receiver: ast.expr | None, text: str, tree: ConcreteTree
) -> Replacements | None:
    from shapecheck.concrete import code

    written = tree.node(node)
    if written is None:
        return None
    if receiver is not None:
        kept = tree.node(receiver)
        if kept is None:
            return None
        text = f"{code(kept)}{text}"
    return ((written, text),)
