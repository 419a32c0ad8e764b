"""Masks and what is written through them: ``tril``/``triu``, ``~``, ``&``/``|``,
``masked_fill``, ``where``."""

from __future__ import annotations

import ast
import math

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    OPPOSITE_POLARITY,
    UNKNOWN,
    Fact,
    IntFact,
    Product,
    ScalarFact,
    TensorFact,
)
from shapecheck.analysis.lattice import Family, flow
from shapecheck.analysis.layout import Layout
from shapecheck.analysis.observations import (
    FillValue,
    MaskBroadcast,
    TensorFromNumber,
)
from shapecheck.analysis.ops import (
    OpCall,
    OpContext,
    as_tensor,
    broadcast_shapes,
    function_op,
    number,
    tensor_op,
    torch_names,
)
from shapecheck.record import replace


@tensor_op("tril", "triu", functions=torch_names("tril", "triu"))
def triangle(call: OpCall) -> Fact:
    """``tril`` keeps the visible keys of a causal mask (True = attend); ``triu`` from the
    first diagonal above keeps the future ones (True = blocked)."""
    diagonal = _least_diagonal(call)
    polarity = None
    if call.name.endswith("tril") and diagonal is not None and diagonal >= 0:
        polarity = "attend"
    elif call.name.endswith("triu") and diagonal is not None and diagonal >= 1:
        polarity = "block"
    # zeroing a triangle does not mask scores (that needs -inf): no longer a product
    return flow(call.receiver, Family.MASKING, origin=call.node, polarity=polarity, product=None)


def _least_diagonal(call: OpCall) -> int | None:
    """The diagonal a ``tril``/``triu`` starts from (0 when not given), or the least it can
    be: a literal, or an offset plus a literal (``triu(j - i + 1)``,
    ``triu(diagonal=start_pos + 1)``), the offset a size (the keys a cache holds beyond the
    queries), never negative; a size alone (``tril(diagonal=start_pos)``) is 0 or more.
    ``None``: anything else (``-k``, a number the analysis cannot read)."""
    argument = call.get(0, "diagonal")
    if argument is None:
        return 0
    fact, node = argument
    literal = call.int_arg(0, "diagonal")
    if literal is not None:
        return literal
    match node:
        case ast.BinOp(op=ast.Add(), right=ast.Constant(value=int() as added)) if added >= 0:
            return added if isinstance(fact, IntFact) else None
        case ast.Name() | ast.Attribute() | ast.BinOp(op=ast.Sub()):
            return 0 if isinstance(fact, IntFact) else None
    return None


@tensor_op("logical_not", functions=torch_names("logical_not"))
def logical_not(call: OpCall) -> Fact:
    return negated(call.receiver, call.node)


def negated(mask: TensorFact, node: ast.AST) -> TensorFact:
    """``~mask``: True where it was False; the polarity flips."""
    flipped = OPPOSITE_POLARITY.get(mask.polarity or "")
    return flow(mask, Family.ELEMENTWISE, origin=node, polarity=flipped, dtype="bool")


def combined(node: ast.AST, left: Fact, right: Fact) -> Fact:
    """``a & b``, ``a | b`` (``logical_and``, ``logical_or``) of masks: elementwise, shapes
    broadcast. The result means what its known operands mean: ``mask & ~causal_mask`` is
    True where attention is allowed whatever ``mask`` was called, since code combines masks
    of one polarity (``&`` of two "attend" masks, ``|`` of two "blocked" ones); operands
    known to disagree leave it unknown. Of the one dtype its operands are known to have:
    boolean for masks, an integer's for ``ids & bits`` (bitwise; ``&`` of floats raises)."""
    tensors = [fact for fact in (left, right) if isinstance(fact, TensorFact)]
    if not tensors:
        return UNKNOWN
    polarities = {tensor.polarity for tensor in tensors if tensor.polarity is not None}
    polarity = polarities.pop() if len(polarities) == 1 else None
    dtypes = {tensor.dtype for tensor in tensors if tensor.dtype is not None}
    dtype = dtypes.pop() if len(dtypes) == 1 else None
    if len(tensors) == 1:  # ``mask & True``: the tensor's shape
        return flow(tensors[0], Family.ELEMENTWISE, origin=node, polarity=polarity, dtype=dtype)
    first, second = tensors
    return TensorFact(
        shape=broadcast_shapes(first.shape, second.shape),
        origin=node,
        polarity=polarity,
        dtype=dtype,
        uncertain=first.uncertain or second.uncertain,
        guess=first.guess or second.guess,
    )


@tensor_op("logical_and", "logical_or", functions=torch_names("logical_and", "logical_or"))
def logical(call: OpCall) -> Fact:
    other = call.get(0, "other")
    return combined(call.node, call.receiver, other[0] if other is not None else UNKNOWN)


FLOAT16_MAX = 65504.0
"""The largest finite float16: fills beyond it overflow (SC401)."""


WEAK_FILL = 1e4
"""Fills of smaller magnitude leave masked keys real weight after softmax (SC402)."""


@tensor_op("masked_fill", functions=torch_names("masked_fill"))
def masked_fill(call: OpCall) -> Fact:
    receiver = call.receiver
    mask, value = call.get(0, "mask"), call.get(1, "value")
    shape = receiver.shape
    mask_tensor = as_tensor(mask[0]) if mask is not None else None
    if mask_tensor is not None and mask_tensor.shape is not None and shape is not None:
        shape = broadcast_shapes(shape, mask_tensor.shape)  # a mask of more axes adds them
    reshaped = shape is not None and shape != receiver.shape
    rank = len(shape) if reshaped and shape is not None else receiver.rank
    layout = Layout.contiguous(rank) if receiver.layout is not None or reshaped else None
    if mask is not None:
        check_mask(call.context, receiver, *mask)
    unread_fills = receiver.unread_fills
    constant = as_tensor(value[0]) if value is not None else None
    if constant is not None and constant.from_number is not None:
        call.context.observe(TensorFromNumber(constant.from_number))
    if value is not None and isinstance(value[0], ScalarFact | IntFact):
        filled = number(value[0])
        written_by = call.node if isinstance(call.node, ast.Call) else None
        problem = fill_problem(receiver, filled, value[1], masked_fill=written_by)
        if problem is not None and problem.overflow:
            if not call.context.precision_aware:
                call.context.observe(problem)  # masked_fill refuses what float16 cannot hold
        elif problem is not None:  # too weak: wrong only if a softmax reads it
            unread_fills = with_fill(call.context, receiver, filled, value[1])
    written = _written(mask[1]) if mask is not None else None
    masked = receiver.masked_weights
    if receiver.weights and written not in receiver.masked_with:
        masked = call.node  # the softmax already spent weight on these keys
    masked_with = receiver.masked_with | ({written} if written else set())
    # a 0/1 float mask filled where it blocks is an additive mask now: 0 or the fill
    polarity = receiver.polarity if receiver.dtype == "bool" else None
    return flow(
        receiver if not reshaped else replace(receiver, shape=shape),
        Family.MASKING,
        layout=layout,
        origin=call.node,
        polarity=polarity,
        masked_weights=masked,
        masked_with=masked_with,
        unread_fills=unread_fills,
    )


def _written(node: ast.AST) -> str:
    """The expression's structure, positions aside: the same mask twice is the same text."""
    return ast.dump(node)


@function_op("torch.where")
def where(call: OpCall) -> Fact:
    condition, chosen, other = call.get(0, "condition"), call.get(1, "input"), call.get(2, "other")
    tensors = [as_tensor(argument[0]) for argument in (chosen, other) if argument is not None]
    for tensor, argument in zip(tensors, (other, chosen), strict=False):
        if tensor is None or (tensor.product is None and not tensor.weights):
            continue
        if condition is not None:
            check_mask(call.context, tensor, *condition)
        unread_fills = tensor.unread_fills
        if argument is not None and isinstance(argument[0], ScalarFact | IntFact):
            unread_fills = with_fill(call.context, tensor, number(argument[0]), argument[1])
        masked = call.node if tensor.weights else tensor.masked_weights
        return flow(
            tensor,
            Family.MASKING,
            layout=None,
            origin=call.node,
            masked_weights=masked,
            unread_fills=unread_fills,
        )
    return TensorFact(origin=call.node, scaling=None)


def with_fill(
    context: OpContext, scores: TensorFact, value: float | None, node: ast.AST
) -> tuple[tuple[ast.AST, float], ...]:
    """``scores``' unread fills and this one; a branch that tests for float16 picked a fill
    beyond its range on purpose, and a positive one boosts keys rather than masking them."""
    if value is None or value > 0 or (context.precision_aware and abs(value) > FLOAT16_MAX):
        return scores.unread_fills
    return (*scores.unread_fills, (node, value))


def fill_problem(
    scores: TensorFact,
    value: float | None,
    node: ast.AST,
    *,
    masked_fill: ast.Call | None = None,
) -> FillValue | None:
    """A literal written into attention scores: beyond float16, or too weak to mask."""
    if value is None or math.isinf(value) or math.isnan(value):
        return None
    if abs(value) > FLOAT16_MAX and scores.dtype not in ("float32", "float64", "bfloat16"):
        return FillValue(node, value, scores.dtype, overflow=True, masked_fill=masked_fill)
    if abs(value) < WEAK_FILL and scores.is_scores:
        return FillValue(node, value, scores.dtype, overflow=False, masked_fill=masked_fill)
    return None


def check_mask(context: OpContext, scores: TensorFact, mask: Fact, node: ast.AST) -> None:
    """A mask for attention scores ``[..., Lq, Lk]`` must broadcast along the right axes."""
    tensor = as_tensor(mask)
    if not scores.is_scores or tensor is None:
        return
    check_mask_axes(
        context, tensor, scores.shape, node, scores.guess or tensor.guess, scores.product
    )


def check_mask_axes(
    context: OpContext,
    mask: TensorFact,
    scores: tuple[Dim, ...] | None,
    node: ast.AST,
    guess: str | None = None,
    product: Product | None = None,
) -> None:
    """``product``: the matrix product the masked scores came from (``None``: the scores of a
    kernel, ``scaled_dot_product_attention``'s)."""
    if mask.shape is None or scores is None:
        return
    misplaced = misaligned_axis(mask.shape, scores)
    if misplaced is not None:
        context.observe(
            MaskBroadcast(
                node,
                mask.shape,
                scores,
                misplaced,
                masks_queries=False,
                guess=guess,
                product=product,
            )
        )
    elif masks_queries(mask.shape, scores):
        axis = len(mask.shape) - 2
        context.observe(
            MaskBroadcast(
                node, mask.shape, scores, axis, masks_queries=True, guess=guess, product=product
            )
        )


def misaligned_axis(mask: tuple[Dim, ...], scores: tuple[Dim, ...]) -> int | None:
    """The first mask axis (aligned from the right) holding a named size that belongs to a
    different axis of the scores: a padding mask over the queries, a batch axis under the
    heads. ``None`` when every axis is 1, the scores' own size, or not provably wrong."""
    if len(mask) > len(scores):
        return None
    offset = len(scores) - len(mask)
    for index, dim in enumerate(mask):
        target = scores[offset + index]
        if dim == target or dim.value == 1 or not dim.is_named or not target.is_named:
            continue  # an unknown size of the scores may be this one
        elsewhere = [i for i, size in enumerate(scores) if size == dim and i != offset + index]
        if elsewhere:
            return index
    return None


def masks_queries(mask: tuple[Dim, ...], scores: tuple[Dim, ...]) -> bool:
    """``[B, 1, L, 1]`` on scores ``[B, H, L, L]``: the sequence axis sits under the queries and
    the keys' axis is 1, so padded queries are blocked while every query still sees the padded
    keys. Scores of more than four axes may hold the keys over two (SAM's and MViTv2's
    decomposed relative positions view ``[B*H, L, L]`` as ``[B*H, qh, qw, kh, kw]`` and add a
    bias along ``kh`` as ``[..., kh, 1]``): which axis holds the queries there is unknown."""
    if len(mask) < 2 or len(mask) > len(scores) or len(scores) > 4:
        return False
    queries, keys = mask[-2], mask[-1]
    return (
        keys.value == 1
        and queries.is_named
        and queries == scores[-2]
        and scores[-1].is_named
        and scores[-1].value != 1
    )
