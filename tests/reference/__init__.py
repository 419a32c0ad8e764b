"""The reference modules (``shapecheck.reference``) against PyTorch's own attention. What the
tests share: ``conftest.py``'s fixtures (each test seeded, with the runtime checks on; the
precisions compared at), and :func:`gap`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def gap(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest absolute difference between two tensors of the same shape, in float64."""
    assert actual.shape == expected.shape
    return float((actual.detach().double() - expected.detach().double()).abs().max())
