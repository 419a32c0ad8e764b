"""Fixtures of the reference modules' tests: every test seeded, with the runtime checks on
(and left on), and ``precision``, the dtypes and tolerances of equalities with torch's own
kernels. torch is imported only once a test needs it: without it, each test module skips."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import torch

PRECISIONS = [("float32", 1e-5), ("float64", 1e-12)]
"""(dtype, tolerance) for equalities with torch's own kernels."""


@pytest.fixture(params=PRECISIONS, ids=[dtype for dtype, _ in PRECISIONS])
def precision(request: pytest.FixtureRequest) -> tuple[torch.dtype, float]:
    import torch

    dtype, tolerance = request.param
    return getattr(torch, dtype), tolerance


@pytest.fixture(autouse=True)
def checks_on_and_seeded() -> Iterator[None]:
    import torch

    from shapecheck.reference import set_runtime_checks

    torch.manual_seed(0)
    set_runtime_checks(True)
    yield
    set_runtime_checks(True)
