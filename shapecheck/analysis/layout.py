"""Memory layout: which axes of a tensor can be merged by ``view``.

A tensor that is a permuted (or expanded) view of contiguous memory is described by the memory
position of each logical axis. ``view`` may merge adjacent axes only when the inner one follows
the outer one directly in memory; an expanded (stride-0) axis merges with nothing, a size-1
axis with anything. This is PyTorch's own rule (``computeStride``), applied symbolically.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Sequence
from dataclasses import field

from shapecheck.analysis.dims import Dim, product, provably_different
from shapecheck.record import record

FREE = -1
"""Memory position of a size-1 axis: it merges with anything."""
BROADCAST = -2
"""Memory position of an expanded axis (stride 0): it merges with nothing."""


@record
class Layout:
    """Memory position of each axis (``order``) and the op that reordered them.

    ``order`` is ``None`` when the rank is unknown (only possible for a contiguous tensor).
    ``reordered_by`` is ``None`` exactly when the tensor is contiguous; it is provenance for
    messages and takes no part in equality (branches that reorder alike agree).
    """

    order: tuple[int, ...] | None
    reordered_by: ast.AST | None = field(default=None, compare=False)

    @staticmethod
    def contiguous(rank: int | None) -> Layout:
        return Layout(None if rank is None else tuple(range(rank)))

    @property
    def is_contiguous(self) -> bool:
        if self.order is None:
            return True
        in_order = [position for position in self.order if position != FREE]
        return in_order == list(range(len(in_order)))

    def materialise(self, rank: int) -> Layout | None:
        """This layout for a tensor now known to have ``rank`` axes."""
        if self.order is None:
            return Layout.contiguous(rank)
        return self if len(self.order) == rank else None

    def permuted(self, axes: Sequence[int], cause: ast.AST) -> Layout | None:
        """The layout after ``permute(*axes)`` (axes already non-negative)."""
        if self.order is None or sorted(axes) != list(range(len(self.order))):
            return None
        return _settle(tuple(self.order[axis] for axis in axes), cause, self.reordered_by)

    def with_axis_inserted(self, position: int) -> Layout | None:
        if self.order is None or not 0 <= position <= len(self.order):
            return None
        order = (*self.order[:position], FREE, *self.order[position:])
        return _settle(order, self.reordered_by, self.reordered_by)

    def with_axis_removed(self, position: int) -> Layout | None:
        if self.order is None or not 0 <= position < len(self.order):
            return None
        return _settle(self.order[:position] + self.order[position + 1 :], None, self.reordered_by)

    def expanded(self, broadcast_axes: Sequence[int], leading: int, cause: ast.AST) -> Layout:
        assert self.order is not None
        order = list(self.order)
        for axis in broadcast_axes:
            order[axis] = BROADCAST
        return _settle((BROADCAST,) * leading + tuple(order), cause, self.reordered_by or cause)

    def renumbered(self, cause: ast.AST | None) -> Layout:
        """This order with memory positions made dense again (after axes were dropped)."""
        assert self.order is not None
        return _settle(self.order, cause, cause)

    def mergeable(self, outer: int, inner: int) -> bool:
        """Can logical axes ``outer`` and ``inner`` (outer before inner) share one view axis?"""
        assert self.order is not None
        first, second = self.order[outer], self.order[inner]
        if FREE in (first, second):
            return True
        return BROADCAST not in (first, second) and second == first + 1


def _settle(order: tuple[int, ...], cause: ast.AST | None, previous: ast.AST | None) -> Layout:
    """Renumber memory positions densely; contiguous layouts forget their cause."""
    ranked = sorted(position for position in order if position >= 0)
    dense = {position: index for index, position in enumerate(ranked)}
    order = tuple(dense.get(position, position) for position in order)
    in_order = [position for position in order if position != FREE]
    if in_order == list(range(len(in_order))):
        return Layout(order)
    return Layout(order, previous or cause)


@record
class ViewPlan:
    """How ``view`` maps old axes onto new ones, and whether memory allows it.

    ``merged`` lists the old axes of a group whose memory order forbids the view (empty when
    the view is possible). ``layout`` is the result's layout, ``None`` when unknown.
    """

    merged: tuple[int, ...]
    layout: Layout | None


@record
class _Group:
    old: range
    new: range
    certain: bool


def plan_view(old_shape: tuple[Dim, ...], layout: Layout, new_shape: tuple[Dim, ...]) -> ViewPlan:
    """Plan ``view(new_shape)`` of a tensor with ``old_shape`` and ``layout``."""
    assert layout.order is not None and len(layout.order) == len(old_shape)
    order = layout.order
    groups = _group(old_shape, new_shape)
    keys: list[tuple[int, int] | int] = []
    known = True
    for group in groups:
        real = [axis for axis in group.old if order[axis] != FREE]
        if len(real) >= 2 and _must_merge_broken(layout, real, group):
            return ViewPlan(tuple(group.old), None)
        if not group.certain:
            known = False
        if not real:
            keys.extend(FREE for _ in group.new)
            continue
        if any(order[axis] == BROADCAST for axis in real):
            keys.extend(BROADCAST for _ in group.new)
            continue
        base = order[real[0]]
        keys.extend((base, index) for index in range(len(group.new)))
    if not known:
        return ViewPlan((), None)
    return ViewPlan((), _layout_from_keys(keys, layout.reordered_by))


def _must_merge_broken(layout: Layout, real: list[int], group: _Group) -> bool:
    broken = [not layout.mergeable(a, b) for a, b in itertools.pairwise(real)]
    if group.certain:
        return any(broken)
    # The exact grouping is unknown: the view fails for sure only when fewer new axes
    # force a merge and every adjacent pair of old axes is broken.
    return len(group.new) < len(real) and all(broken)


def _layout_from_keys(keys: list[tuple[int, int] | int], cause: ast.AST | None) -> Layout:
    ranked = sorted({key for key in keys if isinstance(key, tuple)})
    position = {key: index for index, key in enumerate(ranked)}
    order = tuple(position[key] if isinstance(key, tuple) else key for key in keys)
    return _settle(order, cause, cause)


def _group(old: tuple[Dim, ...], new: tuple[Dim, ...]) -> list[_Group]:
    """Split ``old -> new`` into groups of axes with equal products, as PyTorch does."""
    head: list[_Group] = []
    tail: list[_Group] = []
    i, j = 0, 0
    end_old, end_new = len(old), len(new)
    while True:  # peel matching or size-1 axes from the front
        step = _peel(old, new, i, j, end_old, end_new, front=True)
        if step is None:
            break
        head.append(step)
        i, j = step.old.stop, step.new.stop
    while True:  # and from the back
        step = _peel(old, new, end_old, end_new, i, j, front=False)
        if step is None:
            break
        tail.insert(0, step)
        end_old, end_new = step.old.start, step.new.start
    return head + _group_middle(old, new, i, j, end_old, end_new) + tail


def _peel(
    old: tuple[Dim, ...],
    new: tuple[Dim, ...],
    i: int,
    j: int,
    stop_i: int,
    stop_j: int,
    *,
    front: bool,
) -> _Group | None:
    if front:
        has_old, has_new = i < stop_i, j < stop_j
        a = old[i] if has_old else None
        b = new[j] if has_new else None
    else:
        has_old, has_new = i > stop_i, j > stop_j
        a = old[i - 1] if has_old else None
        b = new[j - 1] if has_new else None
    if a is not None and b is not None and a == b:
        return _single(i, j, 1, 1, front)
    if b is not None and b.value == 1 and (a is None or a.value != 1):
        return _single(i, j, 0, 1, front)
    if a is not None and a.value == 1:
        return _single(i, j, 1, 0, front)
    return None


def _single(i: int, j: int, n_old: int, n_new: int, front: bool) -> _Group:
    if front:
        return _Group(range(i, i + n_old), range(j, j + n_new), True)
    return _Group(range(i - n_old, i), range(j - n_new, j), True)


def _group_middle(
    old: tuple[Dim, ...], new: tuple[Dim, ...], i: int, j: int, end_old: int, end_new: int
) -> list[_Group]:
    if i == end_old and j == end_new:
        return []
    groups: list[_Group] = []
    start_i, start_j = i, j
    while i < end_old and j < end_new:
        # grow the shorter side until the products agree
        a, b = i + 1, j + 1
        left, right = old[i], new[j]
        while left != right:
            if a < end_old and (b == end_new or _smaller(left, right)):
                left = left * old[a]
                a += 1
            elif b < end_new:
                right = right * new[b]
                b += 1
            else:
                break
        if left != right:
            break
        certain = _indivisible(old[i:a], new[j:b])
        groups.append(_Group(range(i, a), range(j, b), certain))
        i, j = a, b
        start_i, start_j = i, j
    if start_i < end_old or start_j < end_new:
        # one old axis can only be split (or kept): that grouping is certain
        certain = end_old - start_i == 1
        groups.append(_Group(range(start_i, end_old), range(start_j, end_new), certain))
    return groups


def _indivisible(old: tuple[Dim, ...], new: tuple[Dim, ...]) -> bool:
    """Is ``old -> new`` one chunk for PyTorch too, whatever the sizes are at run time?

    A split of one axis or a merge into one axis always is. Otherwise every place where
    both sides could be cut must be impossible: one side's leading sizes provably more than
    the other's. Differently named sizes may be equal (``n_heads`` and ``num_heads``), and
    then PyTorch cuts there and sees no merge at all.
    """
    if len(old) == 1 or len(new) == 1:
        return True
    for cut_old in range(1, len(old)):
        for cut_new in range(1, len(new)):
            a, b = product(old[:cut_old]), product(new[:cut_new])
            if not (_strictly_more(a, b) or _strictly_more(b, a) or provably_different(a, b)):
                return False
    return True


def _smaller(left: Dim, right: Dim) -> bool:
    """Should the old side grow next? Grow whichever product is (probably) smaller."""
    if left.value is not None and right.value is not None:
        return left.value <= right.value
    return len(left.factors) <= len(right.factors)


@record
class Reinterpretation:
    """A view that moves a named axis: its values end up under other indices.

    ``dim`` sits at ``old_axis`` before and ``new_axis`` after, but the sizes in front of it
    within its group differ (``old_before`` vs ``new_before``): the view re-chunks memory, so
    what was indexed by ``dim`` is now mixed with other axes. When more sizes stand in front
    of it afterwards, they were moved forward (a split into heads-first axes); when fewer,
    they were moved behind it (a merge of heads into features).
    """

    dim: Dim
    old_axis: int
    new_axis: int
    old_before: Dim
    new_before: Dim

    @property
    def moves_forward(self) -> bool:
        """Sizes moved in front of ``dim`` (heads put before positions)."""
        return _strictly_more(self.new_before, self.old_before)

    @property
    def guess(self) -> str | None:
        """What the move rests on where the code does not name ``dim``: along an axis of one
        entry nothing moves, and an unnamed or unknown size may be 1 (a named size is taken
        to be more, as everywhere here)."""
        if self.dim.is_named:
            return None
        if self.dim.has_unknown:
            return "the moved axis has more than one entry"
        return f"`{self.dim}` is more than 1"


def reinterpreted_axis(old: tuple[Dim, ...], new: tuple[Dim, ...]) -> Reinterpretation | None:
    """The first axis that ``view(old -> new)`` moves to other data, if provably so.

    Only sizes that occur once on each side of their group are followed, and only when one
    side's leading sizes are the other's times more named sizes (``L`` after ``H`` vs ``L``
    first): what it crosses must be named, since an unnamed or unknown size may be 1 or
    equal the size crossed. The size followed may be unnamed or unknown (``x.shape[1]``, a
    ``?`` both sides share: one size either way); literals prove nothing. A size followed
    that the code does not name rests on a guess (``Reinterpretation.guess``). A size one
    side holds as one axis and the other as a run of axes is followed too (MaxViT's
    positions ``x.shape[1]*x.shape[2]`` against ``x.shape[1], x.shape[2]``), where both sides
    of the group hold as many elements as written: where they do not, a size must be 1 at
    run time (Kosmos-2.5's batch of one image, ``[1, rows, columns, d]`` viewed as
    ``(rows * columns, d)``) and nothing is known to move.
    """
    for group in _group(old, new):
        old_dims = [old[axis] for axis in group.old]
        new_dims = [new[axis] for axis in group.new]
        balanced = product(old_dims) == product(new_dims)
        for index, dim in enumerate(old_dims):
            if not dim.factors or old_dims.count(dim) != 1:
                continue
            run = _run_of(dim, new_dims) if balanced else None
            if run is None and new_dims.count(dim) == 1:
                run = new_dims.index(dim)
            if run is None:
                continue
            old_before, new_before = product(old_dims[:index]), product(new_dims[:run])
            if _strictly_more(old_before, new_before) or _strictly_more(new_before, old_before):
                return Reinterpretation(
                    dim, group.old[index], group.new[run], old_before, new_before
                )
        for index, dim in enumerate(new_dims):
            single = dim.factors and new_dims.count(dim) == 1
            run = _run_of(dim, old_dims) if balanced and single else None
            if run is None:
                continue
            old_before, new_before = product(old_dims[:run]), product(new_dims[:index])
            if _strictly_more(old_before, new_before) or _strictly_more(new_before, old_before):
                return Reinterpretation(
                    dim, group.old[run], group.new[index], old_before, new_before
                )
    return None


def _run_of(size: Dim, dims: list[Dim]) -> int | None:
    """Where ``dims`` holds ``size`` as the one run of two or more adjacent sizes, none of them
    a literal, whose product it is (``H, W`` of ``H*W``), if ``size`` is no axis of its own."""
    if size in dims:
        return None
    runs = []
    for start, first in enumerate(dims):
        held = first
        for dim in dims[start + 1 :] if first.factors else ():
            if not dim.factors:
                break
            held = held * dim  # the run's product, grown one size at a time
            if held == size:
                runs.append(start)
    return runs[0] if len(runs) == 1 else None


def heads_split_apart(width: Dim, new: tuple[Dim, ...]) -> Reinterpretation | None:
    """The axis that viewing ``[..., width]`` (leading axes of unknown number) as ``new``
    moves onto the features, where ``new`` splits the width into heads and a head size but
    writes the heads before another axis: ``[..., H*D]`` viewed as ``(B, H, L, D)`` or
    ``(B*H, L, D)``. A view reads the leading axes in order whatever their number, so the
    axis in between (``L``) steps from head to head inside one position's features; only
    along an axis of one entry does nothing move (a guess where that size is not named).
    The heads are a named size the code writes, and the axis in between is not them.
    """
    if len(new) < 3 or not new[-2].factors:
        return None  # a literal in between proves nothing (along 1, nothing moves)
    depth, between = new[-1], new[-2]
    if not depth.floordiv(width).quotients:
        return None  # the width whole in the last axis: heads merged, not split
    heads = width.floordiv(depth)
    # the width over the heads is the head size (a product of nested quotients may not
    # simplify back to the width: Grounding DINO's halved width and heads)
    if width.floordiv(heads) != depth or not heads.is_named or between == heads:
        return None
    leading = product(new[:-2])
    rest = leading.floordiv(heads)
    if rest.quotients or rest * heads != leading:
        return None  # the heads are not written before the axis in between
    return Reinterpretation(between, 0, len(new) - 2, rest, leading)


@record
class ChannelsMove:
    """A view between a channels-first map ``[B, C, *spatial]`` and channels-last values
    ``[B, *spatial, C]`` (tokens ``[B, H*W, C]``, or a map ``[B, H, W, C]``) that keeps the
    batch and the channels whole and regroups only the spatial axes. A view moves no data:
    read the other way round, each pixel's "channels" are a run of one channel's pixels."""

    channels: Dim
    to_last: bool
    """Channels-first values read as channels-last (a map as tokens); else the way back."""


def moved_channels(old: tuple[Dim, ...], new: tuple[Dim, ...]) -> ChannelsMove | None:
    """The channels that ``view(old -> new)`` moves between second and last place, if
    provably so.

    Both sides keep the batch axis; the channel axis is second on one side and last on the
    other; the spatial axes (the rest) are at least three over both sides, so one side is an
    image (``[B, L, C]`` against ``[B, C, L]`` is no map); and the channels and the pixels
    each number more than one (a named size, as everywhere here, or a literal above 1): a
    single channel or a single pixel reads the same either way.
    """
    if old == new or min(len(old), len(new)) < 3 or old[0] != new[0]:
        return None
    for first, last, to_last in ((old, new, True), (new, old, False)):
        channels, pixels = first[1], (product(first[2:]), product(last[1:-1]))
        if (
            channels == last[-1]
            and len(first) + len(last) - 4 >= 3
            and _more_than_one(channels)
            and any(_more_than_one(count) for count in pixels)
        ):
            return ChannelsMove(channels, to_last)
    return None


def _more_than_one(dim: Dim) -> bool:
    """A named size (taken to be more than 1, as ``_strictly_more`` takes it) or a literal
    above 1; an unknown or unnamed size may be 1."""
    if dim.unrelated:
        return False
    return bool(dim.factors) or dim.coefficient > 1


def _strictly_more(larger: Dim, smaller: Dim) -> bool:
    """``larger`` is ``smaller`` times more named sizes, or times a literal above 1."""
    if larger.unrelated or smaller.coefficient == 0:
        return False
    if larger.coefficient % smaller.coefficient != 0:
        return False
    extra = list(larger.factors)
    for atom in smaller.factors:
        if atom not in extra:
            return False
        extra.remove(atom)
    return bool(extra) or larger.coefficient > smaller.coefficient


def faithful_order(
    old: tuple[Dim, ...], new: tuple[Dim, ...], *, reorder_old: bool
) -> tuple[int, ...] | None:
    """The order of ``new``'s axes (or ``old``'s) that makes ``view(old -> new)`` faithful.

    Faithful: every group of axes is one axis split or several merged, each provably so, and
    no named axis moves onto other data; every size is known. Of the orders that qualify,
    the one closest to as written (fewest pairs swapped) is returned, ``None`` when there is
    no such order or two are equally close: a fix must be the one correct rewrite.
    """
    shape = old if reorder_old else new
    if any(dim.unrelated for dim in old + new) or not 2 <= len(shape) <= 6:
        return None
    found: dict[int, list[tuple[int, ...]]] = {}
    for order in itertools.permutations(range(len(shape))):
        reordered = tuple(shape[axis] for axis in order)
        if reordered == shape:
            continue  # as written: the view that was reported
        view = (reordered, new) if reorder_old else (old, reordered)
        if _keeps_every_axis(*view):
            swaps = sum(1 for a, b in itertools.combinations(order, 2) if a > b)
            found.setdefault(swaps, []).append(order)
    if not found:
        return None
    closest = found[min(found)]
    return closest[0] if len(closest) == 1 else None


def _keeps_every_axis(old: tuple[Dim, ...], new: tuple[Dim, ...]) -> bool:
    groups = _group(old, new)
    return all(
        group.certain and (len(group.old) == 1 or len(group.new) == 1) for group in groups
    ) and (reinterpreted_axis(old, new) is None)
