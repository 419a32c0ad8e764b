"""Views and copies that change the shape: ``view``/``reshape`` and their kin, splits and joins."""

from __future__ import annotations

import ast
import re

from shapecheck.analysis.dims import Dim, product
from shapecheck.analysis.facts import (
    UNKNOWN,
    AxisOp,
    ChannelsAxis,
    Fact,
    HeadsAxis,
    IntFact,
    PrefixedShape,
    QualifiedName,
    RepeatedFact,
    TensorFact,
    Tiling,
    TupleFact,
    Unknown,
    fresh_shape,
)
from shapecheck.analysis.imports import dotted_name
from shapecheck.analysis.lattice import Family, flow
from shapecheck.analysis.layout import (
    Layout,
    Reinterpretation,
    heads_split_apart,
    moved_channels,
    plan_view,
    reinterpreted_axis,
)
from shapecheck.analysis.observations import (
    ChannelsMovingView,
    ExactDivisionAssumed,
    IncompatibleView,
    ReinterpretingView,
)
from shapecheck.analysis.ops import (
    Argument,
    OpCall,
    OpContext,
    as_tensor,
    function_op,
    functional_names,
    kept_contiguous,
    new_tensor,
    tensor_op,
    torch_names,
)
from shapecheck.record import replace


def unknown_shape(call: OpCall) -> TensorFact:
    """The receiver, reshaped in a way the analysis cannot tell."""
    return flow(call.receiver, Family.VIEW, shape=None, layout=None, origin=call.node)


def _target_shape(receiver: TensorFact, sizes: list[Dim | None]) -> tuple[Dim, ...]:
    """The new shape, with one otherwise unknown size solved from the element count.

    A ``-1`` is what the element count leaves (``E // H`` if it comes to that: a view must
    be exact), and so is a size of unknown value (``?``) that is no size of the old shape
    (``seq_len``, ``-1`` from one caller and a length from another). Without either, a
    single size whose symbols the old shape never mentions (``view(L, B, embed_dim)`` of
    ``[L, B*H, D]``) is replaced when the division is exact.
    """
    if receiver.shape is None:
        return tuple(size if size is not None else Dim.symbol("?") for size in sizes)
    old_symbols = {atom for dim in receiver.shape for atom in dim.factors}
    missing = [
        index
        for index, size in enumerate(sizes)
        if size is None or (_of_unknown_value(size) and not set(size.factors) & old_symbols)
    ]
    exact_only = not missing
    if exact_only:
        missing = [
            index
            for index, size in enumerate(sizes)
            if size is not None and size.factors and not set(size.factors) & old_symbols
        ]
    if len(missing) == 1:
        known = [size for index, size in enumerate(sizes) if index != missing[0] and size]
        count, written = product(receiver.shape), product(known)
        # What fits, by definition: no division is relied on to get it. But a ``-1`` is what
        # the old sizes leave, ``H * (E // H)`` merged, which is ``E`` only if ``H`` divides
        # ``E``: it keeps that division for whatever reads it as ``E`` (a layer built ``E``
        # wide). A division whose ``E`` the view writes itself is relied on by the view.
        relied = frozenset(
            quotient
            for quotient in count.assumes
            if not exact_only and not set(quotient.numerator.factors) & set(written.factors)
        )
        solved = replace(count.floordiv(written), assumes=relied)
        # a size the code writes is kept over one solved from an unknown (``?``)
        solvable = not solved.has_unknown
        quotients = len(solved.quotients) <= sum(len(d.quotients) for d in receiver.shape)
        if not exact_only or (solvable and quotients):
            sizes = list(sizes)
            sizes[missing[0]] = solved
    return tuple(size if size is not None else Dim.symbol("?") for size in sizes)


def _of_unknown_value(size: Dim) -> bool:
    """``?`` itself (a number callers disagree on), not a size with an unknown part."""
    return size.single_symbol is not None and size.has_unknown


def _view_like(call: OpCall, sizes: list[Dim | None] | None, *, copies: bool) -> Fact:
    """``view`` (``copies=False``) or ``reshape`` (copies when a view is impossible)."""
    receiver = call.receiver
    if sizes is None:
        return unknown_shape(call)
    shape = _target_shape(receiver, sizes)
    old = receiver.shape
    exchanged = old is not None and _exchanges_last_two(old, shape)
    layout = _view_layout(call, shape, copies=copies)
    if layout is _FAILED_VIEW:
        layout = Layout.contiguous(len(shape))  # go on as if the author had fixed it
    elif receiver.shape is not None and isinstance(call.node, ast.Call):
        counted = _counted(receiver.shape, shape)
        moved = reinterpreted_axis(counted, shape)
        # a split whose sizes are of unknown relation to the tensor's (a helper's
        # ``batch_size`` and ``seq_len``): where the last axis is cut into a whole number of
        # heads, it may show them written before another axis, as the width of a tensor of
        # unknown rank does (a spatial axis or a block is no such width)
        width = receiver.shape[-1] if receiver.shape else None
        if (
            moved is None
            and width is not None
            and len(receiver.shape) < len(shape)
            and not width.floordiv(shape[-1]).quotients
        ):
            moved = heads_split_apart(width, shape)
        # Transformer-XL's relative shift exchanges the last two sizes of its scores on
        # purpose (padded first, or Funnel's, which drops rows after: a product of queries
        # and positions, never a tensor a split or merge of heads views): on the way back,
        # sizes a view of values of unknown shape chose; either way, lengths read off the
        # scores, named by no code (counted: a padded length the view's count gives back).
        # No axis there is known to hold what its size names.
        guessed = moved is not None and moved.guess is not None
        shift = (exchanged and (receiver.resized is not None or receiver.product is not None)) or (
            guessed and _exchanges_last_two(counted, shape)
        )
        if moved is not None and not shift:
            call.context.observe(_reinterpreting(call, counted, shape, moved))
        channels = moved_channels(receiver.shape, shape)
        if channels is not None:
            call.context.observe(
                ChannelsMovingView(
                    call.node, call.anchor, receiver.shape, shape, channels, receiver.guess
                )
            )
        rely_on_divisions(call.context, call.node, product(receiver.shape), product(shape))
    elif receiver.known_last is not None and isinstance(call.node, ast.Call):
        moved = heads_split_apart(receiver.known_last, shape)
        if moved is not None:
            # the leading axes, of unknown number, shown as one: the view reads them in order
            leading = (Dim.symbol("..."), receiver.known_last)
            call.context.observe(_reinterpreting(call, leading, shape, moved))
    axis_op = None
    if exchanged:
        rank = len(shape)
        axis_op = AxisOp("view", call.node, rank, (rank - 2, rank - 1))
    return flow(
        receiver,
        Family.VIEW,
        shape=shape,
        layout=layout,
        origin=call.node,
        axis_op=axis_op,
        heads=_split_heads(call, old, shape),
        channels=_kept_channels(receiver, shape),
        resized=call.node if old is None else receiver.resized,
    )


def _exchanges_last_two(old: tuple[Dim, ...], new: tuple[Dim, ...]) -> bool:
    """The sizes of the last two axes exchanged without moving any data."""
    return (
        len(old) == len(new) >= 2
        and old[-1] != old[-2]
        and new[:-2] == old[:-2]
        and (new[-2], new[-1]) == (old[-1], old[-2])
    )


def _reinterpreting(
    call: OpCall, old: tuple[Dim, ...], new: tuple[Dim, ...], moved: Reinterpretation
) -> ReinterpretingView:
    """The view ``call`` of ``old`` as ``new``, which moves ``moved``, with the guesses it rests
    on: the receiver's shape, and that the moved axis is longer than 1."""
    guesses = [guess for guess in (call.receiver.guess, moved.guess) if guess]
    node = call.node
    assert isinstance(node, ast.Call)
    return ReinterpretingView(node, call.anchor, old, new, moved, " and ".join(guesses) or None)


def _counted(old: tuple[Dim, ...], new: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """``old`` with its one unknown size solved from the element count of ``new``, which a view
    must keep: ``[B, H, ?, D]`` viewed as ``[B, L, H*D]`` holds ``L`` positions. Without an
    unknown, one unnamed size that ``new`` leaves out is solved alike: IDEFICS'
    ``key_value_states`` ``[key_value_states.shape[0], kv_len, E]`` viewed as
    ``(bsz, kv_len, H, D)`` has ``bsz`` rows (the same batch, named twice)."""
    if any(dim.has_unknown for dim in new):
        return old
    unknown = [axis for axis, dim in enumerate(old) if dim.has_unknown]
    if not unknown:
        unknown = [axis for axis, dim in enumerate(old) if dim.is_unnamed and dim not in new]
    if len(unknown) != 1:
        return old
    [axis] = unknown
    solved = product(new).floordiv(product(old[:axis] + old[axis + 1 :]))
    if solved.quotients:
        return old
    # what fits, by definition: no division is relied on to get it
    return (*old[:axis], replace(solved, assumes=frozenset()), *old[axis + 1 :])


def _split_heads(
    call: OpCall, old: tuple[Dim, ...] | None, new: tuple[Dim, ...]
) -> HeadsAxis | None:
    """``[B, L, H*D]`` viewed as ``[B, L, H, D]``: the leading axes kept as they were and the
    last one split in two, the first of which counts heads (one head too: a kernel that took
    it for the sequence would see one position)."""
    if old is None or len(new) != len(old) + 1 or len(old) < 2 or new[:-2] != old[:-1]:
        return None
    return HeadsAxis(len(new) - 2, len(new), call.node)


def _kept_channels(receiver: TensorFact, new: tuple[Dim, ...]) -> ChannelsAxis | None:
    """A convolution's channels axis, where the view leaves it and every axis before it (or
    after it) as they were: ``[N, C, H, W]`` flattened to ``[N, C, H*W]`` keeps it."""
    channels, old = receiver.channels, receiver.shape
    if channels is None or old is None or len(old) != channels.rank:
        return None
    front, back = channels.axis + 1, channels.rank - channels.axis
    if new[:front] == old[:front]:
        return ChannelsAxis(channels.axis, len(new))
    if len(new) >= back and new[-back:] == old[-back:]:
        return ChannelsAxis(len(new) - back, len(new))
    return None


_FAILED_VIEW = Layout(None)
"""Marks a view PyTorch refuses (SC101 reports it)."""


def rely_on_divisions(context: OpContext, node: ast.AST, first: Dim, second: Dim) -> None:
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
    return _prefixed_view(call) or _view_like(call, call.sizes(0), copies=False)


@tensor_op("reshape", functions=torch_names("reshape"))
def reshape(call: OpCall) -> Fact:
    return _prefixed_view(call) or _view_like(call, call.sizes(0), copies=True)


def _prefixed_view(call: OpCall) -> TensorFact | None:
    """``x.view(*h.shape[:-1], -1, d)`` while ``h``'s rank is unknown: the shape is ``h``'s
    leading sizes and then the tail, whose ``-1`` is what ``x``'s last axis leaves where only
    that axis is known (the view splits it; an ``nn.Linear`` output says how wide it is).
    ``x`` may be known whole: GPT-2's ``Conv1D`` views its ``[n, nf]`` product as
    ``x.size()[:-1] + (nf,)`` of its input."""
    found = call.prefixed(0)
    receiver = call.receiver
    if found is None:
        return None
    prefix, tail = found
    missing = [index for index, size in enumerate(tail) if size is None]
    if len(missing) == 1 and receiver.shape is None and receiver.known_last is not None:
        others = [size for size in tail if size is not None]
        tail[missing[0]] = receiver.known_last.floordiv(product(others))
    dims = tuple(size if size is not None else Dim.symbol("?") for size in tail)
    splits = prefix.dropped == 1 and len(dims) == 2
    return flow(
        receiver,
        Family.VIEW,
        shape=None,
        layout=kept_contiguous(receiver, None),
        origin=call.node,
        prefixed=PrefixedShape(prefix, dims),
        heads=HeadsAxis(-2, None, call.node) if splits else None,
    )


@tensor_op("view_as", "reshape_as")
def view_as(call: OpCall) -> Fact:
    other = call.tensor_arg(0, "other")
    sizes: list[Dim | None] | None = None
    if other is not None and other.shape is not None:
        sizes = list(other.shape)
    return _view_like(call, sizes, copies=call.name == "reshape_as")


@tensor_op("flatten", functions=torch_names("flatten"))
def flatten(call: OpCall) -> Fact:
    receiver = call.receiver
    start, end = call.int_arg(0, "start_dim"), call.int_arg(1, "end_dim")
    start = 0 if start is None and call.get(0, "start_dim") is None else start
    end = -1 if end is None and call.get(1, "end_dim") is None else end
    if not receiver.shape or start is None or end is None:
        return unknown_shape(call)  # unknown, or 0-d (flattened to one axis of size 1)
    rank = len(receiver.shape)
    first, last = start % rank, end % rank
    merged = product(receiver.shape[first : last + 1])
    sizes: list[Dim | None] = [*receiver.shape[:first], merged, *receiver.shape[last + 1 :]]
    return _view_like(call, sizes, copies=True)


@tensor_op("unflatten", functions=torch_names("unflatten"))
def unflatten(call: OpCall) -> Fact:
    receiver = call.receiver
    axis = call.int_arg(0, "dim")
    split = call.sizes(1, 2)
    position = receiver.normalise_axis(axis) if axis is not None else None
    if receiver.shape is None or position is None or split is None:
        return unknown_shape(call)
    sizes: list[Dim | None] = [*receiver.shape[:position], *split, *receiver.shape[position + 1 :]]
    return _view_like(call, sizes, copies=True)


@tensor_op("repeat", "tile", functions=torch_names("tile"))
def repeat(call: OpCall) -> Fact:
    """``x.repeat(*counts)``; ``tile`` is the same, save that fewer counts than axes count
    for the last axes."""
    receiver = call.receiver
    counts = call.sizes(0)
    if counts is not None and receiver.shape is not None and call.name.endswith("tile"):
        ones: list[Dim | None] = [Dim.constant(1)] * (len(receiver.shape) - len(counts))
        counts = ones + counts
    if counts is not None and receiver.shape is None:
        return _tiled_unknown_rank(call, counts)
    if counts is None or receiver.shape is None or len(counts) < len(receiver.shape):
        return unknown_shape(call)
    added = len(counts) - len(receiver.shape)
    padded = (Dim.constant(1),) * added + receiver.shape
    shape = tuple(
        dim * count if count is not None else Dim.symbol("?")
        for dim, count in zip(padded, counts, strict=True)
    )
    # an existing axis of more than one entry, repeated: whole copies, one after another
    tiled = [
        Tiling(axis, count, padded[axis], len(counts), call.node)
        for axis, count in enumerate(counts)
        if axis >= added and count is not None and 1 not in (count.value, padded[axis].value)
    ]
    return flow(
        receiver,
        Family.VIEW,
        shape=shape,
        layout=Layout.contiguous(len(shape)),
        origin=call.node,
        tiled=tiled[0] if len(tiled) == 1 else None,
    )


def _tiled_unknown_rank(call: OpCall, counts: list[Dim | None]) -> TensorFact:
    """``mask.repeat(H, 1, 1)`` of a tensor of unknown rank: if it has an axis for each count,
    the one count that is not 1 tiles that axis; said as a guess (with fewer axes, the count
    makes a new axis, which tiles nothing)."""
    result = unknown_shape(call)
    counted = [axis for axis, count in enumerate(counts) if count is None or count.value != 1]
    if len(counted) != 1 or (count := counts[counted[0]]) is None:
        return result
    written = dotted_name(call.receiver_node) if call.receiver_node is not None else None
    guess = f"`{written or 'the tensor'}` has {len(counts)} axes"
    tiling = Tiling(counted[0], count, Dim.symbol("?"), len(counts), call.node, guess)
    return replace(result, tiled=tiling)


@tensor_op("repeat_interleave", functions=torch_names("repeat_interleave"))
def repeat_interleave(call: OpCall) -> Fact:
    receiver = call.receiver
    count = call.get(0, "repeats")
    axis = call.int_arg(1, "dim")
    if receiver.shape is None or count is None or axis is None:
        return unknown_shape(call)
    position = receiver.normalise_axis(axis)
    times = call.context.size(*count)
    if position is None or times is None:
        return unknown_shape(call)
    shape = list(receiver.shape)
    shape[position] = shape[position] * times
    return flow(
        receiver,
        Family.VIEW,
        shape=tuple(shape),
        layout=Layout.contiguous(len(shape)),
        origin=call.node,
    )


@tensor_op("contiguous")
def contiguous(call: OpCall) -> Fact:
    return flow(
        call.receiver,
        Family.SAME_VALUES,
        layout=Layout.contiguous(call.receiver.rank),
        origin=call.node,
    )


@tensor_op("clone", functions=torch_names("clone"))
def clone(call: OpCall) -> Fact:
    # clone() keeps the strides of a dense tensor (torch.preserve_format, the default);
    # only torch.contiguous_format makes it contiguous.
    memory_format = call.get(None, "memory_format")
    if memory_format is None or memory_format[0] == QualifiedName("torch.preserve_format"):
        return flow(call.receiver, Family.SAME_VALUES, origin=call.node)
    if memory_format[0] == QualifiedName("torch.contiguous_format"):
        return flow(
            call.receiver,
            Family.SAME_VALUES,
            layout=Layout.contiguous(call.receiver.rank),
            origin=call.node,
        )
    return flow(call.receiver, Family.SAME_VALUES, layout=None, origin=call.node)


@tensor_op("unsqueeze", functions=torch_names("unsqueeze"))
def unsqueeze(call: OpCall) -> Fact:
    receiver = call.receiver
    axis = call.int_arg(0, "dim")
    if receiver.shape is None or axis is None:
        return unknown_shape(call)
    rank = len(receiver.shape) + 1
    if not -rank <= axis < rank:
        return unknown_shape(call)
    position = axis % rank
    shape = (*receiver.shape[:position], Dim.constant(1), *receiver.shape[position:])
    layout = receiver.layout.materialise(rank - 1) if receiver.layout else None
    landed = {old: old + (old >= position) for old in range(rank - 1)}
    table = receiver.table.moved(landed, rank - 1, rank) if receiver.table else None
    return flow(
        receiver,
        Family.VIEW,
        shape=shape,
        layout=layout.with_axis_inserted(position) if layout else None,
        origin=call.node,
        table=table,
    )


@tensor_op("squeeze", functions=torch_names("squeeze"))
def squeeze(call: OpCall) -> Fact:
    receiver = call.receiver
    axis = call.int_arg(0, "dim")
    if receiver.shape is not None and call.get(0, "dim") is None:
        if all(dim.value is not None for dim in receiver.shape):  # squeeze(): all size-1 axes
            kept = tuple(dim for dim in receiver.shape if dim.value != 1)
            if kept == receiver.shape:
                return receiver
            layout = kept_contiguous(receiver, len(kept))
            return flow(receiver, Family.VIEW, shape=kept, layout=layout, origin=call.node)
        return unknown_shape(call)
    if receiver.shape is None or axis is None:
        return unknown_shape(call)
    position = receiver.normalise_axis(axis)
    if position is None or receiver.shape[position].value != 1:
        return unknown_shape(call)
    layout = receiver.layout.materialise(len(receiver.shape)) if receiver.layout else None
    return flow(
        receiver,
        Family.VIEW,
        shape=receiver.shape[:position] + receiver.shape[position + 1 :],
        layout=layout.with_axis_removed(position) if layout else None,
        origin=call.node,
    )


@tensor_op("unfold")
def unfold(call: OpCall) -> Fact:
    """``x.unfold(dimension, size, step)``: a view of the windows of ``size`` entries along
    ``dimension``, ``step`` apart (halo attention's overlapping windows of keys): that axis
    counts the windows, a new last axis runs along each; the values are the receiver's."""
    receiver = call.receiver
    axis, window = call.int_arg(0, "dimension"), call.size_arg(1, "size")
    position = receiver.normalise_axis(axis) if axis is not None else None
    if receiver.shape is None or position is None:
        return unknown_shape(call)
    windows = (*receiver.shape[:position], Dim.symbol("?"), *receiver.shape[position + 1 :])
    shape = (*windows, window if window is not None else Dim.symbol("?"))
    return flow(receiver, Family.VIEW, shape=shape, layout=None, origin=call.node)


@tensor_op(functions=functional_names("pad"))
def pad(call: OpCall) -> Fact:
    """``F.pad(x, (left, right, top, bottom))``: the rank kept, the last axes longer by the
    pads given for them, the last axis first; a pad it cannot read makes its axis ``?``, pads
    of unknown number every axis. New values: ``x``'s, of its dtype and scaled as they were,
    and the fill around them; the padded axes hold more than what their sizes name
    (``resized``: Transformer-XL's relative shift pads its scores by a column and views them
    with the last two sizes exchanged, on purpose)."""
    receiver = call.receiver
    shape = receiver.shape
    pads = _pads(call)
    if shape is not None and pads is None:
        shape = fresh_shape(len(shape))
    elif shape is not None and pads is not None:
        if len(pads) % 2 or len(pads) // 2 > len(shape):
            shape = None  # PyTorch raises
        else:
            padded = list(shape)
            for axis in range(len(pads) // 2):
                before, after = pads[2 * axis], pads[2 * axis + 1]
                if before is None or after is None:
                    padded[-1 - axis] = Dim.symbol("?")
                elif (before + after).value != 0:
                    # (a size plus 0 is no sum PyTorch would tell apart from the size)
                    nonzero = [size for size in (before, after) if size.value != 0]
                    extra = nonzero[0] if len(nonzero) == 1 else before + after
                    padded[-1 - axis] = padded[-1 - axis] + extra
            shape = tuple(padded)
    return new_tensor(
        shape,
        call.node,
        receiver,
        scaling=receiver.scaling,
        dtype=receiver.dtype,
        rank_of=receiver.rank_of,
        resized=call.node,
    )


def _pads(call: OpCall) -> list[Dim | None] | None:
    """The pads ``F.pad`` is given, a pad it cannot read ``None``; a -1, which a size reader
    takes for "infer this size", crops one (x-transformers' ``F.pad(gate, (0, 0, 1, -1))``
    shifts the gate down by a row and keeps its length)."""
    written = call.get(0)
    pads = call.sizes(0, 1) if written is not None else None
    if written is None or pads is None or not isinstance(written[0], TupleFact):
        return pads
    facts = written[0].items
    if len(facts) != len(pads):
        return pads
    return [
        fact.dim if pad is None and isinstance(fact, IntFact) and fact.dim.value == -1 else pad
        for pad, fact in zip(pads, facts, strict=True)
    ]


@tensor_op("expand", "broadcast_to", functions=torch_names("broadcast_to"))
def expand(call: OpCall) -> Fact:
    """``x.expand(*sizes)``, ``torch.broadcast_to(x, sizes)``: the same (-1: the axis kept)."""
    receiver = call.receiver
    sizes = call.sizes(0)
    if sizes is not None and receiver.shape is None:  # as many axes as sizes (-1: its own)
        given = tuple(size if size is not None else Dim.symbol("?") for size in sizes)
        return flow(receiver, Family.VIEW, shape=given, layout=None, origin=call.node)
    if sizes is None or receiver.shape is None or len(sizes) < len(receiver.shape):
        return unknown_shape(call)
    leading = len(sizes) - len(receiver.shape)
    shape: list[Dim] = []
    broadcast: list[int] = []
    unsure = False  # an axis of unknown size: 1 and broadcast, or already as given
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
        elif old.unrelated:  # PyTorch raises unless it is
            shape.append(size)
            unsure = True
        else:
            return unknown_shape(call)
    layout = receiver.layout if not unsure else None
    layout = layout.materialise(len(receiver.shape)) if layout is not None else None
    return flow(
        receiver,
        Family.VIEW,
        shape=tuple(shape),
        layout=layout.expanded(broadcast, leading, call.node) if layout else None,
        origin=call.node,
    )


def _pieces(call: OpCall, count: int | None, axis: int | None, piece_size: Dim | None) -> Fact:
    receiver = call.receiver
    if count is None:
        return UNKNOWN
    if receiver.shape is None or axis is None:  # each piece has the receiver's rank
        width = None  # along the last axis, a linear layer's width: each piece's share of it
        if axis == -1 and receiver.known_last is not None:
            width = piece_size or receiver.known_last.floordiv(Dim.constant(count))
        piece = replace(unknown_shape(call), rank_of=receiver.rank_of, known_last=width)
        return _alike(piece, count)
    position = receiver.normalise_axis(axis)
    if position is None:
        return UNKNOWN
    size = piece_size or receiver.shape[position].floordiv(Dim.constant(count))
    shape = (*receiver.shape[:position], size, *receiver.shape[position + 1 :])
    # a piece keeps the memory order of its source (a gap never makes a view legal)
    piece = flow(receiver, Family.VIEW, shape=shape, layout=receiver.layout, origin=call.node)
    return _alike(piece, count)


_MOST_PIECES = 1024
"""More pieces than any code unpacks by name: beyond it, a sequence of unknown length."""


def _alike(piece: Fact, count: int) -> Fact:
    """``count`` pieces that are all ``piece`` (``chunk(10**9)`` must not fill the memory)."""
    if count > _MOST_PIECES:
        return RepeatedFact(piece)
    return TupleFact(tuple(piece for _ in range(count)))


@tensor_op("chunk", functions=torch_names("chunk"))
def chunk(call: OpCall) -> Fact:
    axis = call.int_arg(1, "dim")
    if axis is None and call.get(1, "dim") is None:
        axis = 0
    return _pieces(call, call.int_arg(0, "chunks"), axis, None)


@tensor_op("split", functions=torch_names("split"))
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
    if not isinstance(fact, IntFact):
        return UNKNOWN
    shape = call.receiver.shape
    if shape is None:
        axis = None  # GPT-2's fused qkv of unknown rank, split along dim=2
    position = call.receiver.normalise_axis(axis) if axis is not None else None
    count = None
    if shape is not None and position is not None:
        count = shape[position].floordiv(fact.dim).value
    pieces = _pieces(call, count if count is not None else 1, axis, fact.dim)
    if count is None and isinstance(pieces, TupleFact):
        # an axis or a length it cannot read: pieces of the receiver's rank and values, as
        # many as the code unpacks
        return RepeatedFact(pieces.items[0])
    return pieces


def _split_sections(call: OpCall, sections: TupleFact, axis: int | None) -> Fact:
    pieces = []
    for item in sections.items:
        size = item.dim if isinstance(item, IntFact) else None
        piece = _pieces(call, 1, axis, size)
        if not isinstance(piece, TupleFact):
            return UNKNOWN
        pieces.append(piece.items[0])
    return TupleFact(tuple(pieces))


@tensor_op("unbind", functions=torch_names("unbind"))
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
    return _alike(unbound(receiver, position, call.node), count)


def unbound(tensor: TensorFact, position: int, origin: ast.AST) -> TensorFact:
    """One slice of ``tensor`` along axis ``position`` (of a known shape): ``unbind``'s
    pieces, and what iterating a tensor gives (``q, k, v = qkv``: its first axis)."""
    assert tensor.shape is not None
    layout = tensor.layout.materialise(len(tensor.shape)) if tensor.layout else None
    return flow(
        tensor,
        Family.VIEW,
        shape=tensor.shape[:position] + tensor.shape[position + 1 :],
        layout=layout.with_axis_removed(position) if layout else None,
        origin=origin,
    )


@function_op(*torch_names("cat", "concat", "concatenate", "stack"))
def concatenate(call: OpCall) -> Fact:
    """``cat`` keeps the rank of its inputs (all equal at run time); ``stack`` adds one.
    The values are the inputs' own: scaled alike if every input is. Attention scores joined
    to logits of other keys stay the scores, scaled as they were (see
    ``_scores_over_more_keys``)."""
    first = call.get(0, "tensors")
    listed = first[0] if first else None
    tensors: list[TensorFact | None] = []
    if isinstance(listed, TupleFact):
        tensors = [as_tensor(item) for item in listed.items]
    elif isinstance(listed, RepeatedFact):  # a comprehension: each piece alike, how many unknown
        tensors = [as_tensor(listed.item)]
    shapes = [tensor.shape for tensor in tensors if tensor is not None and tensor.shape is not None]
    scalings = {tensor.scaling if tensor is not None else None for tensor in tensors}
    scaling = scalings.pop() if len(scalings) == 1 else None
    complete = isinstance(listed, TupleFact) and len(shapes) == len(tensors)
    shape = _concatenated_shape(call, shapes, complete=complete)
    scores = _scores_over_more_keys(call, tensors, shape)
    if scores is not None:
        scaling = scores.scaling
    # phases joined to themselves (``cat((freqs, freqs), dim=-1)``) are still phases
    positions = [tensor.positions if tensor is not None else None for tensor in tensors]
    phases = positions[0] if positions and None not in positions else None
    return new_tensor(
        shape,
        call.node,
        *tensors,
        scaling=scaling,
        product=scores.product if scores is not None else None,
        positions=phases,
        cached=call.node if _grows_a_cache(call, first) else None,
    )


def _scores_over_more_keys(
    call: OpCall, tensors: list[TensorFact | None], shape: tuple[Dim, ...] | None
) -> TensorFact | None:
    """Attention scores joined along their keys' axis to logits of other keys (GPT-OSS's and
    MiMo's attention sinks, ``cat([scores, sinks], dim=-1)``): those scores, whose product
    the softmax still reads, over more keys; the learned logits need no scale of theirs."""
    scores = [tensor for tensor in tensors if tensor is not None and tensor.product is not None]
    if call.name == "torch.stack" or len(scores) != 1 or not scores[0].is_scores:
        return None
    product, axis = scores[0].product, call.int_arg(1, "dim")
    rank = scores[0].rank if shape is None or scores[0].rank == len(shape) else None
    if rank is not None and axis is not None and -rank <= axis < rank:
        axis -= rank if axis >= 0 else 0  # counted from the end, as the keys' axis is
    if product is None or axis != product.key_axis:
        return None
    key_size = shape[axis] if shape is not None and rank is not None else None
    return replace(scores[0], product=replace(product, key_size=key_size))


@tensor_op("gather", functions=torch_names("gather"))
def gather(call: OpCall) -> Fact:
    """``x.gather(dim, index)``: shaped like ``index``, which has ``x``'s rank (PyTorch
    raises otherwise); ``x``'s values, picked."""
    receiver, index = call.receiver, call.tensor_arg(1, "index")
    shape = index.shape if index is not None else None
    if shape is None and receiver.shape is not None:
        shape = fresh_shape(len(receiver.shape))
    elif shape is not None and receiver.shape is not None and len(shape) != len(receiver.shape):
        shape = None
    return new_tensor(shape, call.node, receiver, index, dtype=receiver.dtype)


_CACHE = re.compile(r"cache|past|prev|memor", re.IGNORECASE)
"""How code names what it cached from earlier steps (``past_key_value``, ``self.cache_k``,
``layer_past``, ``prev_k``, Transformer-XL's ``mems``/``memory``)."""


def _grows_a_cache(call: OpCall, listed: Argument | None) -> bool:
    """``torch.cat([past_k, k], dim=2)``: earlier steps' keys joined before the new ones
    along a sequence axis (not the features, the last)."""
    if call.name not in ("torch.cat", "torch.concat", "torch.concatenate") or listed is None:
        return False
    items = listed[1].elts if isinstance(listed[1], ast.List | ast.Tuple) else []
    if len(items) < 2 or not _CACHE.search(ast.unparse(items[0])):
        return False
    axis = call.int_arg(1, "dim")
    return axis is not None and axis != -1


@tensor_op("update")
def cache_update(call: OpCall) -> Fact:
    """``past_key_values.update(k, v, layer_idx)`` (Hugging Face's ``Cache``; tensors have
    no ``update``): the keys and values of every step so far, shaped like the new ones but
    longer along the sequence (axis -2)."""
    written = ast.unparse(call.receiver_node) if call.receiver_node is not None else ""
    keys, values = call.tensor_arg(0, "key_states"), call.tensor_arg(1, "value_states")
    if not _CACHE.search(written) or keys is None or values is None:
        return Unknown("call", f"{written}.update")  # another object's update: unmodelled
    return TupleFact(tuple(_grown(tensor, call.node) for tensor in (keys, values)))


def _grown(tensor: TensorFact, by: ast.AST) -> TensorFact:
    shape = tensor.shape
    if shape is not None and len(shape) >= 2:
        shape = (*shape[:-2], Dim.symbol("?"), shape[-1])
    return new_tensor(shape, by, tensor, dtype=tensor.dtype, heads=tensor.heads, cached=by)


def _concatenated_shape(
    call: OpCall, shapes: list[tuple[Dim, ...]], *, complete: bool
) -> tuple[Dim, ...] | None:
    """The shape of ``cat``/``stack`` of tensors of ``shapes`` (``complete``: the shapes of
    all of them, so ``cat``'s axis is the sum of theirs: ``past + n`` keys)."""
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
    joined = Dim.symbol("?")
    if complete and len(others) == len(shapes):
        joined = others[0][position]
        for dims in others[1:]:
            joined = joined + dims[position]
    return tuple(
        joined
        if index == position
        else Dim.symbol("?")
        if any(d[index] != dim for d in others)
        else dim
        for index, dim in enumerate(shape)
    )


@tensor_op(functions=torch_names("view_as_complex"))
def view_as_complex(call: OpCall) -> Fact:
    """``[..., 2]`` real pairs read as ``[...]`` complex numbers (LLaMA's rotary embedding)."""
    receiver = call.receiver
    if receiver.shape is None or not receiver.shape or receiver.shape[-1].value != 2:
        return unknown_shape(call)
    shape = receiver.shape[:-1]
    layout = kept_contiguous(receiver, len(shape))
    return flow(
        receiver, Family.VIEW, shape=shape, layout=layout, origin=call.node, dtype="complex"
    )


@tensor_op(functions=torch_names("view_as_real"))
def view_as_real(call: OpCall) -> Fact:
    """``[...]`` complex numbers read as ``[..., 2]`` real pairs."""
    receiver = call.receiver
    if receiver.shape is None:
        return unknown_shape(call)
    shape = (*receiver.shape, Dim.constant(2))
    layout = kept_contiguous(receiver, len(shape))
    return flow(receiver, Family.VIEW, shape=shape, layout=layout, origin=call.node, dtype=None)
