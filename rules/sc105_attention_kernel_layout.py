from __future__ import annotations

import ast
from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.dims import format_shape
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.observations import AttentionScores
from shapecheck.rule import Rule, Violation, assuming

_SDPA = ("query", "key", "value")
_FLASH = ("q", "k", "v")
_KERNELS: dict[str, tuple[int, tuple[str, ...]]] = {
    "torch.nn.functional.scaled_dot_product_attention": (-3, _SDPA),
    "torch.nn.attention.flex_attention.flex_attention": (-3, _SDPA),
    "flash_attn.flash_attn_func": (-2, _FLASH),
    "flash_attn.flash_attn_interface.flash_attn_func": (-2, _FLASH),
    "flash_attn.flash_attn_with_kvcache": (-2, ("q", "k_cache", "v_cache")),
    "flash_attn.flash_attn_interface.flash_attn_with_kvcache": (-2, ("q", "k_cache", "v_cache")),
    "xformers.ops.memory_efficient_attention": (-2, _SDPA),
    "xformers.ops.fmha.memory_efficient_attention": (-2, _SDPA),
}
"""Each kernel's place for the heads axis, counted from the end (SDPA and flex attention
take ``[B, H, L, D]``, flash-attn and xformers ``[B, L, H, D]``), and its q/k/v keywords."""

_LAYOUT = {-3: "[B, H, L, D]", -2: "[B, L, H, D]"}


class AttentionKernelLayout(Rule):
    """
    ## What it does
    Finds queries, keys or values handed to an attention kernel in the layout it does not
    take: heads split off the features (`view(B, L, H, D)`) and never moved forward, given
    to `F.scaled_dot_product_attention` or flex attention, which take `[B, H, L, D]`; or moved
    forward (`.transpose(1, 2)`) and given to flash-attn's `flash_attn_func` or xformers'
    `memory_efficient_attention`, which take `[B, L, H, D]`. The same for attention written
    out: `q @ k.transpose(-2, -1)` (or `torch.matmul`) over queries still `[B, L, H, D]`
    multiplies each position's heads with each other.

    ## Why is this bad?
    A kernel reads the axis second from the end (SDPA) or third from the end (flash-attn) as
    the sequence. In the other layout it attends over the heads instead of the tokens: each
    position mixes its own heads, the shapes fit, nothing raises, and the model trains worse
    (NVlabs/FoundationStereo PR#217, Primus-Turbo PR#326, LlamaFactory PR#10436,
    triton#2626).

    ## Example
    ```python
    q = self.q_proj(x).view(B, L, self.num_heads, self.head_dim)
    out = F.scaled_dot_product_attention(q, k, v)
    ```

    ## Use instead
    ```python
    q = self.q_proj(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v).transpose(1, 2)
    ```

    ## Runtime evidence
    No error: the output differs from the reference (`shapecheck.reference` attention with
    the same weights), or, where only one input is laid out wrong and the sizes differ, SDPA
    raises `RuntimeError: The size of tensor a (3) must match the size of tensor b (5) at
    non-singleton dimension 1` (fixtures/SC105_*.py). Traps that stay quiet: one head
    (`view(B, L, 1, D)`), 3-D `[B*H, L, D]` inputs, `permute(0, 2, 1, 3)`, heads normalised
    before the transpose.
    """

    code = "SC105"
    name = "attention-kernel-layout"
    severity = "error"
    summary = "q/k/v handed to an attention kernel in the layout it does not take"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for call in analysis.calls_to(*_KERNELS):
            heads_at, keywords = _KERNELS[analysis.imported_name(call.func) or ""]
            elsewhere = -5 - heads_at  # the other layout: -2 for SDPA, -3 for flash-attn
            wrong: list[tuple[ast.expr, TensorFact]] = []
            for position, keyword in enumerate(keywords):
                node = argument(call, position, keyword)
                fact = analysis.fact(node) if node is not None else None
                heads = fact.heads if isinstance(fact, TensorFact) else None
                if node is not None and heads is not None and heads.from_end() == elsewhere:
                    assert isinstance(fact, TensorFact)
                    wrong.append((node, fact))
            if wrong:
                yield _violation(analysis, call, wrong, heads_at)
        for scores in analysis.observations(AttentionScores):
            product = scores.product
            queries, keys = product.left, product.right
            if (
                _matrix_product(analysis, product.node)
                and queries.heads is not None
                and queries.heads.from_end() == -2
                and keys.heads is not None  # kᵀ of [B, L, H, D] keys: their heads last
                and keys.heads.from_end() == -1
            ):
                yield _written_out(analysis, product.left_node, queries, product.node)


def _matrix_product(analysis: ModuleAnalysis, node: ast.AST) -> bool:
    """``a @ b``, ``torch.matmul(a, b)``, ``a.matmul(b)``: products over the last two axes
    (an einsum names its axes, and may well multiply ``[B, L, H, D]`` right)."""
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.MatMult)
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr == "matmul":
        return True
    return analysis.imported_name(node.func) == "torch.matmul"


def _written_out(
    analysis: ModuleAnalysis, node: ast.expr, queries: TensorFact, product: ast.AST
) -> Violation:
    assert queries.heads is not None
    shape = format_shape(queries.shape) if queries.shape else _LAYOUT[-2]
    split = getattr(queries.heads.by, "lineno", None)
    where = f" (heads split at line {split})" if split else ""
    return Violation(
        node,
        f"`{analysis.source(node)}` is laid out {shape}{where}, but `{analysis.source(product)}` "
        "multiplies its last two axes: it attends over the heads instead of the tokens; "
        "`.transpose(1, 2)` the queries, keys and values first" + assuming(queries.guess),
    )


def _violation(
    analysis: ModuleAnalysis,
    call: ast.Call,
    wrong: list[tuple[ast.expr, TensorFact]],
    heads_at: int,
) -> Violation:
    node, fact = wrong[0]
    assert fact.heads is not None
    names = list(dict.fromkeys(f"`{analysis.source(each)}`" for each, _ in wrong))
    written = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    verb, them = ("is", "it") if len(names) == 1 else ("are", "them")
    shape = format_shape(fact.shape) if fact.shape else _LAYOUT[-5 - heads_at]
    split = getattr(fact.heads.by, "lineno", None)
    where = f" (heads split at line {split})" if split else ""
    remedy = (
        f"`.transpose(1, 2)` {them} first"
        if heads_at == -3
        else f"pass {them} before the `.transpose(1, 2)`"
    )
    return Violation(
        node,
        f"{written} {verb} laid out {shape}{where}, but `{analysis.source(call.func)}` takes "
        f"{_LAYOUT[heads_at]}: it attends over the heads instead of the tokens; {remedy}"
        + assuming(fact.guess),
    )
