"""Reference attention: the formulas, written out, with every tensor's axes named.

Axis names: ``batch``, ``heads``, ``q_len`` (query positions), ``k_len`` (key positions),
``d_k`` (query/key features per head), ``d_v`` (value features), ``d_model``.

Masks follow ``torch.nn.functional.scaled_dot_product_attention``: a boolean mask is
True where attention is allowed; a float mask is added to the scores. Either must broadcast
to ``[*batch, q_len, k_len]``. Blocked positions get the dtype's own minimum, never a literal
such as ``-1e9`` (which overflows float16).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor, nn

from shapecheck.reference.checking import runtime_checks_enabled, shape_checked

Mask = Bool[Tensor, "..."] | Float[Tensor, "..."]


@shape_checked
def scaled_dot_product_attention(
    q: Float[Tensor, "*batch q_len d_k"],
    k: Float[Tensor, "*batch k_len d_k"],
    v: Float[Tensor, "*batch k_len d_v"],
    mask: Mask | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    dropout_p: float = 0.0,
) -> Float[Tensor, "*batch q_len d_v"]:
    """``softmax(q kᵀ · scale + mask) v`` with ``scale = 1/sqrt(d_k)`` unless given.

    ``is_causal`` lets query ``i`` attend to keys ``0..i`` (aligned at the top left, as
    PyTorch does). ``dropout_p`` drops attention weights (use 0 at inference).
    """
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    # scaling q ([..., q_len, d_k]) is cheaper than scaling the scores ([..., q_len, k_len])
    scores = (q * scale) @ k.transpose(-2, -1)  # [*batch, q_len, k_len]
    blocked = torch.finfo(scores.dtype).min
    if is_causal:
        scores = scores.masked_fill(~_causal(q.size(-2), k.size(-2), scores.device), blocked)
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, blocked)
    elif mask is not None:
        scores = scores + mask
    weights = scores.softmax(dim=-1)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch first (Vaswani et al., 2017).

    ``out = fc_out(concat_h(attention(wq(query)_h, wk(key)_h, wv(value)_h)))`` where ``_h``
    is head ``h``'s slice of ``d_k = d_model // num_heads`` features. Self-attention passes
    the same tensor three times; cross-attention may use a different ``k_len``.

    ``mask``: a boolean (True = attend) or additive float mask broadcastable to
    ``[batch, heads, q_len, k_len]``, or a key-padding mask ``[batch, k_len]``. A 2-D mask
    of exactly ``[batch, k_len]`` is read as key padding, any other 2-D mask as
    ``[q_len, k_len]``; when ``batch == q_len`` and you mean ``[q_len, k_len]``, pass
    ``mask[None]``.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads != 0:
            raise ValueError(
                f"d_model ({d_model}) must be divisible by num_heads ({num_heads}): "
                "each head takes d_model // num_heads features"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.dropout = dropout
        self.wq = nn.Linear(d_model, d_model, bias=bias)
        self.wk = nn.Linear(d_model, d_model, bias=bias)
        self.wv = nn.Linear(d_model, d_model, bias=bias)
        self.fc_out = nn.Linear(d_model, d_model, bias=bias)

    @shape_checked
    def forward(
        self,
        query: Float[Tensor, "batch q_len d_model"],
        key: Float[Tensor, "batch k_len d_model"],
        value: Float[Tensor, "batch k_len d_model"],
        mask: Mask | None = None,
        *,
        is_causal: bool = False,
    ) -> Float[Tensor, "batch q_len d_model"]:
        if runtime_checks_enabled() and query.size(-1) != self.d_model:
            raise ValueError(
                f"query: last axis (d_model) has {query.size(-1)} features, "
                f"this module was built for d_model={self.d_model}"
            )
        q = self._split_heads(self.wq(query))  # [batch, heads, q_len, d_k]
        k = self._split_heads(self.wk(key))  # [batch, heads, k_len, d_k]
        v = self._split_heads(self.wv(value))  # [batch, heads, k_len, d_k]
        if mask is not None and mask.shape == (key.size(0), key.size(1)):
            mask = mask[:, None, None, :]  # key padding [batch, k_len]
        if is_causal and mask is not None:  # PyTorch's kernel takes one or the other
            mask = _with_causal(mask, q.size(-2), k.size(-2))
            is_causal = False
        # PyTorch's fused kernel computes exactly scaled_dot_product_attention above (the
        # tests hold them equal), without materialising the scores.
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
        )
        projected: Tensor = self.fc_out(self._merge_heads(out))
        return projected

    def _split_heads(
        self, x: Float[Tensor, "batch seq d_model"]
    ) -> Float[Tensor, "batch heads seq d_k"]:
        batch, seq, _ = x.shape
        return x.view(batch, seq, self.num_heads, self.d_k).transpose(1, 2)

    def _merge_heads(
        self, x: Float[Tensor, "batch heads seq d_k"]
    ) -> Float[Tensor, "batch seq d_model"]:
        batch, _, seq, _ = x.shape
        return x.transpose(1, 2).reshape(batch, seq, self.d_model)


def _causal(q_len: int, k_len: int, device: torch.device) -> Bool[Tensor, "q_len k_len"]:
    """True where query ``i`` may see key ``j``: ``j <= i`` (top-left aligned, as PyTorch)."""
    return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril()


def _with_causal(mask: Tensor, q_len: int, k_len: int) -> Tensor:
    """``mask`` restricted to keys at or before each query."""
    visible = _causal(q_len, k_len, mask.device)
    if mask.dtype == torch.bool:
        return mask & visible
    return mask.masked_fill(~visible, torch.finfo(mask.dtype).min)


class SelfAttention(nn.Module):
    """Single-head self-attention with weight matrices, as the matmul tutorial writes it.

    ``Q = inputs @ WQ``, ``K = inputs @ WK``, ``V = inputs @ WV`` with ``WQ, WK`` of shape
    ``[hidden_dim, d_k]`` and ``WV`` of shape ``[hidden_dim, d_v]``;
    ``out = softmax(Q Kᵀ / sqrt(d_k)) V`` of shape ``[batch, seq, d_v]``.
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
                f"inputs: last axis (hidden_dim) has {inputs.size(-1)} features, "
                f"this module was built for hidden_dim={self.WQ.size(0)}"
            )
        q = inputs @ self.WQ  # [batch, seq, d_k]
        k = inputs @ self.WK  # [batch, seq, d_k]
        v = inputs @ self.WV  # [batch, seq, d_v]
        return scaled_dot_product_attention(q, k, v, mask)
