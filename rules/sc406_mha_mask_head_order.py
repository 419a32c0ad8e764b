from __future__ import annotations

import ast
from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.facts import TensorFact
from shapecheck.fixes import interleaving
from shapecheck.rule import Rule, Violation, assuming


class MhaMaskHeadOrder(Rule):
    """
    ## What it does
    Finds a 3-D `attn_mask` for `nn.MultiheadAttention` built head-major: a `[batch, q_len,
    k_len]` mask tiled over the heads with `mask.repeat(num_heads, 1, 1)` or
    `torch.tile(mask, (num_heads, 1, 1))`.

    ## Why is this bad?
    `nn.MultiheadAttention` reads a 3-D mask batch-major: entry `b * num_heads + h` is head `h`
    of sample `b`. A tiled mask puts sample `b`'s mask at `h * batch + b`, so each sample's heads
    get other samples' masks: padding is attended and real tokens are blocked. Nothing raises
    (line/lighthouse PR#77, CLIP4Clip#22).

    ## Example
    ```python
    attn_mask = padding_mask.repeat(self.num_heads, 1, 1)   # [H*B, L, S], head-major
    out, _ = self.attn(x, x, x, attn_mask=attn_mask)
    ```

    ## Use instead
    ```python
    attn_mask = padding_mask.repeat_interleave(self.num_heads, dim=0)   # [B*H, L, S]
    ```

    ## Fix safety
    Unsafe: `--fix` writes `repeat_interleave(num_heads, dim=0)` in place of the `repeat`, which
    changes the numbers (they were the bug). Only `.repeat(n, 1, 1)` is rewritten; a
    `torch.tile` is left to the author.

    ## Runtime evidence
    The output differs from the reference (the same module given the batch-major mask)
    (fixtures/SC406_*.py). Traps that stay quiet: `repeat_interleave(num_heads, dim=0)`,
    `mask[:, None].repeat(1, H, 1, 1).view(B * H, L, S)` and its `expand`/`reshape` twin, a
    `[1, L, S]` mask tiled over the heads for one sample.
    """

    code = "SC406"
    name = "mha-mask-head-order"
    severity = "error"
    summary = "3-D `nn.MultiheadAttention` mask tiled head-major instead of batch-major"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        reported: set[ast.AST] = set()
        for call in analysis.module_calls("torch.nn.MultiheadAttention"):
            mask = argument(call, 5, "attn_mask")
            fact = analysis.fact(mask) if mask is not None else None
            if mask is None or not isinstance(fact, TensorFact) or fact.tiled is None:
                continue
            tiling = fact.tiled
            if tiling.axis != 0 or tiling.rank != 3 or fact.rank not in (None, 3):
                continue
            if tiling.by in reported:
                continue  # one mask given to several calls: one finding, where it is tiled
            reported.add(tiling.by)
            yield Violation(
                tiling.by,
                f"this 3-D mask (`attn_mask` on line {call.lineno}) repeats the whole batch once "
                "per head (head-major), but nn.MultiheadAttention reads entry "
                "`b * num_heads + h`: each sample gets another sample's mask; use "
                "`repeat_interleave(num_heads, dim=0)`" + assuming(tiling.guess),
                fix=interleaving(tiling, "repeat each sample's mask in place"),
            )
