"""Rotary position embeddings (Su et al., 2021, RoFormer), tables in float32 or wider.

Axis names: ``batch``, ``heads``, ``seq`` (positions), ``head_dim`` (features per head, even),
``pairs = head_dim // 2`` (the feature pairs that rotate, one frequency each).

Feature pair ``i`` of the token at position ``p`` rotates by the angle
``theta[p, i] = p · base^(-2i / head_dim)``::

    (a, b) -> (a · cos theta[p, i] - b · sin theta[p, i],
               a · sin theta[p, i] + b · cos theta[p, i])

Two conventions pair the features differently; the rotation is the same:

- **half-split** (``interleaved=False``; GPT-NeoX, Hugging Face's LLaMA ``rotate_half``):
  pair ``i`` is features ``(i, i + pairs)``;
- **interleaved** (``interleaved=True``; Meta's LLaMA ``view_as_complex``, GPT-J): pair ``i``
  is features ``(2i, 2i + 1)``, read as the complex number ``a + ib`` times ``e^(i theta)``.

They are related by a permutation of the last axis (evens first, then odds), which is how
Hugging Face converts Meta's checkpoints; applying one to weights trained for the other gives
other numbers.

**Precision (rule SC703).** Tables are computed in float32 (or float64) whatever the model's
dtype, and the rotation in the wider of the tables' and the input's dtype. In bfloat16
(8 significant bits) a position above 256 is rounded (1500 becomes 1504) and so is the angle:
measured at position 1500 with ``head_dim=64``, cos from bfloat16 positions and frequencies
is off by up to 1.97 and sin by 1.87 (against float64), while float32 tables are off by
4e-5 (``tests/reference/test_rotary.py`` asserts both).
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from shapecheck.reference.checking import shape_checked

Table = Float[Tensor, "seq pairs"]


def rotary_tables(
    head_dim: int,
    seq_len: int,
    *,
    start_pos: int = 0,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[Table, Table]:
    """``(cos, sin)`` of ``theta[p, i] = p · base^(-2i / head_dim)``, each ``[seq_len, pairs]``.

    Positions are ``p = start_pos .. start_pos + seq_len - 1`` (a float arange of ``dtype``):
    a decode step with ``start_pos`` tokens already in the cache rotates its tokens by their
    absolute positions, and the rows equal those of one table built from position 0.
    ``dtype`` is float32 or float64; lower precision is refused (see the module docstring).
    """
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(
            f"head_dim: {head_dim}, expected a positive even number: rotary embeddings rotate "
            "pairs of features"
        )
    if not dtype.is_floating_point or torch.finfo(dtype).bits < 32:
        raise ValueError(
            f"dtype: {dtype}, expected torch.float32 or torch.float64: in bfloat16 positions "
            "above 256 are rounded and cos/sin are off by up to 2.0 (rule SC703)"
        )
    # the frequency formula of Hugging Face's and Meta's LLaMA, so that their tables agree
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).to(dtype)
    inverse_frequencies = 1.0 / (base ** (exponents / head_dim))  # [pairs]
    positions = torch.arange(start_pos, start_pos + seq_len, dtype=dtype, device=device)
    angles = torch.outer(positions, inverse_frequencies)  # [seq_len, pairs]
    return angles.cos(), angles.sin()


@shape_checked
def apply_rotary(
    x: Float[Tensor, "batch heads seq head_dim"],
    cos: Float[Tensor, "seq pairs"],
    sin: Float[Tensor, "seq pairs"],
    *,
    interleaved: bool,
) -> Float[Tensor, "batch heads seq head_dim"]:
    """``x`` with feature pair ``i`` of position ``p`` rotated by ``theta[p, i]``.

    ``x`` is ``[batch, heads, seq, head_dim]`` (F.sdpa's layout: positions on axis -2); for
    ``[batch, seq, heads, head_dim]`` apply it to ``x.transpose(1, 2)``. ``cos`` and ``sin``
    come from :func:`rotary_tables` for the same ``seq`` positions. Half-split
    (``interleaved=False``) rotates ``(x[..., i], x[..., i + pairs])``; interleaved rotates
    ``(x[..., 2i], x[..., 2i + 1])``. Computed in the wider of ``x``'s and the tables' dtype
    (float32 for a bfloat16 ``x``), returned in ``x``'s dtype.
    """
    head_dim, pairs = x.size(-1), cos.size(-1)
    if head_dim != 2 * pairs:
        raise ValueError(
            f"cos: last axis {pairs}, expected head_dim // 2 = {head_dim // 2} "
            f"(x has head_dim={head_dim})"
        )
    if torch.finfo(cos.dtype).bits < 32 or torch.finfo(sin.dtype).bits < 32:
        raise ValueError(
            f"cos, sin: dtypes {cos.dtype} and {sin.dtype}, expected float32 or float64 "
            "tables (rotary_tables): low-precision tables are off at large positions (rule SC703)"
        )
    wide = x.to(torch.promote_types(x.dtype, cos.dtype))
    if interleaved:
        pairs_last = wide.reshape(*wide.shape[:-1], pairs, 2)  # [batch, heads, seq, pairs, 2]
        first, second = pairs_last[..., 0], pairs_last[..., 1]
    else:
        first, second = wide[..., :pairs], wide[..., pairs:]  # each [batch, heads, seq, pairs]
    rotated_first = first * cos - second * sin
    rotated_second = first * sin + second * cos
    if interleaved:
        rotated = torch.stack((rotated_first, rotated_second), dim=-1).flatten(-2)
    else:
        rotated = torch.cat((rotated_first, rotated_second), dim=-1)
    return rotated.to(x.dtype)
