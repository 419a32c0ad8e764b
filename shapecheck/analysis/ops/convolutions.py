"""Convolutions: ``nn.Conv1d``/``Conv2d``/``Conv3d``, channels first; and resampling,
``F.interpolate`` and the pooling layers.

A convolution reads ``[N, C_in, *spatial]`` (or unbatched ``[C_in, *spatial]``) and makes
``[N, C_out, *spatial']``: the channels it was built with come second, which is what tells a
channels-first map (a patch embedding's output) from tokens. A spatial size is known where it
is kept (``kernel_size=1``, ``padding="same"``, or a stride of 1 with the padding that keeps
it) or divided by the patch (``kernel_size=stride=p``, no padding: ``(H - p) // p + 1`` is
``H // p``); otherwise it is unknown.
"""

from __future__ import annotations

from shapecheck.analysis.dims import Dim
from shapecheck.analysis.facts import (
    ChannelsAxis,
    Fact,
    IntFact,
    ModuleFact,
    SizeFact,
    TupleFact,
    fresh_shape,
)
from shapecheck.analysis.layout import Layout
from shapecheck.analysis.ops import (
    OpCall,
    function_op,
    functional_names,
    items_of,
    module_op,
    new_tensor,
    string_literal,
    tensor_op,
)

CONVOLUTIONS = {"torch.nn.Conv1d": 1, "torch.nn.Conv2d": 2, "torch.nn.Conv3d": 3}
"""Each convolution class and how many spatial axes it takes."""

Setting = Dim | str | None
"""One spatial axis's kernel size, stride, padding or dilation: a size, a padding string
(``"same"``, ``"valid"``), or ``None`` when the code does not say it in a way that can be read."""


@function_op(*CONVOLUTIONS)
def convolution_constructor(call: OpCall) -> Fact:
    rank = CONVOLUTIONS[call.name]
    in_channels, out_channels = call.size_arg(0, "in_channels"), call.size_arg(1, "out_channels")
    kernel = _per_axis(call, 2, "kernel_size", rank, None)
    stride = _per_axis(call, 3, "stride", rank, Dim.constant(1))
    padding = _per_axis(call, 4, "padding", rank, Dim.constant(0))
    dilation = _per_axis(call, 5, "dilation", rank, Dim.constant(1))
    spatial = tuple(map(_divisor, kernel, stride, padding, dilation))
    return ModuleFact(
        call.name, in_features=in_channels, out_features=out_channels, spatial=spatial
    )


def _per_axis(call: OpCall, index: int, keyword: str, rank: int, default: Setting) -> list[Setting]:
    """A setting given once for every axis (``3``, an ``int`` parameter, ``"same"``) or per
    axis (``(3, 3)``); ``default`` where it is not given. A name the analysis does not know as
    an ``int`` may hold a tuple (``to_2tuple(patch_size)``): unknown."""
    argument = call.get(index, keyword)
    if argument is None:
        return [default] * rank
    fact, node = argument
    if isinstance(fact, TupleFact) and len(fact.items) == rank:
        return [item.dim if isinstance(item, IntFact) else None for item in fact.items]
    if isinstance(fact, IntFact):
        return [fact.dim] * rank
    return [string_literal(node)] * rank


def _divisor(kernel: Setting, stride: Setting, padding: Setting, dilation: Setting) -> Dim | None:
    """What one spatial size is divided by, where ``(in + 2p - d(k - 1) - 1) // s + 1`` is a
    plain quotient of ``in``: 1 where the size is kept, the patch for a patch embedding."""
    one, zero = Dim.constant(1), Dim.constant(0)
    if padding == "same":
        return one  # PyTorch allows it with a stride of 1 only
    if padding == "valid":
        padding = zero
    if _keeps_size(kernel, stride, padding, dilation):
        return one
    if isinstance(kernel, Dim) and kernel == stride and padding == zero and dilation == one:
        return kernel
    return None


def _keeps_size(kernel: Setting, stride: Setting, padding: Setting, dilation: Setting) -> bool:
    """A stride of 1 and as much padding on each side as the kernel reaches past the centre:
    ``2p == d(k - 1)``, literals all."""
    settings = (kernel, stride, padding, dilation)
    numbers = [
        value
        for setting in settings
        if isinstance(setting, Dim) and (value := setting.value) is not None
    ]
    if len(numbers) != len(settings):
        return False
    size, step, pad, spread = numbers
    return step == 1 and 2 * pad == spread * (size - 1)


@module_op(*CONVOLUTIONS)
def convolution(call: OpCall) -> Fact:
    """``[N, C_in, *spatial] -> [N, C_out, *spatial']``; the rank as the input's, unknown
    with it."""
    module, shape = call.module, call.receiver.shape
    spatial = module.spatial if module is not None else None
    if module is None or spatial is None or shape is None:
        return new_tensor(None, call.node, call.receiver)
    if len(shape) not in (len(spatial) + 1, len(spatial) + 2):
        return new_tensor(None, call.node, call.receiver)  # PyTorch raises
    batch = shape[: len(shape) - len(spatial) - 1]
    channels = module.out_features or Dim.symbol("?")
    sizes = tuple(
        _divided(size, divisor)
        for size, divisor in zip(shape[-len(spatial) :], spatial, strict=True)
    )
    shape = (*batch, channels, *sizes)
    axis = ChannelsAxis(len(batch), len(shape))
    return new_tensor(shape, call.node, call.receiver, channels=axis)


POOLS = {f"torch.nn.{kind}Pool{rank}d": rank for kind in ("Avg", "Max") for rank in (1, 2, 3)}
"""Each pooling layer and how many spatial axes it takes."""


@function_op(*POOLS)
def pool_constructor(call: OpCall) -> Fact:
    return ModuleFact(call.name)


@module_op(*POOLS)
def pool(call: OpCall) -> Fact:
    """``[N, C, *spatial] -> [N, C, *spatial']`` (or unbatched ``[C, *spatial]``): each
    output an average or maximum of inputs, scaled as they were; the spatial sizes the
    analysis does not work out."""
    receiver, shape = call.receiver, call.receiver.shape
    spatial = POOLS[call.name]
    if shape is None or len(shape) not in (spatial + 1, spatial + 2):
        return new_tensor(None, call.node, receiver, scaling=receiver.scaling)
    shape = (*shape[:-spatial], *fresh_shape(spatial))
    return new_tensor(
        shape, call.node, receiver, scaling=receiver.scaling, channels=receiver.channels
    )


def _divided(size: Dim, divisor: Dim | None) -> Dim:
    """A spatial size after the convolution. A divisor that is a quotient itself
    (``patch_size // stem_stride``) is not divided by: the division would take it as exact,
    which the code never says (SC502 would ask for a check)."""
    if divisor is None or divisor.quotients or size.has_unknown:
        return Dim.symbol("?")
    return size if divisor == Dim.constant(1) else size.floordiv(divisor)


@tensor_op(functions=functional_names("interpolate", "upsample"))
def interpolate(call: OpCall) -> Fact:
    """``F.interpolate(x, size=(h, w))``: ``[N, C, *spatial] -> [N, C, *size]``, of the
    input's rank (``size`` one for every spatial axis, a lone size for each); the new spatial
    sizes unknown where ``scale_factor`` makes them; a convolution's channels stay where they
    were."""
    receiver, shape = call.receiver, call.receiver.shape
    if shape is None or len(shape) < 3:
        return new_tensor(None, call.node, receiver)  # PyTorch raises below 3 axes
    spatial = len(shape) - 2
    given = call.get(1, "size")
    sizes: list[Dim | None] = [None] * spatial
    if given is not None and isinstance(given[0], IntFact):
        sizes = [given[0].dim] * spatial
    elif given is not None and isinstance(given[0], TupleFact | SizeFact):
        items = items_of(given[0])  # (h, w), or another map's ``y.shape[-2:]``
        if len(items) == spatial:
            sizes = [item.dim if isinstance(item, IntFact) else None for item in items]
    new = tuple(
        size if size is not None and size.value != -1 else Dim.symbol("?") for size in sizes
    )
    layout = _resampled_layout(receiver.layout, len(shape))
    shape = (*shape[:2], *new)
    return new_tensor(shape, call.node, receiver, channels=receiver.channels, layout=layout)


def _resampled_layout(layout: Layout | None, rank: int) -> Layout | None:
    """PyTorch allocates a resampled map in its input's suggested memory format: channels
    last where a 4-D or 5-D input is laid out so (VideoLLaMA 3's ``reshape(t, h, w,
    c).permute(0, 3, 1, 2)``, after which ``permute(0, 2, 3, 1).view(-1, c)`` of the result
    is legal), else contiguous (checked with torch 2.13: bilinear, nearest, bicubic). For
    another order the strides decide, which the analysis does not follow: unknown."""
    if layout is None or layout.is_contiguous:
        return None if layout is None else Layout.contiguous(rank)
    channels_last = (0, rank - 1, *range(1, rank - 1))
    return layout if rank in (4, 5) and layout.order == channels_last else None
