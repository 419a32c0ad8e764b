"""Softmax, fused attention (SDPA, ``nn.MultiheadAttention``) and cross-entropy."""

from __future__ import annotations

import ast

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    CALLABLES,
    UNKNOWN,
    Fact,
    ModuleFact,
    Partial,
    QualifiedName,
    TensorFact,
    TupleFact,
    Unknown,
)
from shapecheck.analysis.observations import (
    AttentionScores,
    SoftmaxAxis,
)
from shapecheck.analysis.ops import (
    DTYPES,
    OpCall,
    as_tensor,
    function_op,
    functional_names,
    module_op,
    new_tensor,
    tensor_op,
    torch_names,
)
from shapecheck.analysis.ops.masks import check_mask_axes, fill_problem


@tensor_op(functions=functional_names("scaled_dot_product_attention"))
def fused_attention(call: OpCall) -> Fact:
    """``softmax(q kᵀ / sqrt(d) + mask) v``: ``[..., Lq, d] -> [..., Lq, d_v]``; the layout of
    the output depends on the backend, so it is unknown. Each of q, k, v has at least two axes
    (PyTorch raises otherwise)."""
    query, key, value = call.receiver, call.tensor_arg(0, "key"), call.tensor_arg(1, "value")
    queries, keys = _attention_shape(query), _attention_shape(key)
    values = _attention_shape(value)
    mask = call.get(2, "attn_mask")
    if mask is not None:
        mask_tensor = as_tensor(mask[0])
        if mask_tensor is not None and key is not None and queries and keys:
            scores = (*queries[:-1], keys[-2])
            guess = query.guess or key.guess or mask_tensor.guess
            check_mask_axes(call.context, mask_tensor, scores, mask[1], guess)
    shape = None
    if queries and values and len(queries) == len(values):
        shape = (*queries[:-1], values[-1])
    elif queries and value is not None and value.shape is None:
        shape = (*queries[:-1], Dim.symbol("?"))  # the values' features, on the queries' axes
    return new_tensor(shape, call.node, query, key, value, layout=None)


ATTENTION_KERNELS = {
    "flash_attn.flash_attn_func": "v",
    "flash_attn.flash_attn_interface.flash_attn_func": "v",
    "flash_attn.flash_attn_varlen_func": "v",
    "flash_attn.flash_attn_interface.flash_attn_varlen_func": "v",
    "flash_attn.flash_attn_with_kvcache": "v_cache",
    "flash_attn.flash_attn_interface.flash_attn_with_kvcache": "v_cache",
    "xformers.ops.memory_efficient_attention": "value",
    "xformers.ops.fmha.memory_efficient_attention": "value",
}
"""Fused attention of other libraries (flash-attn, xformers), which take q, k, v with the
heads before the features (``[B, L, H, D]``, or ``[total, H, D]`` packed), and the keyword of
their values."""


@tensor_op(functions=ATTENTION_KERNELS)
def attention_kernel(call: OpCall) -> Fact:
    """The queries' shape with the values' features (``[B, L, H, Dv]``); its memory layout,
    like SDPA's, is the kernel's. The masks these take are their own objects, not checked."""
    query = call.receiver
    value = call.tensor_arg(1, ATTENTION_KERNELS[call.name])
    queries, values = _attention_shape(query), _attention_shape(value)
    shape = None
    if queries is not None:
        shape = (*queries[:-1], values[-1] if values is not None else Dim.symbol("?"))
    return new_tensor(shape, call.node, query, value, layout=None)


def _attention_shape(tensor: TensorFact | None) -> tuple[Dim, ...] | None:
    """The shape of a query, key or value, where it has the two axes attention needs."""
    if tensor is None or tensor.shape is None or len(tensor.shape) < 2:
        return None
    return tensor.shape


@module_op("torch.nn.MultiheadAttention")
def multihead_attention_module(call: OpCall) -> Fact:
    """``(output, weights)``; the output's layout depends on the backend."""
    return TupleFact((TensorFact(origin=call.node, scaling=None), UNKNOWN))


@tensor_op("softmax", functions=[*torch_names("softmax"), *functional_names("softmax")])
def softmax(call: OpCall) -> Fact:
    given = call.get(0, "dim")
    dim = call.int_arg(0, "dim")
    written = given[1] if given is not None else None
    return _softmax(call, call.receiver, dim, given is not None and dim is None, written)


@module_op("torch.nn.Softmax")
def softmax_module(call: OpCall) -> Fact:
    module = call.module
    dim = module.dim if module else None
    # nn.Softmax(dim=d) with d not a literal is not nn.Softmax() (which picks an axis itself)
    unknown = module is None or (module.dim_given and dim is None)
    return _softmax(call, call.receiver, dim, unknown, None, through_module=True)


_SOFTMAX_FUNCTIONS = frozenset({*torch_names("softmax"), *functional_names("softmax")})


@function_op("functools.partial")
def partial_softmax(call: OpCall) -> Fact:
    """``partial(F.softmax, dim=-1)``, kept as ``self.attn_fn`` and called on the scores: it
    computes what ``nn.Softmax(dim=-1)`` does, so it is modelled as one (a ``partial`` of that
    with a ``dtype`` too, which leaves the axis alone). Another callable the analysis follows
    is a :class:`Partial` of it; others stay unknown."""
    function = call.get(0, "func")
    keywords = {name: argument for name, argument in call.kwargs.items() if name != "func"}
    softmax = (
        function is not None
        and len(call.args) <= 1
        and set(keywords) <= {"dim", "dtype"}
        and (
            (isinstance(function[0], QualifiedName) and function[0].name in _SOFTMAX_FUNCTIONS)
            or (isinstance(function[0], ModuleFact) and function[0].kind == "torch.nn.Softmax")
        )
    )
    if function is not None and not softmax:
        if not isinstance(function[0], CALLABLES):
            return Unknown("call", call.name)
        bound = call.args[1:] if "func" not in call.kwargs else call.args
        return Partial(function[0], tuple(bound), tuple(keywords.items()))
    if function is None:
        return Unknown("call", call.name)
    if "dim" not in keywords and isinstance(function[0], ModuleFact):
        return function[0]
    dim = call.int_arg(None, "dim")
    return ModuleFact("torch.nn.Softmax", dim=dim, dim_given="dim" in keywords)


def _softmax(
    call: OpCall,
    scores: TensorFact,
    dim: int | None,
    dim_unknown: bool,
    written: ast.expr | None,
    *,
    through_module: bool = False,
) -> Fact:
    """Attention weights when ``scores`` are attention scores; checks the axis it runs over.

    Without ``dim`` PyTorch picks axis 0 for 0-, 1- and 3-D input and axis 1 otherwise.
    """
    product = scores.product
    if product is not None:
        call.context.observe(AttentionScores(call.node, scores, product, _axis(scores, dim)))
        for node, value in scores.unread_fills:
            problem = fill_problem(scores, value, node)
            if problem is not None:
                call.context.observe(problem)
        if not dim_unknown and scores.shape is not None:
            rank = len(scores.shape)
            implicit = dim is None
            axis = _implicit_axis(rank) if implicit else dim
            keys = product.key_axis % rank if rank else None
            same_keys = (
                keys is not None
                and product.key_size is not None
                and scores.shape[keys] == product.key_size
            )
            if axis is not None and keys is not None and same_keys and axis % rank != keys:
                call.context.observe(
                    SoftmaxAxis(
                        call.node,
                        axis % rank,
                        keys,
                        rank,
                        implicit,
                        written,
                        through_module,
                        product,
                        scores.guess,
                    )
                )
    dtype = call.get(None, "dtype")
    result_dtype = scores.dtype
    if dtype is not None and isinstance(dtype[0], QualifiedName):
        result_dtype = DTYPES.get(dtype[0].name)
    return new_tensor(
        scores.shape,
        call.node,
        scores,
        weights=product is not None,
        probabilities=True,
        dtype=result_dtype,
        masked_with=scores.masked_with,
        prefixed=scores.prefixed,
        known_last=scores.known_last,
        rank_of=scores.rank_of,
    )


@module_op("torch.nn.CrossEntropyLoss")
@tensor_op(functions=functional_names("cross_entropy"))
def cross_entropy(call: OpCall) -> Fact:
    return TensorFact(shape=(), origin=call.node)


def _axis(scores: TensorFact, dim: int | None) -> int | None:
    """The axis a softmax normalises: ``dim`` counted from the front (without ``dim``, the
    axis PyTorch picks), where the rank allows telling."""
    rank = scores.rank
    if rank is None:
        return dim if dim is not None and dim >= 0 else None
    if dim is None:
        return _implicit_axis(rank)
    return dim % rank if -rank <= dim < rank else None


def _implicit_axis(rank: int) -> int:
    """The axis a softmax without ``dim`` picks (PyTorch's legacy rule)."""
    return 0 if rank in (0, 1, 3) else 1
