from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.dims import Dim, format_shape
from shapecheck.analysis.facts import TensorFact
from shapecheck.analysis.observations import ChannelsMovingView
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation, assuming

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class ChannelsFirstTokens(Rule):
    """
    ## What it does
    Finds a channels-first feature map `[B, C, H, W]` (a `Conv2d` output, or named by
    `B, C, H, W = x.shape`) reshaped or viewed straight into tokens `(B, H*W, C)` or
    `(B, -1, C)`, and tokens `[B, L, C]` reshaped straight back into `(B, C, H, W)`, without
    moving the channels: also a channels-first map viewed as channels-last `(B, H, W, C)`,
    and a channels-last map `[B, H, W, C]` viewed as `(B, C, H*W)`.

    ## Why is this bad?
    `view` and `reshape` re-read memory in order; they never move data between axes. A
    channels-first map holds all of channel 0's pixels, then channel 1's: viewed as
    `(B, H*W, C)`, token 0 gets the first `C` pixels of channel 0 instead of pixel 0's `C`
    channels. Pixels and channels mix, the shapes fit, nothing raises, and the model trains
    on scrambled patches (SAM-Adapter-PyTorch#134, headpose-fsanet-pytorch#10,
    pytorch-vit#7, lightly-train PR#119).

    ## Example
    ```python
    x = self.proj(x)                      # nn.Conv2d: [B, C, H, W]
    B, C, H, W = x.shape
    tokens = x.view(B, H * W, C)
    ```

    ## Use instead
    ```python
    tokens = x.flatten(2).transpose(1, 2)            # or x.permute(0, 2, 3, 1).reshape(B, -1, C)
    x = tokens.transpose(1, 2).reshape(B, C, H, W)   # and back
    ```

    ## Fix safety
    Unsafe: the outputs change (that is the point), so it applies only with `--unsafe-fixes`.
    A map viewed as tokens becomes `x.flatten(2).transpose(1, 2)`; tokens viewed as a map get
    their channels moved forward first, `x.transpose(1, 2).view(B, C, H, W)` (a view that
    splits one axis works on the transposed tokens). Only where the shape the view reads is
    known; a map viewed as a channels-last map, or the way back, is left to the author.

    ## Runtime evidence
    No error: the output differs from the reference (tokens built pixel by pixel, token
    `h*W + w` from pixel `(h, w)`'s channels, then the same attention, conv or norm;
    fixtures/SC104_*.py), for a patch embedding's `Conv2d` output, a feature map named by
    `B, C, H, W = x.shape`, tokens reshaped back for a depthwise conv, a map viewed as
    `(B, H, W, C)` before a LayerNorm, and a channels-last map reshaped to `(B, C, H*W)`.
    Traps that stay quiet: channels-last code (`B, H, W, C = x.shape` then
    `reshape(B, H * W, C)`, as timm writes it), one channel (`[B, 1, H, W]`),
    `flatten(2).transpose(1, 2)`, `permute(0, 2, 3, 1)`, and `transpose(1, 2)` before the
    reshape back.
    """

    code = "SC104"
    name = "channels-first-tokens"
    severity = "error"
    summary = "channels-first map `[B, C, H, W]` viewed as tokens `[B, H*W, C]`, or back, unmoved"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for view in analysis.observations(ChannelsMovingView):
            to_last = view.moved.to_last
            first, last = (view.old_shape, view.new_shape)
            if not to_last:
                first, last = last, first
            mixed = (
                "a position's features are a run of one channel's values"
                if to_last
                else "a channel's map is a run of positions' features"
            )
            yield Violation(
                view.anchor,
                f"reads {_kind(view.old_shape, to_last)} {format_shape(view.old_shape)} as "
                f"{_kind(view.new_shape, not to_last)} {format_shape(view.new_shape)} without "
                f"moving the channels ({view.moved.channels}): {mixed}, so pixels and channels "
                f"mix silently; {_remedy(first, last, to_last)}" + assuming(view.guess),
                fix=_moved_first(analysis, view),
            )


def _kind(shape: tuple[Dim, ...], channels_first: bool) -> str:
    """How a side of the view is laid out: a map has two spatial axes or more."""
    spatial = len(shape) - 2
    if channels_first:
        return "the channels-first map" if spatial > 1 else "channels-first"
    return "a channels-last map" if spatial > 1 else "tokens"


def _remedy(first: tuple[Dim, ...], last: tuple[Dim, ...], to_last: bool) -> str:
    """What moves the channels, as written most often: ``first`` is the channels-first side."""
    if to_last and len(last) == 3:
        return "use `.flatten(2).transpose(1, 2)`"
    if not to_last and len(last) == 3:
        return "`.transpose(1, 2)` the tokens first"
    if first[2:] == last[1:-1]:
        rank = len(first)
        if to_last:
            return f"use `.permute(0, {', '.join(map(str, range(2, rank)))}, 1)`"
        return f"use `.permute(0, {rank - 1}, {', '.join(map(str, range(1, rank - 1)))})`"
    return f"move them first (`.movedim({'1, -1' if to_last else '-1, 1'})`)"


def _moved_first(analysis: ModuleAnalysis, view: ChannelsMovingView) -> FixOffer | None:
    """Map to tokens: the view becomes ``x.flatten(2).transpose(1, 2)``. Tokens to map: ``x``
    becomes ``x.transpose(1, 2)`` before the same view. Only where ``x``'s shape is the one
    the view read."""
    call = view.call
    receivers = [call.func.value] if isinstance(call.func, ast.Attribute) else []
    receivers += call.args[:1]  # torch.reshape(x, ...)
    tensor = next(
        (
            node
            for node in receivers
            if isinstance(fact := analysis.fact(node), TensorFact) and fact.shape == view.old_shape
        ),
        None,
    )
    if tensor is None:
        return None
    if view.moved.to_last and len(view.new_shape) == 3:
        moved, whole = ".flatten(2).transpose(1, 2)", True
    elif not view.moved.to_last and len(view.old_shape) == 3:
        moved, whole = ".transpose(1, 2)", False
    else:
        return None
    return FixOffer(
        "move the channels before reading the values in their new order",
        safe=False,
        write=partial(_write, call, tensor, moved, whole=whole),
        rewritten=(call if whole else tensor,),
        kept=(tensor,),
    )


def _write(
    call: ast.Call, tensor: ast.expr, moved: str, tree: ConcreteTree, *, whole: bool
) -> Replacements | None:
    from shapecheck.concrete import atom  # libcst loads only when a fix is written

    replaced, written = tree.node(call if whole else tensor), tree.node(tensor)
    if replaced is None or written is None:
        return None
    return ((replaced, f"{atom(written)}{moved}"),)
