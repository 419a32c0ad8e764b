"""The seeded-bug benchmark's operators (``benchmarks/mutants.py``): which bug a site seeds."""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
mutants = pytest.importorskip("mutants")

DEBERTA = """\
    import torch


    class DisentangledSelfAttention(torch.nn.Module):
        def transpose_for_scores(self, x, attention_heads):
            new_x_shape = x.size()[:-1] + (attention_heads, -1)
            x = x.view(new_x_shape)
            return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))

        def forward(self, hidden_states):
            query = self.transpose_for_scores(self.query_proj(hidden_states), self.num_heads)
            return torch.bmm(query, query.transpose(-1, -2)).softmax(-1)
    """

MERGE = """\
    import torch


    def attend(q, k, v):
        out = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
        return out.transpose(1, 2).reshape(-1, out.size(2), out.size(-1) * out.size(1))
    """


def _seeded(operator_name: str, code: str) -> list[str]:
    """The lines the operator rewrites, as they read after the rewrite."""
    text = textwrap.dedent(code)
    source = mutants.Source(text, ast.parse(text))
    [operator] = [operator for operator in mutants.OPERATORS if operator.name == operator_name]
    return [
        mutants._mutated(text, edit)[edit.start :].splitlines()[0]
        for edit in operator.sites(source)
    ]


def test_a_fold_into_the_batch_by_minus_one_is_a_split_bug() -> None:
    """DeBERTa's ``view(-1, x.size(1), x.size(-1))`` after the head swap keeps the head size
    last: the ``-1`` is the batch times the heads. Dropping the swap reads positions as heads,
    SC102's ``(B*H, L, D)``, a split's bug and not a merge's."""
    assert _seeded("head merge without transpose", DEBERTA) == []
    assert _seeded("head split without transpose", DEBERTA) == [
        ".contiguous().view(-1, x.size(1), x.size(-1))"
    ]


def test_a_merge_into_the_features_stays_a_merge_bug() -> None:
    """A ``-1`` first whose last size is not the tensor's own last merges the heads into the
    features: a merge's bug."""
    assert _seeded("head split without transpose", MERGE) == []
    assert len(_seeded("head merge without transpose", MERGE)) == 1


SEGMENT_SUM = """\
    import torch
    import torch.nn.functional as F


    def reshape_into_chunks(x, pad_size, chunk_size):
        x = F.pad(x, (0, pad_size))
        return x.reshape(x.shape[0], -1, chunk_size)


    def segment_sum(x):
        sums = torch.cumsum(x[..., None].expand(*x.size(), x.size(-1)), dim=-2)
        mask = torch.ones(x.size(-1), x.size(-1), dtype=torch.bool).tril()
        return sums.masked_fill(~mask, -torch.inf)


    def scan(A, dt, pad_size, chunk_size):
        dt = dt.float()
        A = A.to(dt.dtype) * dt
        (A,) = [reshape_into_chunks(t, pad_size, chunk_size) for t in (A,)]
        return torch.exp(segment_sum(A)), torch.exp(segment_sum({other}))
    """


@pytest.mark.parametrize(
    ("other", "seeded"),
    [
        ("F.pad(torch.cumsum(A, dim=-1), (1, 0))", 0),  # float32 on every call: no bug
        ("A * torch.ones(())", 1),  # a 0-d tensor of unknown dtype: float16 may stay
    ],
)
def test_a_fill_of_what_the_code_made_float32_is_no_overflow(other: str, seeded: int) -> None:
    """Mamba2's segment sums: ``A.to(dt.dtype) * dt`` after ``dt = dt.float()`` is float32,
    and a chunking helper and a cumulative sum keep it, so ``-1e9`` fits there; the fill is a
    site only where some call may hand the helper float16."""
    assert len(_seeded("mask fill -> -1e9", SEGMENT_SUM.format(other=other))) == seeded


@pytest.mark.parametrize(
    ("made", "seeded"),
    [
        ("q, k = [x.to(torch.float32) for x in (q, k)]", 0),
        ("if flag:\n            q = q.float()", 1),  # only on one branch
        ("q = q.float()\n        q = q.half()", 1),  # cast back before the fill
    ],
)
def test_float32_is_followed_statement_by_statement(made: str, seeded: int) -> None:
    code = f"""\
    import torch


    def attend(q, k, mask, flag):
        {made}
        scores = (q @ k.transpose(-1, -2)).masked_fill(mask, float("-inf"))
        return scores, q.masked_fill(mask, -torch.inf)
    """
    fills = _seeded("mask fill -> -1e9", code)
    assert len(fills) == 1 + seeded  # the product's fill is always a site (`@` keeps no float32)
