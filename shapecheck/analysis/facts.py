"""Facts: what the analysis knows about the value of an expression.

Every evaluated expression gets one fact. Facts are immutable; an operation makes a new one.
``UNKNOWN`` is the honest answer whenever the analysis cannot tell.
"""

from __future__ import annotations

import ast
from dataclasses import MISSING, field
from typing import TypeVar

from shapecheck.analysis.dims import Dim, Symbol, substitute
from shapecheck.analysis.layout import Layout
from shapecheck.record import fields, record, replace

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class Fact:
    """Base of all facts."""


_Record = TypeVar("_Record")


def given_fields_only(cls: type[_Record]) -> type[_Record]:
    """``cls``, a record whose every field has a default, made by storing only the fields a
    call gives: the others are read from the class, where ``dataclass`` leaves each default.
    Its own ``__init__`` writes every field: a :class:`TensorFact` (31 fields, the record the
    analysis makes most) given one cost 2.2 µs, this one 1.3 µs (10 µs when records were
    frozen). Equality, hashing, ``replace`` and pickling read the fields as attributes, so
    they see no difference."""
    names = tuple(item.name for item in fields(cls))
    if any(item.default is MISSING for item in fields(cls)):
        raise TypeError(f"every field of {cls.__name__} needs a default to be read from")

    def __init__(self: object, *given: object, **named: object) -> None:
        if given:
            named.update(zip(names, given, strict=False))
        self.__dict__.update(named)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


@record
class Unknown(Fact):
    """Nothing is known about the value.

    ``reason`` (and ``detail``, a name) say why, for ``--coverage``: ``call`` (a call it cannot
    follow), ``name`` (a name bound where it does not look), ``parameter`` (a parameter of
    unknown rank), ``op`` (an op whose arguments it cannot read), ``conflict`` (branches that
    disagree), ``expression`` (anything else). They take no part in equality: every unknown
    is the same fact.
    """

    reason: str = field(default="expression", compare=False)
    detail: str = field(default="", compare=False)


UNKNOWN = Unknown()


@record
class ImportedName(Unknown):
    """A name a relative import of the module binds (``from .layers import Head``), or a
    star import may, or an attribute of one (``Attention.attention``): unknown, as any name
    the analysis does not follow, until it is called in a way worth looking it up for (see
    :meth:`~shapecheck.analysis.imported.ProjectScope.called`)."""


@record
class Text(Unknown):
    """A string, one of ``values``: a literal, a name chosen between literals or an f-string
    of such names (x-transformers' ``f"b h i d, {kv_einsum_eq} -> b h i j"``, where
    ``kv_einsum_eq = "b j d" if k.ndim == 3 else "b h j d"``). The ops that read text (an
    einsum equation, an einops pattern) read each; to every other use it is unknown."""

    values: tuple[str, ...] = ()
    """Sorted, at most :data:`MAX_TEXTS`."""


MAX_TEXTS = 8
"""The most strings one :class:`Text` holds; more (a loop building strings) is unknown."""


def text_of(values: set[str]) -> Unknown:
    """The text that is one of ``values`` (unknown when there are too many)."""
    return Text(values=tuple(sorted(values))) if len(values) <= MAX_TEXTS else UNKNOWN


@record
class NoneFact(Fact):
    """``None``: on one branch of an optional tensor (``mask = None``), the absent side."""


NONE = NoneFact()


@record
class DtypeOf(Fact):
    """A tensor's dtype read off it (``x.dtype``): ``dtype`` as the tensor's fact says,
    ``None`` for the model's (an activation, a parameter, a floating buffer)."""

    dtype: str | None


@record
class QualifiedName(Fact):
    """A module, class or function reached through an import: ``torch.nn.functional``."""

    name: str
    guess: str | None = field(default=None, compare=False)
    """What taking it for this rests on, if a guess (a parameter ``norm_layer=nn.LayerNorm``:
    that what callers hand keeps the shape too); its layers carry it."""


@record
class IntFact(Fact):
    """A Python ``int`` of known symbolic size (``B``, ``self.num_heads``, ``4``)."""

    dim: Dim
    assumed: bool = field(default=False, compare=False)
    """Only taken for a size: arithmetic on a name the analysis knows nothing of (``t * 2``),
    which may as well be a tensor."""


@record
class ScalarFact(Fact):
    """A Python number that is not (known to be) a size: ``math.sqrt(d)``, ``d ** -0.5``,
    ``-1e9``. ``scale`` says what it is in terms of sizes, ``value`` what it is as a literal."""

    scale: Scale | None = None
    value: float | None = None
    origin: ast.AST | None = field(default=None, compare=False)


@record
class Scale:
    """A number as ``coefficient * base ** exponent`` (``1 / math.sqrt(d)`` is
    ``1 * d ** -0.5``)."""

    base: Dim
    exponent: float
    coefficient: float = 1.0

    def power(self, exponent: float) -> Scale | None:
        """``None`` where Python's answer is not a real number (``0 ** -1``, ``(-4) ** 0.5``)
        or no float holds it (``10 ** 400``)."""
        if (self.coefficient == 0 and exponent < 0) or (
            self.coefficient < 0 and not float(exponent).is_integer()
        ):
            return None
        try:
            coefficient = self.coefficient**exponent
        except OverflowError:
            return None
        return Scale(self.base, self.exponent * exponent, coefficient)

    def times(self, other: Scale) -> Scale | None:
        if self.base == other.base or other.base == Dim.constant(1):
            exponent = self.exponent + (other.exponent if self.base == other.base else 0)
            return Scale(self.base, exponent, self.coefficient * other.coefficient)
        if self.base == Dim.constant(1):
            return other.times(self)
        return None


def scale_of(fact: Fact) -> Scale | None:
    """The number a fact holds, as a :class:`Scale` (sizes, scalars, 0-d tensors)."""
    if isinstance(fact, IntFact):
        if fact.dim.value is not None:
            value = as_float(fact.dim.value)
            return None if value is None else Scale(Dim.constant(1), 1.0, value)
        return Scale(fact.dim, 1.0)
    if isinstance(fact, ScalarFact):
        if fact.scale is not None:
            return fact.scale
        if fact.value is not None:
            return Scale(Dim.constant(1), 1.0, fact.value)
    if isinstance(fact, TensorFact):
        return fact.scalar
    return None


def as_float(value: int) -> float | None:
    """An exact integer as a float; ``None`` beyond the largest float (``10**400``)."""
    try:
        return float(value)
    except OverflowError:
        return None


@record
class ScaleEvidence:
    """Something multiplied the values by ``factor`` (``None``: by what, nobody knows)."""

    node: ast.AST
    factor: Scale | None


@record
class Tiling:
    """Axis ``axis`` holds ``copies`` whole copies of an axis of ``of`` entries, one copy after
    another: entry ``c * of + i`` is entry ``i`` of copy ``c`` (``x.repeat(H, 1, 1)``,
    ``torch.tile``). Where each entry is repeated in place instead (``repeat_interleave``),
    entry ``i * copies + c``, there is no tiling."""

    axis: int
    copies: Dim
    of: Dim
    rank: int
    """The tiled tensor's rank."""
    by: ast.AST = field(compare=False)
    """The call that tiled (for messages and fixes)."""
    guess: str | None = None
    """Where the tiled tensor's rank was not known: the assumption that it had an axis for
    each count (else the first counts make new axes, which tile nothing)."""


@record
class HeadsAxis:
    """Axis ``axis`` counts groups of the features, split off them by a view: ``[B, L, H*D]``
    viewed as ``[B, L, H, D]`` makes axis 2 the heads, whatever its size. It moves with
    ``transpose``/``permute``; attention kernels want it at a fixed place (SDPA's ``[B, H, L,
    D]``, flash-attn's ``[B, L, H, D]``)."""

    axis: int
    """Counted from the front where ``rank`` is known, else from the end (``-2``)."""
    rank: int | None
    by: ast.AST = field(compare=False)
    """The view that split the features (for messages)."""

    def from_end(self) -> int:
        return self.axis - self.rank if self.rank is not None else self.axis


@record
class Positions:
    """Values that count positions or grow with them (a rotary phase ``t * inv_freq``).
    16 bits cannot hold them: bfloat16 rounds every position above 256, float16 above 2048.
    Once rounded, casting back to float32 brings nothing back."""

    made: ast.AST
    """The ``torch.arange`` that counted them."""
    rounded: ast.AST | None = None
    """Where they went 16-bit: a cast (``.type_as(self.inv_freq)``, ``.half()``), an
    ``arange(..., dtype=...)``, or integers times a 16-bit buffer."""
    dtype: str | None = None
    """``float16``/``bfloat16`` written out; ``None``: the model's (see ``like``)."""
    like: ast.expr | None = None
    """The tensor whose dtype they took (``self.inv_freq``), for messages."""


@record
class PositionTable:
    """cos/sin of positions (a rotary or sinusoidal table), whose axis ``axis`` (counted from
    the end) runs over the positions: ``[T, D]`` has them at -2, as rotary code builds them.
    Broadcast onto a tensor, that axis must meet the tensor's sequence axis."""

    made: ast.AST
    """The ``cos``/``sin`` call."""
    axis: int

    def moved(self, landed: dict[int, int], old_rank: int, new_rank: int) -> PositionTable | None:
        """The table after an op that put old axis ``i`` at ``landed[i]``; ``None`` if the
        positions axis was dropped."""
        new = landed.get(old_rank + self.axis)
        return None if new is None else PositionTable(self.made, new - new_rank)


@record
class ChannelsAxis:
    """Axis ``axis`` of a ``rank``-axis tensor holds a convolution's output channels:
    ``nn.Conv2d`` makes ``[N, C, H, W]``, each position's features laid out before the
    positions. ``transpose``/``permute`` move it; a view keeps it where the axes up to it, or
    from it on, stay as they were (``flatten(2)``: ``[N, C, H*W]``)."""

    axis: int
    rank: int


@record
class SizeFact(Fact):
    """A tuple of sizes: ``x.shape``, ``x.size()``, ``(B, L, H, D)``."""

    dims: tuple[Dim, ...]


@record
class ShapePrefix(Fact):
    """``x.shape[:-k]`` of a tensor whose rank is not known (yet): its sizes but the last
    ``dropped``, however many there are. Read again once the rank is learned."""

    owner: str
    """The name the tensor is bound to (``hidden_states``)."""
    dropped: int
    passed: bool = False
    """Read while ``owner``, a parameter, held what the call passed it: a caller that passed
    a name of its own reads the prefix in that name."""
    binding: int = 0
    """How many times ``owner`` had been bound again when the prefix was read: it is that
    tensor's prefix, never that of one bound to the name later (``restore = x.shape[:-1]``,
    then ``x = attn @ v``)."""


@record
class PrefixedSizes(Fact):
    """``(*x.shape[:-1], -1, head_dim)``: sizes after a :class:`ShapePrefix`."""

    prefix: ShapePrefix
    tail: tuple[Fact, ...]


@record
class PrefixedShape:
    """A shape known as a prefix of another tensor's shape and then ``tail``: the shape of
    ``x.view(*h.shape[:-1], -1, head_dim)`` while ``h``'s rank is unknown."""

    prefix: ShapePrefix
    tail: tuple[Dim, ...]


@record
class TupleFact(Fact):
    """A tuple of values whose length is known: ``qkv.chunk(3, dim=-1)``."""

    items: tuple[Fact, ...]


@record
class RepeatedFact(Fact):
    """A sequence of unknown length whose every element is ``item`` (a comprehension)."""

    item: Fact


@record
class ModuleFact(Fact):
    """An ``nn.Module`` instance whose class the analysis knows: ``nn.Linear(E, 3 * E)``."""

    kind: str
    in_features: Dim | None = None
    out_features: Dim | None = None
    dim: int | None = None
    """``nn.Softmax``'s ``dim`` (``None``: not a number the code writes, see ``dim_given``)."""
    dim_given: bool = False
    uncertain: bool = False
    """Known on some paths only (see ``SAME_SHAPE``): what it returns is then uncertain."""
    guess: str | None = field(default=None, compare=False)
    """What its class rests on, if a guess (see ``QualifiedName.guess``); so do its outputs."""
    spatial: tuple[Dim | None, ...] | None = None
    """A convolution's spatial axes (``in_features``/``out_features`` are its channels): what
    each size is divided by (1: kept, as with ``kernel_size=1`` or ``padding="same"``; ``p``:
    a patch embedding's ``kernel_size=stride=p``), ``None`` where it is no such quotient."""
    pattern: str | None = None
    """An einops layer's pattern: ``Rearrange("b n (h d) -> b h n d", h=heads)``."""
    axis_sizes: tuple[tuple[str, Dim], ...] = ()
    """The axis sizes an einops layer is given (``h=heads``)."""
    stages: tuple[Fact, ...] = ()
    """``nn.Sequential``'s layers, in the order it applies them."""


ACTIVATIONS = frozenset(
    f"torch.nn.{name}"
    for name in ("GELU", "SiLU", "ReLU", "Tanh", "Sigmoid", "Mish", "LeakyReLU", "ELU", "Hardswish")
)
BATCH_NORMS = frozenset(f"torch.nn.BatchNorm{rank}d" for rank in (1, 2, 3))
NORMS = frozenset({"torch.nn.LayerNorm", "torch.nn.RMSNorm", "torch.nn.GroupNorm", *BATCH_NORMS})
SHAPE_PRESERVING = frozenset({"torch.nn.Identity", "torch.nn.Dropout", *ACTIVATIONS, *NORMS})
"""Module classes whose output has their input's shape."""
SAME_SHAPE = "shapecheck.same-shape"
"""The kind of a module that is one of several whose output keeps the input's shape:
``norm_layer(dim) if qk_norm else nn.Identity()``. What it does to the values is unknown."""


@record
class FunctionRef(Fact):
    """A function defined in the analysed module, with what it reads of the names bound where
    it was defined."""

    node: FunctionNode
    closure: tuple[tuple[str, Fact], ...] = ()
    enclosed: bool = False
    """Defined where names were bound (in a function, or after a module's first binding): it
    may depend on them, so what a call returns is not remembered (``ModuleContext.inlined``)."""
    class_name: str | None = None
    uncertain: bool = False
    """One of several functions the code may call here (a lookup's default, the eager
    attention beside fused kernels): what a call returns is then uncertain."""


@record
class NamedFacts(Fact):
    """A dict of names to values (``dict(wte=..., h=...)``, ``{"wte": ...}``), read back by
    name (``d["wte"]``); an ``nn.ModuleDict`` of them (``layers``) also as attributes
    (nanoGPT's ``self.transformer.wte(idx)``)."""

    items: tuple[tuple[str, Fact], ...]
    layers: bool = False

    def named(self, name: str) -> Fact:
        return next((fact for key, fact in self.items if key == name), UNKNOWN)


@record
class Partial(Fact):
    """``functools.partial(function, *args, **kwargs)`` of a callable the analysis follows
    (x-transformers' ``LinearNoBias = partial(nn.Linear, bias=False)``): a call calls
    ``function`` with these arguments first, the call's own after them."""

    function: Fact
    args: tuple[tuple[Fact, ast.expr], ...] = ()
    kwargs: tuple[tuple[str, tuple[Fact, ast.expr]], ...] = ()


@record
class Choice(Fact):
    """One of several callables, chosen where control flow joined (x-transformers'
    ``self.attn_fn``: ``F.sigmoid``, a function of the module or ``partial(F.softmax,
    dim=-1)``, by the constructor's flags). A call calls each, and what is known of its result
    is what their results share: their join (see :mod:`~shapecheck.analysis.lattice`)."""

    options: tuple[Fact, ...]
    """Functions (of the module, or reached by import), modules, instances of the module's
    classes and functions of the module, none of them a :class:`Choice`."""
    uncertain: bool = False
    """Some path chose a callable the analysis does not follow: what a call returns is
    known on the other paths only."""


@record
class ClassRef(Fact):
    """A class defined in the analysed module (calling it constructs an instance)."""

    name: str


@record
class InstanceFact(Fact):
    """An instance of a class defined in the analysed module (calling it runs ``forward``)."""

    name: str
    own: bool = False
    """``self`` handed on by a method of the class (``eager_attention_forward(self, q, k,
    v)``): its sizes are the very sizes that method reads (``self.num_heads``), not those of
    some instance (``attn.heads`` of an ``attn: Attention``)."""
    built_with: tuple[tuple[int | str, Dim], ...] = ()
    """The sizes its construction passed, by position or keyword, where they chose no model
    of their own (``Conv1D(self.embed_dim, self.embed_dim)``): what its ``forward`` returns
    in an attribute ``__init__`` set to one (``self.nf = nf``) is in that size."""


CALLABLES = (QualifiedName, FunctionRef, ModuleFact, Choice, Partial, ClassRef, InstanceFact)
"""Facts of what a call can follow: functions by import or of the module, layers, choices
among them, partials of them, classes and instances of the module."""


@record
class AxisOp:
    """The axis-reordering operation that directly produced a tensor."""

    name: str
    node: ast.AST
    input_rank: int | None
    axes: tuple[int, ...]


@record
class Product:
    """A batched matrix product ``left · right`` and the axes it contracts."""

    node: ast.AST
    left: TensorFact
    right: TensorFact
    left_node: ast.expr
    right_node: ast.expr
    left_contracted: int
    right_contracted: int
    key_axis: int = -1
    """The axis of the result that runs over the keys, counted from the end (negative); it
    moves with its axis through transposes and permutes. Counted from the front (not
    negative) only while the rank is unknown and an ellipsis follows the keys' letter
    (``einsum('v b ... d, l b ... d -> v l b ...')``)."""
    key_size: Dim | None = None
    other: Product | None = None
    """Where branches that computed scores by different products join (timm's halo
    attention): the other branch's product. What is said of a product itself, the axes it
    contracts, holds of it too."""


OPPOSITE_POLARITY = {"attend": "block", "block": "attend"}
"""A mask's polarity after ``~`` or ``== 0``."""


@given_fields_only
@record
class TensorFact(Fact):
    """A tensor.

    ``shape`` is ``None`` while the rank is unknown; otherwise every axis has a :class:`Dim`
    (an unknown size is a fresh symbol). ``scaling`` lists the nodes that multiplied or divided
    the values by a scale since they were computed (``None``: cannot tell). ``product`` is the
    matrix product these values still are, up to scaling, masking and reshaping.
    """

    shape: tuple[Dim, ...] | None = None
    layout: Layout | None = None
    origin: ast.AST | None = field(default=None, compare=False)
    is_parameter: bool = False
    scaling: tuple[ScaleEvidence, ...] | None = ()
    product: Product | None = None
    axis_op: AxisOp | None = None
    is_linear_weight: bool = False
    known_last: Dim | None = None
    """The last axis's size when the rank is unknown (an ``nn.Linear`` output)."""
    scalar: Scale | None = None
    """The number a 0-d tensor holds (``torch.tensor(head_dim)``)."""
    dtype: str | None = None
    """``float16``, ``bfloat16``, ``float32``, ``float64``, ``bool``, ``int64``…; ``None``:
    the model's. A floating buffer or parameter has the model's dtype, whatever it was built
    in: ``model.to(torch.bfloat16)`` casts it."""
    polarity: str | None = None
    """For a mask: ``attend`` (True where attention is allowed) or ``block``."""
    weights: bool = False
    """Attention weights: the softmax of attention scores."""
    masked_weights: ast.AST | None = field(default=None, compare=False)
    """Where attention weights were masked after their softmax (until renormalised)."""
    probabilities: bool = False
    """A softmax output (what a cross-entropy loss must not be given)."""
    fill: ScalarFact | None = None
    """An additive mask made from a literal (``(1 - mask) * -1e9``)."""
    masked_with: frozenset[str] = frozenset()
    """The masks (as written) already applied to these attention scores or weights."""
    from_number: ast.Call | None = field(default=None, compare=False)
    """The ``torch.tensor(<python number>)`` call that built this host constant, until it is
    placed on a device (``.to(x.device)``, ``.to(x)``)."""
    unread_fills: tuple[tuple[ast.AST, float], ...] = field(default=(), compare=False)
    """Literals written into these scores that matter only once a softmax reads them: a fill
    too weak to mask, or an additive fill that float16 turns into ``-inf``."""
    unknown_rank: Unknown | None = field(default=None, compare=False)
    """While the rank is unknown: why (for ``--coverage``)."""
    rank_of: ast.arg | None = field(default=None, compare=False)
    """While the rank is unknown: the parameter (of one function: what was passed in to it)
    that has the same rank, where every op since kept it (a norm, a linear layer, ``chunk``,
    dropout, ``x * scale``), so that a use that shows this tensor's rank shows the
    parameter's."""
    uncertain: bool = False
    """Known on some paths only: joined with a value the analysis could not model (see
    :mod:`~shapecheck.analysis.lattice`). Findings may rest on it; a safe fix, or a finding
    that code does nothing, may not."""
    guess: str | None = None
    """An assumption the shape rests on (``hidden_states is [batch, seq, features]``), made
    where the code says no more (see ``learn_rank``); findings that depend on it say so, and
    neither a safe fix nor a finding that code does nothing may rest on it."""
    prefixed: PrefixedShape | None = None
    """While the rank is unknown: the shape as another tensor's leading sizes and a tail."""
    tiled: Tiling | None = None
    """An axis that holds whole copies one after another (see :class:`Tiling`)."""
    positions: Positions | None = field(default=None, compare=False)
    """Values that count positions (``torch.arange``), or grow with them (a rotary phase
    ``t * inv_freq``), and where they were rounded to 16 bits (see :class:`Positions`)."""
    heads: HeadsAxis | None = None
    """An axis split off the features that counts heads, not positions (see
    :class:`HeadsAxis`)."""
    channels: ChannelsAxis | None = None
    """The axis of a convolution's channels (see :class:`ChannelsAxis`)."""
    table: PositionTable | None = None
    """cos/sin of positions, and which axis runs over them (see :class:`PositionTable`)."""
    cached: ast.AST | None = field(default=None, compare=False)
    """Keys or values grown by a KV cache (``torch.cat([past_k, k], dim=2)``,
    ``past_key_values.update(k, v, layer)``): the call that grew them. They are longer than
    the queries of a decode step, so a causal mask must be aligned bottom-right."""
    resized: ast.AST | None = field(default=None, compare=False)
    """The view that gave values of unknown shape the sizes they have, or the ``F.pad`` that
    lengthened an axis with values that are none of its positions (Transformer-XL's relative
    shift pads its scores and views them as ``[.., m+1, n]``): sizes the code chose, not axes
    known to hold what their names say, so a later view of them moves no named axis
    provably."""

    @property
    def is_scores(self) -> bool:
        """Attention scores: a product of two activations whose left side is not weights
        (``weights @ v`` is the attention output)."""
        return self.product is not None and not self.product.left.weights

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def last_dim(self) -> Dim | None:
        if self.shape is not None:
            return self.shape[-1] if self.shape else None
        return self.known_last

    def normalise_axis(self, axis: int) -> int | None:
        """``axis`` as a non-negative index, when the rank allows it."""
        if self.shape is None:
            return axis if axis >= 0 else None
        rank = len(self.shape)
        if -rank <= axis < rank:
            return axis % rank
        return None


def fresh_shape(rank: int) -> tuple[Dim, ...]:
    return tuple(Dim.symbol("?") for _ in range(rank))


def sizes_substituted(fact: Fact, mapping: dict[Symbol, Dim]) -> Fact:
    """``fact`` with the sizes it holds renamed by ``mapping``: a size, a scale's base, a
    layer's sizes (its layers' too, in an ``nn.Sequential``), a tensor's shape (a parameter
    ``__init__`` made: ``nn.Parameter(torch.zeros(self.num_heads, self.head_size))``,
    LayoutLMv2's ``q_bias`` of ``[1, 1, self.all_head_size]``); any other fact as it is."""
    if isinstance(fact, IntFact):
        return IntFact(substitute(fact.dim, mapping))
    if isinstance(fact, TensorFact) and fact.shape is not None:
        return replace(fact, shape=tuple(substitute(dim, mapping) for dim in fact.shape))
    if isinstance(fact, ScalarFact) and fact.scale is not None:
        return replace(fact, scale=replace(fact.scale, base=substitute(fact.scale.base, mapping)))
    if isinstance(fact, ModuleFact):
        return replace(
            fact,
            out_features=substitute(fact.out_features, mapping) if fact.out_features else None,
            in_features=substitute(fact.in_features, mapping) if fact.in_features else None,
            axis_sizes=tuple((name, substitute(dim, mapping)) for name, dim in fact.axis_sizes),
            stages=tuple(sizes_substituted(stage, mapping) for stage in fact.stages),
        )
    return fact
