"""Axis reordering: ``transpose``, ``permute``, ``movedim``, ``t``, ``.T``, ``.mT``."""

from __future__ import annotations

import ast
import dataclasses

from shapecheck.analysis.facts import (
    AxisOp,
    Fact,
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
        tiled = dataclasses.replace(tiled, axis=permutation.index(tiled.axis))
    return flow(
        receiver,
        Family.AXES,
        shape=tuple(receiver.shape[axis] for axis in permutation),
        layout=layout.permuted(permutation, call.node) if layout else None,
        origin=call.node,
        axis_op=AxisOp(name, call.node, len(receiver.shape), axes),
        tiled=tiled if tiled is not None and tiled.rank == len(permutation) else None,
    )


def swap(call: OpCall, first: int, second: int, name: str) -> TensorFact:
    split = _head_split(call, first, second)
    if split is not None:
        call = dataclasses.replace(call, receiver=split)
    rank = call.receiver.rank
    if rank is None:
        return reorder(call, None, name)
    if not (-rank <= first < rank and -rank <= second < rank):
        return reorder(call, None, name)
    permutation = list(range(rank))
    a, b = first % rank, second % rank
    permutation[a], permutation[b] = permutation[b], permutation[a]
    return reorder(call, permutation, name, swapped=(a, b))


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
    return dataclasses.replace(
        receiver, shape=shape, layout=layout, prefixed=None, unknown_rank=None, guess=guess
    )


@tensor_op(
    "transpose", "swapaxes", "swapdims", functions=torch_names("transpose", "swapaxes", "swapdims")
)
def transpose(call: OpCall) -> Fact:
    first, second = call.int_arg(0, "dim0"), call.int_arg(1, "dim1")
    if first is None or second is None or len(call.args) > 2:
        return reorder(call, None, "transpose")  # numpy's transpose(*axes) is a permute
    # transpose(-1, 3) does nothing only at rank 4: a rank known on one branch only, or
    # guessed, is no proof
    receiver = call.receiver
    rank = None if receiver.uncertain or receiver.guess else receiver.rank
    same = first == second or (rank is not None and first % rank == second % rank)
    if same and isinstance(call.node, ast.Call):
        call.context.observe(
            NoOpAxisOp(call.node, call.anchor, (first, second), call.receiver_node)
        )
    return swap(call, first, second, "transpose")


@tensor_op("t", functions=torch_names("t"))
def matrix_transpose(call: OpCall) -> Fact:
    if call.receiver.rank is not None and call.receiver.rank < 2:
        return flow(call.receiver, Family.SAME_VALUES, origin=call.node)
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
    if axes and axes == list(range(len(axes))) and isinstance(call.node, ast.Call):
        call.context.observe(NoOpAxisOp(call.node, call.anchor, tuple(axes), call.receiver_node))
    if axes is None or rank is None or len(axes) != rank:
        return reorder(call, None, "permute")
    normalised = [axis % rank for axis in axes]
    return reorder(call, normalised if sorted(normalised) == list(range(rank)) else None, "permute")


@tensor_op("movedim", "moveaxis", functions=torch_names("movedim", "moveaxis"))
def movedim(call: OpCall) -> Fact:
    source, destination = call.int_arg(0, "source"), call.int_arg(1, "destination")
    rank = call.receiver.rank
    if source is None or destination is None or rank is None:
        return reorder(call, None, "movedim")
    order = list(range(rank))
    moved = order.pop(source % rank)
    order.insert(destination % rank, moved)
    return reorder(call, order, "movedim")
