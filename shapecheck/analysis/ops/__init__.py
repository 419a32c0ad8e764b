"""Transfer functions: what each torch operation does to the facts of its arguments.

This module is the registry: a tensor op is registered once under its method name and its
``torch.*`` spellings (the first argument is then the receiver); adding an op is one function
in the module of its family, and every rule benefits. Anything not registered yields an
unknown. The families: :mod:`.axes`, :mod:`.views`, :mod:`.arithmetic`, :mod:`.products`,
:mod:`.reductions`, :mod:`.attention`, :mod:`.masks`, :mod:`.constructors`, :mod:`.convolutions`
and :mod:`.einops`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any, Protocol

from shapecheck.analysis.dims import Dim, broadcast, provably_different
from shapecheck.analysis.facts import (
    DtypeOf,
    Fact,
    IntFact,
    ModuleFact,
    PrefixedSizes,
    QualifiedName,
    ScalarFact,
    ShapePrefix,
    SizeFact,
    TensorFact,
    Text,
    TupleFact,
    Unknown,
    as_float,
)
from shapecheck.analysis.layout import Layout
from shapecheck.analysis.observations import Observation
from shapecheck.record import record


class OpContext(Protocol):
    """What a transfer function may ask of the interpreter."""

    def observe(self, observation: Observation) -> None: ...

    @property
    def precision_aware(self) -> bool:
        """Inside a branch that tests for float16: the code chooses its fills per dtype."""
        ...

    def size(self, fact: Fact, node: ast.expr) -> Dim | None:
        """``fact`` used as a tensor size (names become stable symbols)."""
        ...

    def learn_rank(self, key: str, rank: int, guess: str | None) -> TensorFact | None:
        """The tensor bound to ``key``, found by how the code uses it to have ``rank`` axes
        (``guess``: on what assumption); ``None`` if its rank was known or it is no tensor."""
        ...


Argument = tuple[Fact, ast.expr]


@record
class OpCall:
    """One call of an op, with the facts of its receiver and arguments."""

    name: str
    node: ast.expr
    anchor: ast.AST
    receiver: TensorFact
    receiver_node: ast.expr | None
    context: OpContext
    args: list[Argument] = field(default_factory=list)
    kwargs: dict[str, Argument] = field(default_factory=dict)
    module: ModuleFact | None = None

    def get(self, index: int | None, keyword: str | None = None) -> Argument | None:
        if keyword is not None and keyword in self.kwargs:
            return self.kwargs[keyword]
        if index is not None and index < len(self.args):
            return self.args[index]
        return None

    def int_arg(self, index: int | None, keyword: str | None = None) -> int | None:
        argument = self.get(index, keyword)
        if argument is not None and isinstance(argument[0], IntFact):
            return argument[0].dim.value
        return None

    def size_arg(self, index: int | None, keyword: str | None = None) -> Dim | None:
        """The size an argument gives (``None``: not given, ``-1``, or not readable as one)."""
        argument = self.get(index, keyword)
        return self.context.size(*argument) if argument is not None else None

    def tensor_arg(self, index: int | None, keyword: str | None = None) -> TensorFact | None:
        argument = self.get(index, keyword)
        if argument is None:
            return None
        return as_tensor(argument[0])

    def int_list(self, start: int) -> list[int] | None:
        """Integers given as varargs from ``start`` or as one tuple/list there."""
        values = [fact for fact, _ in self.args[start:]]
        if len(values) == 1 and isinstance(values[0], TupleFact | SizeFact):
            values = list(items_of(values[0]))
        ints = [fact.dim.value if isinstance(fact, IntFact) else None for fact in values]
        if not ints or any(value is None for value in ints):
            return None
        return [value for value in ints if value is not None]

    def sizes(self, start: int, stop: int | None = None) -> list[Dim | None] | None:
        """Sizes given as varargs in ``args[start:stop]`` or as one tuple/list/``x.shape``.

        A ``-1`` (or a size the analysis cannot name) is ``None``.
        """
        arguments = self.args[start:stop]
        # sizes spliced from a known shape arrive one by one; anything else has unknown length
        if not arguments or any(
            _is_starred(node) and not isinstance(fact, IntFact) for fact, node in arguments
        ):
            return None
        first_fact, first_node = arguments[0]
        if len(arguments) == 1 and isinstance(first_fact, TupleFact | SizeFact):
            elements = _elements(first_node)
            items = list(items_of(first_fact))
            nodes: list[ast.expr | None] = (
                list(elements) if len(elements) == len(items) else [None] * len(items)
            )
            return [
                self._size(item, item_node) for item, item_node in zip(items, nodes, strict=True)
            ]
        if len(arguments) == 1 and not isinstance(first_fact, IntFact):
            return None  # a lone unknown argument may be a whole shape
        return [self._size(fact, node) for fact, node in arguments]

    def prefixed(self, start: int) -> tuple[ShapePrefix, list[Dim | None]] | None:
        """Sizes written after another tensor's leading sizes of unknown number:
        ``view(*x.shape[:-1], -1, d)`` or ``view(hidden_shape)``."""
        arguments = self.args[start:]
        if len(arguments) == 1 and isinstance(arguments[0][0], PrefixedSizes):
            spliced = arguments[0][0]
            return spliced.prefix, [self._size(item, None) for item in spliced.tail]
        if arguments and isinstance(arguments[0][0], ShapePrefix):
            tail = arguments[1:]
            if any(_is_starred(node) for _, node in tail):
                return None
            return arguments[0][0], [self._size(fact, node) for fact, node in tail]
        return None

    def _size(self, fact: Fact, node: ast.expr | None) -> Dim | None:
        if isinstance(fact, IntFact):
            return None if fact.dim.value == -1 else fact.dim
        if node is None:
            return None
        return self.context.size(fact, node)


def items_of(fact: TupleFact | SizeFact) -> tuple[Fact, ...]:
    """The items of a tuple, or of a shape as sizes."""
    if isinstance(fact, SizeFact):
        return tuple(IntFact(dim) for dim in fact.dims)
    return fact.items


def _elements(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.Tuple | ast.List):
        return [
            element.value if isinstance(element, ast.Starred) else element for element in node.elts
        ]
    return []


def _is_starred(node: ast.expr) -> bool:
    return isinstance(node, ast.Starred)


def as_tensor(fact: Fact) -> TensorFact | None:
    """The fact as a tensor: unknown values might be tensors, known non-tensors are not."""
    if isinstance(fact, TensorFact):
        return fact
    if isinstance(fact, Unknown):
        return TensorFact(scaling=None, unknown_rank=fact)
    return None


Transfer = Callable[[OpCall], Fact]


TENSOR_METHODS: dict[str, Transfer] = {}
"""Tensor method name -> transfer."""


TENSOR_FUNCTIONS: dict[str, Transfer] = {}
"""Qualified function whose first argument is the tensor -> transfer."""


FUNCTIONS: dict[str, Transfer] = {}
"""Qualified function or class (constructors) -> transfer; no receiver."""


MODULE_CALLS: dict[str, Transfer] = {}
"""Module class -> transfer applied when an instance is called on a tensor."""


def tensor_op(*methods: str, functions: Iterable[str] = ()) -> Callable[[Transfer], Transfer]:
    """Register under tensor method names and ``torch.*`` functions taking the tensor first."""

    def register(transfer: Transfer) -> Transfer:
        _registrar(TENSOR_METHODS)(*methods)(transfer)
        return _registrar(TENSOR_FUNCTIONS)(*functions)(transfer)

    return register


def _registrar(table: dict[str, Transfer]) -> Callable[..., Callable[[Transfer], Transfer]]:
    def names(*keys: str) -> Callable[[Transfer], Transfer]:
        def register(transfer: Transfer) -> Transfer:
            for key in keys:
                table[key] = transfer
            return transfer

        return register

    return names


function_op = _registrar(FUNCTIONS)


module_op = _registrar(MODULE_CALLS)


def torch_names(*names: str) -> list[str]:
    return [f"torch.{name}" for name in names]


def functional_names(*names: str) -> list[str]:
    return [f"torch.nn.functional.{name}" for name in names]


def kept_contiguous(receiver: TensorFact, rank: int | None) -> Layout | None:
    """The layout of a view that keeps the memory order of ``receiver`` (with ``rank`` axes
    now): contiguous where the receiver was, unknown otherwise."""
    contiguous = receiver.layout is not None and receiver.layout.is_contiguous
    return Layout.contiguous(rank) if contiguous else None


def broadcast_shapes(
    left: tuple[Dim, ...] | None, right: tuple[Dim, ...] | None
) -> tuple[Dim, ...] | None:
    """The shape of an elementwise op of the two (PyTorch's broadcasting rule). A size known
    on one side only is the result's: the unknown one must be it or 1 (``scores + bias`` of
    ``[1, ?, ?, ?]`` keeps the scores' ``[B, H, L, L]``); so is a named size beside an
    unnamed one, and an unnamed one beside an unknown. Two unnamed sizes, which may be equal
    or not, give their broadcast (``dims.broadcast``: the larger), never a mismatch; so do
    two named ones that may be equal (the batch of the queries and that of the keys, which
    a helper named apart): PyTorch needs them equal or one of them 1."""
    if left is None or right is None:
        return None
    rank = max(len(left), len(right))
    padded_left = (Dim.constant(1),) * (rank - len(left)) + left
    padded_right = (Dim.constant(1),) * (rank - len(right)) + right
    shape = []
    for a, b in zip(padded_left, padded_right, strict=True):
        if a == b or b.value == 1 or (_known(b) < _known(a) and a.value != 1):
            shape.append(a)
        elif a.value == 1 or _known(a) < _known(b):
            shape.append(b)
        elif _known(a) == _known(b) > 0 and not provably_different(a, b):
            shape.append(broadcast(a, b))
        else:
            shape.append(Dim.symbol("?"))
    return tuple(shape)


def _known(size: Dim) -> int:
    """How a size relates to others: unknown (0), unnamed (1: only to itself), named (2)."""
    return 0 if size.has_unknown else 1 if size.unrelated else 2


def new_tensor(
    shape: tuple[Dim, ...] | None,
    origin: ast.AST,
    *inputs: TensorFact | None,
    **facts: Any,
) -> TensorFact:
    """A freshly allocated tensor (contiguous unless ``facts`` says) computed from ``inputs``
    (uncertain, or resting on a guess, where one of them is), with ``facts`` about its
    values."""
    facts.setdefault("layout", Layout.contiguous(None if shape is None else len(shape)))
    given = [tensor for tensor in inputs if tensor is not None]
    uncertain = any(tensor.uncertain for tensor in given)
    guess = next((tensor.guess for tensor in given if tensor.guess), None)
    return TensorFact(shape=shape, origin=origin, uncertain=uncertain, guess=guess, **facts)


DTYPES = {
    "torch.float32": "float32",
    "torch.float": "float32",
    "torch.float16": "float16",
    "torch.half": "float16",
    "torch.bfloat16": "bfloat16",
    "torch.float64": "float64",
    "torch.double": "float64",
    "torch.bool": "bool",
    "torch.int64": "int64",
    "torch.long": "int64",
    "torch.int32": "int32",
    "torch.int": "int32",
}


def written_dtype(fact: Fact) -> str | None:
    """The dtype a ``dtype`` argument names: ``torch.float16``, or ``x.dtype``'s (``None``:
    the model's, or one the analysis cannot read)."""
    if isinstance(fact, QualifiedName):
        return DTYPES.get(fact.name)
    return fact.dtype if isinstance(fact, DtypeOf) else None


def dtype_owner(node: ast.expr) -> ast.expr | None:
    """The tensor a dtype argument is read off: ``x`` for ``x.dtype``; ``None`` otherwise."""
    return node.value if isinstance(node, ast.Attribute) and node.attr == "dtype" else None


LOW_PRECISION = ("float16", "bfloat16")
"""16-bit floats: 8 (bfloat16) or 11 (float16) bits of mantissa."""


def string_literal(node: ast.expr) -> str | None:
    """The text of a string literal (``"head_dim"``, an einsum equation), else ``None``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def texts(argument: Argument | None) -> tuple[str, ...]:
    """The strings an argument may be (an einsum equation, an einops pattern): a literal, a
    name chosen between literals, an f-string of such names, a helper's parameter handed
    one (x-transformers' ``pack_one(t, pattern)``); none where the analysis cannot tell."""
    if argument is not None and isinstance(argument[0], Text):
        return argument[0].values
    return ()


def text(argument: Argument | None) -> str | None:
    """The one string an argument is (``None``: not one the analysis knows)."""
    given = texts(argument)
    return given[0] if len(given) == 1 else None


def number(fact: Fact) -> float | None:
    if isinstance(fact, ScalarFact):
        return fact.value
    if isinstance(fact, IntFact):
        return as_float(fact.dim.value) if fact.dim.value is not None else None
    return None


# the families register their transfers when imported
from shapecheck.analysis.ops import (  # noqa: E402
    arithmetic,
    attention,
    axes,
    constructors,
    convolutions,
    einops,
    masks,
    products,
    reductions,
    views,
)

__all__ = [
    "arithmetic",
    "attention",
    "axes",
    "constructors",
    "convolutions",
    "einops",
    "masks",
    "products",
    "reductions",
    "views",
]
