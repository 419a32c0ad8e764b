"""Multi-head attention as tutorials write it, with three mistakes shapecheck finds.

Run `shapecheck examples/attention_mistakes.py`: it reports each line below marked `<-`,
without importing torch or running anything.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.wq = nn.Linear(d_model, d_model)
        self.wk = nn.Linear(d_model, d_model)
        self.wv = nn.Linear(d_model, d_model)
        self.fc_out = nn.Linear(d_model, d_model)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        batch, q_len, d_model = query.shape
        q = self.wq(query).view(batch, -1, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.wk(key).view(batch, -1, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.wv(value).view(batch, -1, self.num_heads, self.head_dim).transpose(1, 2)

        scores = torch.matmul(q, k.transpose(1, 2))  # <- SC201 (heads swapped with positions) and SC301 (no 1/sqrt(d_k))
        weights = F.softmax(scores, dim=-1)
        out = torch.matmul(weights, v)

        out = out.transpose(1, 2).view(batch, q_len, d_model)  # <- SC101 (view after transpose)
        return self.fc_out(out)
