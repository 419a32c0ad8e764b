from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.facts import TensorFact, Tiling
from shapecheck.analysis.observations import AttentionScores
from shapecheck.fixes import interleaving
from shapecheck.rule import Rule, Violation, assuming


class GqaKvRepeatOrder(Rule):
    """
    ## What it does
    Finds grouped-query attention whose key/value heads are tiled instead of interleaved:
    `k.repeat(1, n_rep, 1, 1)` or `torch.tile(k, (1, n_rep, 1, 1))` on `[batch, kv_heads,
    seq, head_dim]` keys or values, which then meet queries (or attention weights) that were
    not tiled alike, in `q @ kᵀ`, `weights @ v` or `F.scaled_dot_product_attention`.

    ## Why is this bad?
    Query head `i` must read key/value head `i // n_rep` (the convention of LLaMA, Mistral and
    `F.scaled_dot_product_attention(..., enable_gqa=True)`). Tiling gives `[kv0, kv1, kv0,
    kv1]`, so query head 1 reads kv head 1 instead of 0: with pretrained weights the model
    attends with the wrong keys, and nothing raises (onnx PR#7274, axlearn PR#842).

    ## Example
    ```python
    k = k.repeat(1, self.num_heads // self.num_kv_heads, 1, 1)
    ```

    ## Use instead
    ```python
    k = k.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)
    # or F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    ```

    ## Fix safety
    Unsafe: `--fix` writes `repeat_interleave(n_rep, dim=axis)` in place of a `repeat` whose
    one count that is not 1 tiles that axis; the numbers change (they were the bug). `tile`
    is left to the author.

    ## Runtime evidence
    The output differs from the reference, `F.scaled_dot_product_attention(q, k, v,
    enable_gqa=True)` on the untiled keys and values (fixtures/SC203_*.py). Traps that stay
    quiet: `repeat_interleave(n_rep, dim=1)`, transformers' `repeat_kv`
    (`k[:, :, None].expand(...).reshape(...)`), one kv head (`[B, 1, L, D]` tiled is the
    same as interleaved), a batch axis tiled (beams), heads tiled by something other than
    the group size (jetmoe tiles by its experts, DiffLlama its value halves, and group their
    queries to match).
    """

    code = "SC203"
    name = "gqa-kv-repeat-order"
    severity = "error"
    summary = "grouped-query attention with key/value heads tiled instead of interleaved"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        reported: set[ast.AST] = set()
        # queries with keys (q·kᵀ), weights with values (softmax(...) @ v), and both in SDPA
        pairs = [(s.product.left, s.product.right) for s in analysis.observations(AttentionScores)]
        pairs += [
            (fact.product.left, fact.product.right)
            for function in analysis.functions
            for fact in function.facts.values()
            if isinstance(fact, TensorFact) and fact.product and fact.product.left.weights
        ]
        for call in analysis.calls_to("torch.nn.functional.scaled_dot_product_attention"):
            if argument(call, 7, "enable_gqa") is not None:
                continue  # the kernel repeats the heads itself
            query = analysis.fact(argument(call, 0, "query") or call)
            for position, name in ((1, "key"), (2, "value")):
                given = argument(call, position, name)
                fact = analysis.fact(given) if given is not None else None
                if isinstance(query, TensorFact) and isinstance(fact, TensorFact):
                    pairs.append((query, fact))
        for queries, keys in pairs:
            tiling = _mismatched_tiling(queries, keys)
            if tiling is None or tiling.by in reported:
                continue
            reported.add(tiling.by)
            yield Violation(
                tiling.by,
                "these keys/values are tiled ([kv0, kv1, kv0, kv1]) but the queries are not: "
                "query head i reads kv head i % kv_heads, where grouped-query attention "
                "needs i // n_rep; use "
                f"`repeat_interleave(..., dim={tiling.axis})`" + assuming(tiling.guess),
                fix=interleaving(tiling, "repeat each kv head in place"),
            )


_GROUP_SIZE = re.compile(r"//|rep|group|per_kv|queries_per", re.IGNORECASE)
"""How code names the grouped-query ratio: `heads // kv_heads`, `n_rep`,
`num_key_value_groups`, `num_queries_per_kv`."""


def _mismatched_tiling(queries: TensorFact, keys: TensorFact) -> Tiling | None:
    """The tiling of the heads axis of ``[batch, heads, seq, head_dim]`` keys or values
    (third from the end) that the queries (or weights) do not share, by the grouped-query
    ratio. Tiled by anything else (jetmoe's experts, DiffLlama's value halves) the queries
    are grouped to match on purpose."""
    tiling = keys.tiled
    if tiling is None or tiling.rank != 4 or tiling.axis != 1:
        return None
    if not _GROUP_SIZE.search(str(tiling.copies)):
        return None
    mine = queries.tiled
    if mine is not None and mine.axis - mine.rank == -3 and mine.copies == tiling.copies:
        return None  # tiled alike: each query head still meets its own keys
    return tiling
