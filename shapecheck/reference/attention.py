"""Reference attention: the formulas, written out, with every tensor's axes named.

Axis names: ``batch``, ``heads`` (query heads), ``kv_heads`` (key/value heads, fewer under
grouped-query attention), ``q_len`` (query positions), ``k_len`` (key positions), ``d_k``
(query/key features per head), ``d_v`` (value features), ``d_model``, ``kdim``, ``vdim``.

**Layouts.** ``scaled_dot_product_attention`` takes ``[batch, heads, seq, d]``, as
``F.scaled_dot_product_attention``; :func:`flash_attention` takes ``[batch, seq, heads, d]``,
as ``flash_attn_func`` and xformers' ``memory_efficient_attention`` (rule SC105: one handed the
other's layout attends over heads instead of positions, silently).

**Causal alignment.** When ``q_len < k_len`` (decoding with a KV cache: the queries are the
last ``q_len`` positions) the causal mask can be aligned two ways (:func:`causal_mask`):
top left (query ``i`` sees keys ``0..i``; F.sdpa's ``is_causal=True``) or bottom right (query
``i`` sees keys ``0..k_len - q_len + i``; ``flash_attn_func``'s ``causal=True``, torch's
``causal_lower_right``). Only the second is causal decoding (rule SC702).

**Mask polarity.** Each mask argument means exactly what the same name means in torch, so a
boolean ``True`` means opposite things in two places, as it does in torch:

- ``scaled_dot_product_attention(attn_mask=)``: True = **attend**, as
  ``F.scaled_dot_product_attention``; ``MultiHeadAttention(mask=)`` and
  ``SelfAttention(mask=)`` follow the same convention.
- ``MultiHeadAttention(attn_mask=, key_padding_mask=)``: True = **do NOT attend**, as
  ``nn.MultiheadAttention``.

A float mask is added to the scores everywhere (``0`` keeps a key, ``-inf`` blocks it).
Blocked scores are ``-inf``, never a literal such as ``-1e9`` (which overflows float16).

**A query with every key blocked** (a fully masked row: every key blocked by a boolean mask
or ``-inf``) gets zero attention weights and a zero output, not NaN, as
``F.scaled_dot_product_attention`` gives in torch 2.5 and later. ``nn.MultiheadAttention``
(torch 2.13) gives NaN for such a row in eval mode or with ``need_weights=True``, and zeros in
training mode without weights. A row whose float mask is a finite minimum everywhere
(``torch.finfo(dtype).min``) is not blocked: its weights are uniform and its output the mean
of ``value``, in torch too.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor, nn
from torch.nn.attention.bias import CausalBias, CausalVariant

from shapecheck.reference.cache import KVCache
from shapecheck.reference.checking import runtime_checks_enabled, shape_checked
from shapecheck.reference.rotary import apply_rotary, rotary_tables

Mask = Bool[Tensor, "..."] | Float[Tensor, "..."]
Output = Float[Tensor, "batch q_len d_model"]
Weights = Float[Tensor, "batch q_len k_len"] | Float[Tensor, "batch heads q_len k_len"]
Alignment = Literal["top_left", "bottom_right"]
Rotary = Literal["half_split", "interleaved"]

_BLOCKED = float("-inf")


@shape_checked
def scaled_dot_product_attention(
    query: Float[Tensor, "*batch q_len d_k"],
    key: Float[Tensor, "*kv_batch k_len d_k"],
    value: Float[Tensor, "*kv_batch k_len d_v"],
    attn_mask: Mask | CausalBias | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Float[Tensor, "*batch q_len d_v"]:
    """``softmax(query keyᵀ · scale + attn_mask) value`` with ``scale = 1/sqrt(d_k)`` unless given.

    The signature and the numbers of ``torch.nn.functional.scaled_dot_product_attention``:

    - ``attn_mask`` broadcasts to ``[*batch, q_len, k_len]``. **Boolean: True = this query
      attends to this key**, False = blocked (F.sdpa's polarity, the opposite of
      ``nn.MultiheadAttention``'s ``attn_mask``). Float: added to the scores; a float mask
      of another dtype than ``query`` (float32 with float16 ``query``) is added in the wider
      dtype and the weights cast back to ``value``'s, as torch's CPU kernel does. torch's
      ``causal_upper_left(q_len, k_len)`` and ``causal_lower_right(q_len, k_len)`` are the
      boolean masks of :func:`causal_mask` (``"top_left"``, ``"bottom_right"``).
    - ``is_causal`` lets query ``i`` attend to keys ``0..i`` (aligned at the top left, as
      torch does); with ``attn_mask`` too, a key must pass both.
    - ``enable_gqa``: grouped-query attention. ``key`` and ``value`` then have ``kv_heads``
      heads on axis -3, a divisor of ``query``'s ``heads``; each key/value head is repeated
      ``heads // kv_heads`` times with ``repeat_interleave``, so query head ``h`` reads
      key/value head ``h // (heads // kv_heads)``. Without it ``key`` and ``value`` have
      ``query``'s batch axes (``*kv_batch == *batch``).
    - ``dropout_p`` drops attention weights (use 0 at inference).

    A query whose keys are all blocked gets a zero output (see the module docstring).
    """
    if runtime_checks_enabled():
        _check_key_batch(query, key, enable_gqa)
    if isinstance(attn_mask, CausalBias):
        attn_mask = _causal_bias_mask(attn_mask, query.size(-2), key.size(-2), query.device)
    if enable_gqa:
        groups = query.size(-3) // key.size(-3)
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    weights = _attention_weights(query, key, attn_mask, is_causal, scale).to(value.dtype)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value


def _attention_weights(
    query: Float[Tensor, "*batch q_len d_k"],
    key: Float[Tensor, "*batch k_len d_k"],
    attn_mask: Mask | None,
    is_causal: bool,
    scale: float | None,
) -> Float[Tensor, "*batch q_len k_len"]:
    """``softmax(query keyᵀ · scale + attn_mask)`` over keys; a fully blocked row is all zeros."""
    scale = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    # scaling query ([..., q_len, d_k]) is cheaper than scaling the scores ([..., q_len, k_len])
    scores = (query * scale) @ key.transpose(-2, -1)  # [*batch, q_len, k_len]
    if is_causal:
        visible = causal_mask(
            query.size(-2), key.size(-2), aligned="top_left", device=scores.device
        )
        scores = scores.masked_fill(~visible, _BLOCKED)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, _BLOCKED)
    elif attn_mask is not None:
        scores = scores + attn_mask
    # torch's "safe softmax": a row of -inf only would be 0/0 = NaN; it gets zero weights.
    # Its scores are zeroed first so that no NaN reaches the gradient either: only in such
    # rows, where no key is kept, so SC402's concern (zeroed scores still weigh) is void.
    fully_blocked = scores.isneginf().all(dim=-1, keepdim=True)
    finite = scores.masked_fill(fully_blocked, 0.0)  # shapecheck: ignore[SC402]
    return finite.softmax(dim=-1).masked_fill(fully_blocked, 0.0)


@shape_checked
def flash_attention(
    query: Float[Tensor, "batch q_len heads d_k"],
    key: Float[Tensor, "batch k_len kv_heads d_k"],
    value: Float[Tensor, "batch k_len kv_heads d_v"],
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    causal: bool = False,
    *,
    num_heads: int | None = None,
) -> Float[Tensor, "batch q_len heads d_v"]:
    """Attention in the ``[batch, seq, heads, head_dim]`` layout, with ``flash_attn_func``'s
    signature and causal alignment (xformers' ``memory_efficient_attention`` takes it too).

    ``out[:, i, h] = softmax(query[:, i, h] · key[:, :, g]ᵀ · scale) value[:, :, g]`` with
    ``g = h // (heads // kv_heads)``: :func:`scaled_dot_product_attention` (and
    ``F.scaled_dot_product_attention(..., enable_gqa=True)``) on ``.transpose(1, 2)`` of each
    input, transposed back. ``kv_heads`` must divide ``heads`` (grouped-query attention).
    ``causal`` is aligned at the bottom right, as flash-attn's: query ``i`` sees the keys up to
    ``k_len - q_len + i`` (the same as F.sdpa's ``is_causal`` only when ``q_len == k_len``).
    ``softmax_scale`` defaults to ``1/sqrt(d_k)``. The output is contiguous, as flash-attn's,
    so ``out.view(batch, q_len, heads * d_v)`` works.

    ``[batch, heads, seq, head_dim]`` inputs cannot be told apart by their shapes alone;
    ``num_heads`` (the query heads the caller built) refuses them when axis 2 is not it.
    """
    if runtime_checks_enabled():
        _check_flash_layout(query, key, num_heads)
    q_len, heads, k_len, kv_heads = query.size(1), query.size(2), key.size(1), key.size(2)
    visible = (
        causal_mask(q_len, k_len, aligned="bottom_right", device=query.device) if causal else None
    )
    attended = scaled_dot_product_attention(
        query.transpose(1, 2),  # [batch, heads, q_len, d_k]
        key.transpose(1, 2),  # [batch, kv_heads, k_len, d_k]
        value.transpose(1, 2),  # [batch, kv_heads, k_len, d_v]
        visible,
        dropout_p,
        scale=softmax_scale,
        enable_gqa=kv_heads != heads,
    )
    return attended.transpose(1, 2).contiguous()  # [batch, q_len, heads, d_v]


def _check_flash_layout(query: Tensor, key: Tensor, num_heads: int | None) -> None:
    """Heads on axis 2, as ``flash_attn_func`` reads them; F.sdpa's layout refused where seen."""
    heads, kv_heads = query.size(2), key.size(2)
    transposed = (
        ": query, key and value look like [batch, heads, seq, head_dim] (F.sdpa's layout); "
        "this function takes [batch, seq, heads, head_dim]: pass them through .transpose(1, 2)"
    )
    if num_heads is not None and heads != num_heads:
        hint = transposed if query.size(1) == num_heads else ""
        raise ValueError(
            f"query: {heads} heads on axis 2 of [batch, q_len, heads, d_k], "
            f"expected num_heads={num_heads}{hint}"
        )
    if kv_heads == 0 or heads % kv_heads != 0:
        swapped_fits = key.size(1) > 0 and query.size(1) % key.size(1) == 0
        raise ValueError(
            f"key: {kv_heads} heads on axis 2 of [batch, k_len, kv_heads, d_k], expected a "
            f"divisor of query's {heads} (grouped-query attention)"
            + (transposed if swapped_fits else "")
        )


def _check_key_batch(query: Tensor, key: Tensor, enable_gqa: bool) -> None:
    """``key``'s batch axes are ``query``'s, or under ``enable_gqa`` fewer heads dividing them."""
    if enable_gqa and query.dim() < 3:
        raise ValueError(
            f"query: {query.dim()}-D, but enable_gqa repeats key/value heads along axis -3: "
            "expected [..., heads, q_len, d_k]"
        )
    batch, key_batch = list(query.shape[:-2]), list(key.shape[:-2])
    grouped = (
        len(batch) >= 1
        and len(key_batch) == len(batch)
        and key_batch[:-1] == batch[:-1]
        and key_batch[-1] > 0
        and batch[-1] % key_batch[-1] == 0
    )
    if key_batch == batch or (enable_gqa and grouped):
        return
    if enable_gqa:
        raise ValueError(
            f"key: batch axes {key_batch}, expected query's {batch} with a number of heads "
            "(axis -3) that divides query's: enable_gqa repeats each key/value head "
            "heads // kv_heads times"
        )
    hint = " (grouped-query attention, fewer key heads: pass enable_gqa=True)" if grouped else ""
    raise ValueError(f"key: batch axes {key_batch}, expected query's {batch}{hint}")


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first (Vaswani et al., 2017); ``nn.MultiheadAttention``'s
    numbers with its weights (:meth:`from_torch`).

    ``out = fc_out(concat_h(attention(wq(query)_h, wk(key)_g, wv(value)_g)))`` where ``_h`` is
    query head ``h``'s slice of ``d_k = d_model // num_heads`` features and ``g = h //
    (num_heads // num_kv_heads)`` the key/value head it reads. ``num_kv_heads`` below
    ``num_heads`` is grouped-query attention (``num_kv_heads=1``: multi-query attention):
    ``wk`` and ``wv`` project to ``num_kv_heads * d_k`` features. ``kdim`` and ``vdim`` are
    the widths of ``key`` and ``value`` (``d_model`` unless given), as in torch.

    ``rotary`` rotates each head's queries and keys by their positions before attention
    (:func:`~shapecheck.reference.rotary.apply_rotary`, tables of ``rotary_base`` in float32,
    float64 for a float64 module): ``"half_split"`` (Hugging Face's LLaMA ``rotate_half``) or
    ``"interleaved"`` (Meta's LLaMA); ``d_k`` must be even. With ``bias=False``, grouped-query
    attention, a rotary embedding and a :class:`~shapecheck.reference.cache.KVCache` (see
    :meth:`forward`) this is LLaMA's attention.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        *,
        num_kv_heads: int | None = None,
        kdim: int | None = None,
        vdim: int | None = None,
        rotary: Rotary | None = None,
        rotary_base: float = 10000.0,
    ):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads}): "
                "each head takes d_model // num_heads features"
            )
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if kv_heads <= 0 or num_heads % kv_heads != 0:
            raise ValueError(
                f"num_heads ({num_heads}) must be divisible by num_kv_heads ({kv_heads}): "
                "each key/value head serves num_heads // num_kv_heads query heads"
            )
        if rotary not in (None, "half_split", "interleaved"):
            raise ValueError(f"rotary: {rotary!r}, expected 'half_split', 'interleaved' or None")
        if rotary is not None and (d_model // num_heads) % 2 != 0:
            raise ValueError(
                f"rotary: d_k = d_model // num_heads = {d_model // num_heads} is odd, expected "
                "an even d_k: rotary embeddings rotate pairs of features"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_kv_heads = kv_heads
        self.d_k = d_model // num_heads
        self.kdim = d_model if kdim is None else kdim
        self.vdim = d_model if vdim is None else vdim
        self.dropout = dropout
        self.rotary = rotary
        self.rotary_base = rotary_base
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(self.kdim, kv_heads * self.d_k, bias=bias)
        self.wv = nn.Linear(self.vdim, kv_heads * self.d_k, bias=bias)
        self.fc_out = nn.Linear(d_model, d_model, bias=bias)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """This module with ``module``'s weights, dropout, device, dtype and training mode.

        Reads the fused ``in_proj_weight`` or, when ``kdim``/``vdim`` differ from
        ``embed_dim``, ``q_proj_weight``/``k_proj_weight``/``v_proj_weight``; then
        ``in_proj_bias`` and ``out_proj``. Outputs equal ``module``'s for the same inputs in
        the batch-first layout: this module is always batch-first, so a module built with
        ``batch_first=False`` (torch's default) takes ``[seq, batch, features]`` where this
        one takes ``x.transpose(0, 1)``. ``add_bias_kv`` and ``add_zero_attn`` have no
        counterpart here and are refused.
        """
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError(
                "from_torch: add_bias_kv=True and add_zero_attn=True append a key to every "
                "sequence; this module has no counterpart"
            )
        projection = module.out_proj.weight
        converted = cls(
            module.embed_dim,
            module.num_heads,
            dropout=module.dropout,
            bias=module.in_proj_bias is not None,
            kdim=module.kdim,
            vdim=module.vdim,
        ).to(device=projection.device, dtype=projection.dtype)
        if module.in_proj_weight is not None:
            weights = module.in_proj_weight.chunk(3)
        else:
            weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
        with torch.no_grad():
            for linear, weight in zip(
                (converted.wq, converted.wk, converted.wv), weights, strict=True
            ):
                linear.weight.copy_(weight)
            converted.fc_out.weight.copy_(projection)
            if module.in_proj_bias is not None:
                biases = module.in_proj_bias.chunk(3)
                for linear, bias in zip(
                    (converted.wq, converted.wk, converted.wv), biases, strict=True
                ):
                    linear.bias.copy_(bias)
                converted.fc_out.bias.copy_(module.out_proj.bias)
        return converted.train(module.training)

    @shape_checked
    def forward(
        self,
        query: Float[Tensor, "batch q_len d_model"],
        key: Float[Tensor, "batch k_len kdim"],
        value: Float[Tensor, "batch k_len vdim"],
        *,
        mask: Mask | None = None,
        key_padding_mask: Mask | None = None,
        attn_mask: Mask | None = None,
        need_weights: bool | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
        cache: KVCache | None = None,
    ) -> Output | tuple[Output, Weights | None]:
        """Attend from ``query`` to ``key``/``value``; every argument after them by keyword.

        Masks, in one of two polarities (never both in one call):

        - ``mask``: **True = attend** (F.sdpa's polarity), or a float mask added to the
          scores; broadcastable to ``[batch, heads, q_len, k_len]``, or key padding
          ``[batch, k_len]``. A 2-D mask that is both (``batch == q_len``) is refused: say
          which with ``mask[:, None, None, :]`` or ``mask[None]``.
        - ``key_padding_mask`` ``[batch, k_len]`` and ``attn_mask`` ``[q_len, k_len]`` or
          ``[batch * heads, q_len, k_len]`` (batch-major, as torch): **True = do NOT attend**
          (``nn.MultiheadAttention``'s polarity), or float masks added to the scores.

        ``is_causal`` applies the causal mask (query ``i`` sees keys ``0..i``) on top of any
        mask, as F.sdpa does; in ``nn.MultiheadAttention`` it is only a hint that
        ``attn_mask`` already is causal, so passing both is the same there and here.

        ``cache`` (self-attention decoding): ``key`` and ``value`` are the new tokens' own,
        as many as the queries; their projections (rotated at positions ``cache.length ..``
        when ``rotary``) are appended to the cache and the queries attend to every cached
        position, so ``k_len = cache.length + q_len`` for the masks. ``is_causal`` is then
        aligned at the bottom right (query ``i`` is at position ``k_len - q_len + i`` and sees
        the keys up to it; :func:`causal_mask`): a prompt and then one token at a time give the
        rows of one causal call over the whole sequence.

        Returns ``out`` ``[batch, q_len, d_model]`` when ``need_weights`` is not given. Given,
        it returns torch's tuple ``(out, weights)``: ``weights`` is ``None`` for
        ``need_weights=False``; for ``True`` the attention weights, after dropout, averaged
        over heads ``[batch, q_len, k_len]`` (``average_attn_weights=True``) or per head
        ``[batch, heads, q_len, k_len]``. (torch's default is ``need_weights=True``: a call
        written for torch that unpacks ``out, weights`` without passing it must pass it
        here.)

        A query whose keys are all blocked gets zero weights and an output of
        ``fc_out``'s bias (see the module docstring: torch's module gives NaN there).
        """
        if runtime_checks_enabled():
            self._check_widths(query, key, value)
        batch, q_len, new_len = query.size(0), query.size(1), key.size(1)
        if cache is not None and new_len != q_len:
            raise ValueError(
                f"key: {new_len} positions, expected query's {q_len}: with a cache, key and "
                "value are the new tokens' own (self-attention), appended to the cache"
            )
        past_len = 0 if cache is None else cache.length
        allowed = self._sdpa_mask(
            batch, q_len, past_len + new_len, mask, key_padding_mask, attn_mask
        )
        q = self._split_heads(self.wq(query), self.num_heads)  # [batch, heads, q_len, d_k]
        k = self._split_heads(self.wk(key), self.num_kv_heads)  # [batch, kv_heads, new_len, d_k]
        v = self._split_heads(self.wv(value), self.num_kv_heads)  # [batch, kv_heads, new_len, d_k]
        if self.rotary is not None:
            q, k = self._rotate(q, past_len), self._rotate(k, past_len)
        if cache is not None:
            k, v = cache.update(k, v)  # [batch, kv_heads, k_len, d_k], past positions first
        # F.sdpa's own causal mask (top left) is right only without a cache (rule SC702);
        # otherwise the causal mask joins the others: one mask for every kernel of F.sdpa
        kernel_causal = is_causal and allowed is None and cache is None
        if is_causal and not kernel_causal:
            aligned: Alignment = "top_left" if cache is None else "bottom_right"
            visible = causal_mask(q.size(-2), k.size(-2), aligned=aligned, device=q.device)
            allowed = visible if allowed is None else _both(allowed, visible)
        dropout_p = self.dropout if self.training else 0.0
        if not need_weights:
            # PyTorch's fused kernel computes exactly scaled_dot_product_attention above (the
            # tests hold them equal), without materialising the scores.
            attended = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=allowed,
                dropout_p=dropout_p,
                is_causal=kernel_causal,
                enable_gqa=self.num_kv_heads != self.num_heads,
            )
            out: Tensor = self.fc_out(self._merge_heads(attended))
            return out if need_weights is None else (out, None)
        groups = self.num_heads // self.num_kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        weights = _attention_weights(q, k, allowed, kernel_causal, scale=None).to(v.dtype)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        out = self.fc_out(self._merge_heads(weights @ v))
        return out, weights.mean(dim=1) if average_attn_weights else weights

    def _check_widths(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        """Each input's last axis is the width this module was built for, named."""
        for name, tensor, width, built in (
            ("query", query, "d_model", self.d_model),
            ("key", key, "d_model" if self.kdim == self.d_model else "kdim", self.kdim),
            ("value", value, "d_model" if self.vdim == self.d_model else "vdim", self.vdim),
        ):
            if tensor.size(-1) != built:
                raise ValueError(
                    f"{name}: last axis {tensor.size(-1)}, "
                    f"this module was built with {width}={built}"
                )

    def _rotate(
        self, x: Float[Tensor, "batch heads seq d_k"], start_pos: int
    ) -> Float[Tensor, "batch heads seq d_k"]:
        """``x`` rotated at positions ``start_pos .. start_pos + seq - 1``."""
        cos, sin = rotary_tables(
            self.d_k,
            x.size(-2),
            start_pos=start_pos,
            base=self.rotary_base,
            dtype=torch.promote_types(x.dtype, torch.float32),
            device=x.device,
        )
        return apply_rotary(x, cos, sin, interleaved=self.rotary == "interleaved")

    def _sdpa_mask(
        self,
        batch: int,
        q_len: int,
        k_len: int,
        mask: Mask | None,
        key_padding_mask: Mask | None,
        attn_mask: Mask | None,
    ) -> Mask | None:
        """The masks given as one mask in F.sdpa's polarity (True = attend, or added),
        broadcastable to ``[batch, heads, q_len, k_len]``; shapes checked, the argument named."""
        if mask is not None:
            if key_padding_mask is not None or attn_mask is not None:
                raise ValueError(
                    "pass mask= (True = attend) or nn.MultiheadAttention's attn_mask= and "
                    "key_padding_mask= (True = do NOT attend), not both: one polarity per call"
                )
            return self._own_mask(mask, batch, q_len, k_len)
        allowed: Mask | None = None
        if key_padding_mask is not None:
            if key_padding_mask.shape != (batch, k_len):
                padding = key_padding_mask
                _refuse_sequence_first("key_padding_mask", padding, (k_len, batch), (batch, k_len))
                raise ValueError(
                    f"key_padding_mask: shape {list(padding.shape)}, "
                    f"expected [batch, k_len] = {[batch, k_len]}"
                )
            allowed = _attend_where_torch_allows(key_padding_mask)[:, None, None, :]
        if attn_mask is not None:
            per_head = (batch * self.num_heads, q_len, k_len)
            if attn_mask.shape == (q_len, k_len):
                attend = _attend_where_torch_allows(attn_mask)
            elif attn_mask.shape == per_head:
                attend = _attend_where_torch_allows(attn_mask).view(
                    batch, self.num_heads, q_len, k_len
                )
            else:
                _refuse_sequence_first("attn_mask", attn_mask, (batch, batch), (q_len, k_len))
                raise ValueError(
                    f"attn_mask: shape {list(attn_mask.shape)}, expected [q_len, k_len] = "
                    f"{[q_len, k_len]} or [batch * heads, q_len, k_len] = {list(per_head)}"
                )
            allowed = attend if allowed is None else _both(allowed, attend)
        return allowed

    def _own_mask(self, mask: Mask, batch: int, q_len: int, k_len: int) -> Mask:
        """``mask=`` (True = attend): key padding ``[batch, k_len]`` or a broadcastable mask."""
        full = (batch, self.num_heads, q_len, k_len)
        if mask.dim() == 2 and mask.shape == (batch, k_len):
            if batch == q_len:
                raise ValueError(
                    f"mask: shape {list(mask.shape)} is both key padding [batch, k_len] and "
                    f"[q_len, k_len] (batch == q_len == {batch}): pass mask[:, None, None, :] "
                    "for key padding or mask[None] for one [q_len, k_len] mask"
                )
            return mask[:, None, None, :]
        if mask.dim() == 2:
            _refuse_sequence_first("mask", mask, (k_len, batch), (batch, k_len))
        if not _broadcasts(tuple(mask.shape), full):
            raise ValueError(
                f"mask: shape {list(mask.shape)} does not broadcast to [batch, heads, q_len, "
                f"k_len] = {list(full)}, nor is it key padding [batch, k_len] = {[batch, k_len]}"
            )
        return mask

    def _split_heads(
        self, x: Float[Tensor, "batch seq width"], heads: int
    ) -> Float[Tensor, "batch heads seq d_k"]:
        batch, seq, _ = x.shape
        return x.view(batch, seq, heads, self.d_k).transpose(1, 2)

    def _merge_heads(
        self, x: Float[Tensor, "batch heads seq d_k"]
    ) -> Float[Tensor, "batch seq d_model"]:
        batch, _, seq, _ = x.shape
        return x.transpose(1, 2).reshape(batch, seq, self.d_model)


def _refuse_sequence_first(
    name: str, mask: Tensor, sequence_first: tuple[int, int], expected: tuple[int, int]
) -> None:
    """Raise if ``mask`` has the shape it would have with sequence-first inputs.

    Sequence-first inputs ``[seq, batch, features]`` read as batch-first swap ``batch`` and
    the sequence lengths, which for self-attention is invisible in the inputs themselves;
    a mask built for them shows it (when ``batch`` differs from the sequence length).
    """
    if mask.shape == sequence_first and sequence_first != expected:
        raise ValueError(
            f"{name}: shape {list(mask.shape)}, expected {list(expected)}: query, key and "
            "value look sequence-first [seq, batch, features]; this module is batch-first "
            "[batch, seq, features]: pass them through .transpose(0, 1)"
        )


def _broadcasts(shape: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``full`` without growing it."""
    trailing = zip(reversed(shape), reversed(full), strict=False)
    return len(shape) <= len(full) and all(size in (1, wanted) for size, wanted in trailing)


def _attend_where_torch_allows(mask: Mask) -> Mask:
    """``nn.MultiheadAttention``'s mask (boolean True = do NOT attend) in F.sdpa's polarity."""
    return ~mask if mask.dtype == torch.bool else mask


def _both(first: Mask, second: Mask) -> Mask:
    """Attention allowed where both masks (F.sdpa's polarity) allow it."""
    if first.dtype == torch.bool and second.dtype == torch.bool:
        return first & second
    return _additive(first, second.dtype) + _additive(second, first.dtype)


def _additive(mask: Mask, dtype: torch.dtype) -> Float[Tensor, "*shape"]:
    """A boolean mask as 0 (attend) and -inf (blocked) of float ``dtype``; a float one as is."""
    if mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, _BLOCKED)


def causal_mask(
    q_len: int,
    k_len: int,
    *,
    aligned: Alignment,
    device: torch.device | str | None = None,
) -> Bool[Tensor, "q_len k_len"]:
    """True where query ``i`` may see key ``j`` (F.sdpa's polarity: True = attend).

    - ``"top_left"``: ``j <= i``. F.sdpa's ``is_causal=True`` and torch's
      ``causal_upper_left``: query ``i`` is at position ``i`` and the keys start there too.
    - ``"bottom_right"``: ``j <= i + (k_len - q_len)``. The queries are the last ``q_len`` of
      ``k_len`` positions, as when decoding with a KV cache: ``flash_attn_func``'s
      ``causal=True`` and torch's ``causal_lower_right``. With ``q_len > k_len`` the first
      ``q_len - k_len`` queries see no key (a zero output).

    The two are the same mask when ``q_len == k_len``.
    """
    if aligned not in ("top_left", "bottom_right"):
        raise ValueError(f"aligned: {aligned!r}, expected 'top_left' or 'bottom_right'")
    diagonal = 0 if aligned == "top_left" else k_len - q_len
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(diagonal=diagonal)


def _causal_bias_mask(
    bias: CausalBias, q_len: int, k_len: int, device: torch.device
) -> Bool[Tensor, "q_len k_len"]:
    """torch's ``causal_upper_left``/``causal_lower_right`` bias as a boolean mask."""
    if (bias.seq_len_q, bias.seq_len_kv) != (q_len, k_len):
        raise ValueError(
            f"attn_mask: a causal bias for [q_len, k_len] = {[bias.seq_len_q, bias.seq_len_kv]}, "
            f"expected {[q_len, k_len]}"
        )
    lower_right = bias.variant == CausalVariant.LOWER_RIGHT
    return causal_mask(
        q_len, k_len, aligned="bottom_right" if lower_right else "top_left", device=device
    )


class SelfAttention(nn.Module):
    """Single-head self-attention with weight matrices, as the matmul tutorial writes it.

    ``Q = inputs @ WQ``, ``K = inputs @ WK``, ``V = inputs @ WV`` with ``WQ, WK`` of shape
    ``[hidden_dim, d_k]`` and ``WV`` of shape ``[hidden_dim, d_v]``;
    ``out = softmax(Q Kᵀ / sqrt(d_k)) V`` of shape ``[batch, seq, d_v]``. ``mask``: **True =
    attend** (F.sdpa's polarity) or added, broadcastable to ``[batch, seq, seq]``.
    """

    def __init__(self, hidden_dim: int, d_k: int, d_v: int):
        super().__init__()
        self.WQ = nn.Parameter(torch.randn(hidden_dim, d_k) / math.sqrt(hidden_dim))
        self.WK = nn.Parameter(torch.randn(hidden_dim, d_k) / math.sqrt(hidden_dim))
        self.WV = nn.Parameter(torch.randn(hidden_dim, d_v) / math.sqrt(hidden_dim))

    @shape_checked
    def forward(
        self, inputs: Float[Tensor, "batch seq hidden_dim"], mask: Mask | None = None
    ) -> Float[Tensor, "batch seq d_v"]:
        if runtime_checks_enabled() and inputs.size(-1) != self.WQ.size(0):
            raise ValueError(
                f"inputs: last axis {inputs.size(-1)}, "
                f"this module was built with hidden_dim={self.WQ.size(0)}"
            )
        q = inputs @ self.WQ  # [batch, seq, d_k]
        k = inputs @ self.WK  # [batch, seq, d_k]
        v = inputs @ self.WV  # [batch, seq, d_v]
        return scaled_dot_product_attention(q, k, v, mask)
