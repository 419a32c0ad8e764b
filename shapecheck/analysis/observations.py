"""Observations: conclusions the analysis draws while interpreting a function.

Rules query these (``analysis.observations(IncompatibleView)``) instead of walking the tree
again: the knowledge lives in the analysis, the judgement and the wording in the rule.
"""

from __future__ import annotations

import ast

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    HeadsAxis,
    Positions,
    PositionTable,
    PrefixedShape,
    Product,
    TensorFact,
)
from shapecheck.analysis.layout import ChannelsMove, Reinterpretation
from shapecheck.record import record


@record
class IncompatibleView:
    """``view`` merges axes whose memory order forbids it: PyTorch raises at run time."""

    call: ast.Call
    anchor: ast.AST
    receiver: TensorFact
    merged_axes: tuple[int, ...]


@record
class ReinterpretingView:
    """``view``/``reshape`` that moves a named axis onto other data (no transpose)."""

    call: ast.Call
    anchor: ast.AST
    old_shape: tuple[Dim, ...]
    new_shape: tuple[Dim, ...]
    moved: Reinterpretation
    guess: str | None = None
    """What the finding rests on, if a guess: the old shape, or that the moved axis, of a
    size the code does not name, is longer than 1 (``Reinterpretation.guess``)."""

    @property
    def moves_heads(self) -> bool:
        """The axes the view moves are attention heads, as far as the code tells: it names
        them (``self.num_heads``, ``config.num_attention_heads``, ``n_head``, a ``head_dim``),
        or it splits the features into a named count of pieces as wide as the last new axis
        (the Annotated Transformer's ``self.h`` pieces of ``self.d_k``). Windows of an image
        grid, halves of router logits and image rows are reshaped the same way otherwise."""
        old, new = self.old_shape, self.new_shape
        if any("head" in str(dim).lower() for dim in (*old, *new)):
            return True
        return any(count.is_named and count * new[-1] == old[-1] for count in new[:-1])

    @property
    def splits(self) -> bool:
        """A split into heads-first axes (SC102's), not a merge of heads (SC103's): more axes
        after the view than before (``[B*L, H, D]`` read as ``[B, H, L, D]``), or sizes moved
        in front of the moved axis (``[B, L, H, D]`` folded as ``(B*H, L, D)``: the heads
        put before the positions, into the batch)."""
        if len(self.new_shape) > len(self.old_shape):
            return True
        return self.moved.moves_forward


@record
class ChannelsMovingView:
    """``view``/``reshape`` between channels-first and channels-last values that keeps the
    channel axis whole: a map ``[B, C, H, W]`` read as tokens ``[B, H*W, C]``, or back."""

    call: ast.Call
    anchor: ast.AST
    old_shape: tuple[Dim, ...]
    new_shape: tuple[Dim, ...]
    moved: ChannelsMove
    guess: str | None = None
    """What the old shape rests on, if a guess."""


@record
class AttentionScores:
    """A softmax over (a scaled, masked or reshaped) matrix product of two activations."""

    softmax: ast.AST
    scores: TensorFact
    product: Product
    axis: int | None = None
    """The axis of the scores the softmax normalises (``None``: unknown)."""


@record
class WeightsScaled:
    """Attention weights multiplied or divided by a number right after their softmax."""

    softmax: ast.AST
    node: ast.AST


@record
class NoOpAxisOp:
    """``permute``/``transpose`` that leaves every axis where it was."""

    call: ast.Call
    anchor: ast.AST
    axes: tuple[int, ...]
    receiver: ast.expr | None  # the tensor it was called on


@record
class SizeMismatch:
    """Sizes that must agree provably differ (a product's inner axes, a Linear's input)."""

    node: ast.AST
    what: str
    expected: Dim
    actual: Dim


@record
class SameSize:
    """Two sizes written apart that code which runs makes equal: the last axis of a tensor
    (``C`` of ``B, T, C = x.shape``) fed to a layer built ``in_features`` wide."""

    node: ast.AST
    written: Dim
    """The size as the tensor names it (``C``)."""
    known: Dim
    """The size the layer was built with (``n_embd``)."""
    layer: ast.AST
    """What the tensor is fed to (``self.key``)."""


@record
class LinearWeightProduct:
    """``x @ linear.weight``: the ``[out, in]`` weight used as if it were ``[in, out]``."""

    product: Product


@record
class SizeDivision:
    """``a // b`` on named sizes; ``in_constructor`` when inside ``__init__``."""

    node: ast.BinOp
    numerator: frozenset[str]
    denominator: frozenset[str]
    in_constructor: bool


@record
class ExactDivisionAssumed:
    """Two sizes that must agree (a view's, a layer's input) do only if ``origin`` divides."""

    node: ast.AST
    origin: object


@record
class DivisibilityCheck:
    """An ``assert`` or a raising ``if`` whose condition mentions these names."""

    names: frozenset[str]


@record
class IndivisibleSizes:
    """A constructor given literal sizes where one must divide the other, and does not."""

    call: ast.Call
    what: str
    numerator: int
    denominator: int


@record
class AnnotationMismatch:
    """A value whose inferred shape contradicts its jaxtyping annotation."""

    node: ast.AST
    annotation: str
    shape: tuple[Dim, ...] | PrefixedShape
    """Every axis, or the last ones after a prefix (a ``*batch``)."""
    reason: str


@record
class SoftmaxAxis:
    """A softmax over attention scores that runs over ``axis``, not the keys' ``keys``."""

    softmax: ast.AST
    axis: int
    keys: int
    rank: int
    implicit: bool
    dim: ast.expr | None
    """Where the call writes its ``dim`` (``None``: not written, or set in ``nn.Softmax``)."""
    through_module: bool  # an ``nn.Softmax`` call: the dim lives in ``__init__``
    product: Product
    guess: str | None = None
    """What the scores' shape rests on, if a guess."""


@record
class MaskAfterSoftmax:
    """Attention weights masked after their softmax, then used without renormalising."""

    mask: ast.AST


@record
class FillValue:
    """A literal written into attention scores: beyond float16 (``overflow``) or too weak."""

    node: ast.AST
    value: float
    dtype: str | None
    overflow: bool
    masked_fill: ast.Call | None
    """The ``masked_fill`` that writes it (which refuses an overflow); ``None`` when it reaches
    the scores through arithmetic or ``torch.where`` (where an overflow becomes ``-inf``)."""


@record
class MaskBroadcast:
    """A mask whose axes line up with the wrong axes of the attention scores."""

    node: ast.AST
    mask_shape: tuple[Dim, ...]
    scores_shape: tuple[Dim, ...]
    axis: int
    masks_queries: bool  # [B, 1, L, 1]: blocks padded queries instead of padded keys
    guess: str | None = None
    """What the shapes rest on, if a guess."""
    product: Product | None = None
    """The matrix product the masked scores came from (``None``: a kernel's scores)."""


@record
class TensorFromNumber:
    """``torch.tensor(<python number>)`` used where the number would do: a new host tensor
    every time it runs."""

    call: ast.Call


@record
class PositionsInLowPrecision:
    """Positions rounded to 16 bits (see ``facts.Positions``) read by ``cos``/``sin``: the
    angles of rotary or sinusoidal embeddings come out wrong."""

    positions: Positions
    read_by: ast.AST


@record
class TableOnHeads:
    """A positions table broadcast onto a tensor whose heads sit where the table's positions
    land (``q`` in ``[B, T, H, D]`` times ``cos`` of ``[T, D]``): each head gets a position,
    the tokens none."""

    node: ast.AST
    table: PositionTable
    heads: HeadsAxis
    tensor: ast.expr | None
    """The operand whose heads it is, as written."""


Observation = (
    WeightsScaled
    | IncompatibleView
    | ReinterpretingView
    | ChannelsMovingView
    | AttentionScores
    | NoOpAxisOp
    | SizeMismatch
    | SameSize
    | LinearWeightProduct
    | SizeDivision
    | ExactDivisionAssumed
    | DivisibilityCheck
    | IndivisibleSizes
    | AnnotationMismatch
    | SoftmaxAxis
    | MaskAfterSoftmax
    | FillValue
    | MaskBroadcast
    | TensorFromNumber
    | PositionsInLowPrecision
    | TableOnHeads
)
