"""Values computed elementwise: casts and copies, dropout, activations, ``+ - * /``."""

from __future__ import annotations

import ast
import math
import re

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    ACTIVATIONS,
    SAME_SHAPE,
    UNKNOWN,
    DtypeOf,
    Fact,
    HeadsAxis,
    IntFact,
    Positions,
    PositionTable,
    QualifiedName,
    ScalarFact,
    Scale,
    ScaleEvidence,
    TensorFact,
    Unknown,
    scale_of,
)
from shapecheck.analysis.imports import dotted_name
from shapecheck.analysis.lattice import Family, flow
from shapecheck.analysis.layout import Layout
from shapecheck.analysis.observations import (
    PositionsInLowPrecision,
    TableOnHeads,
    TensorFromNumber,
    WeightsScaled,
)
from shapecheck.analysis.ops import (
    LOW_PRECISION,
    Argument,
    OpCall,
    OpContext,
    as_tensor,
    broadcast_shapes,
    dtype_owner,
    functional_names,
    module_op,
    new_tensor,
    number,
    tensor_op,
    torch_names,
    written_dtype,
)
from shapecheck.analysis.ops.masks import check_mask, with_fill
from shapecheck.record import replace

_CAST_METHODS = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "bfloat16": "bfloat16",
    "bool": "bool",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "char": "int8",
    "byte": "uint8",
}


@tensor_op(*_CAST_METHODS, "to", "type", "type_as", "cpu", "cuda", "detach", "requires_grad_")
def same_values(call: OpCall) -> Fact:
    dtype = call.receiver.dtype
    like: Argument | None = None  # a tensor whose dtype is taken
    if call.name in _CAST_METHODS:
        dtype = _CAST_METHODS[call.name]
    elif call.name in ("to", "type"):
        target = call.kwargs.get("dtype") or call.get(0)
        if len(call.args) > 1 and target is call.args[0]:
            target = call.args[1]  # .to(device, dtype)
        if target is not None:
            dtype = _cast(target, dtype, dtype_given="dtype" in call.kwargs)
            like = target if isinstance(target[0], TensorFact | DtypeOf) else None
    elif call.name == "type_as":
        like = call.get(0, "other")
        other = call.tensor_arg(0, "other")
        dtype = other.dtype if other is not None else None
    positions = _rounded_by_cast(call, dtype, like)
    from_number = call.receiver.from_number
    if call.name in ("cuda", "type_as") or (call.name == "to" and _places(call)):
        from_number = None
    return flow(
        call.receiver,
        Family.SAME_VALUES,
        origin=call.node,
        dtype=dtype,
        from_number=from_number,
        positions=positions,
    )


def _rounded_by_cast(call: OpCall, dtype: str | None, like: Argument | None) -> Positions | None:
    """The receiver's positions after a cast to ``dtype``: rounded by a 16-bit dtype, or by
    the model's (that of an activation or a floating buffer, ``.type_as(self.inv_freq)``)."""
    positions = call.receiver.positions
    if positions is None or positions.rounded is not None:
        return positions
    if dtype in LOW_PRECISION:
        return replace(positions, rounded=call.node, dtype=dtype)
    if dtype is None and like is not None and _models_dtype(like[0]):
        return replace(positions, rounded=call.node, like=dtype_owner(like[1]) or like[1])
    return positions


def _models_dtype(fact: Fact) -> bool:
    """A tensor in the model's dtype, or that dtype read off one (``x.dtype``)."""
    if isinstance(fact, DtypeOf):
        return fact.dtype is None
    return isinstance(fact, TensorFact) and fact.dtype is None


def _cast(target: Argument, dtype: str | None, *, dtype_given: bool) -> str | None:
    """The dtype after ``.to(target)``: one written out (``torch.float16``), another
    tensor's (``.to(x)``), unknown for one the analysis cannot read (``.to(q.dtype)``); a
    device (``.to("cuda")``) leaves it."""
    fact, node = target
    if isinstance(fact, QualifiedName | DtypeOf):
        return written_dtype(fact)
    written = (dotted_name(node) or "") if isinstance(node, ast.expr) else ""
    if "device" in written.rsplit(".", 1)[-1]:
        return dtype  # .to(device), .to(x.device)
    if isinstance(fact, TensorFact) and fact.dtype is not None:
        return fact.dtype
    reads_dtype = written.endswith(".dtype")
    return None if dtype_given or reads_dtype or isinstance(fact, TensorFact) else dtype


def _places(call: OpCall) -> bool:
    """``.to(x.device)``, ``.to(x)``, ``.to(device=...)``: more than a dtype change."""
    if "device" in call.kwargs:
        return True
    if not call.args:
        return False
    target, node = call.args[0]
    is_dtype = isinstance(target, QualifiedName) or (
        isinstance(node, ast.Attribute) and node.attr == "dtype"
    )
    return not is_dtype


@module_op("torch.nn.Dropout", "torch.nn.Identity")
@tensor_op(functions=[*functional_names("dropout"), "torch.dropout"])
def dropout(call: OpCall) -> Fact:
    return flow(call.receiver, Family.SAME_VALUES, origin=call.node)


@module_op(*ACTIVATIONS)
def activation_module(call: OpCall) -> Fact:
    return flow(call.receiver, Family.ELEMENTWISE, origin=call.node)


@module_op(SAME_SHAPE)
def same_shape_module(call: OpCall) -> Fact:
    """One of several layers that keep the shape (a norm or ``nn.Identity``): the values
    change in a way the analysis cannot tell, but not their scale (a norm's gain is no
    temperature; see ``normalised``)."""
    guess = call.module.guess if call.module is not None else None
    return flow(
        call.receiver,
        Family.ELEMENTWISE,
        origin=call.node,
        scaling=call.receiver.scaling,
        guess=guess or call.receiver.guess,
    )


_EACH_VALUE = (
    *("relu", "sigmoid", "tanh", "exp", "neg", "abs", "sqrt", "rsqrt", "log", "log1p"),
    *("sign", "square", "reciprocal", "floor", "ceil", "round", "nan_to_num", "flip"),
    *("clamp", "clamp_min", "clamp_max", "clip", "pow"),
)
"""Tensor methods and ``torch`` functions of each value (``flip`` moves them, keeping the
strides' order as these do: PyTorch allocates their result like the input)."""
_ACTIVATIONS = ("relu", "gelu", "silu", "sigmoid", "tanh", "elu", "leaky_relu", "mish")
_MORE_ACTIVATIONS = ("softplus", "relu6", "hardswish", "hardsigmoid", "selu", "celu", "logsigmoid")


@tensor_op(
    *_EACH_VALUE,
    functions=[
        *torch_names(*_EACH_VALUE),
        *functional_names(*_ACTIVATIONS, *_MORE_ACTIVATIONS, "hardtanh"),
    ],
)
def elementwise(call: OpCall) -> Fact:
    """A function applied to each element: shape and layout stay, the values change (bounds
    that are tensors, ``x.clamp(min=floor)``, may broadcast: not modelled)."""
    receiver = call.receiver
    bounds = [*call.args, *call.kwargs.values()]
    if any(isinstance(fact, TensorFact) for fact, _ in bounds):
        return Unknown("op", call.name.rpartition(".")[2])
    scalar = None
    if receiver.scalar is not None and call.name in ("sqrt", "torch.sqrt"):
        scalar = receiver.scalar.power(0.5)
    elif receiver.scalar is not None and call.name in ("rsqrt", "torch.rsqrt"):
        scalar = receiver.scalar.power(-0.5)
    if call.name.rpartition(".")[2] == "tanh" and receiver.product is not None:
        # soft-capped scores, c * tanh(scores / c) (gemma 2 and 3, grok): still the scores,
        # in their scale, as tanh is the identity near zero
        keep = {"product": receiver.product, "scaling": receiver.scaling}
        return flow(receiver, Family.ELEMENTWISE, origin=call.node, scalar=scalar, **keep)
    return flow(receiver, Family.ELEMENTWISE, origin=call.node, scalar=scalar)


_VALUE_TESTS = ("isnan", "isinf", "isfinite")
_INTEGRAL = ("bool", "uint8", "int8", "int16", "int32", "int64")


@tensor_op(*_VALUE_TESTS, functions=torch_names(*_VALUE_TESTS))
def value_test(call: OpCall) -> Fact:
    """``x.isnan()``: a boolean of each value, laid out like ``x``."""
    return flow(call.receiver, Family.ELEMENTWISE, origin=call.node, dtype="bool", scalar=None)


@tensor_op("cumsum", "cumprod", functions=torch_names("cumsum", "cumprod"))
def running(call: OpCall) -> Fact:
    """``mask.cumsum(-1)`` (positions from a padding mask): the shape stays, in a fresh
    contiguous tensor; integers and booleans add up as int64 unless a dtype is written."""
    receiver = call.receiver
    dtype = written_dtype(written[0]) if (written := call.get(None, "dtype")) else receiver.dtype
    if written is None and dtype in _INTEGRAL:
        dtype = "int64"
    return new_tensor(receiver.shape, call.node, receiver, dtype=dtype)


_WRITTEN_AT = ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill")


@tensor_op(
    *_WRITTEN_AT,
    *(f"{name}_" for name in _WRITTEN_AT),
    functions=torch_names(*_WRITTEN_AT),
)
def written_at(call: OpCall) -> Fact:
    """``x.scatter_add_(0, index, src)`` and the like: values written into ``x`` where an
    index says (a router's counts per expert); its shape stays, its values change in a way
    the analysis cannot tell."""
    return flow(call.receiver, Family.ELEMENTWISE, origin=call.node, scaling=None)


@tensor_op("cos", "sin", functions=torch_names("cos", "sin"))
def trigonometric(call: OpCall) -> Fact:
    """``cos``/``sin`` of phases: where the positions behind them were rounded to 16 bits,
    the angles are wrong (rotary and sinusoidal embeddings)."""
    positions = call.receiver.positions
    if positions is not None and positions.rounded is not None and isinstance(call.node, ast.Call):
        call.context.observe(PositionsInLowPrecision(positions, call.node))
    rank = call.receiver.rank
    # phases [T, D] (or [B, T, D]): the positions run along the axis before the features
    table = PositionTable(call.node, -2) if positions and rank != 1 else None
    return flow(call.receiver, Family.ELEMENTWISE, origin=call.node, table=table)


@tensor_op(functions=functional_names("normalize"))
def normalize(call: OpCall) -> Fact:
    # unit vectors: their dot products are bounded, which is a scaling of its own
    receiver = call.receiver
    return flow(
        receiver,
        Family.ELEMENTWISE,
        origin=call.node,
        scaling=(ScaleEvidence(call.node, None),),
    )


def arithmetic(context: OpContext, node: ast.AST, operator: str, left: Fact, right: Fact) -> Fact:
    """``left <operator> right`` for ``+ - * /`` where at least one side may be a tensor."""
    if isinstance(left, IntFact) and isinstance(right, IntFact):
        if operator == "*":
            return IntFact(left.dim * right.dim)
        if operator == "//":
            return IntFact(left.dim.floordiv(right.dim))
        if operator in "+-":  # start_pos + seqlen: a size of its own (see Dim.__add__)
            size = left.dim + right.dim if operator == "+" else left.dim - right.dim
            # an int still, where a term is one of unknown value (``scale_factor += 1`` after
            # branches that counted differently)
            size = Dim.symbol("?") if size.has_unknown else size
            return IntFact(size, left.assumed or right.assumed)
        return UNKNOWN if operator != "/" else _number_arithmetic(operator, left, right)
    if _is_number(left) and _is_number(right):
        return _number_arithmetic(operator, left, right)
    tensors = [fact for fact in (left, right) if isinstance(fact, TensorFact)]
    if not tensors:
        return UNKNOWN
    return _tensor_arithmetic(context, node, operator, left, right)


def _number_arithmetic(operator: str, left: Fact, right: Fact) -> ScalarFact:
    """``1 / math.sqrt(d)``, ``d * 2``: numbers keep their meaning where it is simple."""
    a, b = scale_of(left), scale_of(right)
    scale = None
    if a is not None and b is not None and operator in "*/":
        factor = b if operator == "*" else b.power(-1)
        scale = a.times(factor) if factor is not None else None
    value = None
    x, y = number(left), number(right)
    if x is not None and y is not None:
        value = {"*": x * y, "+": x + y, "-": x - y}.get(operator)
        if operator == "/" and y != 0:
            value = x / y
    return ScalarFact(scale=scale, value=value)


def _is_number(fact: Fact) -> bool:
    return isinstance(fact, IntFact | ScalarFact)


def _known_of_shape(tensor: TensorFact) -> int:
    """How much is known of a tensor's shape: nothing (0), its rank only (1: ``x.ndim == 3``
    told it; or sizes of its own, unnamed, that say nothing of another tensor's), a size (2)."""
    if tensor.shape is None:
        return 0
    return 1 if all(dim.unrelated for dim in tensor.shape) else 2


def _tensor_arithmetic(
    context: OpContext, node: ast.AST, operator: str, left: Fact, right: Fact
) -> Fact:
    left_tensor, right_tensor = as_tensor(left), as_tensor(right)
    if left_tensor is None and right_tensor is None:
        return UNKNOWN
    if left_tensor is None or right_tensor is None:
        # a tensor and a plain number: same shape and layout
        tensor = left_tensor or right_tensor
        number = right if left_tensor is not None else left
        assert tensor is not None
        if tensor.from_number is not None and not _is_number(number):
            context.observe(TensorFromNumber(tensor.from_number))  # next to an activation
        scaling = tensor.scaling
        if operator in ("*", "/"):
            factor = scale_of(number)
            inverted = operator == "/" and left_tensor is not None
            if tensor.weights and factor is not None and tensor.origin is not None:
                context.observe(WeightsScaled(tensor.origin, node))
            scaling = scaled(tensor, node, factor.power(-1) if factor and inverted else factor)
        fill = number if operator == "*" and isinstance(number, ScalarFact) else None
        # a size only assumed (``t * 2`` where ``t`` is an unmodelled call's result) may be
        # a tensor, onto whose unknown shape a 0-d tensor broadcasts
        assumed = tensor.rank == 0 and isinstance(number, IntFact) and number.assumed
        broadcast = {"shape": None, "layout": None, "scalar": None} if assumed else {}
        return flow(
            tensor,
            Family.SCALING,
            origin=node,
            scaling=scaling,
            fill=fill,
            masked_weights=None if operator == "/" else tensor.masked_weights,
            **broadcast,
        )
    for constant, partner in ((left_tensor, right_tensor), (right_tensor, left_tensor)):
        if constant.from_number is not None and partner.from_number is None:
            context.observe(TensorFromNumber(constant.from_number))
    shape = broadcast_shapes(left_tensor.shape, right_tensor.shape)
    guess = left_tensor.guess or right_tensor.guess
    left_known, right_known = _known_of_shape(left_tensor), _known_of_shape(right_tensor)
    if left_known != right_known:
        # scores + attention_mask, q * cos: an operand of unknown shape (or of no known size)
        # broadcasts onto an activation (rank 2 or more, as many axes), as in all the code
        # this is written for; its size-1 axes may grow; said where a finding rests on it
        known, unknown = (
            (left_tensor, _operand(node, right=True))
            if left_known > right_known
            else (right_tensor, _operand(node, right=False))
        )
        other = right_tensor if known is left_tensor else left_tensor
        if (
            known.shape is not None
            and len(known.shape) >= max(2, other.rank or 0)
            and shape != known.shape
        ):
            shape = tuple(Dim.symbol("?") if dim.value == 1 else dim for dim in known.shape)
            guess = guess or f"`{_written(unknown)}` broadcasts onto the other operand"
    both_contiguous = (
        left_tensor.layout is not None
        and right_tensor.layout is not None
        and left_tensor.layout.is_contiguous
        and right_tensor.layout.is_contiguous
        and left_tensor.shape == right_tensor.shape
    )
    layout = Layout.contiguous(len(shape)) if both_contiguous and shape is not None else None
    main, other = (left_tensor, right_tensor)
    if main.product is None and other.product is not None:
        main, other = other, main
    if main.product is not None and other.product is None:
        shape = _product_kept(shape, main)
    scaling = main.scaling
    factor_node = _operand(node, right=other is right_tensor)
    multiplies = operator == "*" and _may_be_scale(other) and not _rotates(factor_node)
    if (operator == "/" and main is left_tensor) or multiplies:
        factor = other.scalar.power(-1) if operator == "/" and other.scalar else other.scalar
        scaling = scaled(main, node, factor)
    unread_fills = main.unread_fills
    if operator in "+-" and main.product is not None:
        # scores + mask: an additive mask must broadcast along the scores' axes
        check_mask(context, main, other, factor_node)
        if other.fill is not None and other.fill.value is not None:
            added = -other.fill.value if operator == "-" else other.fill.value
            unread_fills = with_fill(context, main, added, other.fill.origin or node)
    return TensorFact(
        shape=shape,
        layout=layout,
        origin=node,
        known_last=_broadcast_width(left_tensor, right_tensor) if shape is None else None,
        is_parameter=left_tensor.is_parameter and right_tensor.is_parameter,
        scaling=scaling,
        product=main.product if operator in "+-*/" else None,
        masked_weights=_masked_product(node, operator, main, other),
        weights=main.weights and operator in "*",
        masked_with=main.masked_with,
        unread_fills=unread_fills,
        dtype=_promoted(left_tensor.dtype, right_tensor.dtype),
        uncertain=left_tensor.uncertain or right_tensor.uncertain,
        guess=guess,
        heads=_kept_heads(shape, left_tensor, right_tensor, context, node),
        positions=_phase(node, left_tensor, right_tensor),
    )


def _broadcast_width(left: TensorFact, right: TensorFact) -> Dim | None:
    """The last size of a broadcast whose rank is unknown: a size one side names (taken to be
    more than 1, as everywhere), which the other's must equal or be 1 to (LayoutLMv2's ``q +
    self.q_bias.view(*_sz)``: ``q``'s width, whatever the bias's shape)."""
    named = {side.last_dim for side in (left, right) if side.last_dim and side.last_dim.is_named}
    return named.pop() if len(named) == 1 else None


def _product_kept(shape: tuple[Dim, ...] | None, product: TensorFact) -> tuple[Dim, ...] | None:
    """The shape of a product (attention scores) that a bias, mask or scale of other sizes
    broadcasts onto: where the two name a size apart (Swin's scores, as long as the window
    its caller names or ``x.shape[1]``, and its bias table, as long as its own
    ``self.window_area``), PyTorch raises unless they are equal, so the product's size, the
    one the code goes on to name (``attn.view(-1, self.num_heads, N, N)``), stands for both.
    Not a size 1 of the product: the other operand's grows it; nor an unknown one, where the
    other's is known to relate to other sizes. An unnamed size of the other (a mask's own
    ``mask.shape[1]``) says nothing of the product's: a mask's sizes are mostly 1."""
    if shape is None or product.shape is None or len(shape) != len(product.shape):
        return shape
    return tuple(
        dim if kept.value == 1 or (kept.has_unknown and not dim.unrelated) else kept
        for dim, kept in zip(shape, product.shape, strict=True)
    )


def _phase(node: ast.AST, left: TensorFact, right: TensorFact) -> Positions | None:
    """Positions combined with another tensor (``t[:, None] * self.inv_freq``) are phases
    that grow with them. Integer positions take the other's float dtype: a buffer or
    parameter of the module has the model's, which rounds them."""
    positions = left.positions or right.positions
    if positions is None or positions.rounded is not None:
        return positions
    for counted, other in ((left, right), (right, left)):
        integral = counted.positions is not None and counted.dtype in ("int64", "int32")
        written = _operand_of(node, other is left)
        owned = (dotted_name(written) or "").startswith("self.") if written else False
        if integral and owned and other.positions is None and other.dtype is None:
            return replace(positions, rounded=node, like=written)
    return positions


def _operand_of(node: ast.AST, left: bool) -> ast.expr | None:
    """The left or right operand of ``node``, a binary operation."""
    if not isinstance(node, ast.BinOp):
        return None
    return node.left if left else node.right


def _kept_heads(
    shape: tuple[Dim, ...] | None,
    left: TensorFact,
    right: TensorFact,
    context: OpContext,
    node: ast.AST,
) -> HeadsAxis | None:
    """The heads axis of an operand as wide as the result (``q * cos``: the table broadcasts
    onto ``q``'s axes, which keep their meaning); none where the operands disagree. A
    positions table whose positions land on those heads is observed."""
    rank = None if shape is None else len(shape)
    for tensor, table in ((left, right.table), (right, left.table)):
        heads = tensor.heads
        if heads is not None and table is not None and heads.from_end() == table.axis:
            written = _operand_of(node, tensor is left)
            context.observe(TableOnHeads(node, table, heads, written))
    kept = {side.heads for side in (left, right) if side.heads is not None and side.rank == rank}
    return kept.pop() if len(kept) == 1 else None


def _promoted(left: str | None, right: str | None) -> str | None:
    """The dtype of ``left op right`` as far as the fill checks care: with a float32 or
    float64 operand the result is at least that wide (a mask or the model's dtype joins it)."""
    if left == right:
        return left
    wide = [dtype for dtype in ("float64", "float32") if dtype in (left, right)]
    return wide[0] if wide else None


def _masked_product(
    node: ast.AST, operator: str, main: TensorFact, other: TensorFact
) -> ast.AST | None:
    """Weights times a mask (a tensor built by tril/triu or a comparison) are masked weights;
    dividing (renormalising) forgets it."""
    if operator == "/":
        return None
    if operator == "*" and main.weights and other.polarity is not None:
        return node
    return main.masked_weights


_ROTATION = re.compile(r"(^|_)(cos|sin|freqs?)(_|$)|rotary|rope", re.IGNORECASE)


def _rotates(factor: ast.AST) -> bool:
    """``q * cos`` (+ ``rotate_half(q) * sin``): rotary position embeddings turn the vectors
    and keep their length, which scales nothing."""
    name = dotted_name(factor) if isinstance(factor, ast.expr) else None
    return name is not None and _ROTATION.search(name.rsplit(".", 1)[-1]) is not None


def _may_be_scale(fact: TensorFact) -> bool:
    """A factor that may be a scale (a parameter, a 0-d or unknown tensor), not a mask."""
    return fact.is_parameter or fact.rank is None or fact.rank == 0


def scaled(
    tensor: TensorFact, node: ast.AST, factor: Scale | None
) -> tuple[ScaleEvidence, ...] | None:
    """The scaling of ``tensor`` multiplied by ``factor`` at ``node``. A factor that undoes the
    last one leaves the values as they were before it: the soft cap ``tanh(x / c) * c``
    (Gemma 2 and 3, Grok) caps the scores and keeps their scale."""
    if tensor.scaling is None:
        return None
    if tensor.scaling and _undoes(tensor.scaling[-1], ScaleEvidence(node, factor)):
        return tensor.scaling[:-1]
    return (*tensor.scaling, ScaleEvidence(node, factor))


def _undoes(first: ScaleEvidence, then: ScaleEvidence) -> bool:
    """Does ``then`` multiply by the inverse of ``first``? Known factors whose product is 1;
    else a division by a name and a multiplication by the same name (``x / c``, ``x * c``:
    the same value, read twice)."""
    if first.factor is not None and then.factor is not None:
        net = first.factor.times(then.factor)
        unit = net is not None and (net.exponent == 0 or net.base == Dim.constant(1))
        return unit and net is not None and math.isclose(net.coefficient, 1.0)
    steps = [node for node in (first.node, then.node) if isinstance(node, ast.BinOp)]
    divisions = [step for step in steps if isinstance(step.op, ast.Div)]
    multiplications = [step for step in steps if isinstance(step.op, ast.Mult)]
    if len(divisions) != 1 or len(multiplications) != 1:
        return False
    divisor = dotted_name(divisions[0].right)
    factors = (multiplications[0].left, multiplications[0].right)
    return divisor is not None and divisor in map(dotted_name, factors)


def _operand(node: ast.AST, *, right: bool) -> ast.AST:
    """The left or right operand of a binary operation (the operation itself otherwise)."""
    if isinstance(node, ast.BinOp):
        return node.right if right else node.left
    return node


def _written(node: ast.AST) -> str:
    return dotted_name(node) or "an operand" if isinstance(node, ast.expr) else "an operand"


@tensor_op("mul", "div", "multiply", "divide", "true_divide", functions=torch_names("mul", "div"))
def multiply_method(call: OpCall) -> Fact:
    other = call.get(0, "other")
    if other is None:
        return UNKNOWN
    operator = "*" if call.name in ("mul", "multiply", "torch.mul") else "/"
    return arithmetic(call.context, call.node, operator, call.receiver, other[0])


@tensor_op("add", "sub", functions=torch_names("add", "sub"))
def add_method(call: OpCall) -> Fact:
    other = call.get(0, "other")
    if other is None:
        return UNKNOWN
    return arithmetic(call.context, call.node, "+", call.receiver, other[0])
