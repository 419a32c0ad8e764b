"""einops: ``rearrange``, ``repeat``, ``reduce``, ``einsum``, ``pack`` and ``unpack``, and the
layers ``Rearrange`` and ``Reduce``, the way most research code splits and merges heads
(``rearrange(t, "b n (h d) -> b h n d", h=heads)``).

A pattern names every axis, so it also tells the rank of its input: a tensor of unknown rank
given to ``"b n (h d) -> ..."`` has three axes (einops raises otherwise), and is known to from
there on.
"""

from __future__ import annotations

import re

from shapecheck.analysis.dims import Dim, product
from shapecheck.analysis.facts import (
    UNKNOWN,
    Fact,
    ModuleFact,
    SizeFact,
    TensorFact,
    TupleFact,
    fresh_shape,
)
from shapecheck.analysis.imports import dotted_name
from shapecheck.analysis.lattice import Family, flow
from shapecheck.analysis.ops import (
    OpCall,
    as_tensor,
    function_op,
    kept_contiguous,
    module_op,
    new_tensor,
    tensor_op,
    text,
    texts,
)
from shapecheck.analysis.ops.products import contracted
from shapecheck.analysis.ops.views import unknown_shape

Group = tuple[str, ...]
"""One axis of a pattern side: a name (``("h",)``), a composition (``("h", "d")``), ``("1",)``
or ``("...",)``."""

_TOKENS = re.compile(r"\(|\)|\.\.\.|[^\s()]+")


def parse_side(text: str) -> list[Group] | None:
    """``"b n (h d)"`` -> ``[("b",), ("n",), ("h", "d")]``; ``None`` when malformed."""
    groups: list[Group] = []
    current: list[str] | None = None
    for token in _TOKENS.findall(text):
        if token == "(":
            if current is not None:
                return None
            current = []
        elif token == ")":
            if current is None:
                return None
            groups.append(tuple(current))
            current = None
        elif current is not None:
            current.append(token)
        else:
            groups.append((token,))
    return groups if current is None else None


@tensor_op(functions=["einops.rearrange"])
def rearrange(call: OpCall) -> Fact:
    return _pattern(call, _written_pattern(call), _given_sizes(call), Family.VIEW)


@tensor_op(functions=["einops.repeat"])
def repeat(call: OpCall) -> Fact:
    return _pattern(call, _written_pattern(call), _given_sizes(call), Family.VIEW)


@tensor_op(functions=["einops.reduce"])
def reduce(call: OpCall) -> Fact:
    return _pattern(call, _written_pattern(call), _given_sizes(call), None)


_LAYERS = {"einops.layers.torch.Rearrange": Family.VIEW, "einops.layers.torch.Reduce": None}
"""einops' layers, built with their pattern in ``__init__`` and applied in ``forward``, and
what each does to the values (``None``: a reduction, new values)."""


@function_op(*_LAYERS)
def einops_layer(call: OpCall) -> Fact:
    """``Rearrange("b n (h d) -> b h n d", h=heads)``: the pattern and sizes, for its calls."""
    pattern = _written_pattern(call)
    if pattern is None:
        return UNKNOWN
    sizes = tuple(_given_sizes(call).items())
    return ModuleFact(call.name, pattern=pattern, axis_sizes=sizes)


@module_op(*_LAYERS)
def einops_layer_call(call: OpCall) -> Fact:
    """An einops layer applied to a tensor: its pattern, as the function would apply it."""
    layer = call.module
    if layer is None:
        return unknown_shape(call)
    return _pattern(call, layer.pattern, dict(layer.axis_sizes), _LAYERS[layer.kind])


def input_rank(pattern: str) -> int | None:
    """The rank a pattern's input must have (``None``: any, after ``...``; or malformed)."""
    sides = pattern.split("->")
    left = parse_side(sides[0]) if len(sides) == 2 else None
    return None if left is None or ("...",) in left else len(left)


def _written_pattern(call: OpCall) -> str | None:
    return text(call.get(0, "pattern"))


def _given_sizes(call: OpCall) -> dict[str, Dim]:
    """The axis sizes a call names as keywords (``h=heads``; an axis length, whatever the
    analysis knows of the name: ``d=dim_head`` in ``__init__``)."""
    sizes = {}
    for name, argument in call.kwargs.items():
        size = call.context.size(*argument)
        if size is not None:
            sizes[name] = size
    return sizes


@function_op("einops.einsum")
def einsum(call: OpCall) -> Fact:
    """``einsum(q, k, "b h i d, b h j d -> b h i j")``: the tensors first, the pattern last."""
    if len(call.args) != 3:
        return TensorFact(origin=call.node, scaling=None)
    equations = texts(call.args[-1])
    return contracted(call, equations, call.args[0], call.args[1], letters=False)


def _pattern(call: OpCall, text: str | None, given: dict[str, Dim], family: Family | None) -> Fact:
    """The shape ``text``, a pattern, gives with the axis sizes ``given`` (``family``
    ``None``: a reduction, new values)."""
    sides = text.split("->") if text is not None else []
    left, right = (parse_side(side) for side in sides) if len(sides) == 2 else (None, None)
    if left is None or right is None:
        return unknown_shape(call)
    receiver = _with_rank(call, left)
    if receiver.shape is None or not _fits(left, receiver.shape):
        return unknown_shape(call)
    sizes = _sizes(given, left, receiver.shape)
    shape = tuple(dim for group in right for dim in _group_size(group, sizes))
    kept_order = _elementary(left) == [
        axis for axis in _elementary(right) if axis in _elementary(left)
    ]
    layout = kept_contiguous(receiver, len(shape)) if kept_order else None
    if family is None:
        return new_tensor(shape, call.node, receiver)
    return flow(receiver, family, shape=shape, layout=layout, origin=call.node)


def _with_rank(call: OpCall, left: list[Group]) -> TensorFact:
    """The receiver, its rank learned from a pattern without ``...`` where it was unknown."""
    receiver = call.receiver
    key = dotted_name(call.receiver_node) if call.receiver_node is not None else None
    if receiver.shape is not None or ("...",) in left:
        return receiver
    learned = call.context.learn_rank(key, len(left), None) if key is not None else None
    if learned is not None:
        return learned
    rank = len(left)  # not a name: its sizes stay unknown (but the width a layer made)
    layout = receiver.layout.materialise(rank) if receiver.layout is not None else None
    last = receiver.known_last or Dim.symbol("?")
    shape = (*(Dim.symbol("?") for _ in range(rank - 1)), last)
    return flow(receiver, Family.VIEW, shape=shape, layout=layout, origin=receiver.origin)


def _fits(left: list[Group], shape: tuple[Dim, ...]) -> bool:
    """A pattern side that names every axis of ``shape`` (``...`` standing for any)."""
    ellipses = left.count(("...",))
    if ellipses > 1:
        return False
    return len(left) - 1 <= len(shape) if ellipses else len(left) == len(shape)


def _sizes(given: dict[str, Dim], left: list[Group], shape: tuple[Dim, ...]) -> dict[str, Dim]:
    """Every axis name's size: given as a keyword, read off a single axis, or what a
    composition leaves once its other members are known (einops checks the division)."""
    sizes = dict(given)
    position = 0
    compositions: list[tuple[Group, Dim]] = []
    for group in left:
        if group == ("...",):
            spanned = len(shape) - (len(left) - 1)
            for index in range(spanned):
                sizes[f"...{index}"] = shape[position + index]
            position += spanned
            continue
        dim = shape[position]
        position += 1
        if len(group) == 1 and not group[0].isdigit():
            sizes.setdefault(group[0], dim)
        else:
            compositions.append((group, dim))
    for group, dim in compositions:
        missing = [name for name in group if not name.isdigit() and name not in sizes]
        if len(missing) == 1:
            known = [size for name in group if name != missing[0] for size in _atom(name, sizes)]
            sizes[missing[0]] = dim.floordiv(product(known))
    return sizes


def _atom(name: str, sizes: dict[str, Dim]) -> list[Dim]:
    if name.isdigit():
        return [Dim.constant(int(name))]
    return [sizes[name]] if name in sizes else []


def _group_size(group: Group, sizes: dict[str, Dim]) -> list[Dim]:
    """The sizes one output group stands for (``...`` stands for several)."""
    if group == ("...",):
        spanned = sorted(
            (name for name in sizes if name.startswith("...")), key=lambda n: int(n[3:])
        )
        return [sizes[name] for name in spanned]
    members = [_atom(name, sizes) for name in group]
    if any(not member for member in members):
        return [Dim.symbol("?")]
    return [product([member[0] for member in members])]


def _elementary(side: list[Group]) -> list[str]:
    """The named axes in order (``...`` keeps its own order, a ``1`` holds no data)."""
    return [name for group in side for name in group if not name.isdigit() and name != "..."]


@function_op("einops.pack")
def pack(call: OpCall) -> Fact:
    """``packed, ps = pack([x, y], "b * d")``: the tensors joined along the axis ``*`` stands
    for (each one's axes there flattened into it), and the sizes each had there (``ps``).
    The axes named around ``*`` are the same in every tensor packed (einops checks), so one
    tensor of known shape gives them where another's is unknown."""
    listed, layout = call.get(0, "tensors"), _packing(call, 1)
    if listed is None or layout is None or not isinstance(listed[0], TupleFact):
        return UNKNOWN
    before, after = layout
    inputs = [as_tensor(item) for item in listed[0].items]
    shapes = [tensor.shape if tensor is not None else None for tensor in inputs]
    known = [shape for shape in shapes if shape is not None]
    if not known or any(len(shape) < before + after for shape in known):
        return TupleFact((new_tensor(fresh_shape(before + 1 + after), call.node), UNKNOWN))
    first = known[0]
    if len(known) < len(shapes):  # how many ``*`` gathers is unknown
        shape = (*first[:before], Dim.symbol("?"), *first[len(first) - after :])
        return TupleFact((new_tensor(shape, call.node, *inputs), UNKNOWN))
    packed = [product(shape[before : len(shape) - after]) for shape in known]
    joined = packed[0]
    for size in packed[1:]:
        joined = joined + size
    shape = (*first[:before], joined, *first[len(first) - after :])
    star = tuple(SizeFact(shape[before : len(shape) - after]) for shape in known)
    return TupleFact((new_tensor(shape, call.node, *inputs), TupleFact(star)))


@function_op("einops.unpack")
def unpack(call: OpCall) -> Fact:
    """``x, y = unpack(packed, ps, "b * d")``: the axis ``*`` stands for split back into the
    sizes each tensor had there, as ``pack`` gave them (``ps``)."""
    given, sizes, layout = call.get(0, "tensor"), call.get(1, "packed_shapes"), _packing(call, 2)
    packed = as_tensor(given[0]) if given is not None else None
    if packed is None or sizes is None or layout is None or not isinstance(sizes[0], TupleFact):
        return UNKNOWN
    before, after = layout
    shape = packed.shape
    if shape is None or len(shape) != before + 1 + after:
        return UNKNOWN
    pieces: list[Fact] = []
    for item in sizes[0].items:
        if not isinstance(item, SizeFact):
            return UNKNOWN
        unpacked = (*shape[:before], *item.dims, *shape[before + 1 :])
        pieces.append(flow(packed, Family.VIEW, shape=unpacked, layout=None, origin=call.node))
    return TupleFact(tuple(pieces))


def _packing(call: OpCall, position: int) -> tuple[int, int] | None:
    """How many axes a pack pattern names before and after its ``*`` (``None``: no such
    pattern, or one with a composition or ``...``)."""
    written = text(call.get(position, "pattern"))
    names = written.split() if written is not None else []
    if names.count("*") != 1 or any(not name.isidentifier() for name in names if name != "*"):
        return None
    star = names.index("*")
    return star, len(names) - star - 1
