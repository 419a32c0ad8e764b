"""Transfer functions: what each torch operation does to the facts of its arguments.

One table for the whole analysis. A tensor op is registered once under its method name and
its ``torch.*`` spellings (the first argument is then the receiver); adding an op is one
function here, and every rule benefits. Anything not in the table yields ``UNKNOWN``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from shapecheck.analysis.dims import Dim, product, provably_different
from shapecheck.analysis.facts import (
    OPPOSITE_POLARITY,
    UNKNOWN,
    AxisOp,
    Fact,
    IntFact,
    ModuleFact,
    Product,
    QualifiedName,
    RepeatedFact,
    ScalarFact,
    Scale,
    ScaleEvidence,
    SizeFact,
    TensorFact,
    TupleFact,
    fresh_shape,
    scale_of,
)
from shapecheck.analysis.layout import Layout, plan_view, reinterpreted_axis
from shapecheck.analysis.observations import (
    AttentionScores,
    DoubleScaledAttention,
    ExactDivisionAssumed,
    FillValue,
    IncompatibleView,
    IndivisibleSizes,
    LinearWeightProduct,
    MaskAfterSoftmax,
    MaskBroadcast,
    MaskPolarity,
    NoOpAxisOp,
    Observation,
    ProbabilitiesIntoLoss,
    ReinterpretingView,
    SizeMismatch,
    SoftmaxAxis,
    TensorFromNumber,
    WeightsScaled,
)


class OpContext(Protocol):
    """What a transfer function may ask of the interpreter."""

    def observe(self, observation: Observation) -> None: ...

    @property
    def precision_aware(self) -> bool:
        """Inside a branch that tests for float16: the code chooses its fills per dtype."""
        ...

    def size(self, fact: Fact, node: ast.expr) -> Dim | None:
        """``fact`` used as a tensor size (names become stable symbols)."""
        ...


Argument = tuple[Fact, ast.expr]


@dataclass
class OpCall:
    """One call of an op, with the facts of its receiver and arguments."""

    name: str
    node: ast.expr
    anchor: ast.AST
    receiver: TensorFact
    receiver_node: ast.expr | None
    context: OpContext
    args: list[Argument] = field(default_factory=list)
    kwargs: dict[str, Argument] = field(default_factory=dict)
    module: ModuleFact | None = None

    def get(self, index: int | None, keyword: str | None = None) -> Argument | None:
        if keyword is not None and keyword in self.kwargs:
            return self.kwargs[keyword]
        if index is not None and index < len(self.args):
            return self.args[index]
        return None

    def int_arg(self, index: int | None, keyword: str | None = None) -> int | None:
        argument = self.get(index, keyword)
        if argument is not None and isinstance(argument[0], IntFact):
            return argument[0].dim.value
        return None

    def tensor_arg(self, index: int | None, keyword: str | None = None) -> TensorFact | None:
        argument = self.get(index, keyword)
        if argument is None:
            return None
        return as_tensor(argument[0])

    def int_list(self, start: int) -> list[int] | None:
        """Integers given as varargs from ``start`` or as one tuple/list there."""
        values = [fact for fact, _ in self.args[start:]]
        if len(values) == 1 and isinstance(values[0], TupleFact | SizeFact):
            values = list(_items(values[0]))
        ints = [fact.dim.value if isinstance(fact, IntFact) else None for fact in values]
        if not ints or any(value is None for value in ints):
            return None
        return [value for value in ints if value is not None]

    def sizes(self, start: int, stop: int | None = None) -> list[Dim | None] | None:
        """Sizes given as varargs in ``args[start:stop]`` or as one tuple/list/``x.shape``.

        A ``-1`` (or a size the analysis cannot name) is ``None``.
        """
        arguments = self.args[start:stop]
        if not arguments or any(_is_starred(node) for _, node in arguments):
            return None
        first_fact, first_node = arguments[0]
        if len(arguments) == 1 and isinstance(first_fact, TupleFact | SizeFact):
            elements = _elements(first_node)
            items = list(_items(first_fact))
            nodes: list[ast.expr | None] = (
                list(elements) if len(elements) == len(items) else [None] * len(items)
            )
            return [
                self._size(item, item_node) for item, item_node in zip(items, nodes, strict=True)
            ]
        if len(arguments) == 1 and not isinstance(first_fact, IntFact):
            return None  # a lone unknown argument may be a whole shape
        return [self._size(fact, node) for fact, node in arguments]

    def _size(self, fact: Fact, node: ast.expr | None) -> Dim | None:
        if isinstance(fact, IntFact):
            return None if fact.dim.value == -1 else fact.dim
        if node is None:
            return None
        return self.context.size(fact, node)


def _items(fact: TupleFact | SizeFact) -> Iterable[Fact]:
    if isinstance(fact, SizeFact):
        return (IntFact(dim) for dim in fact.dims)
    return fact.items


def _elements(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.Tuple | ast.List):
        return [
            element.value if isinstance(element, ast.Starred) else element for element in node.elts
        ]
    return []


def _is_starred(node: ast.expr) -> bool:
    return isinstance(node, ast.Starred)


def as_tensor(fact: Fact) -> TensorFact | None:
    """The fact as a tensor: unknown values might be tensors, known non-tensors are not."""
    if isinstance(fact, TensorFact):
        return fact
    if fact is UNKNOWN:
        return TensorFact(scaling=None)
    return None


Transfer = Callable[[OpCall], Fact]

TENSOR_METHODS: dict[str, Transfer] = {}
"""Tensor method name -> transfer."""
TENSOR_FUNCTIONS: dict[str, Transfer] = {}
"""Qualified function whose first argument is the tensor -> transfer."""
FUNCTIONS: dict[str, Transfer] = {}
"""Qualified function or class (constructors) -> transfer; no receiver."""
MODULE_CALLS: dict[str, Transfer] = {}
"""Module class -> transfer applied when an instance is called on a tensor."""


def tensor_op(*methods: str, functions: Iterable[str] = ()) -> Callable[[Transfer], Transfer]:
    """Register under tensor method names and ``torch.*`` functions taking the tensor first."""

    def register(transfer: Transfer) -> Transfer:
        _registrar(TENSOR_METHODS)(*methods)(transfer)
        return _registrar(TENSOR_FUNCTIONS)(*functions)(transfer)

    return register


def _registrar(table: dict[str, Transfer]) -> Callable[..., Callable[[Transfer], Transfer]]:
    def names(*keys: str) -> Callable[[Transfer], Transfer]:
        def register(transfer: Transfer) -> Transfer:
            for key in keys:
                table[key] = transfer
            return transfer

        return register

    return names


function_op = _registrar(FUNCTIONS)
module_op = _registrar(MODULE_CALLS)


def _torch(*names: str) -> list[str]:
    return [f"torch.{name}" for name in names]


def _functional(*names: str) -> list[str]:
    return [f"torch.nn.functional.{name}" for name in names]


def new_tensor(shape: tuple[Dim, ...] | None, origin: ast.AST) -> TensorFact:
    """A freshly allocated, contiguous activation."""
    rank = None if shape is None else len(shape)
    return TensorFact(shape=shape, layout=Layout.contiguous(rank), origin=origin)


# --- axis reordering -------------------------------------------------------------------


def reorder(call: OpCall, permutation: list[int] | None, name: str) -> TensorFact:
    """The receiver with its axes in ``permutation`` order (``None``: rank unknown)."""
    receiver = call.receiver
    if permutation is None or receiver.shape is None:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    layout = receiver.layout.materialise(len(receiver.shape)) if receiver.layout else None
    axis_op = AxisOp(name, call.node, len(receiver.shape), tuple(permutation))
    return receiver.derive(
        shape=tuple(receiver.shape[axis] for axis in permutation),
        layout=layout.permuted(permutation, call.node) if layout else None,
        origin=call.node,
        axis_op=axis_op,
    )


def swap(call: OpCall, first: int, second: int, name: str) -> TensorFact:
    rank = call.receiver.rank
    if rank is None:
        return reorder(call, None, name)
    if not (-rank <= first < rank and -rank <= second < rank):
        return reorder(call, None, name)
    permutation = list(range(rank))
    a, b = first % rank, second % rank
    permutation[a], permutation[b] = permutation[b], permutation[a]
    result = reorder(call, permutation, name)
    return result.derive(axis_op=AxisOp(name, call.node, rank, (a, b)), shape=result.shape)


@tensor_op(
    "transpose", "swapaxes", "swapdims", functions=_torch("transpose", "swapaxes", "swapdims")
)
def transpose(call: OpCall) -> Fact:
    first, second = call.int_arg(0, "dim0"), call.int_arg(1, "dim1")
    if first is None or second is None or len(call.args) > 2:
        return reorder(call, None, "transpose")  # numpy's transpose(*axes) is a permute
    rank = call.receiver.rank
    same = first == second or (rank is not None and first % rank == second % rank)
    if same and isinstance(call.node, ast.Call):
        call.context.observe(
            NoOpAxisOp(call.node, call.anchor, (first, second), call.receiver_node)
        )
    return swap(call, first, second, "transpose")


@tensor_op("t", functions=_torch("t"))
def matrix_transpose(call: OpCall) -> Fact:
    if call.receiver.rank is not None and call.receiver.rank < 2:
        return call.receiver.derive(origin=call.node)
    return swap(call, 0, 1, "t")


def reversed_axes(call: OpCall) -> TensorFact:
    """``x.T``: all axes reversed."""
    rank = call.receiver.rank
    return reorder(call, None if rank is None else list(range(rank))[::-1], "T")


def last_two_swapped(call: OpCall) -> TensorFact:
    """``x.mT``."""
    return swap(call, -2, -1, "mT")


@tensor_op("permute", functions=_torch("permute"))
def permute(call: OpCall) -> Fact:
    axes = call.int_list(0)
    rank = call.receiver.rank
    if axes and axes == list(range(len(axes))) and isinstance(call.node, ast.Call):
        call.context.observe(NoOpAxisOp(call.node, call.anchor, tuple(axes), call.receiver_node))
    if axes is None or rank is None or len(axes) != rank:
        return reorder(call, None, "permute")
    normalised = [axis % rank for axis in axes]
    return reorder(call, normalised if sorted(normalised) == list(range(rank)) else None, "permute")


@tensor_op("movedim", "moveaxis", functions=_torch("movedim", "moveaxis"))
def movedim(call: OpCall) -> Fact:
    source, destination = call.int_arg(0, "source"), call.int_arg(1, "destination")
    rank = call.receiver.rank
    if source is None or destination is None or rank is None:
        return reorder(call, None, "movedim")
    order = list(range(rank))
    moved = order.pop(source % rank)
    order.insert(destination % rank, moved)
    return reorder(call, order, "movedim")


# --- views and copies -------------------------------------------------------------------


def _target_shape(receiver: TensorFact, sizes: list[Dim | None]) -> tuple[Dim, ...]:
    """The new shape, with one otherwise unknown size solved from the element count.

    A ``-1`` is what the element count leaves (``E // H`` if it comes to that: a view must
    be exact). Without a ``-1``, a single size whose symbols the old shape never mentions
    (``view(L, B, embed_dim)`` of ``[L, B*H, D]``) is replaced when the division is exact.
    """
    if receiver.shape is None:
        return tuple(size if size is not None else Dim.symbol("?") for size in sizes)
    old_symbols = {atom for dim in receiver.shape for atom in dim.factors}
    missing = [index for index, size in enumerate(sizes) if size is None]
    exact_only = not missing
    if exact_only:
        missing = [
            index
            for index, size in enumerate(sizes)
            if size is not None and size.factors and not set(size.factors) & old_symbols
        ]
    if len(missing) == 1:
        known = [size for index, size in enumerate(sizes) if index != missing[0] and size]
        # what fits, by definition: no division is relied on to get it
        solved = replace(product(receiver.shape).floordiv(product(known)), assumes=frozenset())
        if not exact_only or len(solved.quotients) <= sum(len(d.quotients) for d in receiver.shape):
            sizes = list(sizes)
            sizes[missing[0]] = solved
    return tuple(size if size is not None else Dim.symbol("?") for size in sizes)


def _view_like(call: OpCall, sizes: list[Dim | None] | None, *, copies: bool) -> Fact:
    """``view`` (``copies=False``) or ``reshape`` (copies when a view is impossible)."""
    receiver = call.receiver
    if sizes is None:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    shape = _target_shape(receiver, sizes)
    layout = _view_layout(call, shape, copies=copies)
    if layout is _FAILED_VIEW:
        layout = Layout.contiguous(len(shape))  # go on as if the author had fixed it
    elif receiver.shape is not None and isinstance(call.node, ast.Call):
        moved = reinterpreted_axis(receiver.shape, shape)
        if moved is not None:
            call.context.observe(
                ReinterpretingView(call.node, call.anchor, receiver.shape, shape, moved)
            )
        _rely_on_divisions(call.context, call.node, product(receiver.shape), product(shape))
    result = receiver.derive(shape=shape, layout=layout, origin=call.node)
    old = receiver.shape
    if (
        old is not None
        and len(old) == len(shape) >= 2
        and old[-1] != old[-2]
        and shape[:-2] == old[:-2]
        and (shape[-2], shape[-1]) == (old[-1], old[-2])
    ):
        # the sizes of the last two axes exchanged without moving any data
        rank = len(shape)
        return result.derive(axis_op=AxisOp("view", call.node, rank, (rank - 2, rank - 1)))
    return result


_FAILED_VIEW = Layout(None)
"""Marks a view PyTorch refuses (SC101 reports it)."""


def _rely_on_divisions(context: OpContext, node: ast.AST, first: Dim, second: Dim) -> None:
    """Sizes that must agree and do only if some ``a // b`` divided exactly (a layer built
    ``d_model`` wide fed ``num_heads * head_dim`` features, a view splitting ``d_model`` into
    ``num_heads`` pieces of ``head_dim``): each such division is relied on (SC502)."""
    if first == second:
        for quotient in first.assumes ^ second.assumes:
            if quotient.origin is not None:
                context.observe(ExactDivisionAssumed(node, quotient.origin))


def _view_layout(call: OpCall, shape: tuple[Dim, ...], *, copies: bool) -> Layout | None:
    receiver = call.receiver
    if receiver.layout is None:
        return None
    if receiver.layout.is_contiguous:
        return Layout.contiguous(len(shape))
    if receiver.shape is None or receiver.layout.order is None:
        return None
    plan = plan_view(receiver.shape, receiver.layout, shape)
    if not plan.merged:
        return plan.layout
    if copies:
        return Layout.contiguous(len(shape))  # reshape copies
    if isinstance(call.node, ast.Call):
        call.context.observe(IncompatibleView(call.node, call.anchor, receiver, plan.merged))
    return _FAILED_VIEW


@tensor_op("view")
def view(call: OpCall) -> Fact:
    first = call.get(0, "dtype")
    if first is not None and isinstance(first[0], QualifiedName):
        return UNKNOWN  # view(torch.float16) reinterprets the dtype
    return _view_like(call, call.sizes(0), copies=False)


@tensor_op("reshape", functions=_torch("reshape"))
def reshape(call: OpCall) -> Fact:
    return _view_like(call, call.sizes(0), copies=True)


@tensor_op("view_as", "reshape_as")
def view_as(call: OpCall) -> Fact:
    other = call.tensor_arg(0, "other")
    sizes: list[Dim | None] | None = None
    if other is not None and other.shape is not None:
        sizes = list(other.shape)
    return _view_like(call, sizes, copies=call.name == "reshape_as")


@tensor_op("flatten", functions=_torch("flatten"))
def flatten(call: OpCall) -> Fact:
    receiver = call.receiver
    start, end = call.int_arg(0, "start_dim"), call.int_arg(1, "end_dim")
    start = 0 if start is None and call.get(0, "start_dim") is None else start
    end = -1 if end is None and call.get(1, "end_dim") is None else end
    if receiver.shape is None or start is None or end is None:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    rank = len(receiver.shape)
    first, last = start % rank, end % rank
    merged = product(receiver.shape[first : last + 1])
    sizes: list[Dim | None] = [*receiver.shape[:first], merged, *receiver.shape[last + 1 :]]
    return _view_like(call, sizes, copies=True)


@tensor_op("unflatten", functions=_torch("unflatten"))
def unflatten(call: OpCall) -> Fact:
    receiver = call.receiver
    axis = call.int_arg(0, "dim")
    split = call.sizes(1, 2)
    position = receiver.normalise_axis(axis) if axis is not None else None
    if receiver.shape is None or position is None or split is None:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    sizes: list[Dim | None] = [*receiver.shape[:position], *split, *receiver.shape[position + 1 :]]
    return _view_like(call, sizes, copies=True)


@tensor_op("repeat")
def repeat(call: OpCall) -> Fact:
    receiver = call.receiver
    counts = call.sizes(0)
    if counts is None or receiver.shape is None or len(counts) < len(receiver.shape):
        return receiver.derive(shape=None, layout=None, origin=call.node)
    padded = (Dim.constant(1),) * (len(counts) - len(receiver.shape)) + receiver.shape
    shape = tuple(
        dim * count if count is not None else Dim.symbol("?")
        for dim, count in zip(padded, counts, strict=True)
    )
    return receiver.derive(shape=shape, layout=Layout.contiguous(len(shape)), origin=call.node)


@tensor_op("repeat_interleave", functions=_torch("repeat_interleave"))
def repeat_interleave(call: OpCall) -> Fact:
    receiver = call.receiver
    count = call.get(0, "repeats")
    axis = call.int_arg(1, "dim")
    if receiver.shape is None or count is None or axis is None:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    position = receiver.normalise_axis(axis)
    times = call.context.size(*count)
    if position is None or times is None:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    shape = list(receiver.shape)
    shape[position] = shape[position] * times
    return receiver.derive(
        shape=tuple(shape), layout=Layout.contiguous(len(shape)), origin=call.node
    )


@tensor_op(functions=_functional("scaled_dot_product_attention"))
def fused_attention(call: OpCall) -> Fact:
    """``softmax(q kᵀ / sqrt(d) + mask) v``: ``[..., Lq, d] -> [..., Lq, d_v]``; the layout of
    the output depends on the backend, so it is unknown."""
    query, key, value = call.receiver, call.tensor_arg(0, "key"), call.tensor_arg(1, "value")
    mask = call.get(2, "attn_mask")
    if mask is not None:
        _check_polarity(call.context, mask, "attend", "F.scaled_dot_product_attention")
        mask_tensor = as_tensor(mask[0])
        if (
            mask_tensor is not None
            and key is not None
            and query.shape is not None
            and key.shape is not None
            and len(key.shape) >= 2
        ):
            scores = (*query.shape[:-1], key.shape[-2])
            _check_mask_axes(call.context, mask_tensor, scores, mask[1])
    scaled = [
        evidence
        for tensor in (query, key)
        if tensor is not None and tensor.scaling
        for evidence in tensor.scaling
        if evidence.factor is not None
    ]
    if scaled and call.get(None, "scale") is None and isinstance(call.node, ast.Call):
        call.context.observe(DoubleScaledAttention(call.node, scaled[0].node))
    shape = None
    if (
        query.shape is not None
        and value is not None
        and value.shape is not None
        and len(query.shape) == len(value.shape)
    ):
        shape = (*query.shape[:-1], value.shape[-1])
    return TensorFact(shape=shape, origin=call.node)


@tensor_op("tril", "triu", functions=_torch("tril", "triu"))
def triangle(call: OpCall) -> Fact:
    """``tril`` keeps the visible keys of a causal mask (True = attend); ``triu`` from the
    first diagonal above keeps the future ones (True = blocked)."""
    diagonal = call.int_arg(0, "diagonal")
    diagonal = 0 if diagonal is None and call.get(0, "diagonal") is None else diagonal
    polarity = None
    if call.name.endswith("tril") and diagonal is not None and diagonal >= 0:
        polarity = "attend"
    elif call.name.endswith("triu") and diagonal is not None and diagonal >= 1:
        polarity = "block"
    return call.receiver.derive(origin=call.node, polarity=polarity, product=None)


@tensor_op("logical_not", functions=_torch("logical_not"))
def logical_not(call: OpCall) -> Fact:
    return negated(call.receiver, call.node)


def negated(mask: TensorFact, node: ast.AST) -> TensorFact:
    """``~mask``: True where it was False; the polarity flips."""
    flipped = OPPOSITE_POLARITY.get(mask.polarity or "")
    return mask.derive(origin=node, polarity=flipped, product=None, dtype="bool")


@tensor_op("contiguous")
def contiguous(call: OpCall) -> Fact:
    return call.receiver.derive(layout=Layout.contiguous(call.receiver.rank), origin=call.node)


@tensor_op("clone", functions=_torch("clone"))
def clone(call: OpCall) -> Fact:
    # clone() keeps the strides of a dense tensor (torch.preserve_format, the default);
    # only torch.contiguous_format makes it contiguous.
    memory_format = call.get(None, "memory_format")
    if memory_format is None or memory_format[0] == QualifiedName("torch.preserve_format"):
        return call.receiver.derive(origin=call.node)
    if memory_format[0] == QualifiedName("torch.contiguous_format"):
        return call.receiver.derive(layout=Layout.contiguous(call.receiver.rank), origin=call.node)
    return call.receiver.derive(layout=None, origin=call.node)


@tensor_op("unsqueeze", functions=_torch("unsqueeze"))
def unsqueeze(call: OpCall) -> Fact:
    receiver = call.receiver
    axis = call.int_arg(0, "dim")
    if receiver.shape is None or axis is None:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    rank = len(receiver.shape) + 1
    if not -rank <= axis < rank:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    position = axis % rank
    shape = (*receiver.shape[:position], Dim.constant(1), *receiver.shape[position:])
    layout = receiver.layout.materialise(rank - 1) if receiver.layout else None
    return receiver.derive(
        shape=shape,
        layout=layout.with_axis_inserted(position) if layout else None,
        origin=call.node,
    )


@tensor_op("squeeze", functions=_torch("squeeze"))
def squeeze(call: OpCall) -> Fact:
    receiver = call.receiver
    axis = call.int_arg(0, "dim")
    if receiver.shape is not None and call.get(0, "dim") is None:
        if all(dim.value is not None for dim in receiver.shape):  # squeeze(): all size-1 axes
            kept = tuple(dim for dim in receiver.shape if dim.value != 1)
            return new_tensor(kept, call.node) if kept != receiver.shape else receiver
        return receiver.derive(shape=None, layout=None, origin=call.node)
    if receiver.shape is None or axis is None:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    position = receiver.normalise_axis(axis)
    if position is None or receiver.shape[position].value != 1:
        return receiver.derive(shape=None, layout=None, origin=call.node)
    layout = receiver.layout.materialise(len(receiver.shape)) if receiver.layout else None
    return receiver.derive(
        shape=receiver.shape[:position] + receiver.shape[position + 1 :],
        layout=layout.with_axis_removed(position) if layout else None,
        origin=call.node,
    )


@tensor_op("expand")
def expand(call: OpCall) -> Fact:
    receiver = call.receiver
    sizes = call.sizes(0)
    if sizes is None or receiver.shape is None or len(sizes) < len(receiver.shape):
        return receiver.derive(shape=None, layout=None, origin=call.node)
    leading = len(sizes) - len(receiver.shape)
    shape: list[Dim] = []
    broadcast: list[int] = []
    for index, size in enumerate(sizes):
        if index < leading:
            shape.append(size if size is not None else Dim.symbol("?"))
            continue
        old = receiver.shape[index - leading]
        if size is None or size == old:
            shape.append(old)
        elif old.value == 1:
            shape.append(size)
            broadcast.append(index - leading)
        else:
            return receiver.derive(shape=None, layout=None, origin=call.node)
    layout = receiver.layout.materialise(len(receiver.shape)) if receiver.layout else None
    return receiver.derive(
        shape=tuple(shape),
        layout=layout.expanded(broadcast, leading, call.node) if layout else None,
        origin=call.node,
    )


# --- values that keep their layout ------------------------------------------------------


@tensor_op(
    "float",
    "half",
    "double",
    "bfloat16",
    "bool",
    "to",
    "type",
    "type_as",
    "cpu",
    "cuda",
    "detach",
    "requires_grad_",
)
def same_values(call: OpCall) -> Fact:
    dtype = call.receiver.dtype
    if call.name in _CAST_METHODS:
        dtype = _CAST_METHODS[call.name]
    elif call.name in ("to", "type"):
        target = call.get(0, "dtype")
        if target is not None and isinstance(target[0], QualifiedName):
            dtype = _DTYPES.get(target[0].name, dtype)
    elif call.name == "type_as":
        other = call.tensor_arg(0, "other")
        dtype = other.dtype if other is not None else None
    from_number = call.receiver.from_number
    if call.name in ("cuda", "type_as") or (call.name == "to" and _places(call)):
        from_number = None
    return call.receiver.derive(origin=call.node, dtype=dtype, from_number=from_number)


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


_CAST_METHODS = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "bfloat16": "bfloat16",
    "bool": "bool",
}
_DTYPES = {
    "torch.float32": "float32",
    "torch.float": "float32",
    "torch.float16": "float16",
    "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.float64": "float64",
    "torch.double": "float64",
    "torch.bool": "bool",
}
FLOAT16_MAX = 65504.0
"""The largest finite float16: fills beyond it overflow (SC401)."""
WEAK_FILL = 1e4
"""Fills of smaller magnitude leave masked keys real weight after softmax (SC402)."""


@tensor_op("masked_fill", functions=_torch("masked_fill"))
def masked_fill(call: OpCall) -> Fact:
    receiver = call.receiver
    layout = Layout.contiguous(receiver.rank) if receiver.layout is not None else None
    mask, value = call.get(0, "mask"), call.get(1, "value")
    if mask is not None:
        _check_mask(call.context, receiver, *mask)
    unread_fills = receiver.unread_fills
    constant = as_tensor(value[0]) if value is not None else None
    if constant is not None and constant.from_number is not None:
        call.context.observe(TensorFromNumber(constant.from_number))
    if value is not None and isinstance(value[0], ScalarFact | IntFact):
        filled = _number(value[0])
        written_by = call.node if isinstance(call.node, ast.Call) else None
        problem = _fill_problem(receiver, filled, value[1], masked_fill=written_by)
        if problem is not None and problem.overflow:
            if not call.context.precision_aware:
                call.context.observe(problem)  # masked_fill refuses what float16 cannot hold
        elif problem is not None:  # too weak: wrong only if a softmax reads it
            unread_fills = _with_fill(call.context, receiver, filled, value[1])
    written = _written(mask[1]) if mask is not None else None
    masked = receiver.masked_weights
    if receiver.weights and written not in receiver.masked_with:
        masked = call.node  # the softmax already spent weight on these keys
    masked_with = receiver.masked_with | ({written} if written else set())
    return receiver.derive(
        layout=layout,
        origin=call.node,
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
            _check_mask(call.context, tensor, *condition)
        unread_fills = tensor.unread_fills
        if argument is not None and isinstance(argument[0], ScalarFact | IntFact):
            unread_fills = _with_fill(call.context, tensor, _number(argument[0]), argument[1])
        masked = call.node if tensor.weights else tensor.masked_weights
        return tensor.derive(
            layout=None, origin=call.node, masked_weights=masked, unread_fills=unread_fills
        )
    return TensorFact(origin=call.node, scaling=None)


def _number(fact: Fact) -> float | None:
    if isinstance(fact, ScalarFact):
        return fact.value
    if isinstance(fact, IntFact):
        return float(fact.dim.value) if fact.dim.value is not None else None
    return None


def _with_fill(
    context: OpContext, scores: TensorFact, value: float | None, node: ast.AST
) -> tuple[tuple[ast.AST, float], ...]:
    """``scores``' unread fills and this one; a branch that tests for float16 picked a fill
    beyond its range on purpose, and a positive one boosts keys rather than masking them."""
    if value is None or value > 0 or (context.precision_aware and abs(value) > FLOAT16_MAX):
        return scores.unread_fills
    return (*scores.unread_fills, (node, value))


def _fill_problem(
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


def _check_mask(context: OpContext, scores: TensorFact, mask: Fact, node: ast.AST) -> None:
    """A mask for attention scores ``[..., Lq, Lk]`` must broadcast along the right axes."""
    tensor = as_tensor(mask)
    if not scores.is_scores or tensor is None:
        return
    _check_mask_axes(context, tensor, scores.shape, node)


def _check_mask_axes(
    context: OpContext, mask: TensorFact, scores: tuple[Dim, ...] | None, node: ast.AST
) -> None:
    if mask.shape is None or scores is None:
        return
    misplaced = misaligned_axis(mask.shape, scores)
    if misplaced is not None:
        context.observe(MaskBroadcast(node, mask.shape, scores, misplaced, masks_queries=False))
    elif masks_queries(mask.shape, scores):
        context.observe(
            MaskBroadcast(node, mask.shape, scores, len(mask.shape) - 2, masks_queries=True)
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
    keys."""
    if len(mask) < 2 or len(mask) > len(scores):
        return False
    queries, keys = mask[-2], mask[-1]
    return (
        keys.value == 1
        and queries.is_named
        and queries == scores[-2]
        and scores[-1].is_named
        and scores[-1].value != 1
    )


@tensor_op(functions=[*_functional("dropout"), "torch.dropout"])
def dropout(call: OpCall) -> Fact:
    return call.receiver.derive(origin=call.node)


@module_op("torch.nn.MultiheadAttention")
def multihead_attention_module(call: OpCall) -> Fact:
    """``nn.MultiheadAttention``'s boolean masks are True where attention is NOT allowed."""
    for position, keyword in ((3, "key_padding_mask"), (5, "attn_mask")):
        mask = call.get(position - 1, keyword)
        if mask is not None:
            _check_polarity(call.context, mask, "block", "nn.MultiheadAttention")
    return TupleFact((TensorFact(origin=call.node, scaling=None), UNKNOWN))


def _check_polarity(context: OpContext, mask: Argument, expected: str, api: str) -> None:
    tensor = as_tensor(mask[0])
    if tensor is None or tensor.dtype != "bool" or tensor.polarity is None:
        return
    if tensor.polarity != expected:
        context.observe(MaskPolarity(mask[1], expected, tensor.polarity, api))


@module_op("torch.nn.Dropout", "torch.nn.Identity")
def dropout_module(call: OpCall) -> Fact:
    return call.receiver.derive(origin=call.node)


@tensor_op(
    "relu",
    "sigmoid",
    "tanh",
    "exp",
    "neg",
    "abs",
    "sqrt",
    "rsqrt",
    functions=[
        *_torch("relu", "sigmoid", "tanh", "exp", "neg", "abs", "sqrt", "rsqrt"),
        *_functional("relu", "gelu", "silu", "sigmoid", "tanh", "elu", "leaky_relu", "mish"),
    ],
)
def elementwise(call: OpCall) -> Fact:
    """A function applied to each element: shape and layout stay, the values change."""
    receiver = call.receiver
    scalar = None
    if receiver.scalar is not None and call.name in ("sqrt", "torch.sqrt"):
        scalar = receiver.scalar.power(0.5)
    elif receiver.scalar is not None and call.name in ("rsqrt", "torch.rsqrt"):
        scalar = receiver.scalar.power(-0.5)
    return receiver.derive(
        origin=call.node,
        product=None,
        scaling=(),
        is_parameter=False,
        scalar=scalar,
        weights=False,
        probabilities=False,
        polarity=None,
        fill=None,
    )


@tensor_op(functions=_functional("normalize"))
def normalize(call: OpCall) -> Fact:
    # unit vectors: their dot products are bounded, which is a scaling of its own
    receiver = call.receiver
    return receiver.derive(
        origin=call.node, product=None, scaling=(ScaleEvidence(call.node, None),)
    )


# --- arithmetic -------------------------------------------------------------------------


def broadcast_shapes(
    left: tuple[Dim, ...] | None, right: tuple[Dim, ...] | None
) -> tuple[Dim, ...] | None:
    if left is None or right is None:
        return None
    rank = max(len(left), len(right))
    padded_left = (Dim.constant(1),) * (rank - len(left)) + left
    padded_right = (Dim.constant(1),) * (rank - len(right)) + right
    shape = []
    for a, b in zip(padded_left, padded_right, strict=True):
        if a == b or b.value == 1:
            shape.append(a)
        elif a.value == 1:
            shape.append(b)
        else:
            shape.append(Dim.symbol("?"))
    return tuple(shape)


def arithmetic(context: OpContext, node: ast.AST, operator: str, left: Fact, right: Fact) -> Fact:
    """``left <operator> right`` for ``+ - * /`` where at least one side may be a tensor."""
    if isinstance(left, IntFact) and isinstance(right, IntFact):
        if operator == "*":
            return IntFact(left.dim * right.dim)
        if operator == "//":
            return IntFact(left.dim.floordiv(right.dim))
        values = (left.dim.value, right.dim.value)
        if operator in "+-" and values[0] is not None and values[1] is not None:
            return IntFact(
                Dim.constant(values[0] + values[1] if operator == "+" else values[0] - values[1])
            )
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
    x, y = _number(left), _number(right)
    if x is not None and y is not None:
        value = {"*": x * y, "+": x + y, "-": x - y}.get(operator)
        if operator == "/" and y != 0:
            value = x / y
    return ScalarFact(scale=scale, value=value)


def _is_number(fact: Fact) -> bool:
    return isinstance(fact, IntFact | ScalarFact)


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
            scaling = _scaled(tensor, node, factor.power(-1) if factor and inverted else factor)
        fill = number if operator == "*" and isinstance(number, ScalarFact) else None
        return tensor.derive(
            origin=node,
            scaling=scaling,
            probabilities=False,
            fill=fill,
            masked_weights=None if operator == "/" else tensor.masked_weights,
        )
    for constant, partner in ((left_tensor, right_tensor), (right_tensor, left_tensor)):
        if constant.from_number is not None and partner.from_number is None:
            context.observe(TensorFromNumber(constant.from_number))
    shape = broadcast_shapes(left_tensor.shape, right_tensor.shape)
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
    scaling = main.scaling
    if (operator == "/" and main is left_tensor) or (operator == "*" and _may_be_scale(other)):
        factor = other.scalar.power(-1) if operator == "/" and other.scalar else other.scalar
        scaling = _scaled(main, node, factor)
    unread_fills = main.unread_fills
    if operator in "+-" and main.product is not None:
        # scores + mask: an additive mask must broadcast along the scores' axes
        _check_mask(context, main, other, _operand_node(node, other is right_tensor))
        if other.fill is not None and other.fill.value is not None:
            added = -other.fill.value if operator == "-" else other.fill.value
            unread_fills = _with_fill(context, main, added, other.fill.origin or node)
    return TensorFact(
        shape=shape,
        layout=layout,
        origin=node,
        is_parameter=left_tensor.is_parameter and right_tensor.is_parameter,
        scaling=scaling,
        product=main.product if operator in "+-*/" else None,
        masked_weights=_masked_product(node, operator, main, other),
        weights=main.weights and operator in "*",
        masked_with=main.masked_with,
        unread_fills=unread_fills,
        dtype=_promoted(left_tensor.dtype, right_tensor.dtype),
    )


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


def _may_be_scale(fact: TensorFact) -> bool:
    """A factor that may be a scale (a parameter, a 0-d or unknown tensor), not a mask."""
    return fact.is_parameter or fact.rank is None or fact.rank == 0


def _scaled(
    tensor: TensorFact, node: ast.AST, factor: Scale | None
) -> tuple[ScaleEvidence, ...] | None:
    return None if tensor.scaling is None else (*tensor.scaling, ScaleEvidence(node, factor))


def _operand_node(node: ast.AST, right: bool) -> ast.AST:
    if isinstance(node, ast.BinOp):
        return node.right if right else node.left
    return node


@tensor_op("mul", "div", "multiply", "divide", "true_divide", functions=_torch("mul", "div"))
def multiply_method(call: OpCall) -> Fact:
    other = call.get(0, "other")
    if other is None:
        return UNKNOWN
    operator = "*" if call.name in ("mul", "multiply", "torch.mul") else "/"
    return arithmetic(call.context, call.node, operator, call.receiver, other[0])


@tensor_op("add", "sub", functions=_torch("add", "sub"))
def add_method(call: OpCall) -> Fact:
    other = call.get(0, "other")
    if other is None:
        return UNKNOWN
    return arithmetic(call.context, call.node, "+", call.receiver, other[0])


# --- products ----------------------------------------------------------------------------


def matrix_product(
    context: OpContext,
    node: ast.expr,
    left: TensorFact,
    right: TensorFact,
    left_node: ast.expr,
    right_node: ast.expr,
) -> TensorFact:
    """``left @ right`` with PyTorch's batching rules, recording what it contracts."""
    shape: tuple[Dim, ...] | None = None
    if (
        left.shape is not None
        and right.shape is not None
        and min(len(left.shape), len(right.shape)) >= 2
    ):
        batch = broadcast_shapes(left.shape[:-2], right.shape[:-2])
        if batch is not None:
            shape = (*batch, left.shape[-2], right.shape[-1])
        if provably_different(left.shape[-1], right.shape[-2]):
            context.observe(
                SizeMismatch(node, "matrix product inner axes", left.shape[-1], right.shape[-2])
            )
    scaling = None
    if left.scaling is not None and right.scaling is not None:
        scaling = left.scaling + right.scaling
    key_size = right.shape[-1] if right.shape else None
    product = Product(node, left, right, left_node, right_node, -1, -2, -1, key_size)
    if right.is_linear_weight:
        context.observe(LinearWeightProduct(product))
    if left.masked_weights is not None:
        context.observe(MaskAfterSoftmax(left.masked_weights))
    return new_tensor(shape, node).derive(scaling=scaling, product=product)


@tensor_op("matmul", "bmm", "mm", functions=_torch("matmul", "bmm", "mm"))
def matmul(call: OpCall) -> Fact:
    other = call.get(0, "mat2") or call.get(0, "other")
    if other is None or call.receiver_node is None:
        return UNKNOWN
    right = as_tensor(other[0])
    if right is None:
        return UNKNOWN
    return matrix_product(
        call.context, call.node, call.receiver, right, call.receiver_node, other[1]
    )


@function_op("torch.baddbmm")
def baddbmm(call: OpCall) -> Fact:
    operands = [call.get(1, "batch1"), call.get(2, "batch2")]
    if operands[0] is None or operands[1] is None:
        return TensorFact(origin=call.node, scaling=None)
    left, right = as_tensor(operands[0][0]), as_tensor(operands[1][0])
    if left is None or right is None:
        return TensorFact(origin=call.node, scaling=None)
    result = matrix_product(call.context, call.node, left, right, operands[0][1], operands[1][1])
    alpha = call.get(None, "alpha")
    if alpha is not None:
        scaling = _scaled(result, call.node, scale_of(alpha[0]))
        result = result.derive(scaling=scaling, product=result.product)
    return result


@function_op("torch.einsum")
def einsum(call: OpCall) -> Fact:
    equation = call.get(0, "equation")
    if equation is None or len(call.args) != 3:
        return TensorFact(origin=call.node, scaling=None)
    subscripts = _string_value(equation[1])
    if subscripts is None or "->" not in subscripts or "." in subscripts:
        return TensorFact(origin=call.node, scaling=None)
    inputs, output = subscripts.replace(" ", "").split("->")
    operands = inputs.split(",")
    left, right = as_tensor(call.args[1][0]), as_tensor(call.args[2][0])
    if len(operands) != 2 or left is None or right is None:
        return TensorFact(origin=call.node, scaling=None)
    left_letters, right_letters = operands
    contracted = [
        letter for letter in left_letters if letter in right_letters and letter not in output
    ]
    letter_sizes: dict[str, Dim] = {}
    for letters, tensor in ((left_letters, left), (right_letters, right)):
        if tensor.shape is not None and len(tensor.shape) == len(letters):
            for letter, dim in zip(letters, tensor.shape, strict=True):
                letter_sizes.setdefault(letter, dim)
    shape = tuple(letter_sizes.get(letter, Dim.symbol("?")) for letter in output)
    scaling = None
    if left.scaling is not None and right.scaling is not None:
        scaling = left.scaling + right.scaling
    result = new_tensor(shape, call.node).derive(scaling=scaling)
    if len(contracted) != 1:
        return result
    letter = contracted[0]
    key_letters = [key for key in right_letters if key not in left_letters and key in output]
    key_axis, key_size = -1, None
    if len(key_letters) == 1:
        key_axis = output.index(key_letters[0]) - len(output)
        key_size = shape[key_axis]
    if left.masked_weights is not None:
        call.context.observe(MaskAfterSoftmax(left.masked_weights))
    return result.derive(
        scaling=scaling,
        product=Product(
            call.node,
            left,
            right,
            call.args[1][1],
            call.args[2][1],
            left_letters.index(letter),
            right_letters.index(letter),
            key_axis,
            key_size,
        ),
    )


def _string_value(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


@tensor_op(functions=_functional("linear"))
def linear_function(call: OpCall) -> Fact:
    weight = call.tensor_arg(0, "weight")
    out: Dim | None = None
    if weight is not None and weight.shape is not None and len(weight.shape) == 2:
        out = weight.shape[0]
    return _projected(call, out)


@module_op("torch.nn.Linear")
def linear_module(call: OpCall) -> Fact:
    module = call.module
    width = call.receiver.last_dim
    if module is not None and module.in_features is not None and width is not None:
        if provably_different(module.in_features, width):
            call.context.observe(
                SizeMismatch(call.node, "nn.Linear input width", module.in_features, width)
            )
        _rely_on_divisions(call.context, call.node, module.in_features, width)
    return _projected(call, module.out_features if module else None)


def _projected(call: OpCall, out: Dim | None) -> TensorFact:
    """``[..., in] -> [..., out]`` (only the last axis known when the rank is not)."""
    shape = call.receiver.shape
    if shape is not None and len(shape) >= 1:
        shape = (*shape[:-1], out if out is not None else Dim.symbol("?"))
    return new_tensor(shape, call.node).derive(known_last=out)


@module_op("torch.nn.LayerNorm", "torch.nn.RMSNorm")
def norm_module(call: OpCall) -> Fact:
    return _normalised(call)


@tensor_op(functions=_functional("layer_norm", "rms_norm"))
def norm_function(call: OpCall) -> Fact:
    return _normalised(call)


def _normalised(call: OpCall) -> TensorFact:
    # a norm's learned gain acts as a temperature on q and k (QK-norm): scaling unknown
    return new_tensor(call.receiver.shape, call.node).derive(scaling=None)


# --- softmax -----------------------------------------------------------------------------


@tensor_op("softmax", functions=[*_torch("softmax"), *_functional("softmax")])
def softmax(call: OpCall) -> Fact:
    given = call.get(0, "dim")
    dim = call.int_arg(0, "dim")
    written = given[1] if given is not None else None
    return _softmax(call, call.receiver, dim, given is not None and dim is None, written)


@module_op("torch.nn.Softmax")
def softmax_module(call: OpCall) -> Fact:
    dim = call.module.dim if call.module else None
    return _softmax(call, call.receiver, dim, False, None, through_module=True)


def _softmax(
    call: OpCall,
    scores: TensorFact,
    dim: int | None,
    dim_unknown: bool,
    written: ast.expr | None,
    *,
    through_module: bool = False,
) -> Fact:
    """Attention weights when ``scores`` are attention scores; checks the axis it runs over.

    Without ``dim`` PyTorch picks axis 0 for 0-, 1- and 3-D input and axis 1 otherwise.
    """
    product = scores.product
    if product is not None:
        call.context.observe(AttentionScores(call.node, scores, product))
        for node, value in scores.unread_fills:
            problem = _fill_problem(scores, value, node)
            if problem is not None:
                call.context.observe(problem)
        if not dim_unknown and scores.shape is not None:
            rank = len(scores.shape)
            implicit = dim is None
            axis = (0 if rank in (0, 1, 3) else 1) if implicit else dim
            keys = product.key_axis % rank if rank else None
            same_keys = (
                keys is not None
                and product.key_size is not None
                and scores.shape[keys] == product.key_size
            )
            if axis is not None and keys is not None and same_keys and axis % rank != keys:
                call.context.observe(
                    SoftmaxAxis(
                        call.node, axis % rank, keys, rank, implicit, written, through_module
                    )
                )
    dtype = call.get(None, "dtype")
    result_dtype = scores.dtype
    if dtype is not None and isinstance(dtype[0], QualifiedName):
        result_dtype = _DTYPES.get(dtype[0].name)
    return new_tensor(scores.shape, call.node).derive(
        weights=product is not None,
        probabilities=True,
        dtype=result_dtype,
        masked_with=scores.masked_with,
    )


# --- constructors ------------------------------------------------------------------------


@function_op(*_torch("randn", "rand", "zeros", "ones", "empty", "full"))
def allocate(call: OpCall) -> Fact:
    sizes = call.sizes(0, -1 if call.name == "torch.full" else None)
    dtype = call.get(None, "dtype")
    named = _DTYPES.get(dtype[0].name) if dtype and isinstance(dtype[0], QualifiedName) else None
    if sizes is None or any(size is None for size in sizes):
        return new_tensor(None, call.node).derive(dtype=named)
    shape = tuple(size for size in sizes if size is not None)
    return new_tensor(shape, call.node).derive(dtype=named)


@function_op("torch.tensor")
def tensor_constant(call: OpCall) -> Fact:
    data = call.get(0, "data")
    if data is None or not isinstance(data[0], IntFact | ScalarFact):
        return new_tensor(None, call.node)
    constant = new_tensor((), call.node).derive(scalar=scale_of(data[0]))
    dtype = call.get(None, "dtype")
    # a device, or the dtype of an activation, means the constant is placed on purpose
    on_purpose = call.get(None, "device") is not None or (
        dtype is not None and not isinstance(dtype[0], QualifiedName)
    )
    if isinstance(call.node, ast.Call) and not on_purpose:
        return constant.derive(from_number=call.node)
    return constant


@tensor_op(functions=_torch("randn_like", "rand_like", "zeros_like", "ones_like", "empty_like"))
def allocate_like(call: OpCall) -> Fact:
    return new_tensor(call.receiver.shape, call.node)


@function_op("torch.nn.Parameter")
def parameter(call: OpCall) -> Fact:
    data = call.tensor_arg(0, "data")
    shape = data.shape if data is not None else None
    return TensorFact(
        shape=shape,
        layout=Layout.contiguous(None if shape is None else len(shape)),
        is_parameter=True,
        origin=call.node,
    )


@function_op("torch.nn.Linear")
def linear_constructor(call: OpCall) -> Fact:
    sizes = [call.get(0, "in_features"), call.get(1, "out_features")]
    in_features, out_features = (
        call.context.size(*argument) if argument is not None else None for argument in sizes
    )
    return ModuleFact("torch.nn.Linear", in_features=in_features, out_features=out_features)


@function_op("torch.nn.ModuleList", "torch.nn.ParameterList")
def module_list(call: OpCall) -> Fact:
    """The modules as listed (indexing ``self.linears[0]`` finds the layer)."""
    modules = call.get(0, "modules")
    if modules is not None and isinstance(modules[0], TupleFact | RepeatedFact):
        return modules[0]
    return UNKNOWN


@function_op("torch.nn.MultiheadAttention")
def multihead_attention_constructor(call: OpCall) -> Fact:
    embed_dim, num_heads = call.int_arg(0, "embed_dim"), call.int_arg(1, "num_heads")
    if embed_dim and num_heads and embed_dim % num_heads and isinstance(call.node, ast.Call):
        call.context.observe(
            IndivisibleSizes(call.node, "embed_dim by num_heads", embed_dim, num_heads)
        )
    return ModuleFact("torch.nn.MultiheadAttention")


@function_op("torch.nn.Embedding")
def embedding_constructor(call: OpCall) -> Fact:
    sizes = [call.get(0, "num_embeddings"), call.get(1, "embedding_dim")]
    count, width = (call.context.size(*argument) if argument else None for argument in sizes)
    return ModuleFact("torch.nn.Embedding", in_features=count, out_features=width)


@module_op("torch.nn.Embedding")
def embedding_module(call: OpCall) -> Fact:
    """Token ids ``[...]`` -> vectors ``[..., embedding_dim]``."""
    ids, module = call.receiver.shape, call.module
    width = module.out_features if module and module.out_features else Dim.symbol("?")
    return new_tensor(None if ids is None else (*ids, width), call.node).derive(known_last=width)


@tensor_op(functions=_functional("cross_entropy"))
def cross_entropy(call: OpCall) -> Fact:
    _check_logits(call, call.receiver, call.receiver_node)
    return TensorFact(shape=(), origin=call.node)


@module_op("torch.nn.CrossEntropyLoss")
def cross_entropy_module(call: OpCall) -> Fact:
    _check_logits(call, call.receiver, call.receiver_node)
    return TensorFact(shape=(), origin=call.node)


def _check_logits(call: OpCall, inputs: TensorFact, node: ast.expr | None) -> None:
    """Cross-entropy applies log-softmax itself: it wants logits, not probabilities."""
    if inputs.probabilities and node is not None:
        call.context.observe(ProbabilitiesIntoLoss(node))


@function_op("torch.nn.CrossEntropyLoss")
def cross_entropy_constructor(call: OpCall) -> Fact:
    return ModuleFact("torch.nn.CrossEntropyLoss")


@function_op("torch.nn.Softmax")
def softmax_constructor(call: OpCall) -> Fact:
    return ModuleFact("torch.nn.Softmax", dim=call.int_arg(0, "dim"))


@function_op("torch.nn.Dropout", "torch.nn.Identity", "torch.nn.LayerNorm", "torch.nn.RMSNorm")
def plain_module(call: OpCall) -> Fact:
    return ModuleFact(call.name)


# --- splitting ---------------------------------------------------------------------------


def _pieces(call: OpCall, count: int | None, axis: int | None, piece_size: Dim | None) -> Fact:
    receiver = call.receiver
    if count is None:
        return UNKNOWN
    if receiver.shape is None or axis is None:
        return TupleFact(
            tuple(receiver.derive(shape=None, layout=None, origin=call.node) for _ in range(count))
        )
    position = receiver.normalise_axis(axis)
    if position is None:
        return UNKNOWN
    size = piece_size or receiver.shape[position].floordiv(Dim.constant(count))
    shape = (*receiver.shape[:position], size, *receiver.shape[position + 1 :])
    # a piece keeps the memory order of its source (a gap never makes a view legal)
    piece = receiver.derive(shape=shape, origin=call.node)
    return TupleFact(tuple(piece for _ in range(count)))


@tensor_op("chunk", functions=_torch("chunk"))
def chunk(call: OpCall) -> Fact:
    axis = call.int_arg(1, "dim")
    if axis is None and call.get(1, "dim") is None:
        axis = 0
    return _pieces(call, call.int_arg(0, "chunks"), axis, None)


@tensor_op("split", functions=_torch("split"))
def split(call: OpCall) -> Fact:
    axis = call.int_arg(1, "dim")
    if axis is None and call.get(1, "dim") is None:
        axis = 0
    sizes = call.get(0, "split_size_or_sections") or call.get(0, "split_size")
    if sizes is None:
        return UNKNOWN
    fact, _ = sizes
    if isinstance(fact, TupleFact):
        return _split_sections(call, fact, axis)
    receiver = call.receiver
    if isinstance(fact, IntFact) and receiver.shape is not None and axis is not None:
        position = receiver.normalise_axis(axis)
        if position is not None:
            count = receiver.shape[position].floordiv(fact.dim).value
            pieces = _pieces(call, count if count is not None else 1, axis, fact.dim)
            if count is None and isinstance(pieces, TupleFact):
                return RepeatedFact(pieces.items[0])  # as many pieces as the code unpacks
            return pieces
    return UNKNOWN


def _split_sections(call: OpCall, sections: TupleFact, axis: int | None) -> Fact:
    pieces = []
    for item in sections.items:
        size = item.dim if isinstance(item, IntFact) else None
        piece = _pieces(call, 1, axis, size)
        if not isinstance(piece, TupleFact):
            return UNKNOWN
        pieces.append(piece.items[0])
    return TupleFact(tuple(pieces))


@tensor_op("unbind", functions=_torch("unbind"))
def unbind(call: OpCall) -> Fact:
    receiver = call.receiver
    axis = call.int_arg(0, "dim")
    if axis is None and call.get(0, "dim") is None:
        axis = 0
    if receiver.shape is None or axis is None:
        return UNKNOWN
    position = receiver.normalise_axis(axis)
    if position is None:
        return UNKNOWN
    count = receiver.shape[position].value
    if count is None:
        return UNKNOWN
    layout = receiver.layout.materialise(len(receiver.shape)) if receiver.layout else None
    piece = receiver.derive(
        shape=receiver.shape[:position] + receiver.shape[position + 1 :],
        layout=layout.with_axis_removed(position) if layout else None,
        origin=call.node,
    )
    return TupleFact(tuple(piece for _ in range(count)))


@function_op(*_torch("cat", "concat", "concatenate", "stack"))
def concatenate(call: OpCall) -> Fact:
    """``cat`` keeps the rank of its inputs (all equal at run time); ``stack`` adds one.
    The values are the inputs' own: scaled alike if every input is."""
    first = call.get(0, "tensors")
    tensors = (
        [as_tensor(item) for item in first[0].items]
        if first and isinstance(first[0], TupleFact)
        else []
    )
    shapes = [tensor.shape for tensor in tensors if tensor is not None and tensor.shape is not None]
    scalings = {tensor.scaling if tensor is not None else None for tensor in tensors}
    scaling = scalings.pop() if len(scalings) == 1 else None
    return new_tensor(_concatenated_shape(call, shapes), call.node).derive(scaling=scaling)


def _concatenated_shape(call: OpCall, shapes: list[tuple[Dim, ...]]) -> tuple[Dim, ...] | None:
    if not shapes:
        return None
    shape = shapes[0]
    axis = call.int_arg(1, "dim")
    axis = 0 if axis is None and call.get(1, "dim") is None else axis
    if call.name == "torch.stack":
        if axis is None or not -len(shape) - 1 <= axis <= len(shape):
            return fresh_shape(len(shape) + 1)
        position = axis % (len(shape) + 1)
        return (*shape[:position], Dim.symbol("?"), *shape[position:])
    if axis is None or not -len(shape) <= axis < len(shape):
        return fresh_shape(len(shape))
    position = axis % len(shape)
    others = [dims for dims in shapes if len(dims) == len(shape)]
    return tuple(
        Dim.symbol("?") if index == position or any(d[index] != dim for d in others) else dim
        for index, dim in enumerate(shape)
    )
