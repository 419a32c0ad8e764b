"""jaxtyping shape annotations: ``Float[Tensor, "batch seq d_model"]`` as a source of shapes
and as an obligation the inferred shapes must meet.

The dimension grammar followed here: space-separated names (the same name is the same size
within one call), integers (fixed sizes), ``_`` (any size), ``#name`` (broadcastable: 1 or
the size), ``*name`` / ``...`` (any number of axes, at most one). Anything else (``dim-1``,
``name=...``) is a size nobody can check statically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shapecheck.analysis.dims import Dim, provably_different

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class AxisSpec:
    """One axis of an annotation."""

    kind: str  # "name", "fixed", "any", "variadic"
    name: str = ""
    size: int = 0
    broadcast: bool = False


@dataclass(frozen=True)
class ShapeSpec:
    text: str
    axes: tuple[AxisSpec, ...]

    @property
    def variadic(self) -> int | None:
        return next((i for i, axis in enumerate(self.axes) if axis.kind == "variadic"), None)


def parse_shape(text: str) -> ShapeSpec | None:
    axes: list[AxisSpec] = []
    for token in text.split():
        broadcast = token.startswith("#")
        token = token.lstrip("#")
        if token == "...":
            axes.append(AxisSpec("variadic"))
        elif token.startswith("*"):
            axes.append(AxisSpec("variadic", name=token[1:]))
        elif token == "_" or (token.startswith("_") and _NAME.fullmatch(token[1:])):
            axes.append(AxisSpec("any"))
        elif token.isdigit():
            axes.append(AxisSpec("fixed", size=int(token), broadcast=broadcast))
        elif _NAME.fullmatch(token):
            axes.append(AxisSpec("name", name=token, broadcast=broadcast))
        else:
            axes.append(AxisSpec("any"))  # an expression like "dim-1": not checked here
    if sum(1 for axis in axes if axis.kind == "variadic") > 1:
        return None
    return ShapeSpec(text, tuple(axes))


def shape_of(spec: ShapeSpec, names: dict[str, Dim]) -> tuple[Dim, ...] | None:
    """The shape an annotation promises, naming sizes in ``names`` (updated for new names)."""
    if spec.variadic is not None:
        return None
    dims: list[Dim] = []
    for axis in spec.axes:
        if axis.kind == "fixed" and not axis.broadcast:
            dims.append(Dim.constant(axis.size))
        elif axis.kind == "name" and not axis.broadcast:
            dims.append(names.setdefault(axis.name, Dim.symbol(axis.name)))
        else:
            dims.append(Dim.symbol("?"))
    return tuple(dims)


def contradiction(spec: ShapeSpec, shape: tuple[Dim, ...], names: dict[str, Dim]) -> str | None:
    """Why ``shape`` provably cannot satisfy ``spec`` (``names`` binds as jaxtyping does)."""
    axes = spec.axes
    variadic = spec.variadic
    if variadic is None and len(axes) != len(shape):
        return f"{len(shape)} axes where the annotation has {len(axes)}"
    if variadic is not None and len(shape) < len(axes) - 1:
        return f"{len(shape)} axes where the annotation needs at least {len(axes) - 1}"
    if variadic is None:
        pairs = list(zip(range(len(shape)), axes, shape, strict=True))
    else:
        tail = len(axes) - variadic - 1
        pairs = [(i, axes[i], shape[i]) for i in range(variadic)]
        pairs += [
            (len(shape) - tail + i, axes[variadic + 1 + i], shape[len(shape) - tail + i])
            for i in range(tail)
        ]
    for position, axis, dim in pairs:
        if axis.broadcast or axis.kind in ("any", "variadic") or dim.has_unknown:
            continue
        if axis.kind == "fixed":
            if dim.value is not None and dim.value != axis.size:
                return f"axis {position} is {dim} where the annotation says {axis.size}"
            continue
        bound = names.get(axis.name)
        if bound is None:
            names[axis.name] = dim
            continue
        if bound == dim:
            continue
        # Different sizes prove nothing by themselves (two names may be equal at run time);
        # a size the annotation names elsewhere, or this name's size found elsewhere, does.
        other = next(
            (name for name, size in names.items() if size == dim and name != axis.name), None
        )
        if other is not None:
            return f"axis {position} holds {other} ({dim}) where the annotation says {axis.name}"
        if provably_different(bound, dim):
            return f"axis {position} ({axis.name}) is {dim} where {axis.name} is {bound}"
        if shape.count(bound) == 1 and bound.is_named:
            moved = shape.index(bound)
            return (
                f"{axis.name} ({bound}) is axis {moved}, where the annotation puts it at "
                f"axis {position}"
            )
    return None
