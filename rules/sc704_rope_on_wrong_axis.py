from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.observations import TableOnHeads
from shapecheck.rule import Rule, Violation


class RopeOnWrongAxis(Rule):
    """
    ## What it does
    Finds a positions table (cos/sin of `torch.arange` positions: rotary or sinusoidal)
    broadcast onto a tensor so that its positions land on the heads axis: a helper written
    for `[B, H, T, D]` (table `[T, D]`, or `cos.unsqueeze(1)`) applied to queries or keys in
    `[B, T, H, D]`.

    ## Why is this bad?
    Broadcasting lines axes up from the end. In `[B, T, H, D]` the axis before the features
    is the heads, so the table rotates head `h` by position `h` and every token alike: the
    positional information is gone. When the table was sliced to the length read off that
    same axis (`seq_len = x.shape[-2]`), the shapes even agree and nothing raises
    (xformers#841, smolGPT#22, LLMs-from-scratch#411, leo-optimizer PR#2); otherwise it
    raises a size mismatch.

    ## Example
    ```python
    q = self.wq(x).view(B, T, H, D)          # flash-attn's layout
    cos, sin = self.cos[:T], self.sin[:T]    # [T, D]
    q = q * cos + rotate_half(q) * sin       # positions land on the heads
    ```

    ## Use instead
    ```python
    cos, sin = self.cos[:T, None, :], self.sin[:T, None, :]   # [T, 1, D]
    q = q * cos + rotate_half(q) * sin
    ```

    ## Runtime evidence
    The output differs from the reference (`shapecheck.reference.apply_rotary` on the same
    tensors in `[B, H, T, D]`), or PyTorch raises `RuntimeError: The size of tensor a (5)
    must match the size of tensor b (3) at non-singleton dimension 2` (fixtures/SC704_*.py).
    Traps that stay quiet: tables unsqueezed for the layout in use (`cos[:, None, :]`,
    Hugging Face's `unsqueeze_dim=2`), `[B, H, T, D]` tensors, helpers that are given the
    sequence axis.
    """

    code = "SC704"
    name = "rope-on-wrong-axis"
    severity = "error"
    summary = "rotary/positional table broadcast onto the heads axis instead of the sequence"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for found in analysis.observations(TableOnHeads):
            table_line = getattr(found.table.made, "lineno", None)
            heads_line = getattr(found.heads.by, "lineno", None)
            written = f"`{analysis.source(found.tensor)}`" if found.tensor is not None else "it"
            yield Violation(
                found.node,
                f"the positions table (from line {table_line}) runs over axis "
                f"{found.table.axis}, which is the heads axis of {written} (split at line "
                f"{heads_line}): each head gets a position and the tokens none; unsqueeze the "
                "table for this layout or move the heads first",
            )
