"""The layers around attention: token + position embedding, and the output projection."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from shapecheck.reference.checking import shape_checked


class TransformerEmbedding(nn.Module):
    """Token embedding plus a learned position embedding ``[1, max_len, hidden_dim]``.

    ``out[b, i] = token(tokens[b, i]) + position[0, i]``. A sequence longer than ``max_len``
    has no position embedding: it is refused with a clear error instead of failing to
    broadcast somewhere inside.
    """

    def __init__(self, vocab_size: int, hidden_dim: int, max_len: int = 512):
        super().__init__()
        self.max_len = max_len
        self.token = nn.Embedding(vocab_size, hidden_dim)
        self.position = nn.Parameter(torch.zeros(1, max_len, hidden_dim))
        nn.init.normal_(self.position, std=0.02)

    @shape_checked
    def forward(self, tokens: Int[Tensor, "batch seq"]) -> Float[Tensor, "batch seq hidden_dim"]:
        seq = tokens.size(1)
        if seq > self.max_len:
            raise ValueError(
                f"tokens: sequence length {seq} exceeds max_len={self.max_len} "
                "(the number of learned positions)"
            )
        embedded: Tensor = self.token(tokens)
        return embedded + self.position[:, :seq]


class OutputLayer(nn.Module):
    """Projection to the vocabulary.

    :meth:`forward` returns **logits**, what ``nn.CrossEntropyLoss`` expects (it applies
    log-softmax itself); :meth:`probabilities` returns ``softmax(logits)`` for sampling or
    display. Feeding probabilities to a cross-entropy loss would apply softmax twice.
    """

    def __init__(self, hidden_dim: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden_dim, vocab_size)

    @shape_checked
    def forward(self, x: Float[Tensor, "batch seq hidden_dim"]) -> Float[Tensor, "batch seq vocab"]:
        logits: Tensor = self.proj(x)
        return logits

    def probabilities(
        self, x: Float[Tensor, "batch seq hidden_dim"]
    ) -> Float[Tensor, "batch seq vocab"]:
        return self.forward(x).softmax(dim=-1)
