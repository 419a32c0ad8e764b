"""A key/value cache for decoding: the keys and values of every position seen so far.

Axis names: ``batch``, ``kv_heads`` (key/value heads, fewer than the query heads under
grouped-query attention), ``new_len`` (the positions of this step), ``k_len`` (all positions
cached), ``d_k``, ``d_v``.

Decoding with a cache, the queries are the last ``q_len`` of ``k_len`` positions, so causal
attention is aligned at the **bottom right**: query ``i`` sits at absolute position
``k_len - q_len + i`` and sees the keys at positions up to it
(``causal_mask(q_len, k_len, aligned="bottom_right")``). ``F.scaled_dot_product_attention``'s
``is_causal=True`` is aligned at the top left (query ``i`` sees keys ``0..i``): given a one-token
query and a longer cache it lets the query see key 0 only (rule SC702).
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from shapecheck.reference.checking import shape_checked


class KVCache:
    """Keys ``[batch, kv_heads, k_len, d_k]`` and values ``[batch, kv_heads, k_len, d_v]`` of the
    positions seen so far, appended along the sequence axis (-2) by :meth:`update`.

    One cache per attention layer. Empty at first (``length == 0``): the first update (the
    prompt, "prefill") sets ``batch``, ``kv_heads``, the feature sizes, dtype and device, and
    every later update must keep them.
    """

    def __init__(self) -> None:
        self.key: Tensor | None = None
        self.value: Tensor | None = None

    @property
    def length(self) -> int:
        """The number of positions cached: the absolute position of the next token."""
        return 0 if self.key is None else self.key.size(-2)

    @shape_checked
    def update(
        self,
        key: Float[Tensor, "batch kv_heads new_len d_k"],
        value: Float[Tensor, "batch kv_heads new_len d_v"],
    ) -> tuple[
        Float[Tensor, "batch kv_heads k_len d_k"], Float[Tensor, "batch kv_heads k_len d_v"]
    ]:
        """Append this step's keys and values; return every cached key and value.

        ``k_len = length + new_len`` after the call, positions in order: the cached ones first.
        """
        if self.key is None or self.value is None:
            self.key, self.value = key, value
            return key, value
        _check_like_cached("key", key, self.key, "d_k")
        _check_like_cached("value", value, self.value, "d_v")
        self.key = torch.cat((self.key, key), dim=-2)
        self.value = torch.cat((self.value, value), dim=-2)
        return self.key, self.value


def _check_like_cached(name: str, new: Tensor, cached: Tensor, features: str) -> None:
    """``new`` has the cached tensor's batch, heads, features, dtype and device, named."""
    batch, kv_heads, _, width = cached.shape
    if (new.size(0), new.size(1), new.size(3)) != (batch, kv_heads, width):
        raise ValueError(
            f"{name}: shape {list(new.shape)}, expected [batch, kv_heads, new_len, {features}] = "
            f"[{batch}, {kv_heads}, new_len, {width}] as the cached {name}s"
        )
    # torch.cat would promote a float16 step into a float32 cache without a word
    if new.dtype != cached.dtype or new.device != cached.device:
        raise ValueError(
            f"{name}: {new.dtype} on {new.device}, expected the cached {name}s' "
            f"{cached.dtype} on {cached.device}"
        )
