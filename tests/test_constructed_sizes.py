"""A class checked again in the sizes its construction gives it (``Head(n_embd,
head_size=n_embd // n_head)``): what only those sizes make wrong is reported in the class,
naming the construction (analysis/imported.py ``ProjectScope.instance``, linter.py)."""

from __future__ import annotations

import textwrap

from shapecheck.linter import lint_source
from shapecheck.rule import all_rules

RULES = [rule() for rule in all_rules()]

HEAD = """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Head(nn.Module):
        def __init__(self, n_embd, head_size):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)
            self.value = nn.Linear(n_embd, head_size, bias=False)

        def forward(self, x):
            B, T, C = x.shape
            k = self.key(x)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * SCALE
            return F.softmax(wei, dim=-1) @ self.value(x)


    class MultiHeadAttention(nn.Module):
        def __init__(self, n_embd, num_heads):
            super().__init__()
            head_size = HEAD_SIZE
            self.heads = nn.ModuleList([Head(n_embd, head_size) for _ in range(num_heads)])

        def forward(self, x):
            return torch.cat([h(x) for h in self.heads], dim=-1)
    """


def lint(source: str, **replacements: str):
    text = textwrap.dedent(source)
    for name, value in replacements.items():
        text = text.replace(name.upper(), value)
    return lint_source(text.encode(), "model.py", RULES).diagnostics


def test_a_scale_wrong_only_in_the_callers_sizes_is_reported_in_the_class_naming_the_caller() -> (
    None
):
    [finding] = lint(HEAD, scale="C**-0.5", head_size="n_embd // num_heads")
    assert (finding.line, finding.column, finding.code) == (17, 15, "SC302")
    assert finding.message == (
        "scores scaled by 1/sqrt(C), the model width (`C` is n_embd, what `self.key` takes): "
        "with num_heads heads each head's d_k is n_embd//num_heads; scale by "
        "1/sqrt(n_embd//num_heads) (where line 25 builds `Head(n_embd, head_size)` with "
        "head_size = n_embd//num_heads)"
    )
    assert finding.fix is None  # a fix would be right for this caller only


def test_the_class_alone_or_as_wide_as_its_input_is_quiet() -> None:
    assert lint(HEAD, scale="C**-0.5", head_size="n_embd") == []  # one head: d_k == C
    alone = HEAD[: HEAD.index("class MultiHeadAttention")]
    assert lint(alone, scale="C**-0.5") == []
    assert lint(HEAD, scale="k.size(-1) ** -0.5", head_size="n_embd // num_heads") == []


def test_a_layer_shows_the_width_of_what_it_is_fed() -> None:
    inside = HEAD.replace(
        "def __init__(self, n_embd, head_size):\n            super().__init__()",
        "def __init__(self, n_embd, n_head):\n            super().__init__()\n"
        "            head_size = n_embd // n_head",
    )
    [finding] = lint(inside[: inside.index("class MultiHeadAttention")], scale="C**-0.5")
    assert finding.code == "SC302" and "(`C` is n_embd, what `self.key` takes)" in finding.message
    # fed to no layer, C is any width: nothing to compare
    unfed = inside.replace("k = self.key(x)", "k = x").replace("q = self.query(x)", "q = x")
    assert lint(unfed[: unfed.index("class MultiHeadAttention")], scale="C**-0.5") == []


def test_a_class_faulted_alone_is_not_faulted_again_in_its_callers_sizes() -> None:
    source = """\
        import torch.nn as nn
        import torch.nn.functional as F
        from jaxtyping import Float
        from torch import Tensor


        class Attention(nn.Module):
            def __init__(self, d_model, num_heads):
                super().__init__()
                assert d_model % num_heads == 0
                self.num_heads = num_heads
                self.d_k = d_model // num_heads
                self.wq = nn.Linear(d_model, d_model)
                self.fc_out = nn.Linear(d_model, d_model)

            def _split(self, x: Float[Tensor, "b n d_model"]) -> Float[Tensor, "b h n d_k"]:
                b, n, _ = x.shape
                return x.view(b, n, self.num_heads, self.d_k).transpose(1, 2)

            def _merge(self, x: Float[Tensor, "b h n d_k"]) -> Float[Tensor, "b n d_model"]:
                return x.transpose(1, 2).contiguous()

            def forward(self, x):
                q = self._split(self.wq(x))
                return self.fc_out(self._merge(F.scaled_dot_product_attention(q, q, q)))


        def build():
            return Attention(12, 3)
        """
    # the merge keeps the heads axis (SC504); as built, fc_out is fed 4 features, not 12
    assert [(f.line, f.code) for f in lint(source)] == [(21, "SC504")]
    alone = source.replace("return x.transpose(1, 2).contiguous()", "return x.transpose(1, 2)")
    alone = alone.replace('-> Float[Tensor, "b n d_model"]', "")
    [downstream] = lint(alone)  # nothing faults the class alone: its sizes show the bug
    assert (downstream.line, downstream.code) == (25, "SC501")
    assert "where line 29 builds `Attention(12, 3)`" in downstream.message


def test_sizes_handed_down_two_layers_from_module_constants() -> None:
    """The lecture GPT's layout: widths are module constants, the head size is decided two
    constructions up (Block -> MultiHead -> Head) and handed on through a ModuleList."""
    source = """\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        n_embd = 384
        n_head = 6


        class Head(nn.Module):
            def __init__(self, head_size):
                super().__init__()
                self.key = nn.Linear(n_embd, head_size, bias=False)
                self.query = nn.Linear(n_embd, head_size, bias=False)

            def forward(self, x):
                B, T, C = x.shape
                return F.softmax(self.query(x) @ self.key(x).transpose(-2, -1) * SCALE, dim=-1)


        class MultiHead(nn.Module):
            def __init__(self, num_heads, head_size):
                super().__init__()
                self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])

            def forward(self, x):
                return torch.cat([h(x) for h in self.heads], dim=-1)


        class Block(nn.Module):
            def __init__(self, n_embd, n_head):
                super().__init__()
                self.sa = MultiHead(n_head, n_embd // n_head)

            def forward(self, x):
                return x + self.sa(x)


        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.Sequential(*[Block(n_embd, n_head=n_head) for _ in range(2)])
        """
    [finding] = lint(source, scale="C**-0.5")
    assert (finding.line, finding.code) == (17, "SC302")
    assert "(`C` is 384, what `self.query` takes): with 6 heads each head's d_k is 64" in (
        finding.message
    )
    assert finding.message.endswith("(where line 23 builds `Head(head_size)` with head_size = 64)")
    assert lint(source, scale="self.key.out_features ** -0.5") == []
    one_head = source.replace("n_head = 6", "n_head = 1")
    assert lint(one_head, scale="C**-0.5") == []  # 384 // 1: one head as wide as the model
