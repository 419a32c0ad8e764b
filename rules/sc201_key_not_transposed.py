from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from shapecheck.analysis import ModuleAnalysis
from shapecheck.analysis.facts import Product, TensorFact
from shapecheck.analysis.observations import AttentionScores
from shapecheck.fixes import FixOffer, Replacements
from shapecheck.rule import Rule, Violation, assuming

if TYPE_CHECKING:
    from shapecheck.concrete import ConcreteTree


class KeyNotTransposed(Rule):
    """
    ## What it does
    Finds attention scores `q @ k'` (`@`, `matmul`, `bmm`, `einsum`) whose key operand `k'`
    is not the keys with their last two axes swapped: `k.transpose(1, 2)` on 4-D keys (or on
    2-D keys, which have no axis 2), a bare `q @ k`, `k.T` on an N-D tensor,
    `k.permute(0, 2, 1, 3)`, `k.view(B, H, D, L)`, or einsum subscripts that contract the keys'
    sequence axis. Where branches compute the scores by different products that one softmax
    reads, each product is checked.

    ## Why is this bad?
    Scores must contract the queries' feature axis `d_k` with the keys' feature axis, giving
    `[..., L_q, L_k]`. Any other pairing either crashes on a shape mismatch or, when sizes
    happen to coincide (`L == d_k`, `H == L`), silently computes something else.
    `transpose(1, 2)` is right only for 3-D `[B*H, L, D]` keys; on 4-D `[B, H, L, D]` keys it
    swaps heads and positions. `.T` reverses every axis of an N-D tensor. `view` reinterprets
    memory; it never transposes.

    ## Example
    ```python
    q = q.view(B, L, H, D).transpose(1, 2)       # [B, H, L, D]
    k = k.view(B, L, H, D).transpose(1, 2)       # [B, H, L, D]
    scores = q @ k.transpose(1, 2) / math.sqrt(D)
    ```

    ## Use instead
    ```python
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)   # or k.mT
    ```

    ## Fix safety
    Unsafe: the scores change (that is the point), so it applies only with `--unsafe-fixes`.
    The keys where the product reads them become `k.transpose(-2, -1)` (from `.transpose(1, 2)`,
    `.T`, a reinterpreting `.view`) or get `.transpose(-2, -1)` appended, and only where the
    shapes prove it: the rewritten keys end `[..., d_k, L_k]` with the queries' batch axes.
    Einsum subscripts are left to the author.

    ## Runtime evidence
    With distinct sizes PyTorch raises (fixtures/SC201_*.py, `python -m shapecheck.confirm`):
    `RuntimeError: The size of tensor a (3) must match the size of tensor b (7) at
    non-singleton dimension 1` (matmul), `RuntimeError: Expected size for first two dimensions
    of batch2 tensor to be: [6, 4] but got: [6, 7].` (bmm), `RuntimeError: einsum(): subscript
    d has size 7 for operand 1 which does not broadcast with previously seen size 4` (einsum),
    `IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 2)`
    (`transpose(1, 2)` on 2-D keys).
    `k.view(B, H, D, L)` runs and differs from the reference; so does any of these when the
    sizes coincide.
    """

    code = "SC201"
    name = "key-not-transposed"
    severity = "error"
    summary = "attention scores `q @ k'` where k' is not k with its last two axes swapped"

    def check(self, analysis: ModuleAnalysis) -> Iterator[Violation]:
        for scores in analysis.observations(AttentionScores):
            product: Product | None = scores.product
            while product is not None:  # and the products other branches joined to these
                if not product.left.is_parameter and not product.right.is_parameter:
                    problem = _problem(product)
                    if problem is not None:
                        guess = scores.scores.guess or product.left.guess or product.right.guess
                        yield Violation(
                            product.right_node,
                            problem + assuming(guess),
                            fix=_fix(analysis, product),
                        )
                product = product.other


def _fix(analysis: ModuleAnalysis, product: Product) -> FixOffer | None:
    """Keys with their last two axes swapped, written where the product reads them, when the
    shapes prove it right: ``k.transpose(1, 2)``, ``k.T`` and ``k.view(B, H, D, L)`` of keys
    ``[..., L, D]`` become ``k.transpose(-2, -1)``; keys ``[..., L, D]`` read as they are get
    ``.transpose(-2, -1)`` appended."""
    if product.right_contracted != -2 or product.left.shape is None:
        return None  # einsum: the subscripts, not a transpose, say what is contracted
    feature = product.left.shape[product.left_contracted]
    written = product.right_node
    op = product.right.axis_op
    candidate: tuple[ast.expr, TensorFact] | None = None
    if op is not None and op.node is written and op.name in ("T", "transpose", "view"):
        receiver = _reordered(analysis, written)
        fact = analysis.fact(receiver) if receiver is not None else None
        if receiver is not None and isinstance(fact, TensorFact):
            candidate = receiver, fact
    else:
        candidate = written, product.right
    if candidate is None:
        return None
    keys, fact = candidate
    if fact.shape is None or len(fact.shape) < 2:
        return None
    queries = product.left.shape
    if fact.shape[-1] != feature or fact.shape[-2] == feature:
        return None
    if len(fact.shape) != len(queries) or fact.shape[:-2] != queries[:-2]:
        return None  # the batch axes must already line up
    return FixOffer(
        "transpose the keys' last two axes",
        safe=False,
        write=partial(_write_transposed, written, keys),
        rewritten=(written,),
        kept=(keys,),
    )


def _write_transposed(written: ast.expr, keys: ast.expr, tree: ConcreteTree) -> Replacements | None:
    from shapecheck.concrete import atom  # libcst loads only when a fix is written

    target, tensor = tree.node(written), tree.node(keys)
    if target is None or tensor is None:
        return None
    return ((target, f"{atom(tensor)}.transpose(-2, -1)"),)


def _reordered(analysis: ModuleAnalysis, node: ast.expr) -> ast.expr | None:
    """The tensor a ``.T``, ``.transpose(…)``/``torch.transpose(x, …)`` or ``.view(…)`` reads."""
    if isinstance(node, ast.Attribute):
        return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if analysis.resolves_to(node.func, "torch.transpose"):
            first = node.args[0] if node.args else None
            return None if first is None or isinstance(first, ast.Starred) else first
        return node.func.value
    return None


def _problem(product: Product) -> str | None:
    keys = product.right
    op = keys.axis_op
    is_matmul = product.right_contracted == -2
    if is_matmul and op is not None and op.name == "transpose" and op.input_rank is not None:
        rank = op.input_rank
        missing = [axis for axis in op.axes if not -rank <= axis < rank]
        if missing and not keys.guess and not keys.uncertain:
            first, second = op.axes
            return (
                f"`transpose({first}, {second})` on {rank}-D keys names axis "
                f"{missing[0]}, which they do not have (PyTorch raises IndexError): use "
                "`.transpose(-2, -1)`"
            )
    if is_matmul and op is not None and op.input_rank is not None and op.input_rank > 2:
        rank = op.input_rank
        if op.name == "T":
            return (
                f"`.T` reverses all {rank} axes of the keys; attention scores need only the "
                "last two swapped: use `.transpose(-2, -1)` or `.mT`"
            )
        if op.name == "transpose" and set(op.axes) != {rank - 2, rank - 1}:
            first, second = op.axes
            return (
                f"`transpose({first}, {second})` on {rank}-D keys swaps axes {first} and "
                f"{second}, not the last two: the scores do not contract the feature axis; "
                "use `.transpose(-2, -1)`"
            )
        if op.name == "view":
            return (
                "`view` reinterprets the keys' memory with the last two sizes exchanged; "
                "it does not transpose: use `.transpose(-2, -1)`"
            )
    return _contracts_wrong_axis(product)


def _contracts_wrong_axis(product: Product) -> str | None:
    """The queries' feature axis is paired with a keys' axis that is not the keys' features."""
    queries, keys = product.left, product.right
    if queries.shape is None or keys.shape is None:
        return None
    try:
        feature = queries.shape[product.left_contracted]
        paired = keys.shape[product.right_contracted]
    except IndexError:
        return None
    if paired == feature:
        return None
    if feature.value is not None and paired.value is None:
        return None  # a literal size seen elsewhere in the keys proves nothing
    channels = keys.channels
    if channels is not None and channels.axis - channels.rank == product.right_contracted:
        return None  # keys [.., C, N] out of a convolution, to be contracted as they are
    positions = [index for index, dim in enumerate(keys.shape) if dim == feature]
    if len(positions) != 1:
        return None
    rank = len(keys.shape)
    return (
        f"the scores contract the queries' feature axis ({feature}) with keys axis "
        f"{product.right_contracted % rank} ({paired}); the keys' feature axis is axis "
        f"{positions[0]}: transpose the keys' last two axes (`.transpose(-2, -1)`)"
    )
