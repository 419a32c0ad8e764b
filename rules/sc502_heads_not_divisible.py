from __future__ import annotations

from collections.abc import Iterator

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.dims import written
from shapecheck.analysis.observations import (
    DivisibilityCheck,
    ExactDivisionAssumed,
    IndivisibleSizes,
    SizeDivision,
)
from shapecheck.rule import Rule, Violation


class HeadsNotDivisible(Rule):
    """
    ## What it does
    Warns about `head_dim = d_model // num_heads` (or BERT's `int(d_model / num_heads)`) in a
    constructor that never checks that the division is exact (no `assert d_model % num_heads
    == 0`, no raising `if`) while a `view` in the class splits a `d_model`-wide tensor into
    `num_heads` pieces of `head_dim` — code that is only right when the division is exact.
    Reports as
    an error a constructor called with literal sizes that do not divide
    (`nn.MultiheadAttention(100, 3)`, or a module of the same file whose `__init__` divides
    those arguments).

    ## Why is this bad?
    `//` drops the remainder: with `d_model=100, num_heads=3` each head gets 33 features and
    one feature disappears, or a later `view` fails with a message that says nothing about
    heads. A check at construction names the real problem.

    ## Example
    ```python
    def __init__(self, d_model, num_heads):
        self.head_dim = d_model // num_heads
    ```

    ## Use instead
    ```python
    def __init__(self, d_model, num_heads):
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.head_dim = d_model // num_heads
    ```

    ## Runtime evidence
    `AssertionError: embed_dim must be divisible by num_heads` from `nn.MultiheadAttention`;
    hand-written modules fail later, in their view: `RuntimeError: shape '[2, -1, 3, 4]' is
    invalid for input of size 140` (fixtures/SC502_*.py).
    Real cases: detr#499, LLMs-from-scratch#444. Traps that stay quiet: GQA's
    `n_heads % n_kv_heads` checks, models with an explicit `head_dim`.
    """

    code = "SC502"
    name = "heads-not-divisible"
    severity = "warning"
    summary = "`d_model // num_heads` never checked to divide (error with literal sizes)"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        relied_on = {o.origin for o in analysis.observations(ExactDivisionAssumed)}
        for function in analysis.functions:
            checks = [o.names for o in function.observations if isinstance(o, DivisibilityCheck)]
            for observation in function.observations:
                if isinstance(observation, IndivisibleSizes):
                    yield Violation(
                        observation.call,
                        f"{written(observation.numerator)} is not divisible by "
                        f"{written(observation.denominator)} "
                        f"({observation.what}): each head would get a fraction of a feature",
                        severity="error",
                    )
                elif (
                    isinstance(observation, SizeDivision)
                    and observation.in_constructor
                    and observation.node in relied_on
                ):
                    if any(
                        observation.numerator & names and observation.denominator & names
                        for names in checks
                    ):
                        continue
                    yield Violation(
                        observation.node,
                        "nothing checks that this division is exact: a remainder is dropped "
                        "silently; raise a clear error when it is not",
                    )
