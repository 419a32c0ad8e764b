"""Matrix products (``@``, ``matmul``, ``bmm``, ``einsum``) and layers built on them."""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence

from shapecheck.analysis.dims import Dim, provably_different
from shapecheck.analysis.facts import (
    BATCH_NORMS,
    NORMS,
    UNKNOWN,
    Fact,
    PrefixedShape,
    Product,
    ScaleEvidence,
    TensorFact,
    TupleFact,
    scale_of,
)
from shapecheck.analysis.lattice import Family, flow, join
from shapecheck.analysis.observations import (
    LinearWeightProduct,
    MaskAfterSoftmax,
    SameSize,
    SizeMismatch,
)
from shapecheck.analysis.ops import (
    Argument,
    OpCall,
    OpContext,
    as_tensor,
    broadcast_shapes,
    function_op,
    functional_names,
    module_op,
    new_tensor,
    tensor_op,
    texts,
    torch_names,
)
from shapecheck.analysis.ops.arithmetic import scaled
from shapecheck.analysis.ops.views import rely_on_divisions
from shapecheck.record import replace


def matrix_product(
    context: OpContext,
    node: ast.expr,
    left: TensorFact,
    right: TensorFact,
    left_node: ast.expr,
    right_node: ast.expr,
) -> TensorFact:
    """``left @ right`` with PyTorch's batching rules, recording what it contracts."""
    if left.rank == 0 or right.rank == 0:
        return new_tensor(None, node, left, right, scaling=None)  # PyTorch raises
    shape: tuple[Dim, ...] | None = None
    if (
        left.shape is not None
        and right.shape is not None
        and min(len(left.shape), len(right.shape)) >= 2
    ):
        batch = broadcast_shapes(left.shape[:-2], right.shape[:-2])
        if batch is not None:
            shape = (*batch, left.shape[-2], right.shape[-1])
        if provably_different(left.shape[-1], right.shape[-2]):
            context.observe(
                SizeMismatch(node, "matrix product inner axes", left.shape[-1], right.shape[-2])
            )
    scaling = _joint_scaling(left, right)
    key_size = right.shape[-1] if right.shape else None
    product = Product(node, left, right, left_node, right_node, -1, -2, -1, key_size)
    if right.is_linear_weight:
        context.observe(LinearWeightProduct(product))
    if left.masked_weights is not None:
        context.observe(MaskAfterSoftmax(left.masked_weights))
    mixing = left.product
    if left.is_scores and mixing is not None and mixing.key_axis == -2 and right.product is None:
        # talking heads (scores with the heads moved last, times a matrix): the same scores,
        # their heads mixed, over the same keys, still on the next-to-last axis
        product = mixing
    prefixed = _prefixed_product(left, right) if shape is None else None
    return new_tensor(
        shape,
        node,
        left,
        right,
        scaling=scaling,
        product=product,
        prefixed=prefixed,
        known_last=prefixed.tail[-1] if prefixed else None,
    )


def _prefixed_product(left: TensorFact, right: TensorFact) -> PrefixedShape | None:
    """The last axes of ``left @ right`` where an operand is known only by its last axes after
    a prefix (a ``*batch``): both after the same prefix, or one a matrix."""
    first = left.prefixed if left.shape is None else None
    second = right.prefixed if right.shape is None else None
    if first is not None and second is not None:
        if first.prefix != second.prefix or len(first.tail) != len(second.tail):
            return None
        if len(first.tail) < 2:
            return None
        batch = broadcast_shapes(first.tail[:-2], second.tail[:-2]) or ()
        return PrefixedShape(first.prefix, (*batch, first.tail[-2], second.tail[-1]))
    if first is not None and first.tail and right.shape is not None and len(right.shape) == 2:
        return PrefixedShape(first.prefix, (*first.tail[:-1], right.shape[-1]))
    if second is not None and len(second.tail) >= 2 and left.shape and len(left.shape) == 2:
        return PrefixedShape(second.prefix, (*second.tail[:-2], left.shape[-2], second.tail[-1]))
    return None


def _joint_scaling(left: TensorFact, right: TensorFact) -> tuple[ScaleEvidence, ...] | None:
    """A product's scaling: both operands' scalings, where both are known."""
    if left.scaling is None or right.scaling is None:
        return None
    return left.scaling + right.scaling


@tensor_op("matmul", "bmm", "mm", functions=torch_names("matmul", "bmm", "mm"))
def matmul(call: OpCall) -> Fact:
    other = call.get(0, "mat2") or call.get(0, "other")
    if other is None or call.receiver_node is None:
        return UNKNOWN
    right = as_tensor(other[0])
    if right is None:
        return UNKNOWN
    return matrix_product(
        call.context, call.node, call.receiver, right, call.receiver_node, other[1]
    )


@function_op("torch.baddbmm")
def baddbmm(call: OpCall) -> Fact:
    operands = [call.get(1, "batch1"), call.get(2, "batch2")]
    if operands[0] is None or operands[1] is None:
        return TensorFact(origin=call.node, scaling=None)
    left, right = as_tensor(operands[0][0]), as_tensor(operands[1][0])
    if left is None or right is None:
        return TensorFact(origin=call.node, scaling=None)
    result = matrix_product(call.context, call.node, left, right, operands[0][1], operands[1][1])
    alpha = call.get(None, "alpha")
    if alpha is not None:
        scaling = scaled(result, call.node, scale_of(alpha[0]))
        return flow(
            result,
            Family.SCALING,
            origin=call.node,
            scaling=scaling,
            fill=None,
            masked_weights=result.masked_weights,
        )
    return result


@function_op("torch.addmm")
def addmm(call: OpCall) -> Fact:
    """``torch.addmm(bias, x, w)``: ``x @ w + bias``, a layer's projection (GPT-2's
    ``Conv1D`` projects ``[n, in] -> [n, out]`` so), unscaled unless ``alpha`` scales it."""
    rows, columns = call.tensor_arg(1, "mat1"), call.tensor_arg(2, "mat2")
    if rows is None or columns is None:
        return TensorFact(origin=call.node, scaling=None)
    two_d = [tensor.shape for tensor in (rows, columns) if tensor.shape and len(tensor.shape) == 2]
    shape = (two_d[0][0], two_d[1][1]) if len(two_d) == 2 else None
    result = new_tensor(shape, call.node, rows, columns)
    alpha = call.get(None, "alpha")
    if alpha is None:
        return result
    return replace(result, scaling=scaled(result, call.node, scale_of(alpha[0])))


@function_op("torch.einsum")
def einsum(call: OpCall) -> Fact:
    """``torch.einsum("bhid,bhjd->bhij", q, k)``, or with the operands in one list
    (``[q, k]``): one letter per axis, spaces ignored."""
    operands = einsum_operands(call.args[1:])
    if len(operands) != 2:
        return TensorFact(origin=call.node, scaling=None)
    equations = texts(call.get(0, "equation"))
    return contracted(call, equations, operands[0], operands[1], letters=True)


def einsum_operands(after_equation: Sequence[Argument]) -> Sequence[Argument]:
    """The operands of ``torch.einsum``, written apart (``q, k``) or in one list (``[q, k]``)."""
    if len(after_equation) == 1:
        listed, node = after_equation[0]
        elements = node.elts if isinstance(node, ast.List | ast.Tuple) else []
        if isinstance(listed, TupleFact) and len(listed.items) == len(elements):
            return list(zip(listed.items, elements, strict=True))
    return after_equation


EinsumAxes = tuple[list[list[str]], list[str]]
"""The axes of each operand, and of the output."""


def parse_einsum(equation: str, *, letters: bool) -> EinsumAxes | None:
    """``"b h i d, b h j d -> b h i j"`` (einops: names between spaces) or ``"bhid,bhjd->bhij"``
    (torch: one letter each), where ``...`` (one per operand at most) stands for the axes no
    letter names; ``None`` for what the analysis does not follow (no ``->``)."""
    if equation.count("->") != 1:
        return None
    inputs, output = equation.split("->")
    sides = [_einsum_axes(operand, letters=letters) for operand in inputs.split(",")]
    result = _einsum_axes(output, letters=letters)
    if result is None or any(side is None for side in sides):
        return None
    if ELLIPSIS in result and not any(ELLIPSIS in side for side in sides if side is not None):
        return None  # PyTorch raises
    return [side for side in sides if side is not None], result


def _einsum_axes(part: str, *, letters: bool) -> list[str] | None:
    """One side's axes, ``...`` kept as one; ``None`` for stray dots or two ellipses."""
    if letters:
        pieces = part.replace(" ", "").split(ELLIPSIS)
        named = [list(piece) for piece in pieces]
        axes = [*named[0], *(axis for piece in named[1:] for axis in (ELLIPSIS, *piece))]
    else:
        axes = part.split()
    named_axes = [axis for axis in axes if axis != ELLIPSIS]
    if len(axes) - len(named_axes) > 1 or any("." in axis for axis in named_axes):
        return None
    return axes


ELLIPSIS = "..."


def contracted(
    call: OpCall, equations: Sequence[str], first: Argument, second: Argument, *, letters: bool
) -> Fact:
    """Two operands contracted by one of ``equations``: an equation chosen between literals
    (x-transformers' keys of 3 or 4 axes) is each one the operands' known ranks allow, and
    what they share; sizes that disagree are reported only where one equation is left."""
    parsed = [parse_einsum(equation, letters=letters) for equation in equations]
    given = as_tensor(first[0]), as_tensor(second[0])
    readings = [
        (axes, operands)
        for axes in parsed
        if axes is not None and (operands := _operands_as(axes, *given)) is not None
    ]
    if not parsed or None in parsed or not readings:
        return TensorFact(origin=call.node, scaling=None)  # unreadable, or PyTorch raises
    sure = len(readings) == 1
    results: list[Fact] = [
        contraction(call, _spelled_out(axes, operands), operands, (first[1], second[1]), sure=sure)
        for axes, operands in readings
    ]
    return functools.reduce(join, results)


def _operands_as(
    parsed: EinsumAxes, left: TensorFact | None, right: TensorFact | None
) -> tuple[TensorFact, TensorFact] | None:
    """The two operands as the equation reads them; ``None`` where it names another number
    of operands, or an operand's rank is known to be another (PyTorch raises)."""
    operands, _ = parsed
    if len(operands) != 2 or left is None or right is None:
        return None
    left, right = _read_as(left, operands[0]), _read_as(right, operands[1])
    return (left, right) if left is not None and right is not None else None


def _spelled_out(parsed: EinsumAxes, operands: tuple[TensorFact, TensorFact]) -> EinsumAxes:
    """The equation with each ``...`` replaced by a name for every axis it covers, where the
    operands' ranks tell how many: named from the ellipsis's end (``...1``, ``...0``), as
    PyTorch lines them up to broadcast; the output's covers the longer. Unchanged while an
    operand's ellipsis covers an unknown number."""
    sides, output = parsed
    if not any(ELLIPSIS in letters for letters in sides):
        return parsed
    spans: list[int] = []  # how many axes each operand's ellipsis covers
    for letters, tensor in zip(sides, operands, strict=True):
        if ELLIPSIS not in letters:
            spans.append(0)
        elif tensor.rank is None:
            return parsed
        else:
            spans.append(tensor.rank - len(letters) + 1)

    def spelled(letters: list[str], span: int) -> list[str]:
        if ELLIPSIS not in letters:
            return letters
        at = letters.index(ELLIPSIS)
        covered = [f"{ELLIPSIS}{axis}" for axis in reversed(range(span))]
        return [*letters[:at], *covered, *letters[at + 1 :]]

    spelled_sides = [spelled(letters, span) for letters, span in zip(sides, spans, strict=True)]
    return spelled_sides, spelled(output, max(spans))


def _letter_sizes(letters: list[str], shape: tuple[Dim, ...]) -> list[tuple[str, Dim]]:
    """Each letter with the size of its axis; the axes an ellipsis still covers have none."""
    if ELLIPSIS not in letters:
        return list(zip(letters, shape, strict=True))
    at = letters.index(ELLIPSIS)
    after = len(letters) - at - 1
    before = zip(letters[:at], shape[:at], strict=True)
    return [*before, *zip(letters[at + 1 :], shape[len(shape) - after :], strict=True)]


def _position(letters: list[str], letter: str) -> int:
    """Where ``letter``'s axis is: counted from the front before an ellipsis that covers an
    unknown number of axes, from the end after it."""
    at = letters.index(letter)
    if ELLIPSIS in letters and at > letters.index(ELLIPSIS):
        return at - len(letters)
    return at


def contraction(
    call: OpCall,
    parsed: EinsumAxes,
    operands: tuple[TensorFact, TensorFact],
    nodes: tuple[ast.expr, ast.expr],
    *,
    sure: bool,
) -> TensorFact:
    """Two operands contracted as an einsum equation says (``sure``: the one equation the
    code may run); a product of attention scores where one axis is summed over."""
    (left_letters, right_letters), output = parsed
    left, right = operands
    contracted = [
        letter for letter in left_letters if letter in right_letters and letter not in output
    ]
    letter_sizes: dict[str, Dim] = {}
    for letters, tensor in ((left_letters, left), (right_letters, right)):
        if tensor.shape is not None:
            for letter, dim in _letter_sizes(letters, tensor.shape):
                seen = letter_sizes.setdefault(letter, dim)
                if letter.startswith(ELLIPSIS):  # the axes of an ellipsis broadcast
                    letter_sizes[letter] = (broadcast_shapes((seen,), (dim,)) or (dim,))[0]
                elif sure and provably_different(seen, dim):
                    what = f"einsum axis `{letter}` of both operands"
                    call.context.observe(SizeMismatch(call.node, what, seen, dim))
    shape: tuple[Dim, ...] | None = None
    known_last = None
    if ELLIPSIS not in output:
        shape = tuple(letter_sizes.get(letter, Dim.symbol("?")) for letter in output)
    elif output[-1] != ELLIPSIS:
        known_last = letter_sizes.get(output[-1])
    scaling = _joint_scaling(left, right)
    if len(contracted) != 1:
        return new_tensor(shape, call.node, left, right, scaling=scaling, known_last=known_last)
    mixed = _mixed_scores((left, left_letters), (right, right_letters), output, contracted[0])
    if mixed is not None:  # talking heads: still the same scores, over the same keys
        return new_tensor(shape, call.node, left, right, scaling=scaling, product=mixed)
    letter = contracted[0]
    key_letters = [
        key
        for key in right_letters
        if key not in left_letters and key in output and not key.startswith(ELLIPSIS)
    ]  # (an axis only the keys' longer ellipsis covers is a batch the queries broadcast over)
    key_axis, key_size = -1, None
    if len(key_letters) == 1:
        key_axis = _position(output, key_letters[0])
        if ELLIPSIS not in output:
            key_axis -= len(output)
        key_size = letter_sizes.get(key_letters[0]) if shape is None else shape[key_axis]
    if left.masked_weights is not None:
        call.context.observe(MaskAfterSoftmax(left.masked_weights))
    product = Product(
        call.node,
        left,
        right,
        *nodes,
        _position(left_letters, letter),
        _position(right_letters, letter),
        key_axis,
        key_size,
    )
    return new_tensor(
        shape, call.node, left, right, scaling=scaling, product=product, known_last=known_last
    )


def _read_as(tensor: TensorFact, letters: list[str]) -> TensorFact | None:
    """An operand as an einsum reads it, one letter per axis (and any number for ``...``):
    ``None`` where its rank is known to be another (PyTorch raises); a rank guessed, or
    known on some paths only, is forgotten (the letters tell better)."""
    named = len(letters) - (ELLIPSIS in letters)
    rank = tensor.rank
    if rank is None or rank == named or (ELLIPSIS in letters and rank > named):
        return tensor
    if tensor.guess or tensor.uncertain:
        return replace(tensor, shape=None, layout=None)
    return None


def _mixed_scores(
    left: tuple[TensorFact, list[str]],
    right: tuple[TensorFact, list[str]],
    output: list[str],
    contracted: str,
) -> Product | None:
    """Attention scores whose heads a learned matrix mixes (``'b h i j, h g -> b g i j'``):
    the product is still q·kᵀ, and its key axis is where the output puts the keys' letter."""
    for (scores, letters), (other, _) in ((left, right), (right, left)):
        product = scores.product
        if not scores.is_scores or product is None or other.product is not None:
            continue
        if ELLIPSIS in letters or ELLIPSIS in output:
            continue  # axes counted from the end, which an ellipsis leaves unknown
        if not -len(letters) <= product.key_axis < 0:
            continue
        keys = letters[product.key_axis]
        if keys != contracted and keys in output:
            return replace(product, key_axis=output.index(keys) - len(output))
    return None


@tensor_op(functions=torch_names("cdist"))
def pairwise_distance(call: OpCall) -> Fact:
    """``torch.cdist(x1, x2)``: ``[*B, P, M]`` and ``[*B, R, M]`` give ``[*B, P, R]``, a
    distance between each row of one and each of the other."""
    left, right = call.receiver, call.tensor_arg(0, "x2")
    if left.shape is None or len(left.shape) < 2:
        return new_tensor(None, call.node, left, right)
    rows = Dim.symbol("?")
    if right is not None and right.shape is not None and len(right.shape) >= 2:
        rows = right.shape[-2]
    return new_tensor((*left.shape[:-1], rows), call.node, left, right)


@tensor_op(functions=functional_names("linear"))
def linear_function(call: OpCall) -> Fact:
    weight = call.tensor_arg(0, "weight")
    out: Dim | None = None
    if weight is not None and weight.shape is not None and len(weight.shape) == 2:
        out = weight.shape[0]
    return _projected(call, out)


@module_op("torch.nn.Linear")
def linear_module(call: OpCall) -> Fact:
    module = call.module
    width = call.receiver.last_dim
    if module is not None and module.in_features is not None and width is not None:
        if provably_different(module.in_features, width):
            call.context.observe(
                SizeMismatch(call.node, "nn.Linear input width", module.in_features, width)
            )
        rely_on_divisions(call.context, call.node, module.in_features, width)
        if width != module.in_features and isinstance(call.node, ast.Call):
            call.context.observe(SameSize(call.node, width, module.in_features, call.node.func))
    return _projected(call, module.out_features if module else None)


def _projected(call: OpCall, out: Dim | None) -> TensorFact:
    """``[..., in] -> [..., out]`` (only the last axis known when the rank is not). Scores
    whose heads a layer mixes (talking heads: the head axis moved last) stay the scores."""
    receiver = call.receiver
    shape = receiver.shape
    if shape is not None and len(shape) >= 1:
        shape = (*shape[:-1], out if out is not None else Dim.symbol("?"))
    product = receiver.product
    # a permute moved the keys' axis away from the last (CaiT's talking heads mix the heads)
    if receiver.is_scores and product is not None and product.key_axis != -1:
        scaling = scaled(receiver, call.node, None)  # learned weights: a scale of their own
        return new_tensor(shape, call.node, receiver, product=product, scaling=scaling)
    return new_tensor(shape, call.node, receiver, known_last=out, rank_of=receiver.rank_of)


@module_op(*NORMS)
@tensor_op(functions=functional_names("layer_norm", "rms_norm"))
def normalised(call: OpCall) -> Fact:
    """A norm keeps the shape, and its output is unscaled: it has unit variance per element
    whatever scaled its input, and its elementwise gain starts at 1, so q·kᵀ of QK-norm'd
    vectors still grows with d_k and needs 1/sqrt(d_k) (Qwen3, OLMo2, ViT-22B scale after
    it); only unit vectors (``F.normalize``) or a temperature on the scores scale them. A
    batch norm keeps its input's scaling: in eval mode it is an affine map of running
    statistics, which a scale before it passes through."""
    receiver = call.receiver
    scaling = receiver.scaling if call.name in BATCH_NORMS else ()
    return new_tensor(
        receiver.shape, call.node, receiver, scaling=scaling, rank_of=receiver.rank_of
    )


@module_op("torch.nn.Embedding")
def embedding_module(call: OpCall) -> Fact:
    """Token ids ``[...]`` -> vectors ``[..., embedding_dim]``."""
    ids, module = call.receiver.shape, call.module
    width = module.out_features if module and module.out_features else Dim.symbol("?")
    shape = None if ids is None else (*ids, width)
    return new_tensor(shape, call.node, call.receiver, known_last=width)
