"""Observations: conclusions the analysis draws while interpreting a function.

Rules query these (``analysis.observations(IncompatibleView)``) instead of walking the tree
again: the knowledge lives in the analysis, the judgement and the wording in the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import Product, TensorFact
from shapecheck.analysis.layout import Reinterpretation


@dataclass(frozen=True)
class IncompatibleView:
    """``view`` merges axes whose memory order forbids it: PyTorch raises at run time."""

    call: cst.Call
    anchor: cst.CSTNode
    receiver: TensorFact
    merged_axes: tuple[int, ...]


@dataclass(frozen=True)
class ReinterpretingView:
    """``view``/``reshape`` that moves a named axis onto other data (no transpose)."""

    call: cst.Call
    anchor: cst.CSTNode
    old_shape: tuple[Dim, ...]
    new_shape: tuple[Dim, ...]
    moved: Reinterpretation


@dataclass(frozen=True)
class AttentionScores:
    """A softmax over (a scaled, masked or reshaped) matrix product of two activations."""

    softmax: cst.CSTNode
    scores: TensorFact
    product: Product


@dataclass(frozen=True)
class NoOpAxisOp:
    """``permute``/``transpose`` that leaves every axis where it was."""

    call: cst.Call
    anchor: cst.CSTNode
    axes: tuple[int, ...]


@dataclass(frozen=True)
class SizeMismatch:
    """Sizes that must agree provably differ (a product's inner axes, a Linear's input)."""

    node: cst.CSTNode
    what: str
    expected: Dim
    actual: Dim


@dataclass(frozen=True)
class LinearWeightProduct:
    """``x @ linear.weight``: the ``[out, in]`` weight used as if it were ``[in, out]``."""

    product: Product


@dataclass(frozen=True)
class SizeDivision:
    """``a // b`` on named sizes; ``in_constructor`` when inside ``__init__``."""

    node: cst.BinaryOperation
    numerator: frozenset[str]
    denominator: frozenset[str]
    in_constructor: bool


@dataclass(frozen=True)
class ExactDivisionAssumed:
    """Two sizes that must agree (a view's, a layer's input) do only if ``origin`` divides."""

    node: cst.CSTNode
    origin: object


@dataclass(frozen=True)
class DivisibilityCheck:
    """An ``assert`` or a raising ``if`` whose condition mentions these names."""

    names: frozenset[str]


@dataclass(frozen=True)
class IndivisibleSizes:
    """A constructor given literal sizes where one must divide the other, and does not."""

    call: cst.Call
    what: str
    numerator: int
    denominator: int


@dataclass(frozen=True)
class AnnotationMismatch:
    """A value whose inferred shape contradicts its jaxtyping annotation."""

    node: cst.CSTNode
    annotation: str
    shape: tuple[Dim, ...]
    reason: str


Observation = (
    IncompatibleView
    | ReinterpretingView
    | AttentionScores
    | NoOpAxisOp
    | SizeMismatch
    | LinearWeightProduct
    | SizeDivision
    | ExactDivisionAssumed
    | DivisibilityCheck
    | IndivisibleSizes
    | AnnotationMismatch
)
