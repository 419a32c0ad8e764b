"""What the uses of a tensor show of its rank, and when a function is read again for them.

A parameter's rank is rarely declared; the code shows it where it uses the tensor, and not
always first: ``B, N, C = x.shape`` may come after ``self.qkv(x)``. Some uses fix the rank
(PyTorch raises otherwise): unpacking ``x.shape`` or ``x.size()`` (also ``b, n, h = *x.shape,
heads`` and ``n, d = x.shape[1:]``), ``bmm`` and ``baddbmm`` (3-D), ``mm`` and ``addmm`` (2-D),
``permute`` (one index per axis), a view into products of its own sizes (``x.view(x.size(0),
x.size(1) * x.size(2))``), an einsum equation or einops pattern without ``...``, ``gather``'s
input and index (each has the other's rank), and handing the
tensor to a function of the module whose uses fix the rank of that parameter. Others bound it
from below only: ``x.transpose(2, 3)``, ``x.size(3)``, ``x.shape[-3]``, ``x[:, :, 0]``. A use as
a size (one of a view's several sizes, ``torch.zeros(n)``, an einops axis length) shows an int,
which the parameter is from there on (a 0-d tensor would serve as one too). Four are guesses,
which every finding resting on them states ("assuming ..."): a bound of :data:`LIKELY_FROM` axes
or more is taken as the rank, a factor of a matrix product takes the rank of the other where
that is a batch of matrices (:func:`partner_uses`), a term added to 4-D attention scores
(a mask, a bias; SDPA's ``attn_mask``) takes theirs (:func:`addend_uses`), and one side of a
choice (``a if test else b``) takes the other's (:func:`alternative_uses`).

The interpreter notes each such use of a parameter that still holds what was passed in (the
very fact it started from, learned further: a name bound again, or a tensor changed in place,
holds another) and learns the rank on the spot where a use fixes or guesses it, so the code
after it knows (of any name: ``attn.transpose(2, 3)`` of a local too). A size no unpacking
names is the tensor's own, unnamed (``Dim.unnamed``: ``x.shape[1]``, which reading
``x.shape[1]`` again gives): known and equal to itself, but of unknown relation to any other
size, since rules take two named sizes for two different ones; an unpacking later names
that very size.
:meth:`ParameterUses.rank` decides what all the uses show: the one rank those that fix it
agree on, at least every lower bound. Nothing is decided for a parameter whose uses disagree
(two ranks on two branches), nor for one whose rank the code asks for itself (``x.ndim``,
``x.dim()``, ``len(x.shape)``: it takes several ranks by design).

Where a parameter was read before its rank was learned (in an earlier statement, on another
branch), the function is interpreted once more with the rank known from the start
(:meth:`ParameterUses.read_again`). There is no walk of the body for this: the uses are the
ones the interpretation meets anyway, and a function is interpreted at most twice.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from shapecheck.analysis.dims import Dim, Symbol
from shapecheck.analysis.facts import Fact, IntFact, SizeFact, TensorFact, Text, TupleFact
from shapecheck.analysis.imports import dotted_name
from shapecheck.analysis.ops.einops import parse_side
from shapecheck.analysis.ops.products import einsum_operands
from shapecheck.record import record

LIKELY_FROM = 4
"""The fewest axes a lower bound must reach to be taken as the rank, on a guess. A use of the
fourth axis (``k.transpose(2, 3)``, ``x.size(3)``) is the mark of attention's 4-D tensors
(``[batch, heads, seq, head_dim]``), which have exactly four; a bound of three or less says
little (``transpose(1, 2)`` is as common on a 3-D ``[batch, seq, features]`` tensor as on a
4-D one), and is no guess."""


@record
class Evidence:
    """What one use of a tensor shows of its rank."""

    rank: int
    exact: bool
    """The use requires ``rank`` axes; otherwise it allows ``rank`` or more."""
    guess: str | None = None
    """For a rank that rests on a guess (the other factor's of a product, one a function of
    the module guesses): what it rests on."""
    sizes: tuple[str | None, ...] = ()
    """For ``B, N, C = x.shape``: the name each axis's size is bound to (``None``: none)."""
    shown: str = ""
    """For a lower bound: the use, as messages quote it (``x.transpose(2, 3)``)."""
    as_size: bool = False
    """A use as a size (``x.view(b, n, heads, -1)``, ``torch.zeros(n)``): rank 0, an int."""


def fixed(rank: int, sizes: tuple[str | None, ...] = ()) -> Evidence:
    return Evidence(rank, exact=True, sizes=sizes)


SIZE_USE = Evidence(0, exact=True, as_size=True)


def at_least(rank: int, shown: str) -> Evidence:
    return Evidence(rank, exact=False, shown=shown)


@record
class RankByUse:
    """A tensor's rank as its uses show it."""

    rank: int
    guess: str | None = None
    """What it rests on where no use fixes it, as messages say it (``TensorFact.guess``)."""
    sizes: tuple[str | None, ...] = ()
    """The names an unpacking gives its sizes (empty where none does)."""
    last: Dim | None = None
    """The last axis's size, where the linear layers it is handed to say it."""
    as_size: bool = False
    """Used as a size: an int (or a 0-d tensor, which PyTorch takes as one)."""


def decide(name: str, uses: list[Evidence]) -> RankByUse | None:
    """The rank the uses of ``name`` show: the one rank the uses that fix it agree on (those
    resting on a guess count where no other fixes one), at least every lower bound; else a
    lower bound of :data:`LIKELY_FROM` or more, on a guess. ``None`` where they disagree."""
    certain = {use.rank for use in uses if use.exact and use.guess is None}
    guessed = {use.rank: use.guess for use in uses if use.exact and use.guess is not None}
    bound = max((use for use in uses if not use.exact), key=lambda use: use.rank, default=None)
    fewest = bound.rank if bound is not None else 0
    ranks = certain or set(guessed)
    if len(ranks) == 1:
        [rank] = ranks
        if rank < fewest:
            return None
        sizes = next((use.sizes for use in uses if use.rank == rank and use.sizes), ())
        as_size = rank == 0 and any(use.as_size for use in uses)
        return RankByUse(rank, None if certain else guessed[rank], sizes, as_size=as_size)
    if not ranks and bound is not None and bound.rank >= LIKELY_FROM:
        return RankByUse(
            bound.rank, f"`{name}` has {bound.rank} axes, the fewest `{bound.shown}` allows"
        )
    return None


@dataclass
class ParameterUses:
    """What one interpretation of a function met of its parameters of unknown rank."""

    shown: dict[str, list[Evidence]] = field(default_factory=dict)
    asked: set[str] = field(default_factory=set)
    """Parameters whose rank the code asks for (``x.ndim``): it takes several."""
    first_read: dict[str, ast.stmt | None] = field(default_factory=dict)
    """Where each was first read while its rank was unknown."""
    read_elsewhere: set[str] = field(default_factory=set)
    """Those read so in more than one statement."""
    learned_at: dict[str, ast.stmt | None] = field(default_factory=dict)
    """Where each was first learned a rank."""

    def note(self, name: str, evidence: Evidence) -> None:
        self.shown.setdefault(name, []).append(evidence)

    def read(self, name: str, statement: ast.stmt | None) -> None:
        first = self.first_read.setdefault(name, statement)
        if first is not statement:
            self.read_elsewhere.add(name)

    def learned(self, name: str, statement: ast.stmt | None) -> None:
        self.learned_at.setdefault(name, statement)

    def rank(self, name: str) -> RankByUse | None:
        """The rank the uses of parameter ``name`` show, if they agree on one."""
        uses = self.shown.get(name)
        if not uses or name in self.asked:
            return None
        return decide(name, uses)

    def read_again(self, learned: Mapping[str, set[int]]) -> dict[str, RankByUse]:
        """The parameters to know from the start when the function is read again: those
        read while their rank was unknown in another statement than the one that showed it,
        or learned another rank (``learned``: the ranks each was given) than all their uses
        show."""
        again: dict[str, RankByUse] = {}
        for name, first in self.first_read.items():
            shown = self.rank(name)
            if shown is None:
                continue
            late = name in self.read_elsewhere or self.learned_at.get(name, first) is not first
            # (a size is learned as an int, which holds no rank)
            if late or (not shown.as_size and learned.get(name, set()) != {shown.rank}):
                again[name] = shown
        return again


# --- what a use shows ---------------------------------------------------------------------

_FIXED_RANK_OPERANDS: dict[str, tuple[int, tuple[tuple[int, str], ...]]] = {
    "torch.bmm": (3, ((0, "input"), (1, "mat2"))),
    "torch.baddbmm": (3, ((1, "batch1"), (2, "batch2"))),
    "torch.mm": (2, ((0, "input"), (1, "mat2"))),
    "torch.addmm": (2, ((1, "mat1"), (2, "mat2"))),
}
"""Functions whose operands (by position, or keyword) have exactly this rank."""

_FIXED_RANK_METHODS: dict[str, tuple[int, bool, tuple[tuple[int, str], ...]]] = {
    "bmm": (3, True, ((0, "mat2"),)),
    "baddbmm": (3, False, ((0, "batch1"), (1, "batch2"))),
    "mm": (2, True, ((0, "mat2"),)),
    "addmm": (2, False, ((0, "mat1"), (1, "mat2"))),
}
"""Tensor methods: the rank, whether the receiver has it too, and the operands that do."""

_SWAPS = frozenset({"transpose", "swapaxes", "swapdims", "movedim", "moveaxis"})

RANK_QUERIES = frozenset({"dim", "ndimension"})
"""Tensor methods that ask the rank."""

SHOWING_METHODS = frozenset(
    {
        "size",
        "permute",
        "view",
        "reshape",
        "matmul",
        "gather",
        *_SWAPS,
        *_FIXED_RANK_METHODS,
        *RANK_QUERIES,
    }
)
"""Tensor methods whose calls may show something of a rank (the others are not looked at)."""

SHOWING_FUNCTIONS = frozenset(
    {
        *_FIXED_RANK_OPERANDS,
        "torch.transpose",
        "torch.swapaxes",
        "torch.swapdims",
        "torch.permute",
        "torch.einsum",
        "torch.matmul",
        "torch.gather",
        "torch.nn.functional.scaled_dot_product_attention",
        "einops.einsum",
        "einops.rearrange",
        "einops.repeat",
        "einops.reduce",
        "builtins.len",
    }
)
"""Functions whose calls may show something of a rank."""

Argument = tuple[Fact, ast.expr]


def method_uses(
    receiver: str, method: str, args: list[Argument], kwargs: Mapping[str, Argument]
) -> Iterator[tuple[Argument | None, Evidence]]:
    """What ``receiver.<method>(...)`` shows of the ranks of its tensors: ``None`` stands for
    the receiver."""
    if method == "size":
        axis = _int(args, kwargs, 0, "dim")
        if axis is not None:
            yield None, at_least(_axes_for(axis), f"{receiver}.size({axis})")
    elif method in _SWAPS:
        first, second = _int(args, kwargs, 0, "dim0"), _int(args, kwargs, 1, "dim1")
        if first is not None and second is not None and len(args) <= 2:
            fewest = max(_axes_for(first), _axes_for(second))
            yield None, at_least(fewest, f"{receiver}.{method}({first}, {second})")
    elif method == "permute":
        axes = _axes_listed(args)
        if axes is not None:
            yield None, fixed(axes)
    elif method in ("view", "reshape"):
        rank = _own_sizes(receiver, args)
        if rank is not None:
            yield None, fixed(rank)
    elif method in _FIXED_RANK_METHODS:
        rank, receiver_too, operands = _FIXED_RANK_METHODS[method]
        if receiver_too:
            yield None, fixed(rank)
        for index, keyword in operands:
            operand = _passed(args, kwargs, index, keyword)
            if operand is not None:
                yield operand, fixed(rank)


def function_uses(
    name: str, args: list[Argument], kwargs: Mapping[str, Argument]
) -> Iterator[tuple[Argument, Evidence]]:
    """What a call of the function ``name`` (qualified) shows of the ranks of its tensors."""
    if name in _FIXED_RANK_OPERANDS:
        rank, operands = _FIXED_RANK_OPERANDS[name]
        for index, keyword in operands:
            operand = _passed(args, kwargs, index, keyword)
            if operand is not None:
                yield operand, fixed(rank)
    elif name in ("torch.transpose", "torch.swapaxes", "torch.swapdims", "torch.permute"):
        tensor = _passed(args, kwargs, 0, "input")
        written = tensor[1].id if tensor is not None and isinstance(tensor[1], ast.Name) else None
        if tensor is not None and written is not None:
            for _, evidence in method_uses(written, name[6:], args[1:], {}):
                yield tensor, evidence
    elif name == "torch.einsum" and args:
        yield from _equation(args[0], einsum_operands(args[1:]), letters=True)
    elif name == "einops.einsum" and args:
        yield from _equation(args[-1], args[:-1], letters=False)
    elif name == "torch.nn.functional.scaled_dot_product_attention":
        # the mask is added to the scores, which have the queries' rank (more axes raise)
        query, mask = _passed(args, kwargs, 0, "query"), _passed(args, kwargs, 3, "attn_mask")
        axes = query[0].rank if query is not None and isinstance(query[0], TensorFact) else None
        added = _added_to_scores(dotted_name(mask[1]), axes) if mask is not None else None
        if mask is not None and added is not None:
            yield mask, added
    elif name in ("einops.rearrange", "einops.repeat", "einops.reduce"):
        tensor, pattern = _passed(args, kwargs, 0, "tensor"), _passed(args, kwargs, 1, "pattern")
        # a pattern that may be one of several strings: the rank all of them give
        inputs = {_input_axes(written) for written in _strings(pattern)}
        if tensor is not None and len(inputs) == 1 and (axes := inputs.pop()) is not None:
            yield tensor, fixed(axes)


def partner_uses(name: str | None, partner: Fact) -> Evidence | None:
    """A factor of a matrix product whose other factor is a batch of matrices (three axes or
    more) has its rank, on a guess: the batched products of attention pair equal ranks
    (``[batch, heads, seq, d]`` on both sides); beside a matrix, any rank goes."""
    rank = partner.rank if isinstance(partner, TensorFact) else None
    if name is None or rank is None or rank < 3:
        return None
    guess = f"`{name}` has {rank} axes, as the other factor of its matrix product does"
    return Evidence(rank, exact=True, guess=guess)


def alternative_uses(name: str | None, partner: Fact) -> Evidence | None:
    """A value that stands in for a tensor of known rank on the other branch of a choice
    (``current_states = key_value_states if is_cross_attention else hidden_states``) has its
    rank, on a guess: the code after the choice reads either one the same way (the encoder's
    states of cross-attention are ``[batch, seq, features]`` as the decoder's are)."""
    rank = partner.rank if isinstance(partner, TensorFact) else None
    if name is None or rank is None:
        return None
    guess = f"`{name}` has {rank} axes, as the tensor it stands in for on the other branch does"
    return Evidence(rank, exact=True, guess=guess)


def gathered(
    args: list[Argument], kwargs: Mapping[str, Argument], receiver: Argument | None
) -> tuple[Argument, Argument] | None:
    """The input and the index of ``x.gather(dim, index)`` (``receiver``: ``x``) or
    ``torch.gather(x, dim, index)``."""
    source = receiver or _passed(args, kwargs, 0, "input")
    index = _passed(args, kwargs, 1 if receiver else 2, "index")
    return (source, index) if source is not None and index is not None else None


def gathered_uses(name: str | None, partner: Fact) -> Evidence | None:
    """The input of ``gather`` and its index have the same rank (PyTorch raises otherwise):
    each has the other's, where that is known."""
    rank = partner.rank if isinstance(partner, TensorFact) else None
    return fixed(rank) if name is not None and rank is not None else None


def addend_uses(name: str | None, partner: Fact) -> Evidence | None:
    """A term added to attention scores of :data:`LIKELY_FROM` axes or more (``scores +
    attention_mask``, a position bias) has their rank, on a guess: it has at most theirs (more
    would grow the scores past what the softmax and the values expect), and by convention
    exactly (Hugging Face's masks are ``[batch, 1, q, k]``, its biases ``[1, heads, q, k]``);
    a causal ``[q, k]`` broadcast over batch and heads is the exception a finding's "assuming"
    names."""
    rank = partner.rank if isinstance(partner, TensorFact) and partner.is_scores else None
    return _added_to_scores(name, rank)


def _added_to_scores(name: str | None, rank: int | None) -> Evidence | None:
    """A mask or bias added to attention scores of ``rank`` axes has as many, on a guess
    (:func:`addend_uses`)."""
    if name is None or rank is None or rank < LIKELY_FROM:
        return None
    guess = f"`{name}` has {rank} axes, as the attention scores it is added to do"
    return Evidence(rank, exact=True, guess=guess)


def index_uses(name: str, node: ast.Subscript) -> Evidence | None:
    """``x[:, :, 0]``: at least as many axes as it indexes (a string key: no tensor)."""
    index = node.slice
    pieces = index.elts if isinstance(index, ast.Tuple) else [index]
    if any(isinstance(piece, ast.Constant) and isinstance(piece.value, str) for piece in pieces):
        return None
    indexed = sum(
        not (isinstance(piece, ast.Constant) and piece.value in (None, Ellipsis))
        for piece in pieces
    )
    written = ", ".join(_piece(piece) for piece in pieces)
    return at_least(indexed, f"{name}[{written}]")


def shape_index_uses(name: str, axis: int) -> Evidence:
    """``x.shape[3]``: at least four axes; ``x.shape[-3]``: at least three."""
    return at_least(_axes_for(axis), f"{name}.shape[{axis}]")


def unpacking_uses(target: ast.expr, value: ast.expr) -> tuple[ast.expr, Evidence] | None:
    """``B, N, C = x.shape`` (or ``x.size()``): exactly as many axes as names, with a starred
    name at least the others; ``b, n, h = *x.shape, self.heads``: as many as the names the
    other values leave. The tensor's node, and what it shows."""
    if not isinstance(target, ast.Tuple | ast.List):
        return None
    names = target.elts
    starred = sum(isinstance(name, ast.Starred) for name in names)
    if isinstance(value, ast.Subscript):
        return None if starred else _tail_unpacking(names, value)
    owner = shape_owner(value)
    if owner is not None and starred:
        return owner, at_least(len(names) - starred, "unpacking its shape")
    if owner is not None:
        return owner, fixed(len(names), tuple(map(size_name, names)))
    if not isinstance(value, ast.Tuple | ast.List) or starred:
        return None
    spliced = [element for element in value.elts if isinstance(element, ast.Starred)]
    owner = shape_owner(spliced[0].value) if len(spliced) == 1 else None
    rank = len(names) - (len(value.elts) - 1)
    if owner is None or rank < 0:
        return None
    start = value.elts.index(spliced[0])
    return owner, fixed(rank, tuple(map(size_name, names[start : start + rank])))


def _tail_unpacking(
    names: list[ast.expr], value: ast.Subscript
) -> tuple[ast.expr, Evidence] | None:
    """``S, D = x.shape[1:]`` or ``B, L = x.shape[:-1]``: as many axes as the names and the
    ones the slice skips at either end (Python raises otherwise), the names naming those in
    between."""
    window = value.slice
    owner = shape_owner(value.value)
    if owner is None or not isinstance(window, ast.Slice) or window.step:
        return None
    front = literal_int(window.lower) if window.lower else 0
    stop = literal_int(window.upper) if window.upper else None
    if front is None or front < 0 or (window.upper and (stop is None or stop >= 0)):
        return None  # (a stop counted from the front: ``x.shape[:2]`` has at least two axes)
    back = -stop if stop is not None else 0
    rank = front + len(names) + back
    return owner, fixed(rank, (None,) * front + tuple(map(size_name, names)) + (None,) * back)


def literal_int(node: ast.expr) -> int | None:
    """An integer literal (a slice bound, an index), ``-1`` included."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return sign * node.value
    return None


def rank_tests(test: ast.expr) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """What a condition says of ranks, where it holds and where it does not: ``x.ndim == 3``
    (``x.dim()``, ``x.ndimension()``, ``len(x.shape)``, ``len(x.size())``, each test an
    ``and`` joins) gives ``x`` three axes where it holds, ``x.ndim != 3`` where it does not.
    Each entry: the tensor's name and its rank."""
    conditions = (
        test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    )
    holds: list[tuple[str, int]] = []
    fails: list[tuple[str, int]] = []
    for condition in conditions:
        if not isinstance(condition, ast.Compare) or len(condition.ops) != 1:
            continue
        operator, (left, right) = condition.ops[0], (condition.left, condition.comparators[0])
        if _rank_of(left) is None:
            left, right = right, left
        owner = _rank_of(left)
        if owner is None or not isinstance(right, ast.Constant) or type(right.value) is not int:
            continue
        rank = right.value
        if isinstance(operator, ast.Eq):
            holds.append((owner, rank))
        elif isinstance(operator, ast.NotEq) and len(conditions) == 1:
            fails.append((owner, rank))
    return holds, fails


def _rank_of(node: ast.expr) -> str | None:
    """The name whose rank ``node`` asks (``x.ndim``, ``x.dim()``, ``len(x.shape)``)."""
    asked: ast.expr | None = None
    if isinstance(node, ast.Attribute) and node.attr == "ndim":
        asked = node.value
    elif isinstance(node, ast.Call) and not node.keywords:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in RANK_QUERIES and not node.args:
            asked = func.value
        elif isinstance(func, ast.Name) and func.id == "len" and len(node.args) == 1:
            asked = shape_owner(node.args[0])
    return dotted_name(asked) if asked is not None else None


def shape_owner(node: ast.expr) -> ast.expr | None:
    """``x`` in ``x.shape`` or ``x.size()``."""
    if isinstance(node, ast.Attribute) and node.attr == "shape":
        return node.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "size"
        and not node.args
        and not node.keywords
    ):
        return node.func.value
    return None


def _equation(
    equation: Argument, operands: Sequence[Argument], *, letters: bool
) -> Iterator[tuple[Argument, Evidence]]:
    """``einsum("bhid,bhjd->bhij", q, k)``: one letter (einops: one name) per axis. Of an
    equation that may be one of several strings (x-transformers' ``f"b h i d, {kv_eq} -> b
    h i j"``), each operand has the rank every one of them gives it, if they agree."""
    strings = _strings(equation)
    ranks: list[set[int | None]] = [set() for _ in operands]
    for written in strings:
        sides = written.split("->")[0].split(",")
        if "->" not in written or len(sides) != len(operands):
            return
        for side, seen in zip(sides, ranks, strict=True):
            # an ellipsis stands for any number of axes
            axes = len(side.replace(" ", "")) if letters else len(side.split())
            seen.add(None if "." in side else axes)
    for operand, seen in zip(operands, ranks, strict=True):
        if len(seen) == 1 and (rank := seen.pop()) is not None:
            yield operand, fixed(rank)


def _axes_listed(args: list[Argument]) -> int | None:
    """How many axes ``permute(0, 2, 1, 3)`` or ``permute((0, 2, 1, 3))`` names."""
    if any(isinstance(node, ast.Starred) for _, node in args):
        return None  # a spliced tuple of unknown length
    if len(args) == 1:
        fact = args[0][0]
        if isinstance(fact, TupleFact):
            return len(fact.items)
        return len(fact.dims) if isinstance(fact, SizeFact) else None
    return len(args) if len(args) >= 2 else None


def _own_sizes(receiver: str, args: list[Argument]) -> int | None:
    """``x.view(x.size(0), x.size(1) * x.size(2))``: sizes that are products of the tensor's
    own, each axis once and in order from the first: as many axes as they use (a view keeps
    every element; a ``-1`` or another size says nothing)."""
    sizes = [fact for fact, _ in args]
    if len(sizes) == 1 and isinstance(sizes[0], TupleFact):
        sizes = list(sizes[0].items)
    prefix = f"{receiver}.shape["
    used: list[str] = []
    for size in sizes:
        if not isinstance(size, IntFact) or size.dim.coefficient != 1:
            return None
        for atom in size.dim.factors:
            if not isinstance(atom, Symbol) or not atom.name.startswith(prefix):
                return None
            used.append(atom.name.removeprefix(prefix).removesuffix("]"))
    if not used or used != [str(axis) for axis in range(len(used))]:
        return None
    return len(used)


def _passed(
    args: list[Argument], kwargs: Mapping[str, Argument], index: int, keyword: str
) -> Argument | None:
    if keyword in kwargs:
        return kwargs[keyword]
    if any(isinstance(node, ast.Starred) for _, node in args[: index + 1]):
        return None
    return args[index] if index < len(args) else None


def _int(
    args: list[Argument], kwargs: Mapping[str, Argument], index: int, keyword: str
) -> int | None:
    passed = _passed(args, kwargs, index, keyword)
    fact = passed[0] if passed is not None else None
    return fact.dim.value if isinstance(fact, IntFact) else None


def _axes_for(axis: int) -> int:
    """The fewest axes that have ``axis`` (``3``: four; ``-3``: three)."""
    return axis + 1 if axis >= 0 else -axis


def size_name(target: ast.expr) -> str | None:
    """The name an unpacking binds a size to (``_`` names none)."""
    if isinstance(target, ast.Name) and target.id != "_":
        return target.id
    return None


def _piece(piece: ast.expr) -> str:
    """One index as a message shows it: ``:``, ``0``, ``None``, ``...``; ``…`` for the rest."""
    if isinstance(piece, ast.Slice) and (piece.lower, piece.upper, piece.step) == (None,) * 3:
        return ":"
    if isinstance(piece, ast.Constant) and (piece.value is None or piece.value is Ellipsis):
        return "..." if piece.value is Ellipsis else "None"
    value = literal_int(piece)
    return str(value) if value is not None else "…"


def _input_axes(pattern: str) -> int | None:
    """How many axes an einops pattern's input has (``None``: no ``->``, or an ellipsis)."""
    groups = parse_side(pattern.split("->")[0]) if "->" in pattern else None
    return len(groups) if groups is not None and ("...",) not in groups else None


def _strings(text: Argument | None) -> tuple[str, ...]:
    """Every string an argument may be (a literal, a name chosen between literals, an
    f-string of such names: a :class:`Text`); none where it is not known."""
    fact = text[0] if text is not None else None
    return fact.values if isinstance(fact, Text) else ()
