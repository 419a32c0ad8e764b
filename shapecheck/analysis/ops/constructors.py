"""Tensors and modules built from nothing: ``torch.zeros``, ``torch.tensor``, ``nn.Linear``."""

from __future__ import annotations

import ast

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    SAME_SHAPE,
    SHAPE_PRESERVING,
    UNKNOWN,
    Choice,
    DtypeOf,
    Fact,
    InstanceFact,
    IntFact,
    ModuleFact,
    NamedFacts,
    Positions,
    QualifiedName,
    RepeatedFact,
    ScalarFact,
    TensorFact,
    TupleFact,
    Unknown,
    scale_of,
)
from shapecheck.analysis.layout import Layout
from shapecheck.analysis.observations import (
    IndivisibleSizes,
)
from shapecheck.analysis.ops import (
    DTYPES,
    LOW_PRECISION,
    OpCall,
    dtype_owner,
    function_op,
    new_tensor,
    tensor_op,
    torch_names,
    written_dtype,
)
from shapecheck.record import replace


@function_op(*torch_names("randn", "rand", "zeros", "ones", "empty", "full"))
def allocate(call: OpCall) -> Fact:
    """``torch.zeros(b, n, d)``: as many axes as sizes are given, a size it cannot read
    (``torch.zeros(len(items), d)``) being ``?``."""
    named = _named_dtype(call)
    if call.get(None, "dtype") is None and call.name != "torch.full":
        named = "float32"  # PyTorch's default dtype (torch.full takes its fill value's)
    return new_tensor(_allocated_shape(call), call.node, dtype=named)


@tensor_op("new_zeros", "new_ones", "new_empty", "new_full")
def allocate_new(call: OpCall) -> Fact:
    """``x.new_zeros(b, n)``: a tensor of the sizes given, of ``x``'s dtype unless another
    is written."""
    return new_tensor(
        _allocated_shape(call), call.node, dtype=_named_dtype(call) or call.receiver.dtype
    )


def _named_dtype(call: OpCall) -> str | None:
    """The dtype a constructor's ``dtype=torch.float16`` names (``None``: none written, or
    not one named so)."""
    dtype = call.get(None, "dtype")
    return DTYPES.get(dtype[0].name) if dtype and isinstance(dtype[0], QualifiedName) else None


def _allocated_shape(call: OpCall) -> tuple[Dim, ...] | None:
    """The sizes a constructor is given (the last argument of ``torch.full`` and
    ``new_full`` is the fill value, unless it is named); ``None``: how many is unknown."""
    full = call.name in ("torch.full", "new_full") and "fill_value" not in call.kwargs
    sizes = call.sizes(0, -1 if full else None)
    if sizes is None:
        return None
    return tuple(Dim.symbol("?") if size is None else size for size in sizes)


@function_op("torch.eye")
def eye(call: OpCall) -> Fact:
    """``torch.eye(n)``, ``torch.eye(n, m)``: ``[n, m]``, square when ``m`` is not given;
    float32 unless a dtype is written (x-transformers' selective attention gates scores with
    ``1. - torch.eye(i)``)."""
    rows = call.get(0, "n")
    columns = call.get(1, "m")
    n = call.context.size(*rows) if rows is not None else None
    m = call.context.size(*columns) if columns is not None else n
    shape = tuple(Dim.symbol("?") if size is None else size for size in (n, m))
    return new_tensor(shape, call.node, dtype=_named_dtype(call) or "float32")


@function_op("torch.tensor")
def tensor_constant(call: OpCall) -> Fact:
    data = call.get(0, "data")
    if data is None or not isinstance(data[0], IntFact | ScalarFact):
        return new_tensor(None, call.node)
    scalar = scale_of(data[0])
    dtype = call.get(None, "dtype")
    # a device, or the dtype of an activation, means the constant is placed on purpose
    on_purpose = call.get(None, "device") is not None or (
        dtype is not None and not isinstance(dtype[0], QualifiedName)
    )
    built_here = isinstance(call.node, ast.Call) and not on_purpose
    return new_tensor((), call.node, scalar=scalar, from_number=call.node if built_here else None)


@function_op("torch.arange")
def arange(call: OpCall) -> Fact:
    """``torch.arange(end)``, ``(start, end[, step])``: positions, one axis. Integers unless
    a dtype or a float bound says otherwise (PyTorch's rule); a 16-bit dtype, or the
    model's (``dtype=self.inv_freq.dtype``), rounds them (see ``facts.Positions``)."""
    bounds = call.args[:3]
    length = call.context.size(*bounds[0]) if len(bounds) == 1 else None
    written = call.get(None, "dtype")
    positions = Positions(call.node)
    if written is None:
        floats = any(isinstance(fact, ScalarFact) for fact, _ in bounds)
        dtype: str | None = "float32" if floats else "int64"
    else:
        dtype = written_dtype(written[0])
        if in_low_precision(written[0]):
            positions = Positions(call.node, call.node, dtype, dtype_owner(written[1]))
    shape = (length if length is not None else Dim.symbol("?"),)
    return new_tensor(shape, call.node, dtype=dtype, positions=positions)


def in_low_precision(fact: Fact) -> bool:
    """A 16-bit dtype written out, or the model's read off a tensor (``self.inv_freq.dtype``,
    which ``model.to(torch.bfloat16)`` makes 16-bit)."""
    if isinstance(fact, DtypeOf):
        return fact.dtype is None or fact.dtype in LOW_PRECISION
    return isinstance(fact, QualifiedName) and DTYPES.get(fact.name) in LOW_PRECISION


@function_op("torch.nn.Buffer")
def buffer(call: OpCall) -> Fact:
    """``self.inv_freq = nn.Buffer(inv_freq)``: the tensor, which now moves and is cast
    with the module (a floating one takes the model's dtype)."""
    data = call.tensor_arg(0, "data")
    if data is None:
        return new_tensor(None, call.node)
    return moved_with_module(data)


def moved_with_module(tensor: TensorFact) -> TensorFact:
    """A tensor the module owns (a buffer): ``.to(device)`` and ``.to(dtype)`` apply to it;
    built once, it is no per-call constant."""
    floating = tensor.dtype not in ("bool", "int64", "int32")
    return replace(tensor, from_number=None, dtype=None if floating else tensor.dtype)


@tensor_op(
    functions=torch_names(
        "randn_like", "rand_like", "zeros_like", "ones_like", "empty_like", "full_like"
    )
)
def allocate_like(call: OpCall) -> Fact:
    return new_tensor(call.receiver.shape, call.node, call.receiver)


@function_op("torch.nn.Parameter")
def parameter(call: OpCall) -> Fact:
    data = call.tensor_arg(0, "data")
    shape = data.shape if data is not None else None
    return TensorFact(
        shape=shape,
        layout=Layout.contiguous(None if shape is None else len(shape)),
        is_parameter=True,
        origin=call.node,
    )


@function_op("torch.nn.Linear")
def linear_constructor(call: OpCall) -> Fact:
    in_features, out_features = call.size_arg(0, "in_features"), call.size_arg(1, "out_features")
    return ModuleFact("torch.nn.Linear", in_features=in_features, out_features=out_features)


@function_op("torch.nn.ModuleList", "torch.nn.ParameterList")
def module_list(call: OpCall) -> Fact:
    """The modules as listed (indexing ``self.linears[0]`` finds the layer)."""
    modules = call.get(0, "modules")
    if modules is not None and isinstance(modules[0], TupleFact | RepeatedFact):
        return modules[0]
    return UNKNOWN


@function_op("torch.nn.ModuleDict")
def module_dict(call: OpCall) -> Fact:
    """The modules by name (``self.transformer.wte`` finds the layer)."""
    modules = call.get(0, "modules")
    if modules is not None and isinstance(modules[0], NamedFacts):
        return replace(modules[0], layers=True)
    return UNKNOWN


@function_op("torch.nn.Sequential")
def sequential(call: OpCall) -> Fact:
    """``nn.Sequential(nn.Linear(d, e), Rearrange(...))``, or of an ``OrderedDict`` of named
    layers: its layers in order, where each is one the analysis knows (a module, an instance
    of a class of the module, or a choice among them: LeViT's ``sub_layer(stride=stride)``)."""
    stages = tuple(fact for fact, _ in call.args)
    if len(stages) == 1 and isinstance(stages[0], TupleFact):
        named = stages[0].items  # OrderedDict([("down", ...), ("ln", ...)])
        pairs = [item for item in named if isinstance(item, TupleFact) and len(item.items) == 2]
        if len(pairs) != len(named):
            return Unknown("call", call.name)
        stages = tuple(pair.items[1] for pair in pairs)
    if call.kwargs or not all(_applies_as_layer(stage) for stage in stages):
        return Unknown("call", call.name)
    return ModuleFact(call.name, stages=stages)


def _applies_as_layer(fact: Fact) -> bool:
    if isinstance(fact, Choice):
        return all(_applies_as_layer(option) for option in fact.options)
    return isinstance(fact, ModuleFact | InstanceFact)


@function_op("collections.OrderedDict")
def ordered_dict(call: OpCall) -> Fact:
    """``OrderedDict([(name, layer), ...])``: the pairs in order, which is all that
    ``nn.Sequential`` reads of it; anything else is unknown."""
    pairs = call.get(0, None)
    if len(call.args) == 1 and not call.kwargs and pairs and isinstance(pairs[0], TupleFact):
        return pairs[0]
    return Unknown("call", call.name)


@function_op("torch.nn.MultiheadAttention")
def multihead_attention_constructor(call: OpCall) -> Fact:
    embed_dim, num_heads = call.int_arg(0, "embed_dim"), call.int_arg(1, "num_heads")
    if embed_dim and num_heads and embed_dim % num_heads and isinstance(call.node, ast.Call):
        call.context.observe(
            IndivisibleSizes(call.node, "embed_dim by num_heads", embed_dim, num_heads)
        )
    return ModuleFact("torch.nn.MultiheadAttention")


@function_op("torch.nn.Embedding")
def embedding_constructor(call: OpCall) -> Fact:
    count, width = call.size_arg(0, "num_embeddings"), call.size_arg(1, "embedding_dim")
    return ModuleFact("torch.nn.Embedding", in_features=count, out_features=width)


@function_op("torch.nn.CrossEntropyLoss")
def cross_entropy_constructor(call: OpCall) -> Fact:
    return ModuleFact("torch.nn.CrossEntropyLoss")


@function_op("torch.nn.Softmax")
def softmax_constructor(call: OpCall) -> Fact:
    given = call.get(0, "dim") is not None
    return ModuleFact("torch.nn.Softmax", dim=call.int_arg(0, "dim"), dim_given=given)


@function_op(*SHAPE_PRESERVING)
def plain_module(call: OpCall) -> Fact:
    return ModuleFact(call.name)


@function_op(SAME_SHAPE)
def same_shape_constructor(call: OpCall) -> Fact:
    """A layer of one of several classes that keep the shape (``norm_layer or nn.LayerNorm``):
    which one, the analysis cannot tell."""
    return ModuleFact(SAME_SHAPE, uncertain=True)


@function_op("torch.nn.functional.one_hot")
def one_hot(call: OpCall) -> Fact:
    """``F.one_hot(indices, num_classes)``: the indices' shape and one more axis of
    ``num_classes`` (of unknown length when left at -1: the largest index decides), int64."""
    indices = call.tensor_arg(0, "tensor")
    if indices is None or indices.shape is None:
        return new_tensor(None, call.node, indices, dtype="int64")
    shape = (*indices.shape, call.size_arg(1, "num_classes") or Dim.symbol("?"))
    return new_tensor(shape, call.node, indices, dtype="int64")


@tensor_op("multinomial", functions=torch_names("multinomial"))
def multinomial(call: OpCall) -> Fact:
    """``torch.multinomial(probs, n)``: ``n`` indices drawn from each row of the last axis,
    int64."""
    probs = call.receiver
    if probs.shape is None:
        return new_tensor(None, call.node, probs, dtype="int64")
    shape = (*probs.shape[:-1], call.size_arg(0, "num_samples") or Dim.symbol("?"))
    return new_tensor(shape, call.node, probs, dtype="int64")
