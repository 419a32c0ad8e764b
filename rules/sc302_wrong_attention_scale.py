from __future__ import annotations

import ast
import itertools
from collections.abc import Callable, Iterator
from functools import partial

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import Scale, TensorFact
from shapecheck.analysis.observations import AttentionScores, SameSize
from shapecheck.rule import Rule, Violation


class WrongAttentionScale(Rule):
    """
    ## What it does
    Finds attention scores scaled by something other than `1/sqrt(d_k)`: by the square root of
    the model width (`d_model`, `embed_dim`, `C` of `B, T, C = x.shape`) when there are several
    heads, by `sqrt(num_heads)`, by `1/d_k` (no square root), or multiplied by `sqrt(d_k)`
    (dividing by a `scale` that already holds `d_k ** -0.5`); and queries scaled by hand and then
    given to `F.scaled_dot_product_attention`, which scales again unless `scale=` is passed.
    `C` is known to be the model width when `x` feeds a layer built that wide
    (`self.key = nn.Linear(n_embd, head_size)`); where only the caller decides the head size
    (`Head(n_embd, head_size=n_embd // n_head)`), the scale is reported in `Head`, naming the
    line that builds it so.

    ## Why is this bad?
    The scale keeps the dot products of `d_k`-dimensional vectors at unit variance. With the
    wrong one the softmax is too sharp or too flat; training runs, the numbers differ from
    every reference implementation, and the model quietly learns worse.

    ## Example
    ```python
    head_dim = d_model // num_heads
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_model)
    ```

    ## Use instead
    ```python
    scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)
    ```

    ## Runtime evidence
    No error: the output differs from the reference (`shapecheck.reference` with the same
    weights; fixtures/SC302_*.py). Real cases: hyunwoongko/transformer ee92100,
    attention-is-all-you-need e108f0f, tt-metal PR#56789, ViT#1, perceiver-io#9, transformers
    PR#38290. Deliberate choices (μP's `1/d`) say so with `# shapecheck: ignore[SC302]`;
    single-head code where `d_model == d_k` is right and stays quiet.
    """

    code = "SC302"
    name = "wrong-attention-scale"
    severity = "warning"
    summary = "attention scaled by sqrt(d_model), sqrt(heads), 1/d_k, or twice"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for call in analysis.calls_to("torch.nn.functional.scaled_dot_product_attention"):
            if _scaled_inputs(analysis, call) and argument(call, None, "scale") is None:
                yield Violation(
                    call,
                    "the queries or keys are scaled already, and "
                    "`F.scaled_dot_product_attention` scales by 1/sqrt(d_k) again: pass "
                    "`scale=1.0`, or drop the manual scaling",
                )
        reported = set()
        for scores in analysis.observations(AttentionScores):
            if analysis.co_attention(scores.product):
                continue  # an alignment both ways is not dot-product attention
            problem = _problem(scores, partial(_sizes_shown_equal, analysis, scores))
            if problem is not None and problem[0] not in reported:
                reported.add(problem[0])
                yield Violation(problem[0], problem[1])


def _scaled_inputs(analysis: ModuleAnalysis, call: ast.Call) -> bool:
    """Were the queries or keys given to ``call`` multiplied by a known number?"""
    for passed in (argument(call, 0, "query"), argument(call, 1, "key")):
        fact = analysis.fact(passed) if passed is not None else None
        if isinstance(fact, TensorFact) and any(e.factor is not None for e in fact.scaling or ()):
            return True
    return False


def _sizes_shown_equal(
    analysis: ModuleAnalysis, scores: AttentionScores
) -> dict[Dim, tuple[Dim, str]]:
    """The sizes of the function computing ``scores`` that its layers show equal to others,
    each with the words that say so: ``C`` of ``B, T, C = x.shape`` is ``n_embd`` where ``x``
    feeds ``self.key = nn.Linear(n_embd, head_size)``."""
    function = analysis.enclosing_function(scores.softmax)
    if function is None:
        return {}
    shown: dict[Dim, tuple[Dim, str]] = {}
    for same in analysis.observations(SameSize, within=function):
        layer = analysis.source(same.layer)
        words = f"`{same.written}` is {same.known}, what `{layer}` takes"
        shown.setdefault(same.written, (same.known, words))
    return shown


def _problem(
    scores: AttentionScores, shown_equal: Callable[[], dict[Dim, tuple[Dim, str]]]
) -> tuple[ast.AST, str] | None:
    product = scores.product
    evidence = scores.scores.scaling
    if not evidence or product.left.is_parameter or product.right.is_parameter:
        return None
    total: Scale | None = Scale(Dim.constant(1), 0.0)
    for item in evidence:
        if item.factor is None or total is None:
            return None  # something scales by an unknown amount: nothing to compare
        total = total.times(item.factor)
    queries = product.left.shape
    if total is None or queries is None or total.coefficient != 1.0:
        return None
    d_k = queries[product.left_contracted]
    where = evidence[-1].node
    base, exponent = total.base, total.exponent
    if base == d_k:
        if exponent == -1:
            return where, f"scores scaled by 1/{d_k}, not 1/sqrt({d_k}): the softmax is too flat"
        if exponent == 0.5:
            return where, (
                f"scores multiplied by sqrt({d_k}): dividing by a scale that already is "
                f"{d_k} ** -0.5 inverts it; multiply by it instead"
            )
        return None
    if exponent != -0.5 or not base.is_named:
        return None
    # the width as written, then (only if that tells nothing) as a layer shows it to be
    for width, shown in itertools.chain([(base, "")], _shown(base, shown_equal)):
        ratio = width.floordiv(d_k)
        several = ratio.is_named or (ratio.value or 0) > 1
        if several and not ratio.quotients:
            words = f" ({shown})" if shown else ""
            return where, (
                f"scores scaled by 1/sqrt({base}), the model width{words}: with {ratio} heads "
                f"each head's d_k is {d_k}; scale by 1/sqrt({d_k})"
            )
    if len(queries) >= 3 and base == queries[-3]:
        return where, f"scores scaled by 1/sqrt({base}), the number of heads: use 1/sqrt({d_k})"
    return None


def _shown(
    base: Dim, shown_equal: Callable[[], dict[Dim, tuple[Dim, str]]]
) -> Iterator[tuple[Dim, str]]:
    """``base`` as the size a layer shows it to be (a single size only: one a layer took)."""
    single = base.is_named and len(base.factors) == 1
    if single and (known := shown_equal().get(base)) is not None:
        yield known
