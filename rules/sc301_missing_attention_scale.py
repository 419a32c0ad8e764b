from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis, argument
from shapecheck.analysis.facts import Product, ScaleEvidence, TensorFact
from shapecheck.analysis.imports import dotted_name
from shapecheck.analysis.observations import AttentionScores, WeightsScaled
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class MissingAttentionScale(Rule):
    """
    ## What it does
    Finds a softmax over dot-product attention scores (`q @ k.transpose(-2, -1)`, `matmul`,
    `bmm`, `einsum`) where nothing scales the queries, the keys or the scores — no
    `/ math.sqrt(d_k)`, `* d_k ** -0.5`, `* self.scale`, learned temperature or `alpha=`.

    ## Why is this bad?
    The dot product of two `d_k`-dimensional vectors has a variance that grows with `d_k`.
    Unscaled, the softmax saturates: almost all weight on one key, vanishing gradients for the
    rest. Training still runs, so the bug survives; the outputs differ from every reference
    implementation (`F.scaled_dot_product_attention` scales by `1/sqrt(d_k)` by default).

    Scaling after the softmax does not count. Models that drop the scale on purpose (T5 folds
    it into the initialisation) should say so with `# shapecheck: ignore[SC301]`.

    QK-norm (`q_norm`/`k_norm` LayerNorm or RMSNorm layers, `nn.BatchNorm`, or the module's own
    class named `...RMSNorm`/`...LayerNorm`) does not stand for the scale: a norm gives each
    element unit variance and its elementwise gain starts at 1, so the dot product still grows
    with d_k; a scale applied before the norm is divided out by it. Qwen3, OLMo2, Chameleon
    and ViT-22B scale after it; a model that wants no scale
    writes it out (Gemma 3n's `self.scaling = 1.0`; timm's Gemma 4 ViT gives SDPA `scale=1.0`
    and computes the same by hand on its other branch). A temperature or logit scale
    multiplying the scores counts as a scale. Unit vectors (`F.normalize`, cosine attention)
    need one too, the other way: their scores lie in [-1, 1] and, with no temperature, the
    softmax is almost uniform (reported as such, with no fix: the temperature is learned).

    ## Example
    ```python
    scores = q @ k.transpose(-2, -1)
    weights = scores.softmax(dim=-1)
    ```

    ## Use instead
    ```python
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = scores.softmax(dim=-1)
    # or: F.scaled_dot_product_attention(q, k, v)
    ```

    ## Fix safety
    Unsafe: the attention weights change (that is the point), so it applies only with
    `--unsafe-fixes`. The product is divided by `math.sqrt(d_k)` (`import math` is added when
    missing), with `d_k` the size the analysis knows (`self.head_dim`) or read from the
    queries (`q.size(-1)`). No fix where the weights are scaled after the softmax: that scale
    must move, not be doubled.

    ## Runtime evidence
    No error: the unscaled attention's output differs from the reference
    (`shapecheck.reference`, and `F.scaled_dot_product_attention`) under the same weights, by
    0.12 to 1.3 at the fixtures' small sizes (fixtures/SC301_*.py, `python -m
    shapecheck.confirm`), QK-norm'd scores (a scale before the norm included) and cosine
    similarities with no temperature included (fixtures/SC301_qk_norm.py), and einsums whose
    `...` covers the batch and head axes or follows the keys' axis
    (fixtures/SC301_functional.py). Real case: mlc-llm PR#3426. Traps that stay quiet: a
    similarity that aligns two sequences both ways (ESIM's soft alignment, LoFTR's dual
    softmax), which is no dot-product attention and is unscaled by design
    (fixtures/SC301_co_attention.py); QK-norm with a scale, a scale of 1.0 written out (passed
    on, or as SDPA's `scale=1.0` in the same function), or a learned temperature on the
    scores; queries of one number per position (`nn.Linear(d, 3)` unbound on its last axis:
    d_k is 1).
    """

    code = "SC301"
    name = "missing-attention-scale"
    severity = "warning"
    summary = "softmax over q·kᵀ scores with no 1/sqrt(d_k) scaling"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        reported: set[ast.AST] = set()
        scaled_after = {weights.softmax for weights in analysis.observations(WeightsScaled)}
        for scores in analysis.observations(AttentionScores):
            product = scores.product
            if product.left.is_parameter or product.right.is_parameter:
                continue
            if product.node in reported or analysis.co_attention(product):
                continue  # (an alignment both ways is unscaled by design)
            if _cosine_only(analysis, scores.scores.scaling):
                reported.add(product.node)
                yield Violation(
                    product.node,
                    "softmax over cosine similarities (q and k normalised to unit length) that "
                    "nothing scales: the scores lie in [-1, 1] and the softmax is almost "
                    "uniform; multiply them by a learned temperature (Swin v2's `logit_scale`, "
                    "XCiT's `temperature`)",
                )
                continue
            if scores.scores.scaling != ():
                continue
            if _one_number_per_position(analysis, product) or _scale_one_written(analysis, product):
                continue
            reported.add(product.node)
            yield Violation(
                product.node,
                "softmax over q·kᵀ scores that nothing scales: divide by `math.sqrt(d_k)` "
                "(or multiply q by `d_k ** -0.5`) before the softmax",
                # scaling the weights instead is a mistake a second scale would not mend
                fix=None if scores.softmax in scaled_after else _scaled(analysis, product),
            )


def _one_number_per_position(analysis: ModuleAnalysis, product: Product) -> bool:
    """Queries that are one feature of a projection each (``q, k, v =
    self.qkv(x).unbind(-1)`` with ``nn.Linear(d, 3)``, timm's CSATv2): each position's query
    is one number, its d_k is 1, and 1/sqrt(1) scales nothing. (The product then contracts
    positions, not features: a bug of another kind, which a scale would not mend.)"""
    split = product.left.origin
    if not (isinstance(split, ast.Call) and isinstance(split.func, ast.Attribute)):
        return False
    dim = argument(split, 0, "dim")
    if split.func.attr != "unbind" or dim is None or analysis.source(dim) != "-1":
        return False
    projected = analysis.fact(split.func.value)
    linear = set(analysis.module_calls("torch.nn.Linear"))
    return isinstance(projected, TensorFact) and projected.origin in linear


def _scale_one_written(analysis: ModuleAnalysis, product: Product) -> bool:
    """The function's other branch calls ``F.scaled_dot_product_attention(q, ..., scale=1.0)``
    with queries nothing scaled: the author chose no scale, and the product by hand computes
    the same attention (timm's Gemma 4 ViT, after QK-norm; not XCiT, whose fused branch
    multiplies q by the temperature the product by hand multiplies the scores by)."""
    function = analysis.enclosing_function(product.node)
    for call in analysis.calls_to("torch.nn.functional.scaled_dot_product_attention"):
        scale, query = argument(call, 6, "scale"), argument(call, 0, "query")
        written = scale.value if isinstance(scale, ast.Constant) else None
        queries = analysis.fact(query) if query is not None else None
        unscaled = isinstance(queries, TensorFact) and queries.scaling == ()
        if written == 1 and unscaled and analysis.enclosing_function(call) is function:
            return True
    return False


def _cosine_only(analysis: ModuleAnalysis, scaling: tuple[ScaleEvidence, ...] | None) -> bool:
    """Scores whose only scaling is ``F.normalize`` of q and k: cosine similarities, with no
    temperature."""
    return bool(scaling) and all(
        isinstance(evidence.node, ast.Call)
        and analysis.resolves_to(evidence.node.func, "torch.nn.functional.normalize")
        for evidence in scaling or ()
    )


_SELF_ATTRIBUTE = re.compile(r"self(\.[A-Za-z_]\w*)+")


def _scaled(analysis: ModuleAnalysis, product: Product) -> FixOffer | None:
    """Divide by ``math.sqrt(d_k)`` after the product (``q @ kᵀ / s``, and
    ``torch.matmul(q, kᵀ) / s`` where the call stands alone), else on the queries inside it.
    ``d_k`` is the size the analysis knows (``self.head_dim``) or read from the queries
    (``q.size(-1)``)."""
    queries, written = product.left, product.left_node
    size = queries.shape[product.left_contracted] if queries.shape is not None else None
    if size is not None and _SELF_ATTRIBUTE.fullmatch(str(size)):
        d_k = str(size)
    elif dotted_name(written) is not None:  # a name or attribute: safe to repeat
        d_k = f"{analysis.source(written)}.size({product.left_contracted})"
    else:
        return None
    whole = isinstance(product.node, ast.BinOp) or _stands_alone(analysis, product.node)
    scaled = product.node if whole else written
    return FixOffer(
        "divide the scores by sqrt(d_k)",
        safe=False,
        write=partial(_divided, scaled, whole, f"math.sqrt({d_k})"),
        rewritten=(scaled,),
        kept=(scaled,),
        imports=("math",),
    )


def _divided(scaled: ast.AST, whole: bool, divisor: str, tree: ConcreteTree) -> Replacements | None:
    """``scaled / divisor``: ``scaled`` replaced whole (parentheses around it stay), or
    parenthesised as an operand where it would not stay whole."""
    from shapecheck.concrete import bare, operand  # libcst loads only when a fix is written

    node = tree.node(scaled)
    if node is None:
        return None
    return ((node, f"{bare(node) if whole else operand(node)} / {divisor}"),)


def _stands_alone(analysis: ModuleAnalysis, node: ast.AST) -> bool:
    """Is ``node`` a whole assigned value, returned value or argument (where ``node / s``
    needs no parentheses)? A ``@`` product never needs them: ``/`` groups the same way."""
    parent = analysis.parent(node)
    if isinstance(parent, ast.Call):
        return node in parent.args
    return isinstance(parent, ast.Assign | ast.AnnAssign | ast.Return | ast.keyword)
