"""Sizes a tensor has though the code never names them (``dims.Dim.unnamed``).

Once a parameter's rank is known (a use, an annotation, an unpacking, a caller handing it),
each axis nothing names is a size of its own, ``hidden_states.shape[0]``: equal to itself
wherever it flows, known to ``--coverage``, yet of unknown relation to every other size, so
no rule concludes from it that two sizes differ.
"""

from __future__ import annotations

import ast
import textwrap

from shapecheck.analysis import analyse
from shapecheck.analysis.dims import (
    Dim,
    broadcast,
    format_shape,
    named_by_code,
    provably_different,
)
from shapecheck.analysis.facts import Fact, TensorFact
from shapecheck.analysis.ops import broadcast_shapes
from shapecheck.coverage import coverage
from shapecheck.linter import lint_source
from shapecheck.rule import all_rules

HEADER = "import torch\nimport torch.nn as nn\nfrom einops import rearrange\n\n\n"

PROJECTED = """\
class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)

    def forward(self, hidden_states):
        q = rearrange(self.q_proj(hidden_states), "b n (h d) -> b h n d", h=self.heads)
        k = rearrange(self.k_proj(hidden_states), "b n (h d) -> b h n d", h=self.heads)
        v = rearrange(self.v_proj(hidden_states), "b n (h d) -> b h n d", h=self.heads)
        scores = q @ k.transpose(-2, -1) * self.head_dim ** -0.5
        out = scores.softmax(dim=-1) @ v
        return rearrange(out, "b h n d -> b n (h d)")
"""
"""transformers' way: nothing names ``hidden_states``' batch or length; an einops pattern
shows its rank (3-D, through the projections that keep it)."""


def _facts(source: str, function: str) -> dict[str, Fact]:
    """What each name is bound to last in ``function``."""
    text = HEADER + textwrap.dedent(source)
    [found] = [f for f in analyse(ast.parse(text), text).functions if f.name.endswith(function)]
    return {name: fact for _, name, fact in found.bindings}


def _shape(fact: Fact | None) -> str:
    assert isinstance(fact, TensorFact)
    return format_shape(fact.shape)


def _findings(source: str) -> list[tuple[str, int, str]]:
    text = HEADER + textwrap.dedent(source)
    rules = [rule() for rule in all_rules()]
    return [
        (d.code, d.line - HEADER.count("\n"), d.message)
        for d in lint_source(text.encode(), "model.py", rules).diagnostics
    ]


def test_what_one_parameter_makes_shares_its_unnamed_sizes() -> None:
    """``q``, ``k`` and ``v``, made from the same ``hidden_states``, share its batch and
    length; the scores are square in it."""
    facts = _facts(PROJECTED, "forward")
    batch, length = "hidden_states.shape[0]", "hidden_states.shape[1]"
    assert _shape(facts["q"]) == f"[{batch}, self.heads, {length}, hidden//self.heads]"
    assert _shape(facts["scores"]) == f"[{batch}, self.heads, {length}, {length}]"
    scores = facts["scores"]
    assert isinstance(scores, TensorFact) and scores.shape is not None
    assert scores.shape[2] == scores.shape[3] and scores.shape[2].is_unnamed


def test_coverage_counts_unnamed_sizes_as_known() -> None:
    """Honest knowledge, as ``B, T, C = x.shape`` would be: every tensor of ``forward`` has
    its whole shape known."""
    text = HEADER + PROJECTED
    report = coverage("model.py", analyse(ast.parse(text), text))
    assert report.attention_functions == 1
    assert report.shape_known == report.tensors > 10


HANDED = """\
class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, memory):
        b, n, d = x.shape
        context = torch.cat([x, memory], dim=1)
        return self.attend(x, context)

    def attend(self, q, kv):
        scores = q @ kv.transpose(-2, -1)
        return scores.softmax(dim=-1) @ kv
"""
"""The keys' length is a concatenation's, which nothing names: the helper receives
``[b, ?, d]``."""


def test_a_size_a_caller_hands_unknown_is_the_parameters_own() -> None:
    facts = _facts(HANDED, "attend")
    assert _shape(facts["kv"]) == "[b, kv.shape[1], d]"
    assert _shape(facts["scores"]) == "[b, n, kv.shape[1]]"


def test_unnamed_sizes_are_equal_to_themselves_and_unrelated_to_others() -> None:
    length = Dim.unnamed("x.shape[1]", nameable=True)
    other = Dim.unnamed("y.shape[1]", nameable=False)
    assert length == length and length != other
    assert not length.has_unknown and length.unrelated and not length.is_named
    grown = length + Dim.constant(1)
    assert grown.unrelated and not grown.is_named  # a sum compares no better than its term
    assert (length * Dim.symbol("H")).unrelated
    assert provably_different(length, Dim.constant(2) * length)  # arithmetic still proves
    assert not provably_different(length, other)
    named_by_code(length)  # an axis a use showed: named now, everywhere it is
    assert length.is_named and not grown.unrelated
    named_by_code(other)  # a size nobody knew (a caller's `?`) stays unnamed
    assert other.unrelated


CROSS_MASK = """\
def attend(q, k, v, lengths):
    scores = torch.einsum("bhid,bhjd->bhij", q, k) * q.shape[-1] ** -0.5
    mask = torch.arange(q.shape[2])[None, :] < lengths[:, None]
    scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
    return torch.einsum("bhij,bhjd->bhid", scores.softmax(dim=-1), v)
"""
"""Cross-attention look-alike: a padding mask over the queries' length laid on the keys'
axis. The queries' and the keys' lengths are sizes of two parameters nothing names: they
may be equal (self-attention through this function), so no mask is known to be misplaced."""


def test_unnamed_sizes_of_two_parameters_are_never_found_to_differ() -> None:
    facts = _facts(CROSS_MASK, "attend")
    assert _shape(facts["mask"]) == "[?, q.shape[2]]"
    assert [code for code, _, _ in _findings(CROSS_MASK)] == []
    named = CROSS_MASK.replace(
        "    scores = torch",
        "    b, h, i, d = q.shape\n    _, _, j, _ = k.shape\n    scores = torch",
        1,
    )
    # the same code naming the lengths apart: a rule takes two named sizes for different ones
    assert "SC404" in [code for code, _, _ in _findings(named)]


RELATIVE_SCORES = """\
class RelativeAttention(nn.Module):
    def forward(self, q, pos_emb):
        b, h, n, d = q.shape
        pos = pos_emb.view(b, -1, h, d).permute(0, 2, 3, 1)
        return self.shift(q @ pos)
"""
"""Scores of the queries against positions whose count the caller's ``-1`` leaves unknown,
handed to a helper that shifts them."""

SHIFTED = (
    RELATIVE_SCORES
    + """
    def shift(self, pos_tensor):
        zero_pad = torch.zeros((*pos_tensor.size()[:3], 1), dtype=pos_tensor.dtype)
        padded = torch.cat([zero_pad, pos_tensor], dim=-1)
        padded = padded.view(*pos_tensor.size()[:2], pos_tensor.size(3) + 1, pos_tensor.size(2))
        return padded[:, :, 1:].view_as(pos_tensor)[:, :, :, : pos_tensor.size(-1) // 2 + 1]
"""
)
"""fastspeech2-conformer's relative shift (Transformer-XL's skew): the padded scores read as
``[.., m+1, n]``, a row dropped, read back. The caller's ``-1`` leaves the positions' count
unknown, so ``m`` is the helper's own size, unnamed: where it equals ``n`` the views move
nothing, so neither is known to be a head split or merge."""


def test_a_view_exchanging_an_unnamed_size_is_no_head_split() -> None:
    facts = _facts(SHIFTED, "shift")
    assert _shape(facts["pos_tensor"]) == "[b, h, n, pos_tensor.shape[3]]"
    assert _shape(facts["padded"]) == "[b, h, (1+pos_tensor.shape[3]), n]"
    assert [code for code, _, _ in _findings(SHIFTED)] == []


DIVIDED = """\
def attend(q, k, v):
    q, k = q.float(), k.float()
    scores = torch.einsum("bhid,bhjd->bhij", q, k) / q.shape[-1]
    return torch.einsum("bhij,bhjd->bhid", scores.softmax(dim=-1), v)
"""


def test_a_finding_shows_an_unnamed_size_by_where_it_comes_from() -> None:
    """The scores divided by ``d_k``, not its root: the message names ``q``'s last axis as
    the code can read it (``q.shape[3]``), where it used to print ``?``."""
    [(code, line, message)] = _findings(DIVIDED)
    assert (code, line) == ("SC302", 3)
    assert message.startswith("scores scaled by 1/q.shape[3], not 1/sqrt(q.shape[3])")


UNPACKED_SHIFT = (
    RELATIVE_SCORES
    + """
    def shift(self, attention_scores):
        batch_size, num_heads, query_length, position_length = attention_scores.shape
        attention_scores = nn.functional.pad(attention_scores, pad=(1, 0))
        attention_scores = attention_scores.view(batch_size, num_heads, -1, query_length)
        return attention_scores[:, :, 1:].view(batch_size, num_heads, query_length, position_length)
"""
)
"""parakeet's ``_rel_shift``: the helper names the positions' count its caller could not
(``position_length``); a name given to a size nobody knew does not make it a size rules
compare (it stayed ``?`` before it had a symbol of its own), so the skew is no head split."""


def test_a_size_nobody_knew_stays_unnamed_where_the_code_unpacks_it() -> None:
    facts = _facts(UNPACKED_SHIFT, "shift")
    positions = facts["position_length"]
    assert getattr(positions, "dim", None) is not None and positions.dim.unrelated  # type: ignore[union-attr]
    assert [code for code, _, _ in _findings(UNPACKED_SHIFT)] == []


TWO_CALLERS = """\
class Attention(nn.Module):
    def forward(self, x, y):
        b, n, d = x.shape
        c, m, e = y.shape
        return self.attend(x, x), self.attend(y, y)

    def attend(self, q, k):
        scores = q @ k.transpose(-2, -1)
        return scores.softmax(dim=-1)
"""
"""A helper called twice, on ``x`` and on ``y``: its callers name its sizes apart (``b`` or
``c``), but each hands ``q`` and ``k`` the same ones."""


def test_sizes_every_call_hands_equal_are_one_size() -> None:
    """The helper's ``q`` and ``k`` share their batch and length, so the scores are square in
    one length, whatever the call."""
    facts = _facts(TWO_CALLERS, "attend")
    assert _shape(facts["q"]) == "[q.shape[0], q.shape[1], q.shape[2]]"
    assert _shape(facts["k"]) == "[q.shape[0], q.shape[1], q.shape[2]]"
    assert _shape(facts["scores"]) == "[q.shape[0], q.shape[1], q.shape[1]]"


CROSS_ATTENTION = """\
def attend(q, k):
    scores = q @ k.permute(0, 2, 1)
    return torch.bmm(scores.softmax(dim=-1), q)
"""
"""Queries and keys of two parameters whose sizes nothing relates (``bmm``: 3-D): the
scores' batch is the broadcast of theirs."""


def test_two_unnamed_sizes_broadcast_to_their_larger() -> None:
    """PyTorch needs the queries' batch and the keys' equal or one of them 1: the scores'
    batch is the larger, one size (unnamed: it compares with nothing else), the same whichever
    way round, and the same again beside either of them."""
    length = Dim.unnamed("q.shape[0]", nameable=True)
    other = Dim.unnamed("k.shape[0]", nameable=True)
    larger = broadcast(length, other)
    assert larger == broadcast(other, length) and str(larger) == "max(k.shape[0], q.shape[0])"
    assert broadcast(larger, length) == larger and broadcast(length, length) == length
    assert larger.unrelated and not larger.has_unknown
    q, k = (tuple(Dim.unnamed(f"{n}.shape[{i}]", nameable=False) for i in range(2)) for n in "qk")
    assert format_shape(broadcast_shapes(q, k)) == (
        "[max(k.shape[0], q.shape[0]), max(k.shape[1], q.shape[1])]"
    )
    assert broadcast_shapes(q, q) == q


def test_two_named_sizes_that_may_be_equal_broadcast_to_their_larger() -> None:
    """Named apart (the keys' batch unpacked in a helper as ``batch``, the queries' as
    ``b``), two sizes may still be equal: their broadcast is the larger. Two that cannot be
    equal (``2`` and ``3``) have none: PyTorch raises there."""
    b, batch = Dim.symbol("b"), Dim.symbol("batch")
    two, three = Dim.constant(2), Dim.constant(3)
    assert format_shape(broadcast_shapes((b, two), (batch, three))) == "[max(b, batch), ?]"
    assert format_shape(broadcast_shapes((b, b * two), (b, b * three))) == "[b, ?]"


def test_the_scores_of_two_parameters_have_a_known_batch() -> None:
    """The sizes a matrix product broadcasts."""
    text = HEADER + CROSS_ATTENTION
    [function] = [f for f in analyse(ast.parse(text), text).functions if f.name == "attend"]
    products = [
        fact
        for node, fact in function.facts.items()
        if isinstance(node, ast.BinOp) and isinstance(fact, TensorFact)
    ]
    assert [format_shape(fact.shape) for fact in products] == [
        "[max(k.shape[0], q.shape[0]), q.shape[1], k.shape[1]]"
    ]
