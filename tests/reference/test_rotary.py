"""Rotary embeddings: the reference equals Hugging Face's ``rotate_half`` and Meta's complex form,
written out here; the two pairings are one permutation apart; tables stay float32 (the evidence
for rule SC703: bfloat16 tables are off by up to 2 at position 1500); a rotation keeps each
pair's norm and makes scores depend only on relative positions."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("jaxtyping")
pytest.importorskip("beartype")

import torch.nn.functional as F  # noqa: E402
from jaxtyping import TypeCheckError  # noqa: E402
from torch.testing import assert_close  # noqa: E402

from shapecheck.reference import (  # noqa: E402
    MultiHeadAttention,
    apply_rotary,
    rotary_tables,
    set_runtime_checks,
)
from tests.reference import gap  # noqa: E402

BATCH, HEADS, SEQ, HEAD_DIM = 2, 3, 6, 8
BASE = 10000.0


def rotated(x: torch.Tensor, *, interleaved: bool, start_pos: int = 0) -> torch.Tensor:
    """The reference rotation of ``x`` ``[batch, heads, seq, head_dim]`` at its positions."""
    cos, sin = rotary_tables(x.size(-1), x.size(-2), start_pos=start_pos, device=x.device)
    return apply_rotary(x, cos, sin, interleaved=interleaved)


def hugging_face_rotary(x: torch.Tensor, start_pos: int) -> torch.Tensor:
    """transformers' ``LlamaRotaryEmbedding`` and ``apply_rotary_pos_emb``, written out."""
    dim = x.size(-1)
    inv_freq = 1.0 / (BASE ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    position_ids = torch.arange(start_pos, start_pos + x.size(-2))[None, :]
    freqs = (inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)  # [1, seq, dim]
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]  # unsqueeze_dim=1: [batch, heads, ...]

    def rotate_half(t: torch.Tensor) -> torch.Tensor:
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2 :]
        return torch.cat((-t2, t1), dim=-1)

    return x * cos + rotate_half(x) * sin


def meta_rotary(x_blhd: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Meta's llama ``precompute_freqs_cis`` and ``apply_rotary_emb`` on ``[B, L, H, D]``,
    written out: pairs ``(2i, 2i + 1)`` read as complex numbers times ``e^(i theta)``."""
    dim, seq = x_blhd.size(-1), x_blhd.size(1)
    freqs = 1.0 / (BASE ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(start_pos + seq, dtype=torch.float32)
    freqs_cis = torch.polar(torch.ones(start_pos + seq, dim // 2), torch.outer(t, freqs))
    freqs_cis = freqs_cis[start_pos : start_pos + seq][None, :, None, :]  # [1, L, 1, D/2]
    x_complex = torch.view_as_complex(x_blhd.float().reshape(*x_blhd.shape[:-1], -1, 2))
    return torch.view_as_real(x_complex * freqs_cis).flatten(3).type_as(x_blhd)


@pytest.mark.parametrize("start_pos", [0, 5, 1000])
def test_half_split_is_hugging_faces_rotate_half(start_pos: int) -> None:
    x = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    expected = hugging_face_rotary(x, start_pos)
    assert_close(rotated(x, interleaved=False, start_pos=start_pos), expected)
    # the other pairing is not this one
    assert gap(rotated(x, interleaved=True, start_pos=start_pos), expected) > 0.1


@pytest.mark.parametrize("start_pos", [0, 5, 1000])
def test_interleaved_is_metas_complex_form(start_pos: int) -> None:
    x_blhd = torch.randn(BATCH, SEQ, HEADS, HEAD_DIM)  # Meta's layout: [B, L, H, D]
    expected = meta_rotary(x_blhd, start_pos)
    actual = rotated(x_blhd.transpose(1, 2), interleaved=True, start_pos=start_pos)
    assert_close(actual.transpose(1, 2), expected)
    half_split = rotated(x_blhd.transpose(1, 2), interleaved=False, start_pos=start_pos)
    assert gap(half_split.transpose(1, 2), expected) > 0.1


def test_the_pairings_are_one_permutation_of_the_last_axis_apart() -> None:
    """Evens first, then odds: the permutation Hugging Face applies to Meta's wq and wk."""
    x = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM)
    evens_then_odds = torch.cat((torch.arange(0, HEAD_DIM, 2), torch.arange(1, HEAD_DIM, 2)))
    back = torch.argsort(evens_then_odds)
    interleaved = rotated(x, interleaved=True, start_pos=3)
    via_half_split = rotated(x[..., evens_then_odds], interleaved=False, start_pos=3)[..., back]
    assert torch.equal(interleaved, via_half_split)
    # unpermuted, the pairings disagree: weights trained for one are wrong under the other
    assert gap(interleaved, rotated(x, interleaved=False, start_pos=3)) > 0.1


def test_tables_from_start_pos_are_the_rows_of_one_table() -> None:
    """A decode step at ``start_pos`` rotates as the same positions of the whole sequence;
    positions restarted at 0 (a cache offset forgotten) rotate otherwise."""
    cos, sin = rotary_tables(HEAD_DIM, 20)
    step_cos, step_sin = rotary_tables(HEAD_DIM, 3, start_pos=17)
    assert torch.equal(step_cos, cos[17:]) and torch.equal(step_sin, sin[17:])
    assert cos.dtype == sin.dtype == torch.float32
    x = torch.randn(BATCH, HEADS, 20, HEAD_DIM)
    for interleaved in (False, True):
        whole = rotated(x, interleaved=interleaved)
        step = rotated(x[..., 17:, :], interleaved=interleaved, start_pos=17)
        assert torch.equal(step, whole[..., 17:, :])
        restarted = rotated(x[..., 17:, :], interleaved=interleaved)
        assert gap(restarted, whole[..., 17:, :]) > 0.1


def test_float32_tables_stay_accurate_at_position_1500_where_bfloat16_ones_do_not() -> None:
    """Rule SC703's evidence. Measured (head_dim 64, position 1500, against float64): float32
    tables are off by 3.9e-5 (cos) and 2.1e-5 (sin); tables whose positions and frequencies are
    bfloat16 (``arange(n).type_as(inv_freq)`` after ``.to(torch.bfloat16)``) by 1.97 and 1.87,
    since 1500 is 1504 in bfloat16 and so is the angle of the first pair. Rounding float32
    tables to bfloat16 afterwards (``cos.to(x.dtype)``) costs only bfloat16's 2^-9. Applied to
    a bfloat16 query (seed 0), the reference is off by 0.0070, the bfloat16 tables by 4.26."""
    head_dim, position = 64, 1500
    exact_cos, exact_sin = rotary_tables(head_dim, 1, start_pos=position, dtype=torch.float64)
    cos, sin = rotary_tables(head_dim, 1, start_pos=position)
    assert cos.dtype == torch.float32
    assert gap(cos, exact_cos) < 1e-4 and gap(sin, exact_sin) < 1e-4
    assert gap(cos.bfloat16(), exact_cos) <= 2**-9 and gap(sin.bfloat16(), exact_sin) <= 2**-9

    # the bug, as the real cases write it: a frequency buffer cast by the model's .to(bfloat16)
    inv_freq = (1.0 / (BASE ** (torch.arange(0, head_dim, 2).float() / head_dim))).bfloat16()
    positions = torch.arange(position + 1).type_as(inv_freq)
    assert positions[position].item() == 1504.0
    angles = torch.outer(positions, inv_freq)[position:]  # [1, pairs]
    low_cos, low_sin = angles.cos(), angles.sin()
    assert gap(low_cos, exact_cos) > 1.5 and gap(low_sin, exact_sin) > 1.5

    query = torch.randn(1, HEADS, 1, head_dim).bfloat16()
    exact = apply_rotary(query.double(), exact_cos, exact_sin, interleaved=False)
    actual = apply_rotary(query, cos, sin, interleaved=False)
    assert actual.dtype == torch.bfloat16
    assert gap(actual, exact) <= 0.02
    half = head_dim // 2
    first, second = query[..., :half], query[..., half:]
    in_bfloat16 = torch.cat(
        (first * low_cos - second * low_sin, first * low_sin + second * low_cos), dim=-1
    )
    assert gap(in_bfloat16, exact) > 1.0


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotation_keeps_the_norm_of_each_pair(interleaved: bool) -> None:
    x = torch.randn(BATCH, HEADS, SEQ, HEAD_DIM, dtype=torch.float64)
    cos, sin = rotary_tables(HEAD_DIM, SEQ, start_pos=1000, dtype=torch.float64)
    out = apply_rotary(x, cos, sin, interleaved=interleaved)

    def pair_norms(t: torch.Tensor) -> torch.Tensor:
        pairs = t.unflatten(-1, (-1, 2)) if interleaved else t.unflatten(-1, (2, -1)).mT
        return pairs.norm(dim=-1)  # [batch, heads, seq, pairs]

    assert_close(pair_norms(out), pair_norms(x))
    assert gap(out, x) > 0.1  # and it moved them


@pytest.mark.parametrize("interleaved", [False, True])
def test_scores_depend_only_on_the_relative_position(interleaved: bool) -> None:
    """``rot(q, m) · rot(k, n)`` is a function of ``m - n``: the same query and key at every
    position give a score matrix constant along each diagonal, whatever the offset."""
    seq = 40
    query = torch.randn(1, 1, 1, HEAD_DIM, dtype=torch.float64).expand(1, 1, seq, HEAD_DIM)
    key = torch.randn(1, 1, 1, HEAD_DIM, dtype=torch.float64).expand(1, 1, seq, HEAD_DIM)

    def scores(start_pos: int) -> torch.Tensor:
        cos, sin = rotary_tables(HEAD_DIM, seq, start_pos=start_pos, dtype=torch.float64)
        q = apply_rotary(query, cos, sin, interleaved=interleaved)
        k = apply_rotary(key, cos, sin, interleaved=interleaved)
        return (q @ k.mT)[0, 0]  # [seq, seq]: row m, column n

    at_zero = scores(0)
    assert_close(at_zero[1:, 1:], at_zero[:-1, :-1])  # (m + 1, n + 1) scores as (m, n)
    assert_close(scores(1000), at_zero)
    assert gap(at_zero[1:, :-1], at_zero[:-1, :-1]) > 1e-2  # but m - n itself matters


def test_module_rotary_rotates_the_projected_heads_before_attention() -> None:
    """``MultiHeadAttention(rotary=...)``: Hugging Face's rotation of each head's projected
    queries and keys, then F.sdpa with ``enable_gqa``; without the rotation, other numbers."""
    d_model, heads, kv_heads = HEADS * 2 * HEAD_DIM, 2 * HEADS, HEADS
    module = MultiHeadAttention(d_model, heads, num_kv_heads=kv_heads, rotary="half_split").eval()
    plain = MultiHeadAttention(d_model, heads, num_kv_heads=kv_heads).eval()
    plain.load_state_dict(module.state_dict())
    x = torch.randn(BATCH, SEQ, d_model)

    def split(t: torch.Tensor, count: int) -> torch.Tensor:
        return t.unflatten(-1, (count, HEAD_DIM)).transpose(1, 2)

    with torch.no_grad():
        q = hugging_face_rotary(split(module.wq(x), heads), start_pos=0)
        k = hugging_face_rotary(split(module.wk(x), kv_heads), start_pos=0)
        attended = F.scaled_dot_product_attention(
            q, k, split(module.wv(x), kv_heads), is_causal=True, enable_gqa=True
        )
        expected = module.fc_out(attended.transpose(1, 2).flatten(2))
        assert_close(module(x, x, x, is_causal=True), expected)
        assert gap(plain(x, x, x, is_causal=True), expected) > 1e-2


def test_module_interleaved_rotary_is_metas() -> None:
    d_model = HEADS * HEAD_DIM
    module = MultiHeadAttention(d_model, HEADS, rotary="interleaved", bias=False).eval()
    half_split = MultiHeadAttention(d_model, HEADS, rotary="half_split", bias=False).eval()
    half_split.load_state_dict(module.state_dict())
    x = torch.randn(BATCH, SEQ, d_model)
    with torch.no_grad():
        q = meta_rotary(module.wq(x).unflatten(-1, (HEADS, HEAD_DIM)), start_pos=0)
        k = meta_rotary(module.wk(x).unflatten(-1, (HEADS, HEAD_DIM)), start_pos=0)
        v = module.wv(x).unflatten(-1, (HEADS, HEAD_DIM))
        attended = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        expected = module.fc_out(attended.transpose(1, 2).flatten(2))
        assert_close(module(x, x, x, is_causal=True), expected)
        assert gap(half_split(x, x, x, is_causal=True), expected) > 1e-2


ERRORS = {
    "odd-head-dim": (
        lambda: rotary_tables(7, SEQ),
        "head_dim: 7, expected a positive even number: rotary embeddings rotate pairs of features",
    ),
    "bfloat16-tables": (
        lambda: rotary_tables(HEAD_DIM, SEQ, dtype=torch.bfloat16),
        "dtype: torch.bfloat16, expected torch.float32 or torch.float64: in bfloat16 positions "
        "above 256 are rounded and cos/sin are off by up to 2.0 (rule SC703)",
    ),
    "bfloat16-tables-applied": (
        lambda: apply_rotary(
            torch.randn(1, 1, SEQ, HEAD_DIM).bfloat16(),
            *(table.bfloat16() for table in rotary_tables(HEAD_DIM, SEQ)),
            interleaved=False,
        ),
        "cos, sin: dtypes torch.bfloat16 and torch.bfloat16, expected float32 or float64 tables "
        "(rotary_tables): low-precision tables are off at large positions (rule SC703)",
    ),
    "tables-for-another-head-dim": (
        lambda: apply_rotary(
            torch.randn(1, 1, SEQ, HEAD_DIM), *rotary_tables(HEAD_DIM - 2, SEQ), interleaved=True
        ),
        "cos: last axis 3, expected head_dim // 2 = 4 (x has head_dim=8)",
    ),
    "module-odd-d_k": (
        lambda: MultiHeadAttention(9, 3, rotary="half_split"),
        "rotary: d_k = d_model // num_heads = 3 is odd, expected an even d_k: rotary "
        "embeddings rotate pairs of features",
    ),
    "module-unknown-pairing": (
        lambda: MultiHeadAttention(8, 2, rotary="rotate_half"),  # type: ignore[arg-type]
        "rotary: 'rotate_half', expected 'half_split', 'interleaved' or None",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_name_the_argument_and_say_expected_and_actual(case: str) -> None:
    call, message = ERRORS[case]
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


def test_sequence_and_heads_swapped_fail_at_the_call() -> None:
    """A ``[batch, seq, heads, head_dim]`` tensor given where positions are on axis -2 (rule
    SC704) binds ``seq`` to the heads, which the tables' length contradicts."""
    x = torch.randn(BATCH, SEQ, HEADS, HEAD_DIM)
    cos, sin = rotary_tables(HEAD_DIM, SEQ)
    with pytest.raises(TypeCheckError, match="parameter 'cos'"):
        apply_rotary(x, cos, sin, interleaved=False)
    assert apply_rotary(x.transpose(1, 2), cos, sin, interleaved=False).shape == (
        BATCH,
        HEADS,
        SEQ,
        HEAD_DIM,
    )


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_rotary_module_compiles_with_fullgraph(backend: str) -> None:
    set_runtime_checks(False)
    torch.compiler.reset()  # earlier tests' compilations count towards dynamo's recompile limit
    module = MultiHeadAttention(HEADS * HEAD_DIM, HEADS, rotary="interleaved").eval()
    x = torch.randn(BATCH, SEQ, HEADS * HEAD_DIM)
    compiled = torch.compile(module, fullgraph=True, backend=backend)
    with torch.no_grad():
        assert gap(compiled(x, x, x, is_causal=True), module(x, x, x, is_causal=True)) == 0.0
