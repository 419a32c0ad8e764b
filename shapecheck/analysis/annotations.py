"""jaxtyping shape annotations: ``Float[Tensor, "*batch seq d_model"]`` as a source of shapes
and as an obligation the inferred shapes must meet.

The grammar is jaxtyping's (0.3), axes separated by spaces:

- ``name``: a size, the same wherever the name appears within one call;
- ``3``, or ``name=3`` (the name is a label): a fixed size;
- ``_``, ``_name``: any size; ``?name`` (per PyTree leaf) is taken as any size too;
- ``#name``, ``#3``: broadcastable, 1 or the size (a size of 1 binds nothing);
- ``h*d``, ``d_model//h``, ``2*n``: an expression in names bound before it; it binds none.
  Sums and differences of sizes (``n-1``) are not sizes this analysis can write: unchecked;
- ``*name``: any number of axes, the same within one call; ``...`` or ``*_``: any number;
  ``#*name``: broadcastable to them (unchecked). At most one of these per annotation.

An annotation jaxtyping rejects (two variadic axes, ``##n``, ``*3``, ``#_``) is none at all.

Two names are taken to be two sizes: a value whose axis holds another name's size, or a
name's size times another name's (``h*d`` where ``d`` is due), contradicts its annotation,
as jaxtyping finds whenever the sizes differ. Where a size cannot be told (an unknown, a
broadcastable axis that may be 1, the axes behind a ``*batch``), nothing is claimed.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field

from shapecheck.analysis.dims import Dim, Symbol, format_shape, provably_different
from shapecheck.analysis.facts import PrefixedShape, ShapePrefix
from shapecheck.record import record

Value = tuple[Dim, ...] | PrefixedShape
"""A shape as far as it is known: every axis, or the last ones after a prefix of unknown
length (a ``*batch``, or another tensor's leading axes)."""

_variadic_serials = itertools.count(1)


@record
class AxisSpec:
    """One axis of an annotation."""

    kind: str  # "name", "fixed", "any", "expression", "variadic"
    name: str = ""
    """A name's or a variadic's name (``""``: anonymous, ``...``), an expression's text."""
    size: int = 0
    broadcast: bool = False


@record
class ShapeSpec:
    text: str
    axes: tuple[AxisSpec, ...]

    @property
    def variadic(self) -> int | None:
        return next((i for i, axis in enumerate(self.axes) if axis.kind == "variadic"), None)


@dataclass
class Bindings:
    """What one call's annotations have bound so far, as jaxtyping's memo holds it: a size
    per name, and per ``*name`` the axes it stands for."""

    sizes: dict[str, Dim] = field(default_factory=dict)
    variadics: dict[str, Value] = field(default_factory=dict)

    def copy(self) -> Bindings:
        return Bindings(dict(self.sizes), dict(self.variadics))


def parse_shape(text: str) -> ShapeSpec | None:
    axes: list[AxisSpec] = []
    for token in text.split():
        axis = _parse_axis(token)
        if axis is None:
            return None
        axes.append(axis)
    if sum(1 for axis in axes if axis.kind == "variadic") > 1:
        return None
    return ShapeSpec(text, tuple(axes))


def _parse_axis(token: str) -> AxisSpec | None:
    """One axis as jaxtyping reads it (``None`` where jaxtyping raises)."""
    if ("," in token and "(" not in token) or token.endswith("#"):
        return None
    if "..." in token:
        return AxisSpec("variadic") if token == "..." else None
    flags: set[str] = set()
    rest = token
    while rest:
        if rest[0] in "#*_?":
            if rest[0] in flags:
                return None  # ``##n``, ``**n``, ``__n``, ``??n``
            flags.add(rest[0])
            rest = rest[1:]
        elif rest.count("=") == 1:
            rest = rest.split("=")[1]  # ``rows=3`` is ``3``; the name labels it
        else:
            break
    broadcast, variadic, anonymous, per_leaf = (flag in flags for flag in "#*_?")
    if not rest or rest.isidentifier():
        if anonymous and broadcast:
            return None
        if variadic:
            # a per-leaf or broadcastable ``*name`` is not one shape for the whole call
            named = not (anonymous or per_leaf or broadcast)
            return AxisSpec("variadic", rest if named else "")
        if anonymous or per_leaf:
            return AxisSpec("any")
        return AxisSpec("name", rest, broadcast=broadcast)
    try:
        size = int(rest)
    except ValueError:
        if anonymous or variadic or per_leaf:
            return None
        return AxisSpec("expression", rest, broadcast=broadcast)
    if anonymous or variadic or per_leaf:
        return None
    return AxisSpec("fixed", size=size, broadcast=broadcast)


def declared(spec: ShapeSpec, bindings: Bindings) -> Value | None:
    """The shape a parameter annotated ``spec`` holds, naming sizes in ``bindings`` (updated
    for new names): every axis, or the axes after a leading ``*batch`` / ``...``. ``None``
    where a variadic axis comes later (``"b *rest"``): the rank and the first axes' places
    are then unknown."""
    variadic = spec.variadic
    if variadic not in (None, 0):
        return None
    dims: list[Dim] = []
    for axis in spec.axes[1:] if variadic == 0 else spec.axes:
        if axis.kind == "fixed" and not axis.broadcast:
            dims.append(Dim.constant(axis.size))
        elif axis.kind == "name" and not axis.broadcast:
            dims.append(bindings.sizes.setdefault(axis.name, Dim.symbol(axis.name)))
        elif axis.kind == "expression" and not axis.broadcast:
            dims.append(evaluate(axis.name, bindings) or Dim.symbol("?"))
        else:
            dims.append(Dim.symbol("?"))
    if variadic is None:
        return tuple(dims)
    batch = spec.axes[0]
    if not batch.name:
        return PrefixedShape(_fresh_prefix("..."), tuple(dims))
    bound = bindings.variadics.setdefault(
        batch.name, PrefixedShape(_fresh_prefix(f"*{batch.name}"), ())
    )
    if isinstance(bound, PrefixedShape):
        return PrefixedShape(bound.prefix, (*bound.tail, *dims))
    return (*bound, *dims)


def _fresh_prefix(label: str) -> ShapePrefix:
    """The leading axes of a ``*batch`` or ``...``: a prefix of no tensor the code names (the
    serial keeps two functions' ``*batch`` apart)."""
    return ShapePrefix(f"{label}@{next(_variadic_serials)}", 0)


def evaluate(text: str, bindings: Bindings) -> Dim | None:
    """The size an expression axis (``h*d``, ``d_model//h``) names, from the names bound so
    far; ``None`` for a name not bound yet, or an operation sizes cannot express."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    return _size_of(tree, bindings)


def _size_of(node: ast.expr, bindings: Bindings) -> Dim | None:
    match node:
        case ast.Constant(value=int() as value) if not isinstance(value, bool):
            return Dim.constant(value)
        case ast.Name(id=name):
            return bindings.sizes.get(name)
        case ast.BinOp(left=left, op=operator, right=right):
            a, b = _size_of(left, bindings), _size_of(right, bindings)
            if a is None or b is None:
                return None
            if isinstance(operator, ast.Mult):
                return a * b
            if isinstance(operator, ast.FloorDiv) and b.value != 0:
                return a.floordiv(b)
            if a.value is not None and b.value is not None:
                if isinstance(operator, ast.Add):
                    return Dim.constant(a.value + b.value)
                if isinstance(operator, ast.Sub):
                    return Dim.constant(a.value - b.value)
    return None


def format_value(value: Value) -> str:
    """``[B, L, D]``, or ``[*batch, L, D]`` after a prefix."""
    if isinstance(value, tuple):
        return format_shape(value)
    owner = value.prefix.owner
    if "@" in owner:
        leading = owner.split("@")[0]
    elif value.prefix.dropped:
        leading = f"*{owner}.shape[:-{value.prefix.dropped}]"
    else:
        leading = f"*{owner}.shape"
    return "[" + ", ".join([leading, *(str(dim) for dim in value.tail)]) + "]"


def contradiction(spec: ShapeSpec, value: Value, bindings: Bindings) -> str | None:
    """Why ``value`` provably cannot satisfy ``spec`` (``bindings`` binds as jaxtyping does:
    the axes before a variadic, then those after it, then the variadic)."""
    if isinstance(value, PrefixedShape):
        return _prefixed_contradiction(spec, value, bindings)
    axes, shape, variadic = spec.axes, value, spec.variadic
    if variadic is None:
        if len(axes) != len(shape):
            return f"{len(shape)} axes where the annotation has {len(axes)}"
        return _axes_contradiction(list(enumerate(zip(axes, shape, strict=True))), shape, bindings)
    if len(shape) < len(axes) - 1:
        return f"{len(shape)} axes where the annotation needs at least {len(axes) - 1}"
    after = len(axes) - variadic - 1
    end = len(shape) - after
    pairs = [(i, (axes[i], shape[i])) for i in range(variadic)]
    pairs += [(end + i, (axes[variadic + 1 + i], shape[end + i])) for i in range(after)]
    return _axes_contradiction(pairs, shape, bindings) or _variadic_contradiction(
        axes[variadic], shape[variadic:end], bindings
    )


def _prefixed_contradiction(
    spec: ShapeSpec, value: PrefixedShape, bindings: Bindings
) -> str | None:
    """``value``'s last axes against the annotation's. Its rank is unknown, but only one rank
    can pass: aligned from the end, an axis that contradicts its annotation fails either
    way."""
    axes, tail, variadic = spec.axes, value.tail, spec.variadic
    if variadic is None and len(tail) > len(axes):
        return f"at least {len(tail)} axes where the annotation has {len(axes)}"
    after = len(axes) if variadic is None else len(axes) - variadic - 1
    checked = min(after, len(tail))
    pairs = [
        (-checked + i, (axes[len(axes) - checked + i], tail[len(tail) - checked + i]))
        for i in range(checked)
    ]
    reason = _axes_contradiction(pairs, tail, bindings, from_end=True)
    if reason is not None or variadic != 0 or len(tail) < after:
        return reason
    # a leading variadic holds the prefix and the axes the annotation's tail leaves
    rest = PrefixedShape(value.prefix, tail[: len(tail) - after])
    return _variadic_contradiction(axes[0], rest, bindings)


def _variadic_contradiction(axis: AxisSpec, held: Value, bindings: Bindings) -> str | None:
    if not axis.name:
        return None  # ``...``, ``#*batch``: any axes
    bound = bindings.variadics.setdefault(axis.name, held)
    if bound is held:
        return None
    reason = _axes_differ(bound, held)
    if reason is None:
        return None
    return (
        f"*{axis.name} stands for {format_value(held)} here and for {format_value(bound)} "
        f"before: {reason}"
    )


def _axes_differ(bound: Value, held: Value) -> str | None:
    """Why two values of one ``*name`` differ: a different number of axes, or sizes provably
    different. Behind two different prefixes, only the axes both end with can be compared."""
    known = [value for value in (bound, held) if isinstance(value, tuple)]
    first = bound.tail if isinstance(bound, PrefixedShape) else bound
    second = held.tail if isinstance(held, PrefixedShape) else held
    same_prefix = (
        isinstance(bound, PrefixedShape)
        and isinstance(held, PrefixedShape)
        and bound.prefix == held.prefix
    )
    if (len(known) == 2 or same_prefix) and len(first) != len(second):
        return f"{_count(len(second))} where there were {len(first)}"
    if len(known) == 1:
        exact, open_ended = (first, second) if known[0] is bound else (second, first)
        if len(open_ended) > len(exact):
            return f"at least {_count(len(open_ended))} where one side has {len(exact)}"
    for a, b in zip(reversed(first), reversed(second), strict=False):
        if provably_different(a, b):
            return f"{b} where there was {a}"
    return None


def _count(axes: int) -> str:
    return f"{axes} axis" if axes == 1 else f"{axes} axes"


def _axes_contradiction(
    pairs: list[tuple[int, tuple[AxisSpec, Dim]]],
    shape: tuple[Dim, ...],
    bindings: Bindings,
    from_end: bool = False,
) -> str | None:
    """The first axis that contradicts its annotation (``from_end``: positions count from
    the end of ``shape``, the known last axes of a value)."""
    for position, (axis, dim) in pairs:
        reason = _axis_contradiction(position, axis, dim, shape, bindings, from_end)
        if reason is not None:
            return reason
    return None


def _axis_contradiction(
    position: int,
    axis: AxisSpec,
    dim: Dim,
    shape: tuple[Dim, ...],
    bindings: Bindings,
    from_end: bool,
) -> str | None:
    if axis.kind in ("any", "variadic") or dim.unrelated:
        return None
    if axis.broadcast and dim.value in (None, 1):
        return None  # 1 passes and binds nothing; a size that may be 1 proves nothing
    if axis.kind == "fixed":
        if dim.value is not None and dim.value != axis.size:
            return f"axis {position} is {dim} where the annotation says {axis.size}"
        return None
    if axis.kind == "expression":
        expected = evaluate(axis.name, bindings)
        if expected is None or expected == dim:
            return None
        if provably_different(expected, dim) or _off_by_named_factor(expected, dim, bindings):
            written = "" if str(expected) == axis.name else f" ({expected})"
            return f"axis {position} is {dim} where the annotation says {axis.name}{written}"
        return _moved(axis.name, expected, position, shape, from_end)
    bound = bindings.sizes.get(axis.name)
    if bound is None:
        bindings.sizes[axis.name] = dim
        return None
    if bound == dim:
        return None
    # Different sizes prove nothing by themselves (two names may be equal at run time);
    # a size the annotation names elsewhere, or this name's size found elsewhere, does.
    other = next(
        (name for name, size in bindings.sizes.items() if size == dim and name != axis.name), None
    )
    if other is not None:
        return f"axis {position} holds {other} ({dim}) where the annotation says {axis.name}"
    if provably_different(bound, dim):
        return f"axis {position} ({axis.name}) is {dim} where {axis.name} is {bound}"
    return _moved(axis.name, bound, position, shape, from_end)


def _moved(
    name: str, size: Dim, position: int, shape: tuple[Dim, ...], from_end: bool
) -> str | None:
    """``name``'s size found at exactly one other axis of the value."""
    if shape.count(size) != 1 or not size.is_named:
        return None
    moved = shape.index(size) - (len(shape) if from_end else 0)
    return f"{name} ({size}) is axis {moved}, where the annotation puts it at axis {position}"


def _off_by_named_factor(expected: Dim, dim: Dim, bindings: Bindings) -> bool:
    """Do two sizes written in the annotation's names differ by a factor of such names
    (``h*d`` and ``d``)? Then only sizes of 1 make them equal."""
    named = {atom for size in bindings.sizes.values() for atom in size.factors}
    for larger, smaller in ((expected, dim), (dim, expected)):
        if not all(isinstance(atom, Symbol) and atom in named for atom in larger.factors):
            continue
        factor = larger.floordiv(smaller)
        if factor.factors and not factor.quotients and factor * smaller == larger:
            return True
    return False
