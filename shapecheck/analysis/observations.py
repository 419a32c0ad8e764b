"""Observations: conclusions the analysis draws while interpreting a function.

Rules query these (``analysis.observations(IncompatibleView)``) instead of walking the tree
again: the knowledge lives in the analysis, the judgement and the wording in the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from shapecheck.analysis.facts import Product, TensorFact


@dataclass(frozen=True)
class IncompatibleView:
    """``view`` merges axes whose memory order forbids it: PyTorch raises at run time."""

    call: cst.Call
    anchor: cst.CSTNode
    receiver: TensorFact
    merged_axes: tuple[int, ...]


@dataclass(frozen=True)
class AttentionScores:
    """A softmax over (a scaled, masked or reshaped) matrix product of two activations."""

    softmax: cst.CSTNode
    scores: TensorFact
    product: Product


Observation = IncompatibleView | AttentionScores
