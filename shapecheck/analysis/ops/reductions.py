"""Reductions: ``sum``, ``mean``, ``amax``, ``logsumexp``, ``std``, ``any``, ``argmax``… over
the axes ``dim`` names (``keepdim=True`` keeps them as 1s), or over all of them; and the
rankings along one axis, ``topk`` and ``sort``."""

from __future__ import annotations

import ast

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    Fact,
    IntFact,
    NoneFact,
    PrefixedShape,
    QualifiedName,
    TensorFact,
    TupleFact,
    Unknown,
    fresh_shape,
)
from shapecheck.analysis.ops import DTYPES, OpCall, new_tensor, tensor_op, torch_names

_VALUES = ("sum", "nansum", "mean", "nanmean", "prod", "amax", "amin", "logsumexp")
_SPREADS = ("std", "var")
"""``std(dim, unbiased, keepdim)``: ``keepdim`` comes third."""
_TESTS = ("any", "all")
_INDICES = ("argmax", "argmin")
_ONE_AXIS = ("argmax", "argmin", "prod")
"""Reductions whose ``dim`` is one axis, never a tuple."""
_COUNTED = ("sum", "nansum", "prod")
"""Reductions that count booleans as integers."""
_LINEAR = ("sum", "nansum", "mean", "nanmean", "amax", "amin")
"""Reductions a positive factor passes through: the values stay as scaled as they were."""


@tensor_op(
    *_VALUES,
    *_SPREADS,
    *_TESTS,
    *_INDICES,
    functions=torch_names(*_VALUES, *_SPREADS, *_TESTS, *_INDICES),
)
def reduction(call: OpCall) -> Fact:
    name = call.name.removeprefix("torch.")
    if call.receiver.is_scores:
        # subtracted from the scores (``scores - scores.amax(-1, keepdim=True)``, a stable
        # softmax), a reduction of them would pass for an additive mask: left unknown
        return Unknown("op", name)
    keep_position = 2 if name in _SPREADS else 1
    axes = _reduced_axes(call, name)
    keepdim = _flag(call.get(keep_position, "keepdim"))
    if axes is None or keepdim is None:
        return Unknown("op", name)
    receiver = call.receiver
    if not axes:  # every axis
        if not keepdim:
            shape: tuple[Dim, ...] | None = ()
        else:
            shape = None if receiver.shape is None else (Dim.constant(1),) * len(receiver.shape)
        return _reduced(call, name, shape, None)
    if receiver.shape is not None:
        rank = len(receiver.shape)
        wrapped = [axis % max(rank, 1) for axis in axes if -max(rank, 1) <= axis < max(rank, 1)]
        if len(wrapped) != len(axes) or len(set(wrapped)) != len(wrapped):
            return _reduced(call, name, None, None)  # PyTorch raises
        return _reduced(call, name, _kept(receiver.shape, wrapped, keepdim), None)
    split = receiver.prefixed
    if split is None or any(not -len(split.tail) <= axis < 0 for axis in axes):
        return Unknown("op", name)
    positions = [axis % len(split.tail) for axis in axes]
    if len(set(positions)) != len(positions):
        return _reduced(call, name, None, None)
    tail = _kept(split.tail, positions, keepdim)
    return _reduced(call, name, None, PrefixedShape(split.prefix, tail))


def _reduced_axes(call: OpCall, name: str) -> tuple[int, ...] | None:
    """The axes ``dim`` names, ``()`` for all of them (no ``dim``, ``None`` or ``()``);
    ``None`` where the code does not say which."""
    given = call.get(0, "dim")
    if given is None:
        return None if name == "logsumexp" else ()
    fact = given[0]
    if isinstance(fact, NoneFact):
        return ()
    if isinstance(fact, IntFact):
        return None if fact.dim.value is None else (fact.dim.value,)
    if isinstance(fact, TupleFact) and name not in _ONE_AXIS:
        values = [item.dim.value if isinstance(item, IntFact) else None for item in fact.items]
        if all(value is not None for value in values):
            return tuple(value for value in values if value is not None)
    return None


def _flag(given: tuple[Fact, ast.expr] | None) -> bool | None:
    """A ``keepdim`` written as a literal (absent: ``False``); ``None`` where not."""
    if given is None:
        return False
    node = given[1]
    return node.value if isinstance(node, ast.Constant) and type(node.value) is bool else None


def _kept(shape: tuple[Dim, ...], axes: list[int], keepdim: bool) -> tuple[Dim, ...]:
    if keepdim:
        return tuple(Dim.constant(1) if i in axes else dim for i, dim in enumerate(shape))
    return tuple(dim for i, dim in enumerate(shape) if i not in axes)


def _reduced(
    call: OpCall, name: str, shape: tuple[Dim, ...] | None, prefixed: PrefixedShape | None
) -> TensorFact:
    """New values of ``shape`` (or ``prefixed``), of the dtype the reduction gives, scaled as
    the receiver was where the reduction is linear (otherwise: nobody can tell)."""
    receiver = call.receiver
    dtype = receiver.dtype
    if name in _TESTS:
        dtype = "bool"
    elif name in _INDICES or (name in _COUNTED and dtype == "bool"):
        dtype = "int64"
    given = call.get(None, "dtype")
    if given is not None:
        dtype = DTYPES.get(given[0].name) if isinstance(given[0], QualifiedName) else None
    last = prefixed.tail[-1] if prefixed is not None and prefixed.tail else None
    return new_tensor(
        shape,
        call.node,
        receiver,
        dtype=dtype,
        scaling=receiver.scaling if name in _LINEAR else None,
        prefixed=prefixed,
        known_last=last,
    )


@tensor_op("topk", "sort", functions=torch_names("topk", "sort"))
def ranked(call: OpCall) -> Fact:
    """``values, indices = x.topk(k, dim=-1)`` (a mixture of experts' router), ``x.sort(dim)``:
    both shaped like ``x``, but ``k`` long along ``dim`` for ``topk``; the indices int64."""
    top = call.name.removeprefix("torch.") == "topk"
    position = 1 if top else 0
    axis = -1 if call.get(position, "dim") is None else call.int_arg(position, "dim")
    length = call.size_arg(0, "k") if top else None
    receiver, shape = call.receiver, None
    rank = receiver.rank
    if receiver.shape is not None and axis is None:
        # along an axis it cannot read: the rank kept, and which size topk cut unknown
        shape = list(fresh_shape(len(receiver.shape)) if top else receiver.shape)
    elif (
        receiver.shape is not None
        and rank is not None
        and axis is not None
        and -rank <= axis < rank
    ):
        shape = list(receiver.shape)
        if top:
            shape[axis] = length if length is not None else Dim.symbol("?")
    values = new_tensor(
        None if shape is None else tuple(shape), call.node, receiver, dtype=receiver.dtype
    )
    indices = new_tensor(values.shape, call.node, receiver, dtype="int64")
    return TupleFact((values, indices))


@tensor_op("max", "min", functions=torch_names("max", "min"))
def extreme(call: OpCall) -> Fact:
    """``values, indices = x.max(dim=-1)`` (``keepdim`` keeps the axis as 1), ``x.max()`` one
    value. Of scores, unknown, as the other reductions (a stable softmax subtracts it); two
    tensors (``torch.max(a, b)``, elementwise) are not modelled."""
    name = call.name.removeprefix("torch.")
    given = call.get(0, "dim") or call.get(None, "axis")
    receiver = call.receiver
    if receiver.is_scores or (given is not None and isinstance(given[0], TensorFact)):
        return Unknown("op", name)
    if given is None:
        return _reduced(call, name, (), None)
    keepdim = _flag(call.get(1, "keepdim"))
    axis = given[0].dim.value if isinstance(given[0], IntFact) else None
    shape = receiver.shape
    if keepdim is None or axis is None or shape is None or not -len(shape) <= axis < len(shape):
        return Unknown("op", name)
    kept = _kept(shape, [axis % len(shape)], keepdim)
    values = _reduced(call, name, kept, None)
    indices = new_tensor(kept, call.node, receiver, dtype="int64")
    return TupleFact((values, indices))


@tensor_op("histc", "bincount", functions=torch_names("histc", "bincount"))
def histogram(call: OpCall) -> Fact:
    """``torch.histc(x, bins=n)``: ``n`` counts (100 unless given), of ``x``'s dtype, whatever
    ``x``'s shape (a router's experts chosen per token); ``bincount`` as many as the largest
    value, which the code does not show: one axis of unknown length, int64 (of ``weights``'s
    dtype when weighted)."""
    receiver = call.receiver
    if call.name.removeprefix("torch.") == "bincount":
        weights = call.tensor_arg(0, "weights")
        dtype = "int64" if weights is None else weights.dtype
        return new_tensor((Dim.symbol("?"),), call.node, receiver, dtype=dtype)
    bins = call.get(0, "bins")
    length = Dim.constant(100) if bins is None else call.context.size(*bins)
    return new_tensor((length or Dim.symbol("?"),), call.node, receiver, dtype=receiver.dtype)
