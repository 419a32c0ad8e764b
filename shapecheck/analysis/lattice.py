"""How each piece of knowledge about a tensor merges where control flow joins, and how it
passes through each family of operations.

A :class:`~shapecheck.analysis.facts.TensorFact` is a record of independent pieces of
knowledge (shape, layout, scaling, product, role, mask polarity, dtype, …). Each one states
here, once:

- its **merge** at an ``if``/``else``, a loop or a ``try``: what is still known when either
  branch may have run (:data:`MERGES`);
- its **flow** through each :class:`Family` of operations: kept, computed by the op, a fresh
  value's default, or lost (:data:`FLOWS`). Ops that make new values from others (products,
  softmax, norms, linear layers, constructors, ``cat``) build them with
  :func:`~shapecheck.analysis.ops.new_tensor`: every fact at its fresh default except what the
  op computes, uncertain where an input is. Reductions (``sum``, ``mean``) are not modelled:
  their result is unknown.

Unknowns are not all alike. A value the analysis could not *model* (a cache object's
``update``, a call into another file) says nothing about what the other branch computed, and
the likely truth is that both branches make the same kind of tensor: the other branch's facts
are kept, marked ``uncertain`` (findings may rest on them, since the code is wrong on that
branch; "this does nothing" findings and safe fixes may not). Branches that *conflict* (a
tensor on one side, a number on the other) leave a conflict. ``None`` on one side is an
optional tensor or layer: where the code uses it as one, it is the other side's, for certain.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from enum import Enum
from typing import Any

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    SAME_SHAPE,
    SHAPE_PRESERVING,
    Choice,
    ClassRef,
    Fact,
    FunctionRef,
    ImportedName,
    InstanceFact,
    IntFact,
    ModuleFact,
    NoneFact,
    Partial,
    QualifiedName,
    RepeatedFact,
    TensorFact,
    Text,
    TupleFact,
    Unknown,
    text_of,
)
from shapecheck.analysis.imports import call_name
from shapecheck.record import fields, replace


class Family(Enum):
    """Families of operations, by what they do to a tensor's values."""

    AXES = "axes"
    """The same values with the axes reordered: ``transpose``, ``permute``, ``.T``."""
    VIEW = "view"
    """The same values in another shape: ``view``, ``reshape``, ``unsqueeze``, indexing,
    ``chunk``, ``expand``, ``repeat``."""
    SAME_VALUES = "same values"
    """The same values, maybe another dtype or memory: ``.float()``, ``.to()``,
    ``.contiguous()``, ``clone``, ``detach``, dropout."""
    ELEMENTWISE = "elementwise"
    """A function of each value: ``exp``, ``relu``, ``~``, ``-x``, ``x ** p``."""
    MASKING = "masking"
    """Values written where a mask says: ``masked_fill``, ``torch.where``, ``tril``."""
    SCALING = "scaling"
    """Multiplied, divided, shifted by a number: ``x * 0.125``, ``x / math.sqrt(d)``."""
    UNMODELLED_IN_PLACE = "unmodelled in-place"
    """An in-place method the analysis does not model (``x.clamp_()``): the values changed
    in a way it cannot tell; the shape and layout stay."""


class Flow(Enum):
    KEEP = "kept"
    COMPUTED = "computed by the op"
    FRESH = "a new value's default"
    LOST = "unknown"


K, C, F, L = Flow.KEEP, Flow.COMPUTED, Flow.FRESH, Flow.LOST
_FAMILIES = list(Family)


def _flows(*flows: Flow) -> dict[Family, Flow]:
    """Flows in the order of :class:`Family`."""
    assert len(flows) == len(_FAMILIES)
    return dict(zip(_FAMILIES, flows, strict=True))


# Each row: AXES, VIEW, SAME_VALUES, ELEMENTWISE, MASKING, SCALING, UNMODELLED_IN_PLACE.
# COMPUTED: every op of the family must pass the new value. KEEP: kept, unless an op of the
# family works out more (a cast its dtype, masked_fill the masks it applied).
FLOWS: dict[str, dict[Family, Flow]] = {
    "shape": _flows(C, C, K, K, K, K, K),
    "layout": _flows(C, C, K, K, K, K, K),
    "origin": _flows(C, C, C, C, C, C, K),
    # (a function of each value of a learned tensor is learned: Swin v2's clamped temperature)
    "is_parameter": _flows(K, K, K, K, K, K, K),
    "scaling": _flows(K, K, K, F, K, C, L),
    "product": _flows(K, K, K, F, K, K, L),
    "axis_op": _flows(C, F, F, F, F, F, F),
    "is_linear_weight": _flows(F, F, F, F, F, F, F),
    "known_last": _flows(F, F, K, K, K, K, K),
    "scalar": _flows(K, K, K, F, K, K, K),
    "dtype": _flows(K, K, K, K, K, K, K),
    "polarity": _flows(K, K, K, F, K, K, K),
    "weights": _flows(K, K, K, F, K, K, K),
    "masked_weights": _flows(K, K, K, K, K, C, K),
    "probabilities": _flows(K, K, K, F, K, F, K),
    "fill": _flows(K, K, K, F, K, C, K),
    "masked_with": _flows(K, K, K, K, K, K, K),
    "from_number": _flows(K, K, K, K, K, K, K),
    "unread_fills": _flows(K, K, K, K, K, K, K),
    "unknown_rank": _flows(K, K, K, K, K, K, K),
    "rank_of": _flows(K, F, K, K, F, K, K),
    "uncertain": _flows(K, K, K, K, K, K, K),
    "guess": _flows(K, K, K, K, K, K, K),
    "prefixed": _flows(F, F, K, K, K, K, K),
    "tiled": _flows(F, F, K, K, K, K, K),
    "heads": _flows(F, F, K, K, K, K, K),
    "channels": _flows(F, F, K, K, K, K, K),
    "positions": _flows(K, K, K, F, F, K, F),
    "cached": _flows(K, K, K, K, K, K, K),
    "resized": _flows(K, K, K, K, K, K, K),
    "table": _flows(F, F, K, F, F, K, F),
}
"""How each field passes through each family. ``unknown_rank`` is kept, and set by
:func:`flow` where an op loses the rank; ``uncertain`` always flows on."""

_LOST = {"scaling": None, "product": None}
"""The unknown value of the fields that can be LOST (their fresh default says "none")."""
_FRESH = {f.name: f.default for f in fields(TensorFact)}
_COMPUTED = {
    family: frozenset(name for name, flows in FLOWS.items() if flows[family] is Flow.COMPUTED)
    for family in Family
}
_RESETS = {
    family: {
        name: _FRESH[name] if flows[family] is Flow.FRESH else _LOST[name]
        for name, flows in FLOWS.items()
        if flows[family] in (Flow.FRESH, Flow.LOST)
    }
    for family in Family
}


def flow(fact: TensorFact, family: Family, **computed: Any) -> TensorFact:
    """``fact`` through an op of ``family``: each field as :data:`FLOWS` says, the ones the op
    works out given in ``computed``. Where the op loses the rank, it says so (for
    ``--coverage``)."""
    missing = _COMPUTED[family].difference(computed)
    if missing:
        raise TypeError(f"an op of the family {family.value!r} must compute {min(missing)!r}")
    changes = {**_RESETS[family], **computed}
    if changes.get("shape", fact.shape) is None and fact.shape is not None:
        changes.setdefault("unknown_rank", Unknown("op", _op_name(changes.get("origin"))))
    return replace(fact, **changes)


def _op_name(node: ast.AST | None) -> str:
    """The name of the op a node calls (``view`` for ``x.view(...)``); ``indexing``."""
    if isinstance(node, ast.Subscript):
        return "indexing"
    return (call_name(node) if node is not None else None) or "an op"


# --- joins -----------------------------------------------------------------------------------


def _agree(left: Any, right: Any) -> Any:
    return left if left == right else None


def _both(left: bool, right: bool) -> bool:
    return left and right


def _either(left: Any, right: Any) -> Any:
    return left or right


def _unless_disputed(left: Any, right: Any) -> Any:
    """What one branch knows where the other knows nothing, or both agree on."""
    if left is None or right is None:
        return left if right is None else right
    return left if left == right else None


def _union(left: Any, right: Any) -> Any:
    if isinstance(left, frozenset):
        return left | right
    return (*left, *(item for item in right if item not in left))


def _shapes(left: tuple[Dim, ...] | None, right: tuple[Dim, ...] | None) -> Any:
    if left is None or right is None or len(left) != len(right):
        return None
    return tuple(a if a == b else Dim.symbol("?") for a, b in zip(left, right, strict=True))


Merge = Callable[[Any, Any], Any]

MERGES: dict[str, tuple[Merge, str]] = {
    "shape": (_shapes, "the rank where both agree on it, each size where both agree"),
    "layout": (_agree, "where both agree"),
    "origin": (_either, "the first branch's (provenance for messages)"),
    "is_parameter": (_both, "a parameter on both branches"),
    "scaling": (_agree, "where both scaled alike; otherwise unknown"),
    "product": (_agree, "the same product on both branches"),
    "axis_op": (_agree, "the same op on both branches"),
    "is_linear_weight": (_both, "on both branches"),
    "known_last": (_agree, "where both agree"),
    "scalar": (_agree, "where both agree"),
    "dtype": (_agree, "where both agree; the other facts do not depend on it"),
    "polarity": (
        _unless_disputed,
        "a polarity no branch disputes: where a branch made the mask (`~causal_mask`), the "
        "mask passed in on another (`mask`, of no polarity known) is taken to mean the same, "
        "and a float bias (`mask = attn_bias`) means nothing until code makes it boolean",
    ),
    "weights": (_both, "attention weights on both branches, whatever their dtype"),
    "masked_weights": (_either, "masked after the softmax on either branch (that one is wrong)"),
    "probabilities": (_both, "a softmax on both branches"),
    "fill": (_agree, "the same literal on both branches"),
    "masked_with": (
        _union,
        "every mask either branch applied (a branch that skips one, "
        "`if mask is not None`, has none to apply)",
    ),
    "from_number": (_agree, "the same constructor call"),
    "unread_fills": (_union, "a fill on either branch may reach the softmax"),
    "unknown_rank": (_either, "either branch's reason"),
    "rank_of": (_agree, "the same parameter's rank on both branches"),
    "uncertain": (_either, "uncertain on either branch"),
    "guess": (_either, "a guess on either branch"),
    "prefixed": (_agree, "the same prefix and tail on both branches"),
    "tiled": (_either, "tiled on either branch (`if mask is not None: mask = mask.repeat(...)`)"),
    "heads": (_agree, "where both branches split the features alike"),
    "channels": (_agree, "where both branches hold a convolution's channels on the same axis"),
    "positions": (_either, "positions on either branch"),
    "cached": (_either, "grown by a cache on either branch (`if past is not None: k = cat(...)`)"),
    "resized": (_either, "given its sizes by a view of an unknown shape on either branch"),
    "table": (_agree, "the same table, laid out alike, on both branches"),
}
"""How each field of a tensor fact merges, and why."""


def missing_rules(record: type) -> list[str]:
    """The fields of dataclass ``record`` that lack a merge rule or a flow for some family."""
    return [
        field.name
        for field in fields(record)
        if field.name not in MERGES
        or field.name not in FLOWS
        or set(FLOWS[field.name]) != set(Family)
    ]


_OPTIONAL = (TensorFact, ModuleFact)
"""What ``None`` on another branch leaves as it was: ``self.q_proj = None`` where a fused layer
replaces it (``if self.qkv is not None: ... else: self.q_proj(x)``) is called only where it is
the layer."""


def join(left: Fact, right: Fact) -> Fact:
    """What is still known after control flow merges two values (see the module docstring)."""
    if left is right:
        return left
    if isinstance(left, NoneFact) and isinstance(right, _OPTIONAL):
        return right  # an optional tensor or layer: where it is used as one, it is this one
    if isinstance(right, NoneFact) and isinstance(left, _OPTIONAL):
        return left
    if isinstance(left, Text) and isinstance(right, Text):
        return text_of({*left.values, *right.values})
    if isinstance(left, Unknown) or isinstance(right, Unknown):
        return _with_unknown(left, right)
    if isinstance(left, TensorFact) and isinstance(right, TensorFact):
        return _join_tensors(left, right)
    if left == right:
        return left
    if isinstance(left, IntFact) and isinstance(right, IntFact):
        return IntFact(Dim.symbol("?"))
    if _keeps_shape(left) and _keeps_shape(right):
        uncertain = any(isinstance(m, ModuleFact) and m.uncertain for m in (left, right))
        return ModuleFact(SAME_SHAPE, uncertain=uncertain)
    if isinstance(left, ModuleFact) and isinstance(right, ModuleFact):
        joined = _join_layers(left, right)
        if joined is not None:
            return joined
    if _chosen(left, right):
        return _choice(left, right)
    if (
        isinstance(left, TupleFact)
        and isinstance(right, TupleFact)
        and len(left.items) == len(right.items)
    ):
        return TupleFact(tuple(map(join, left.items, right.items)))
    tensors = _listed_tensors(left, right)
    if tensors:
        # a list of tensors a loop appends to: of unknown length, each item alike
        return RepeatedFact(functools.reduce(join, tensors))
    return Unknown("conflict")


def _listed_tensors(left: Fact, right: Fact) -> list[Fact]:
    """The items of two sequences of tensors of different lengths (``outs = []`` before a
    loop that appends to it, ``outs`` after); none where either holds anything else."""
    items: list[Fact] = []
    for side in (left, right):
        if isinstance(side, TupleFact):
            items += side.items
        elif isinstance(side, RepeatedFact):
            items.append(side.item)
        else:
            return []
    return items if all(isinstance(item, TensorFact) for item in items) else []


def _with_unknown(left: Fact, right: Fact) -> Fact:
    known, unknown = (right, left) if isinstance(left, Unknown) else (left, right)
    assert isinstance(unknown, Unknown)
    if isinstance(known, Unknown):
        return known if known.reason == "conflict" else unknown
    if unknown.reason != "conflict" and isinstance(known, TensorFact | FunctionRef | Choice):
        return replace(known, uncertain=True)  # the eager attention beside kernels
    if unknown.reason != "conflict" and _keeps_shape(known):
        # norm_layer(dim) if qk_norm else nn.Identity(): some layer that keeps the shape
        return ModuleFact(SAME_SHAPE, uncertain=True)
    if (
        unknown.reason != "conflict"
        and isinstance(known, QualifiedName)
        and known.name in SHAPE_PRESERVING
    ):
        # norm_layer or nn.LayerNorm: some class whose layers keep the shape
        return QualifiedName(SAME_SHAPE)
    if (
        unknown.reason != "conflict"
        and not isinstance(unknown, ImportedName)  # looked up in its file where it is called
        and isinstance(known, ModuleFact)
    ):
        # custom_attn_fn if given else partial(F.softmax, dim=-1): the softmax, on some paths
        return replace(known, uncertain=True)
    return unknown  # a number or module known on one branch only is not kept


def _join_layers(left: ModuleFact, right: ModuleFact) -> ModuleFact | None:
    """Layers of one class that differ in their widths only (a cross-attention's keys built
    from another width, ``nn.Linear(kv_dim, H * D)`` beside ``nn.Linear(E, H * D)``): that
    class, each width where both agree, otherwise unknown."""
    differ = {
        field.name
        for field in fields(ModuleFact)
        if getattr(left, field.name) != getattr(right, field.name)
    }
    if left.kind != right.kind or not differ <= {"in_features", "out_features", "uncertain"}:
        return None
    return replace(
        left,
        in_features=_same_size(left.in_features, right.in_features),
        out_features=_same_size(left.out_features, right.out_features),
        uncertain=left.uncertain or right.uncertain,
    )


def _same_size(left: Dim | None, right: Dim | None) -> Dim | None:
    if left == right:
        return left
    return None if left is None or right is None else Dim.symbol("?")


def _chosen(left: Fact, right: Fact) -> bool:
    """Two callables either of which the code may call: functions of the module, modules,
    instances of the module's classes (``RMSNorm(d) if qk_norm else nn.Identity()``), the
    classes themselves (LeViT's ``ConvNorm if use_conv else LinearNorm``), choices among them,
    or a function reached by import beside one of those (two names reached by import may be
    numbers or dtypes: ``torch.float16``)."""
    functions = FunctionRef | ModuleFact | InstanceFact | ClassRef | Choice | Partial
    return (isinstance(left, functions) and isinstance(right, functions | QualifiedName)) or (
        isinstance(right, functions) and isinstance(left, QualifiedName)
    )


def _choice(left: Fact, right: Fact) -> Choice:
    """The callables of both sides (see :class:`~shapecheck.analysis.facts.Choice`)."""
    options: list[Fact] = []
    for side in (left, right):
        for option in side.options if isinstance(side, Choice) else (side,):
            if option not in options:
                options.append(option)
    uncertain = any(isinstance(side, Choice) and side.uncertain for side in (left, right))
    return Choice(tuple(options), uncertain)


def _keeps_shape(fact: Fact) -> bool:
    return isinstance(fact, ModuleFact) and fact.kind in (*SHAPE_PRESERVING, SAME_SHAPE)


def _join_tensors(left: TensorFact, right: TensorFact) -> TensorFact:
    merged = {
        name: merge(getattr(left, name), getattr(right, name))
        for name, (merge, _) in MERGES.items()
    }
    if merged["shape"] is None and left.shape is not None and right.shape is not None:
        merged["unknown_rank"] = Unknown("conflict")  # both ranks known, and different
    elif merged["shape"] is not None:
        merged["unknown_rank"] = None
    if merged["product"] is None and left.is_scores and right.is_scores:
        merged.update(_either_scores(left, right, merged["shape"]))
    if merged["shape"] is None and left.last_dim is not None and left.last_dim == right.last_dim:
        merged["known_last"] = left.last_dim  # the width both agree on, whatever their ranks
    return TensorFact(**merged)


def _either_scores(
    left: TensorFact, right: TensorFact, shape: tuple[Dim, ...] | None
) -> dict[str, Any]:
    """Attention scores of different products on the two branches: a softmax after the join
    reads one or the other. One product whose scores a branch joined to other keys' logits
    (MiMo's optional attention sinks) is that product over as many keys as the joined shape
    says. Two products of their own (timm's halo attention: ``(q @ kᵀ + pos) * scale`` on one
    branch, ``q @ kᵀ * scale + pos`` on the other) are the scores of the branch that leaves
    them unscaled, where one does (what is said of them holds on that branch), else the first
    branch's, scaled where both agree; the other branch's product is kept beside it
    (``Product.other``) for what is said of a product itself."""
    first, second = left.product, right.product
    assert first is not None and second is not None
    if first.key_axis != second.key_axis:
        return {}
    unscaled: dict[str, Any] = {}
    if first.node is not second.node and left.scaling != () == right.scaling:
        first, second, unscaled = second, first, {"scaling": ()}
    if first.key_size != second.key_size:
        keys = first.key_axis
        joined = shape[keys] if shape is not None and len(shape) >= -keys else None
        first = replace(first, key_size=joined)
    if first.node is not second.node:
        first = replace(first, other=second)
    return {"product": first, **unscaled}
