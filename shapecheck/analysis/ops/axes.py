"""Axis reordering: ``transpose``, ``permute``, ``movedim``, ``t``, ``.T``, ``.mT``."""

from __future__ import annotations

import ast

from shapecheck.analysis.facts import (
    AxisOp,
    Fact,
    PrefixedShape,
    TensorFact,
)
from shapecheck.analysis.lattice import Family, flow
from shapecheck.analysis.observations import (
    NoOpAxisOp,
)
from shapecheck.analysis.ops import (
    OpCall,
    tensor_op,
    torch_names,
)
from shapecheck.record import replace


def reorder(
    call: OpCall, permutation: list[int] | None, name: str, swapped: tuple[int, int] | None = None
) -> TensorFact:
    """The receiver with its axes in ``permutation`` order (``None``: rank unknown); a swap
    of two axes is remembered as that swap."""
    receiver = call.receiver
    if permutation is None or receiver.shape is None:
        return flow(receiver, Family.AXES, shape=None, layout=None, origin=call.node, axis_op=None)
    layout = receiver.layout.materialise(len(receiver.shape)) if receiver.layout else None
    axes = swapped if swapped is not None else tuple(permutation)
    tiled = receiver.tiled
    if tiled is not None and tiled.rank == len(permutation):  # the copies move with their axis
        tiled = replace(tiled, axis=permutation.index(tiled.axis))
    heads = receiver.heads
    if heads is not None and heads.rank == len(permutation):  # so do the heads
        heads = replace(heads, axis=permutation.index(heads.axis))
    channels = receiver.channels
    if channels is not None and channels.rank == len(permutation):  # and the channels
        channels = replace(channels, axis=permutation.index(channels.axis))
    product = receiver.product
    rank = len(permutation)
    if product is not None and -rank <= product.key_axis < rank:  # and the keys
        keys = permutation.index(product.key_axis % rank) - rank
        product = replace(product, key_axis=keys)
    return flow(
        receiver,
        Family.AXES,
        shape=tuple(receiver.shape[axis] for axis in permutation),
        layout=layout.permuted(permutation, call.node) if layout else None,
        origin=call.node,
        axis_op=AxisOp(name, call.node, len(receiver.shape), axes),
        product=product,
        tiled=tiled if tiled is not None and tiled.rank == len(permutation) else None,
        heads=heads if heads is not None and heads.rank == len(permutation) else None,
        channels=channels if channels is not None and channels.rank == len(permutation) else None,
    )


def wrapped(axis: int, rank: int) -> int | None:
    """``axis`` counted from the front, as PyTorch counts it; ``None`` out of range (PyTorch
    raises IndexError). A 0-d tensor takes -1 and 0, as if it had one axis."""
    bound = max(rank, 1)
    return axis % bound if -bound <= axis < bound else None


def swap(call: OpCall, first: int, second: int, name: str) -> TensorFact:
    split = _head_split(call, first, second)
    if split is not None:
        call = replace(call, receiver=split)
    rank = call.receiver.rank
    if rank is None:
        return _tail_swap(call, first, second) or reorder(call, None, name)
    a, b = wrapped(first, rank), wrapped(second, rank)
    if a is None or b is None:  # PyTorch raises IndexError; the axes asked for are kept
        unknown = reorder(call, None, name)
        return replace(unknown, axis_op=AxisOp(name, call.node, rank, (first, second)))
    if rank == 0:
        return _unchanged(call)
    permutation = list(range(rank))
    permutation[a], permutation[b] = permutation[b], permutation[a]
    return reorder(call, permutation, name, swapped=(a, b))


def _tail_swap(call: OpCall, first: int, second: int) -> TensorFact | None:
    """``x.transpose(-2, -1)`` where only ``x``'s last axes are known (after a ``*batch``):
    two of those swapped, counted from the end as the code counts them."""
    split = call.receiver.prefixed
    if split is None or not -len(split.tail) <= min(first, second) <= max(first, second) < 0:
        return None
    tail = list(split.tail)
    tail[first], tail[second] = tail[second], tail[first]
    return flow(
        call.receiver,
        Family.AXES,
        shape=None,
        layout=None,
        origin=call.node,
        axis_op=None,
        prefixed=PrefixedShape(split.prefix, tuple(tail)),
        known_last=tail[-1],
    )


def _unchanged(call: OpCall) -> TensorFact:
    """A reordering of fewer than two axes: the tensor as it was."""
    return flow(call.receiver, Family.SAME_VALUES, origin=call.node)


def _head_split(call: OpCall, first: int, second: int) -> TensorFact | None:
    """``x.view(*h.shape[:-1], heads, d).transpose(1, 2)`` while ``h``'s rank is unknown. A
    head split swaps the new heads axis with the one before it, so ``h.shape[:-1]`` holds two
    sizes (batch, sequence): ``h`` is learned to have as many axes, on that assumption."""
    receiver = call.receiver
    split = receiver.prefixed
    if receiver.shape is not None or split is None or len(split.tail) != 2:
        return None
    if {first, second} != {1, 2}:
        return None
    prefix = split.prefix
    rank = 2 + prefix.dropped
    guess = f"`{prefix.owner}` has {rank} axes, as splitting heads after two of them implies"
    owner = call.context.learn_rank(prefix.owner, rank, guess)
    if owner is None or owner.shape is None:
        return None
    shape = (*owner.shape[:2], *split.tail)
    layout = receiver.layout.materialise(len(shape)) if receiver.layout else None
    heads = receiver.heads
    if heads is not None and heads.rank is None:
        heads = replace(heads, axis=len(shape) + heads.axis, rank=len(shape))
    return replace(
        receiver,
        shape=shape,
        layout=layout,
        prefixed=None,
        unknown_rank=None,
        guess=guess,
        heads=heads,
    )


@tensor_op(
    "transpose", "swapaxes", "swapdims", functions=torch_names("transpose", "swapaxes", "swapdims")
)
def transpose(call: OpCall) -> Fact:
    first, second = call.int_arg(0, "dim0"), call.int_arg(1, "dim1")
    if first is None or second is None or len(call.args) > 2:
        return reorder(call, None, "transpose")  # numpy's transpose(*axes) is a permute
    if _swaps_with_itself(call.receiver, first, second) and isinstance(call.node, ast.Call):
        call.context.observe(
            NoOpAxisOp(call.node, call.anchor, (first, second), call.receiver_node)
        )
    return swap(call, first, second, "transpose")


def _swaps_with_itself(receiver: TensorFact, first: int, second: int) -> bool:
    """Does ``transpose(first, second)`` leave every axis in place? Not where an axis is out
    of the rank's range (PyTorch raises). ``transpose(-1, 3)`` does so only at rank 4: a rank
    known on one branch only, or guessed, is no proof."""
    rank = receiver.rank
    if rank is None:
        return first == second
    a, b = wrapped(first, rank), wrapped(second, rank)
    if a is None or b is None:
        return False
    return first == second or (not receiver.uncertain and not receiver.guess and a == b)


@tensor_op("t", functions=torch_names("t"))
def matrix_transpose(call: OpCall) -> Fact:
    if call.receiver.rank is not None and call.receiver.rank < 2:
        return _unchanged(call)
    return swap(call, 0, 1, "t")


def reversed_axes(call: OpCall) -> TensorFact:
    """``x.T``: all axes reversed."""
    rank = call.receiver.rank
    return reorder(call, None if rank is None else list(range(rank))[::-1], "T")


def last_two_swapped(call: OpCall) -> TensorFact:
    """``x.mT``."""
    return swap(call, -2, -1, "mT")


@tensor_op("permute", functions=torch_names("permute"))
def permute(call: OpCall) -> Fact:
    axes = call.int_list(0)
    rank = call.receiver.rank
    if axes is not None and _keeps_every_axis(axes, rank) and isinstance(call.node, ast.Call):
        call.context.observe(NoOpAxisOp(call.node, call.anchor, tuple(axes), call.receiver_node))
    if axes is None or rank is None or len(axes) != rank:
        return reorder(call, None, "permute")
    normalised = [axis % rank for axis in axes if -rank <= axis < rank]
    return reorder(call, normalised if sorted(normalised) == list(range(rank)) else None, "permute")


def _keeps_every_axis(axes: list[int], rank: int | None) -> bool:
    """An identity order; of another length than the rank, it raises instead of doing
    nothing."""
    return axes == list(range(len(axes))) and rank in (None, len(axes))


@tensor_op("movedim", "moveaxis", functions=torch_names("movedim", "moveaxis"))
def movedim(call: OpCall) -> Fact:
    source, destination = call.int_arg(0, "source"), call.int_arg(1, "destination")
    rank = call.receiver.rank
    if source is None or destination is None or rank is None:
        return reorder(call, None, "movedim")
    start, end = wrapped(source, rank), wrapped(destination, rank)
    if start is None or end is None:
        return reorder(call, None, "movedim")
    if rank == 0:
        return _unchanged(call)
    order = list(range(rank))
    order.insert(end, order.pop(start))
    return reorder(call, order, "movedim")
